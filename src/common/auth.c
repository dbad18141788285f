/*
 * auth.c - the shared-secret handshake's crypto, token file and client side, and the
 * protected-mode address check. See auth.h for the protocol.
 */
#include "common/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <math.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/wire.h"
#include "mooncake/errors.h"

static const char KEY_LABEL[] = "mooncake-c auth v1 key";
static const char SERVER_LABEL[] = "mooncake-c auth v1 server";
static const char CLIENT_LABEL[] = "mooncake-c auth v1 client";
static const char CRED_LABEL[] = "mooncake-c client credential v1";

/* ---- client credentials ------------------------------------------------------------------ */

static void cred_mac(const uint8_t *k, const uint8_t *id, uint8_t *cred)
{
    uint8_t msg[sizeof(CRED_LABEL) + MC_AUTH_ID_BYTES];
    memcpy(msg, CRED_LABEL, sizeof(CRED_LABEL));
    memcpy(msg + sizeof(CRED_LABEL), id, MC_AUTH_ID_BYTES);
    unsigned int len = MC_AUTH_CRED_BYTES;
    if (!HMAC(EVP_sha256(), k, 32, msg, sizeof(msg), cred, &len))
        mc_auth_random(cred, MC_AUTH_CRED_BYTES); /* never equal to a real one */
}

void mc_auth_cred_mint(const struct mc_auth_key *key, const uint8_t *id, uint8_t *cred)
{
    cred_mac(key->k, id, cred);
}

bool mc_auth_cred_check(const struct mc_auth_key *key, const uint8_t *id, const uint8_t *cred)
{
    if (!key->set)
        return false;
    uint8_t want[MC_AUTH_CRED_BYTES];
    cred_mac(key->k, id, want);
    bool ok = mc_auth_mac_equal(want, cred);
    if (key->has_alt) {
        cred_mac(key->alt, id, want);
        ok = mc_auth_mac_equal(want, cred) || ok;
    }
    OPENSSL_cleanse(want, sizeof(want));
    return ok;
}

/* ---- keys -------------------------------------------------------------------------------- */

int mc_auth_key_from_token(const void *token, size_t len, struct mc_auth_key *out)
{
    memset(out, 0, sizeof(*out));
    if (!token || len < MC_AUTH_MIN_TOKEN_BYTES || len > MC_AUTH_MAX_TOKEN_BYTES)
        return MC_ERR_INVALID_PARAMS;
    uint8_t buf[sizeof(KEY_LABEL) + MC_AUTH_MAX_TOKEN_BYTES];
    memcpy(buf, KEY_LABEL, sizeof(KEY_LABEL));
    memcpy(buf + sizeof(KEY_LABEL), token, len);
    unsigned int olen = 0;
    int ok = EVP_Digest(buf, sizeof(KEY_LABEL) + len, out->k, &olen, EVP_sha256(), NULL);
    OPENSSL_cleanse(buf, sizeof(buf));
    if (!ok || olen != sizeof(out->k)) {
        memset(out, 0, sizeof(*out));
        return MC_ERR_INTERNAL_ERROR;
    }
    out->set = true;
    return 0;
}

static void proof(const struct mc_auth_key *key, const char *label, size_t label_len,
                  const uint8_t *cnonce, const uint8_t *snonce, uint8_t mac[MC_AUTH_MAC_BYTES]);

static _Atomic bool g_allow_readable;

void mc_auth_allow_readable_token_file(bool allow)
{
    atomic_store(&g_allow_readable, allow);
}

double mc_auth_token_entropy_bits(const void *token, size_t len)
{
    const uint8_t *p = token;
    uint32_t hist[256] = {0};
    for (size_t i = 0; i < len; i++)
        hist[p[i]]++;
    double h = 0;
    for (int i = 0; i < 256; i++)
        if (hist[i]) {
            double f = (double)hist[i] / (double)len;
            h -= f * log2(f);
        }
    return h * (double)len;
}

static bool check_proof(const struct mc_auth_key *key, const char *label, size_t label_len,
                        const uint8_t *cnonce, const uint8_t *snonce, const uint8_t *mac)
{
    uint8_t want[MC_AUTH_MAC_BYTES];
    proof(key, label, label_len, cnonce, snonce, want);
    bool ok = mc_auth_mac_equal(want, mac);
    if (key->has_alt) {
        struct mc_auth_key alt = {.set = true};
        memcpy(alt.k, key->alt, sizeof(alt.k));
        proof(&alt, label, label_len, cnonce, snonce, want);
        ok = mc_auth_mac_equal(want, mac) || ok; /* both computed: no timing hint of which */
        OPENSSL_cleanse(&alt, sizeof(alt));
    }
    return ok;
}

bool mc_auth_check_server_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                                const uint8_t *snonce, const uint8_t *mac)
{
    return check_proof(key, SERVER_LABEL, sizeof(SERVER_LABEL), cnonce, snonce, mac);
}

bool mc_auth_check_client_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                                const uint8_t *snonce, const uint8_t *mac)
{
    return check_proof(key, CLIENT_LABEL, sizeof(CLIENT_LABEL), cnonce, snonce, mac);
}

bool mc_auth_key_matches(const struct mc_auth_key *key, const struct mc_auth_key *presented)
{
    if (!key->set || !presented->set)
        return false;
    bool ok = CRYPTO_memcmp(key->k, presented->k, sizeof(key->k)) == 0;
    if (key->has_alt)
        ok = (CRYPTO_memcmp(key->alt, presented->k, sizeof(key->alt)) == 0) || ok;
    return ok;
}

static bool is_space(uint8_t c)
{
    return c == '\n' || c == '\r' || c == ' ' || c == '\t';
}

/* One token of a token file: its length bounds, its entropy (a warning). */
static int check_token(const char *path, const uint8_t *t, size_t n, int index, char *err,
                       size_t errlen)
{
    if (n < MC_AUTH_MIN_TOKEN_BYTES || n > MC_AUTH_MAX_TOKEN_BYTES) {
        snprintf(err, errlen, "token %d must hold %d..%d bytes (it holds %s%zu)", index,
                 MC_AUTH_MIN_TOKEN_BYTES, MC_AUTH_MAX_TOKEN_BYTES,
                 n > MC_AUTH_MAX_TOKEN_BYTES ? "more than " : "",
                 n > MC_AUTH_MAX_TOKEN_BYTES ? (size_t)MC_AUTH_MAX_TOKEN_BYTES : n);
        return MC_ERR_INVALID_PARAMS;
    }
    double bits = mc_auth_token_entropy_bits(t, n);
    if (bits < MC_AUTH_WEAK_TOKEN_BITS)
        mc_warn("auth",
                "the token looks guessable (a recorded handshake lets one test guesses offline): "
                "use random bytes, e.g. openssl rand -hex 32",
                "path=%s token=%d estimated_bits=%.0f", path, index, bits);
    return 0;
}

int mc_auth_key_load(const char *path, struct mc_auth_key *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    uint8_t buf[2 * MC_AUTH_MAX_TOKEN_BYTES + 4];
    size_t n = 0;
    int rc = 0;
    int fd = path && *path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the token file: %s", strerror(errno));
        return MC_ERR_FILE_OPEN_FAIL;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH))) {
        if (!atomic_load(&g_allow_readable)) {
            snprintf(err, errlen,
                     "the token file is readable or writable by group or others (mode %o): chmod "
                     "600 it (or --allow_readable_token_file)",
                     (unsigned)(st.st_mode & 0777));
            close(fd);
            return MC_ERR_INVALID_PARAMS;
        }
        mc_warn("auth", "the token file is readable by group or others (chmod 600 it)",
                "path=%s mode=%o", path, (unsigned)(st.st_mode & 0777));
    }
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof(buf) - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read the token file: %s", strerror(errno));
            rc = MC_ERR_FILE_READ_FAIL;
            goto out;
        }
        if (r == 0 || (n += (size_t)r) == sizeof(buf))
            break;
    }
    /* up to two tokens, one per line */
    size_t start[3], len[3];
    int ntok = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && is_space(buf[i]))
            i++;
        if (i == n)
            break;
        size_t j = i;
        while (j < n && buf[j] != '\n' && buf[j] != '\r')
            j++;
        size_t e = j;
        while (e > i && is_space(buf[e - 1]))
            e--;
        if (ntok == 2) {
            snprintf(err, errlen, "the token file holds more than two tokens");
            rc = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        start[ntok] = i;
        len[ntok++] = e - i;
        i = j;
    }
    if (ntok == 0) {
        snprintf(err, errlen, "the token must hold %d..%d bytes (it holds 0)",
                 MC_AUTH_MIN_TOKEN_BYTES, MC_AUTH_MAX_TOKEN_BYTES);
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    for (int t = 0; t < ntok && rc == 0; t++)
        rc = check_token(path, buf + start[t], len[t], t + 1, err, errlen);
    if (rc == 0)
        rc = mc_auth_key_from_token(buf + start[0], len[0], out);
    if (rc == 0 && ntok == 2) {
        struct mc_auth_key alt;
        rc = mc_auth_key_from_token(buf + start[1], len[1], &alt);
        if (rc == 0) {
            memcpy(out->alt, alt.k, sizeof(out->alt));
            out->has_alt = true;
        }
        OPENSSL_cleanse(&alt, sizeof(alt));
    }
    if (rc != 0)
        memset(out, 0, sizeof(*out));
out:
    OPENSSL_cleanse(buf, sizeof(buf));
    close(fd);
    return rc;
}

/* ---- proofs ------------------------------------------------------------------------------ */

int mc_auth_random(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void proof(const struct mc_auth_key *key, const char *label, size_t label_len,
                  const uint8_t *cnonce, const uint8_t *snonce, uint8_t mac[MC_AUTH_MAC_BYTES])
{
    uint8_t msg[64 + 2 * MC_AUTH_NONCE_BYTES];
    memcpy(msg, label, label_len);
    memcpy(msg + label_len, cnonce, MC_AUTH_NONCE_BYTES);
    memcpy(msg + label_len + MC_AUTH_NONCE_BYTES, snonce, MC_AUTH_NONCE_BYTES);
    unsigned int len = MC_AUTH_MAC_BYTES;
    if (!HMAC(EVP_sha256(), key->k, (int)sizeof(key->k), msg, label_len + 2 * MC_AUTH_NONCE_BYTES,
              mac, &len))
        mc_auth_random(mac, MC_AUTH_MAC_BYTES); /* never equal to a real proof */
}

void mc_auth_server_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                          const uint8_t *snonce, uint8_t mac[MC_AUTH_MAC_BYTES])
{
    proof(key, SERVER_LABEL, sizeof(SERVER_LABEL), cnonce, snonce, mac);
}

void mc_auth_client_proof(const struct mc_auth_key *key, const uint8_t *cnonce,
                          const uint8_t *snonce, uint8_t mac[MC_AUTH_MAC_BYTES])
{
    proof(key, CLIENT_LABEL, sizeof(CLIENT_LABEL), cnonce, snonce, mac);
}

bool mc_auth_mac_equal(const uint8_t *a, const uint8_t *b)
{
    return CRYPTO_memcmp(a, b, MC_AUTH_MAC_BYTES) == 0;
}

/* ---- client side ------------------------------------------------------------------------- */

/* Waits for fd to be ready for `events` until deadline. 0, or MC_ERR_RPC_TIMEOUT / RPC_FAIL. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    if (events == POLLIN && mc_tls_sock_pending(fd))
        return 0; /* decrypted already: the socket will not say */
    for (;;) {
        uint64_t now = mc_now_ms();
        if (now >= deadline)
            return MC_ERR_RPC_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)(deadline - now));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return MC_ERR_RPC_FAIL;
    }
}

static int send_frame(int fd, uint16_t method, const uint8_t *body, uint32_t len, uint64_t deadline)
{
    uint8_t buf[MC_WIRE_HEADER_SIZE + MC_AUTH_PROVE_CRED_BYTES];
    if (len > MC_AUTH_PROVE_CRED_BYTES)
        return MC_ERR_INVALID_PARAMS;
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, method, 0, len);
    mc_wire_encode_header(&h, buf);
    memcpy(buf + MC_WIRE_HEADER_SIZE, body, len);
    size_t total = MC_WIRE_HEADER_SIZE + len, off = 0;
    while (off < total) {
        int rc = wait_fd(fd, POLLOUT, deadline);
        if (rc)
            return rc;
        ssize_t w = mc_tls_sock_send(fd, buf + off, total - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (w <= 0)
            return MC_ERR_RPC_FAIL;
        off += (size_t)w;
    }
    return 0;
}

static int recv_all(int fd, uint8_t *buf, size_t n, uint64_t deadline)
{
    size_t off = 0;
    while (off < n) {
        int rc = wait_fd(fd, POLLIN, deadline);
        if (rc)
            return rc;
        ssize_t r = mc_tls_sock_recv(fd, buf + off, n - off, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r <= 0)
            return MC_ERR_RPC_FAIL;
        off += (size_t)r;
    }
    return 0;
}

/* Receives the answer to `method`: its status in *status and its body (exactly want bytes when
 * the status is 0). */
static int recv_answer(int fd, uint16_t method, uint8_t *body, uint32_t want, int32_t *status,
                       uint64_t deadline)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    int rc = recv_all(fd, hb, sizeof(hb), deadline);
    if (rc)
        return rc;
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    /* request id 0 with an error: the server refused the connection itself (at accept) */
    if (mc_wire_validate(&h, MC_WIRE_MIN_MAX_FRAME_BYTES) != MC_WIRE_OK ||
        h.kind != MC_WIRE_RESPONSE ||
        (h.request_id != method && !(h.request_id == 0 && h.status != 0)))
        return MC_ERR_RPC_FAIL;
    *status = h.status;
    if (h.status != 0)
        return h.body_length == 0 ? 0 : MC_ERR_RPC_FAIL;
    if (h.body_length != want)
        return MC_ERR_RPC_FAIL;
    return want ? recv_all(fd, body, want, deadline) : 0;
}

static int refusal(int32_t status, const char *who, const char *peer, const char *step)
{
    int rc = status == MC_ERR_PROTECTED_MODE || status == MC_ERR_TLS_REQUIRED
                 ? status
                 : MC_ERR_UNAUTHENTICATED;
    if (status == MC_ERR_NOT_SUPPORTED)
        mc_error(who,
                 "the server has no auth token but this process has one: give both the "
                 "same --auth_token_file",
                 "peer=%s step=%s", peer, step);
    else
        mc_error(who, "the server refused the connection", "peer=%s step=%s status=%s hint=\"%s\"",
                 peer, step, mc_strerror(status), mc_auth_hint(rc));
    return rc;
}

int mc_auth_client_handshake(int fd, const struct mc_auth_key *key, uint32_t timeout_ms,
                             const char *who, const char *peer)
{
    uint64_t deadline = mc_now_ms() + (timeout_ms ? timeout_ms : 3000);
    uint8_t cnonce[MC_AUTH_NONCE_BYTES], ans[MC_AUTH_NONCE_BYTES + MC_AUTH_MAC_BYTES];
    uint8_t mac[MC_AUTH_MAC_BYTES];
    int32_t status = 0;
    if (!key || !key->set || mc_auth_random(cnonce, sizeof(cnonce)) != 0)
        return MC_ERR_INTERNAL_ERROR;
    int rc = send_frame(fd, MC_METHOD_AUTH_CHALLENGE, cnonce, sizeof(cnonce), deadline);
    if (!rc)
        rc = recv_answer(fd, MC_METHOD_AUTH_CHALLENGE, ans, sizeof(ans), &status, deadline);
    if (rc)
        goto net_fail;
    if (status != 0)
        return refusal(status, who, peer, "challenge");
    const uint8_t *snonce = ans;
    if (!mc_auth_check_server_proof(key, cnonce, snonce, ans + MC_AUTH_NONCE_BYTES)) {
        mc_error(who, "the server could not prove it knows the auth token (wrong token there?)",
                 "peer=%s", peer);
        return MC_ERR_UNAUTHENTICATED;
    }
    uint8_t prove[MC_AUTH_PROVE_CRED_BYTES];
    size_t prove_len = MC_AUTH_MAC_BYTES;
    mc_auth_client_proof(key, cnonce, snonce, mac);
    memcpy(prove, mac, sizeof(mac));
    if (key->cred && mc_auth_cred_get(key->cred, prove + MC_AUTH_MAC_BYTES,
                                      prove + MC_AUTH_MAC_BYTES + MC_AUTH_ID_BYTES))
        prove_len = MC_AUTH_PROVE_CRED_BYTES; /* and this is the client it is */
    rc = send_frame(fd, MC_METHOD_AUTH_PROVE, prove, (uint32_t)prove_len, deadline);
    if (!rc)
        rc = recv_answer(fd, MC_METHOD_AUTH_PROVE, NULL, 0, &status, deadline);
    if (rc)
        goto net_fail;
    if (status != 0)
        return refusal(status, who, peer, "prove");
    return 0;
net_fail:
    mc_warn(who, "auth handshake failed", "peer=%s rc=%s", peer, mc_strerror(rc));
    return rc;
}

const char *mc_auth_hint(int code)
{
    if (code == MC_ERR_PROTECTED_MODE)
        return "the server runs in protected mode (no auth token) and accepts loopback peers "
               "only: give every process the same --auth_token_file (or start the server with "
               "--protected_mode=false on a trusted network)";
    if (code == MC_ERR_TLS_REQUIRED)
        return "the server speaks TLS only: give this process the cluster's --tls_ca_file (and "
               "--tls_cert_file/--tls_key_file when the server requires client certificates)";
    if (code == MC_ERR_UNAUTHENTICATED)
        return "the server requires the shared auth token: give this process the same "
               "--auth_token_file as the server (auth_token_file in mc_client_config)";
    return NULL;
}

/* ---- addresses --------------------------------------------------------------------------- */

void mc_auth_format_addr(const struct sockaddr *sa, socklen_t len, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        snprintf(out, cap, "%s:%u", ip, ntohs(in->sin_port));
    } else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        snprintf(out, cap, "[%s]:%u", ip, ntohs(in6->sin6_port));
    } else if (sa && sa->sa_family == AF_UNIX) {
        snprintf(out, cap, "unix");
    } else {
        snprintf(out, cap, "?");
    }
}

bool mc_auth_addr_is_loopback(const struct sockaddr *sa, socklen_t len)
{
    if (!sa)
        return false;
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        return (a >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return sa->sa_family == AF_UNIX;
}
