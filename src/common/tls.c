/*
 * tls.c - see tls.h.
 *
 * A session (struct mc_tls) is one SSL object behind a mutex: OpenSSL allows one call at a time
 * on it, and the RPC client reads on one thread while another writes. The mutex is never held
 * across a wait: every SSL call runs on a non-blocking socket, and the blocking helpers poll
 * with the lock released. Writes go out record by record (partial-write mode), small pieces
 * of an iovec gathered into one record; after EAGAIN the next call starts with the same bytes,
 * as OpenSSL requires (moving-buffer mode lets the gathering buffer live on the stack).
 */
#include "common/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/lock_owner.h"
#include "common/mc_assert.h"
#include "mooncake/errors.h"

#define GATHER_BYTES 16384 /* one TLS record of plaintext */

struct mc_tls_ctx {
    SSL_CTX *ssl;
    bool has_ca;
};

struct mc_tls {
    SSL *ssl;
    int fd;
    pthread_mutex_t lock;
    struct mc_lock_owner lock_owner; /* who holds lock (settle_locked asserts it) */
    bool want_write;
    int rcv_ms, snd_ms; /* client sessions: the socket's timeouts (-1 = none) */
    char reason[192];
    char who[32], peer[96]; /* client sessions: for log lines */
    bool logged;            /* a TLS failure was logged (once per session) */
};

/* ---- contexts ---------------------------------------------------------------------------- */

static bool set(const char *s)
{
    return s && *s;
}

bool mc_tls_files_set(const struct mc_tls_files *f)
{
    return f && (set(f->cert_file) || set(f->key_file) || set(f->ca_file));
}

static void ssl_reason(char *out, size_t cap)
{
    unsigned long e = ERR_get_error();
    if (!e) {
        snprintf(out, cap, "unknown error");
        return;
    }
    ERR_error_string_n(e, out, cap);
    ERR_clear_error();
}

int mc_tls_ctx_new(const struct mc_tls_files *f, bool server, struct mc_tls_ctx **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    char why[160];
    struct mc_tls_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return MC_ERR_INTERNAL_ERROR;
    }
    if (set(f->cert_file) != set(f->key_file)) {
        snprintf(err, errlen, "--tls_cert_file and --tls_key_file go together");
        goto fail;
    }
    if (server && !set(f->cert_file)) {
        snprintf(err, errlen, "a TLS server needs --tls_cert_file and --tls_key_file");
        goto fail;
    }
    ERR_clear_error();
    c->ssl = SSL_CTX_new(TLS_method());
    if (!c->ssl) {
        ssl_reason(why, sizeof(why));
        snprintf(err, errlen, "cannot create a TLS context: %s", why);
        goto fail;
    }
    SSL_CTX_set_min_proto_version(c->ssl, TLS1_3_VERSION);
    SSL_CTX_set_options(c->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_num_tickets(c->ssl, 0);
    SSL_CTX_set_session_cache_mode(c->ssl, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                 SSL_MODE_RELEASE_BUFFERS);
    if (set(f->cert_file)) {
        if (SSL_CTX_use_certificate_chain_file(c->ssl, f->cert_file) != 1) {
            ssl_reason(why, sizeof(why));
            snprintf(err, errlen, "cannot load the certificate %s: %s", f->cert_file, why);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(c->ssl, f->key_file, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(c->ssl) != 1) {
            ssl_reason(why, sizeof(why));
            snprintf(err, errlen, "cannot load the key %s (or it does not match %s): %s",
                     f->key_file, f->cert_file, why);
            goto fail;
        }
    }
    if (set(f->ca_file)) {
        if (SSL_CTX_load_verify_locations(c->ssl, f->ca_file, NULL) != 1) {
            ssl_reason(why, sizeof(why));
            snprintf(err, errlen, "cannot load the CA file %s: %s", f->ca_file, why);
            goto fail;
        }
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->ca_file);
        if (names)
            SSL_CTX_set_client_CA_list(c->ssl, names);
        c->has_ca = true;
    } else {
        SSL_CTX_set_default_verify_paths(c->ssl);
    }
    *out = c;
    return 0;
fail:
    if (c->ssl)
        SSL_CTX_free(c->ssl);
    free(c);
    return MC_ERR_INVALID_PARAMS;
}

void mc_tls_ctx_free(struct mc_tls_ctx *ctx)
{
    if (!ctx)
        return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}

bool mc_tls_ctx_verifies_clients(const struct mc_tls_ctx *ctx)
{
    return ctx && ctx->has_ca;
}

/* ---- the socket BIO, without SIGPIPE ------------------------------------------------------
 * OpenSSL's socket BIO writes with send(fd, buf, n, 0): a peer that has gone raises SIGPIPE,
 * which kills a program that embeds the library and did not ignore it. Ours is that BIO with
 * its write replaced by send(..., MSG_NOSIGNAL). */

static BIO_METHOD *g_bio_method;
static pthread_once_t g_bio_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *in, size_t len, size_t *written)
{
    int fd = -1;
    BIO_get_fd(b, &fd);
    errno = 0;
    ssize_t r = send(fd, in, len, MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (r <= 0) {
        if (BIO_sock_should_retry((int)r))
            BIO_set_retry_write(b);
        *written = 0;
        return 0;
    }
    *written = (size_t)r;
    return 1;
}

static void make_bio_method(void)
{
    const BIO_METHOD *sock = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "socket without SIGPIPE");
    if (!m)
        return;
    if (BIO_meth_set_write_ex(m, nosig_write) != 1 ||
        BIO_meth_set_read(m, BIO_meth_get_read(sock)) != 1 ||
        BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock)) != 1 ||
        BIO_meth_set_create(m, BIO_meth_get_create(sock)) != 1 ||
        BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock)) != 1) {
        BIO_meth_free(m);
        return;
    }
    g_bio_method = m;
}

/* Attaches fd to ssl through the BIO above. false: out of memory. */
static bool attach_fd(SSL *ssl, int fd)
{
    pthread_once(&g_bio_once, make_bio_method);
    BIO *b = g_bio_method ? BIO_new(g_bio_method) : NULL;
    if (!b)
        return false;
    BIO_set_fd(b, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, b, b);
    return true;
}

/* ---- sessions ---------------------------------------------------------------------------- */

static struct mc_tls *session_new(struct mc_tls_ctx *ctx, int fd, bool server)
{
    struct mc_tls *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->ssl = SSL_new(ctx->ssl);
    if (!t->ssl || !attach_fd(t->ssl, fd)) {
        if (t->ssl)
            SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    if (server) {
        SSL_set_accept_state(t->ssl);
        SSL_set_verify(t->ssl,
                       ctx->has_ca ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                                   : SSL_VERIFY_NONE,
                       NULL);
    } else {
        SSL_set_connect_state(t->ssl);
        SSL_set_verify(t->ssl, SSL_VERIFY_PEER, NULL);
    }
    t->fd = fd;
    t->rcv_ms = t->snd_ms = -1;
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

struct mc_tls *mc_tls_server_new(struct mc_tls_ctx *ctx, int fd)
{
    return session_new(ctx, fd, true);
}

void mc_tls_free(struct mc_tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* Under t->lock, after an SSL call returned r <= 0: -1 with errno (EAGAIN, EPROTO or the
 * socket's), or 0 for the peer's orderly end. */
static ssize_t settle_locked(struct mc_tls *t, int r)
{
    MC_ASSERT(mc_owner_is_me(&t->lock_owner));
    int e = SSL_get_error(t->ssl, r);
    int saved = errno;
    t->want_write = false;
    switch (e) {
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        t->want_write = true;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (saved == 0)
            return 0; /* EOF */
        snprintf(t->reason, sizeof(t->reason), "%s", strerror(saved));
        errno = saved == EAGAIN ? EPIPE : saved;
        return -1;
    default: {
        char why[160];
        ssl_reason(why, sizeof(why));
        long v = SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK)
            snprintf(t->reason, sizeof(t->reason), "%s (certificate: %s)", why,
                     X509_verify_cert_error_string(v));
        else
            snprintf(t->reason, sizeof(t->reason), "%s", why);
        errno = EPROTO;
        return -1;
    }
    }
}

static ssize_t read_some(struct mc_tls *t, void *buf, size_t len, bool peek)
{
    if (len > INT32_MAX)
        len = INT32_MAX;
    mc_owner_lock(&t->lock, &t->lock_owner);
    ERR_clear_error();
    errno = 0;
    int r = peek ? SSL_peek(t->ssl, buf, (int)len) : SSL_read(t->ssl, buf, (int)len);
    ssize_t out = r > 0 ? r : settle_locked(t, r);
    if (r > 0)
        t->want_write = false;
    mc_owner_unlock(&t->lock, &t->lock_owner);
    return out;
}

ssize_t mc_tls_read(struct mc_tls *t, void *buf, size_t len)
{
    return len ? read_some(t, buf, len, false) : 0;
}

ssize_t mc_tls_writev(struct mc_tls *t, const struct iovec *iov, int n)
{
    size_t total = 0;
    int i = 0;
    size_t off = 0; /* into iov[i] */
    while (i < n) {
        if (off == iov[i].iov_len) {
            i++;
            off = 0;
            continue;
        }
        uint8_t gather[GATHER_BYTES];
        const uint8_t *p = (const uint8_t *)iov[i].iov_base + off;
        size_t len = iov[i].iov_len - off;
        if (len < GATHER_BYTES) { /* small pieces: one record (the same bytes on a retry) */
            size_t g = 0;
            int j = i;
            size_t o = off;
            while (j < n && g < GATHER_BYTES) {
                size_t take = iov[j].iov_len - o;
                if (take > GATHER_BYTES - g)
                    take = GATHER_BYTES - g;
                memcpy(gather + g, (const uint8_t *)iov[j].iov_base + o, take);
                g += take;
                o += take;
                if (o == iov[j].iov_len) {
                    j++;
                    o = 0;
                }
            }
            p = gather;
            len = g;
        }
        if (len > INT32_MAX)
            len = INT32_MAX;
        mc_owner_lock(&t->lock, &t->lock_owner);
        ERR_clear_error();
        errno = 0;
        int r = SSL_write(t->ssl, p, (int)len);
        ssize_t bad = r > 0 ? 0 : settle_locked(t, r);
        if (r > 0)
            t->want_write = false;
        mc_owner_unlock(&t->lock, &t->lock_owner);
        if (r <= 0) {
            if (total)
                return (ssize_t)total;
            if (bad == 0)
                errno = EPIPE;
            return -1;
        }
        total += (size_t)r;
        size_t left = (size_t)r; /* advance over what went out */
        while (left) {
            size_t room = iov[i].iov_len - off;
            if (left < room) {
                off += left;
                left = 0;
            } else {
                left -= room;
                i++;
                off = 0;
            }
        }
    }
    return (ssize_t)total;
}

size_t mc_tls_pending(struct mc_tls *t)
{
    mc_owner_lock(&t->lock, &t->lock_owner);
    int n = SSL_pending(t->ssl);
    mc_owner_unlock(&t->lock, &t->lock_owner);
    return n > 0 ? (size_t)n : 0;
}

bool mc_tls_wants_write(const struct mc_tls *t)
{
    return t->want_write;
}

bool mc_tls_established(const struct mc_tls *t)
{
    return SSL_is_init_finished(t->ssl);
}

const char *mc_tls_reason(const struct mc_tls *t)
{
    return t->reason[0] ? t->reason : "unknown";
}

/* ---- the client registry: descriptor -> session ----------------------------------------- */

#define REG_CHUNK 4096
#define REG_CHUNKS 256 /* descriptors below 1M */

static _Atomic(struct mc_tls *) *g_reg[REG_CHUNKS];
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic(struct mc_tls *) *reg_slot(int fd, bool create)
{
    if (fd < 0 || fd >= REG_CHUNK * REG_CHUNKS)
        return NULL;
    _Atomic(struct mc_tls *) *chunk = __atomic_load_n(&g_reg[fd / REG_CHUNK], __ATOMIC_ACQUIRE);
    if (!chunk && create) {
        pthread_mutex_lock(&g_reg_lock);
        chunk = g_reg[fd / REG_CHUNK];
        if (!chunk) {
            chunk = calloc(REG_CHUNK, sizeof(*chunk));
            if (chunk)
                __atomic_store_n(&g_reg[fd / REG_CHUNK], chunk, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&g_reg_lock);
    }
    return chunk ? &chunk[fd % REG_CHUNK] : NULL;
}

static struct mc_tls *reg_get(int fd)
{
    _Atomic(struct mc_tls *) *s = reg_slot(fd, false);
    return s ? atomic_load_explicit(s, memory_order_acquire) : NULL;
}

static int timeout_of(int fd, int opt)
{
    struct timeval tv;
    socklen_t l = sizeof(tv);
    if (getsockopt(fd, SOL_SOCKET, opt, &tv, &l) != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0))
        return -1;
    long ms = (long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    return ms > 0 && ms < INT32_MAX ? (int)ms : 1;
}

/* Waits for the session's socket (writable when the last call wants it, else readable) up to
 * ms (-1 = forever). 0, or -1 with errno EAGAIN on timeout. */
static int wait_sock(struct mc_tls *t, bool write, int ms)
{
    struct pollfd p = {.fd = t->fd, .events = (short)(write ? POLLOUT : POLLIN)};
    for (;;) {
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 0;
        if (r == 0) {
            errno = EAGAIN;
            return -1;
        }
        if (errno != EINTR)
            return -1;
    }
}

int mc_tls_sock_connect(struct mc_tls_ctx *ctx, int fd, uint32_t timeout_ms, const char *who,
                        const char *peer)
{
    _Atomic(struct mc_tls *) *slot = reg_slot(fd, true);
    struct mc_tls *t = slot ? session_new(ctx, fd, false) : NULL;
    if (!t)
        return MC_ERR_INTERNAL_ERROR;
    snprintf(t->who, sizeof(t->who), "%s", who ? who : "tls");
    snprintf(t->peer, sizeof(t->peer), "%s", peer ? peer : "?");
    t->rcv_ms = timeout_of(fd, SO_RCVTIMEO);
    t->snd_ms = timeout_of(fd, SO_SNDTIMEO);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        mc_tls_free(t);
        return MC_ERR_RPC_FAIL;
    }
    uint64_t deadline = mc_now_ms() + (timeout_ms ? timeout_ms : 3000);
    int rc = 0;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int r = SSL_do_handshake(t->ssl);
        if (r == 1)
            break;
        /* the session is this thread's alone until the handshake ends; the lock is what
         * settle_locked asserts (pthread_mutex_lock leaves errno as the SSL call set it) */
        mc_owner_lock(&t->lock, &t->lock_owner);
        ssize_t s = settle_locked(t, r);
        int err = errno;
        mc_owner_unlock(&t->lock, &t->lock_owner);
        errno = err;
        if (s == 0 || errno != EAGAIN) {
            if (s == 0)
                snprintf(t->reason, sizeof(t->reason), "the server closed the connection");
            rc = errno == EPROTO || s == 0 ? MC_ERR_UNAUTHENTICATED : MC_ERR_RPC_FAIL;
            mc_error(who, "TLS handshake failed", "peer=%s reason=\"%s\" hint=\"%s\"", peer,
                     t->reason,
                     "the server must speak TLS (--tls_cert_file) and its certificate must be "
                     "signed by this side's --tls_ca_file");
            goto fail;
        }
        uint64_t now = mc_now_ms();
        if (now >= deadline || wait_sock(t, t->want_write, (int)(deadline - now)) != 0) {
            rc = MC_ERR_RPC_TIMEOUT;
            mc_warn(who, "TLS handshake timed out", "peer=%s", peer);
            goto fail;
        }
    }
    atomic_store_explicit(slot, t, memory_order_release);
    return 0;
fail:
    mc_tls_free(t);
    (void)fcntl(fd, F_SETFL, fl);
    return rc;
}

bool mc_tls_sock_is_tls(int fd)
{
    return reg_get(fd) != NULL;
}

ssize_t mc_tls_sock_recv(int fd, void *buf, size_t len, int flags)
{
    struct mc_tls *t = reg_get(fd);
    if (!t)
        return recv(fd, buf, len, flags);
    if (!len)
        return 0;
    for (;;) {
        ssize_t r = read_some(t, buf, len, (flags & MSG_PEEK) != 0);
        if (r < 0 && errno == EPROTO && !t->logged) {
            t->logged = true; /* a server's alert (certificate refused) or a tampered record */
            mc_error(t->who, "TLS error", "peer=%s reason=\"%s\"", t->peer, t->reason);
            errno = EPROTO;
        }
        if (r >= 0 || errno != EAGAIN || (flags & MSG_DONTWAIT))
            return r;
        if (wait_sock(t, false, t->rcv_ms) != 0)
            return -1;
    }
}

static int send_iov_tls(struct mc_tls *t, struct iovec *iov, int n, bool dontwait, size_t *sent)
{
    *sent = 0;
    while (n > 0) {
        ssize_t w = mc_tls_writev(t, iov, n);
        if (w < 0) {
            if (errno != EAGAIN || dontwait)
                return -1;
            if (wait_sock(t, true, t->snd_ms) != 0) /* TLS 1.3 writes never wait to read */
                return -1;
            continue;
        }
        *sent += (size_t)w;
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
        if (dontwait)
            return 0;
    }
    return 0;
}

ssize_t mc_tls_sock_send(int fd, const void *buf, size_t len, int flags)
{
    struct mc_tls *t = reg_get(fd);
    if (!t)
        return send(fd, buf, len, flags);
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    size_t sent = 0;
    int r = send_iov_tls(t, &v, 1, (flags & MSG_DONTWAIT) != 0, &sent);
    return r && !sent ? -1 : (ssize_t)sent;
}

int mc_tls_sock_send_iov(int fd, struct iovec *iov, int n)
{
    struct mc_tls *t = reg_get(fd);
    size_t sent;
    return t ? send_iov_tls(t, iov, n, false, &sent) : -1;
}

size_t mc_tls_sock_pending(int fd)
{
    struct mc_tls *t = reg_get(fd);
    return t ? mc_tls_pending(t) : 0;
}

int mc_tls_sock_close(int fd)
{
    _Atomic(struct mc_tls *) *s = reg_slot(fd, false);
    struct mc_tls *t = s ? atomic_exchange(s, NULL) : NULL;
    mc_tls_free(t);
    return close(fd);
}

const char *mc_tls_sock_reason(int fd)
{
    struct mc_tls *t = reg_get(fd);
    return t && t->reason[0] ? t->reason : NULL;
}
