/*
 * test_tls.c - TLS on the master's RPC port and the daemons' peer ports, with real processes on
 * loopback. A throwaway CA (and a second, unrelated one) with certificates for the master, the
 * daemon, this test and a stranger is made with the openssl tool in the temporary directory
 * (exit 77 without it). The master and the daemon run with --tls_cert_file, --tls_key_file,
 * --tls_ca_file (client certificates required) and a token (its handshake runs inside TLS).
 *
 *   round_trip        a library client with the TLS files and the token puts 4 MiB values
 *                     (stored in the daemon's segment: the bytes cross the peer port) and reads
 *                     them back equal; mooncake_cli with the TLS flags does the same
 *   plain_refused     a client without TLS gets TLS_REQUIRED (rpc client and library)
 *   no_client_cert    a client that trusts the CA but shows no certificate is refused
 *   wrong_ca          a client whose certificate another CA signed is refused; a client that
 *                     trusts only the other CA refuses the master
 *   shared_connection eight threads share one TLS rpc connection: 2,400 calls all answered
 *   no_sigpipe        writing on a TLS connection the master closed fails without SIGPIPE
 *   https             the master's HTTP port speaks HTTPS with its certificate: mooncake_cli
 *                     metrics reads it with the TLS flags, and curl (when installed) checks
 *                     it against the CA; plain HTTP gets no answer
 *   relay             an on-path relay passes the TLS handshake and the token handshake, then
 *                     injects a plain-text RemoveAll(force), or flips one byte of a record: the
 *                     master closes the connection and every key is still there. The same
 *                     injection against a plain master does remove them (the attack is real).
 *
 * Every process dies with the test; the temporary directory is removed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_util.h"
#include "common/auth.h"
#include "common/net.h"
#include "common/rpc_client.h"
#include "common/tls.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "test_listen.h"

#define START_MS 20000
#define CLI_MS 30000
#define VALUE_LEN (4u << 20)
#define NKEYS 3

static struct {
    struct cu_cluster cl;
    char tok[128], tok_flag[160];
    char ca[128], ca_key[128], ca2[128], ca2_key[128];
    char m_cert[128], m_key[128], d_cert[128], d_key[128], t_cert[128], t_key[128];
    char x_cert[128], x_key[128]; /* signed by ca2 */
    struct cu_proc master, d;
    char ep[256];
    struct mc_auth_key key;
} g;

static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == 0 ? 0 : -1;
}

static int make_ca(const char *name, char *pem, char *key)
{
    snprintf(pem, 128, "%s/%s.pem", g.cl.dir, name);
    snprintf(key, 128, "%s/%s.key", g.cl.dir, name);
    return sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
              "-keyout %s -out %s -days 2 -subj /CN=%s >/dev/null 2>&1",
              key, pem, name);
}

static int make_cert(const char *name, const char *ca, const char *ca_key, char *pem, char *key)
{
    snprintf(pem, 128, "%s/%s.pem", g.cl.dir, name);
    snprintf(key, 128, "%s/%s.key", g.cl.dir, name);
    return sh("printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > %s/%s.ext && "
              "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s "
              "-out %s/%s.csr -subj /CN=%s >/dev/null 2>&1 && openssl x509 -req -in %s/%s.csr "
              "-CA %s -CAkey %s -CAcreateserial -extfile %s/%s.ext -out %s -days 2 >/dev/null 2>&1",
              g.cl.dir, name, key, g.cl.dir, name, name, g.cl.dir, name, ca, ca_key, g.cl.dir, name,
              pem);
}

static const char *flag(char *buf, size_t cap, const char *name, const char *v)
{
    snprintf(buf, cap, "--%s=%s", name, v);
    return buf;
}

static int start_master(struct cu_proc *p, bool tls)
{
    char c[200], k[200], a[200];
    const char *tls_flags[] = {flag(c, sizeof(c), "tls_cert_file", g.m_cert),
                               flag(k, sizeof(k), "tls_key_file", g.m_key),
                               flag(a, sizeof(a), "tls_ca_file", g.ca),
                               g.tok_flag,
                               "--log_level=warn",
                               NULL};
    const char *plain_flags[] = {g.tok_flag, "--log_level=warn", NULL};
    return cu_start_master(&g.cl, p, 0, tls ? tls_flags : plain_flags, START_MS);
}

static int teardown(void **state);

static int setup_cluster(void)
{
    if (system("openssl version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_tls: no openssl tool, skipping\n");
        exit(77);
    }
    if (cu_cluster_init(&g.cl, "mc_tls") != 0)
        return -1;
    snprintf(g.tok, sizeof(g.tok), "%s/token", g.cl.dir);
    const char *secret = "tls-test-token-0123456789abcdefghijklmnopqrstuvwxyz\n";
    if (cu_write_file(g.tok, secret, strlen(secret)) != 0)
        return -1;
    chmod(g.tok, 0600);
    snprintf(g.tok_flag, sizeof(g.tok_flag), "--auth_token_file=%s", g.tok);
    char err[160];
    if (mc_auth_key_load(g.tok, &g.key, err, sizeof(err)) != 0) {
        fprintf(stderr, "token: %s\n", err);
        return -1;
    }
    if (make_ca("ca", g.ca, g.ca_key) || make_ca("ca2", g.ca2, g.ca2_key) ||
        make_cert("master", g.ca, g.ca_key, g.m_cert, g.m_key) ||
        make_cert("daemon", g.ca, g.ca_key, g.d_cert, g.d_key) ||
        make_cert("tester", g.ca, g.ca_key, g.t_cert, g.t_key) ||
        make_cert("stranger", g.ca2, g.ca2_key, g.x_cert, g.x_key)) {
        fprintf(stderr, "test_tls: cannot make the certificates\n");
        return -1;
    }
    if (start_master(&g.master, true) != 0)
        return -1;
    char c[200], k[200], a[200];
    const char *dflags[] = {flag(c, sizeof(c), "tls_cert_file", g.d_cert),
                            flag(k, sizeof(k), "tls_key_file", g.d_key),
                            flag(a, sizeof(a), "tls_ca_file", g.ca),
                            g.tok_flag,
                            "--segment_size=64MiB",
                            "--log_level=warn",
                            NULL};
    return cu_start_daemon(&g.cl, &g.d, "daemon", dflags, g.ep, sizeof(g.ep), START_MS);
}

/* cmocka runs no group teardown after a failed setup: clean up here then. */
static int setup(void **state)
{
    int rc = setup_cluster();
    if (rc)
        teardown(state);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    cu_stop(&g.d, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    cu_cluster_destroy(&g.cl);
    return 0;
}

/* An rpc client of addr with TLS files (NULL: plain) and the token; *ctx is its context. */
static struct mc_rpc_client *rpc(const char *addr, const char *cert, const char *key,
                                 const char *ca, struct mc_tls_ctx **ctx)
{
    static char host[128];
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    assert_int_equal(mc_rpc_parse_endpoint(addr, host, sizeof(host), &cfg), 0);
    cfg.connect_timeout_ms = 3000;
    cfg.call_timeout_ms = 5000;
    cfg.auth = &g.key;
    *ctx = NULL;
    if (ca) {
        struct mc_tls_files f = {cert, key, ca};
        char err[256];
        assert_int_equal(mc_tls_ctx_new(&f, false, ctx, err, sizeof(err)), 0);
        cfg.tls = *ctx;
    }
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cfg, &c), 0);
    return c;
}

/* 0 when the master has key k, OBJECT_NOT_FOUND when not, or the call's error. */
static int exist_key(struct mc_rpc_client *c, const char *k)
{
    Mc__ExistKeyRequest r = MC__EXIST_KEY_REQUEST__INIT;
    r.key = (char *)k;
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_EXIST_KEY, &r.base,
                                    &mc__exist_key_response__descriptor, 0, &m);
    if (rc == 0 && !((Mc__ExistKeyResponse *)m)->exists)
        rc = MC_ERR_OBJECT_NOT_FOUND;
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

static struct mc_client *lib_client(bool tls, int *rc)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.cl.rpc;
    cfg.host = "127.0.0.1";
    cfg.auth_token_file = g.tok;
    cfg.connect_timeout_ms = 3000;
    if (tls) {
        cfg.tls_cert_file = g.t_cert;
        cfg.tls_key_file = g.t_key;
        cfg.tls_ca_file = g.ca;
    }
    struct mc_client *c = NULL;
    *rc = mc_client_open(&cfg, &c);
    return c;
}

static void test_round_trip(void **state)
{
    (void)state;
    int rc;
    struct mc_client *c = lib_client(true, &rc);
    assert_int_equal(rc, 0);
    uint8_t *v = malloc(VALUE_LEN), *back = malloc(VALUE_LEN);
    assert_non_null(v);
    assert_non_null(back);
    for (int i = 0; i < NKEYS; i++) {
        char k[32];
        snprintf(k, sizeof(k), "tls/%d", i);
        cu_fill(v, VALUE_LEN, 1000u + (uint64_t)i);
        assert_int_equal(mc_put(c, k, v, VALUE_LEN, NULL), 0);
    }
    for (int i = 0; i < NKEYS; i++) {
        char k[32];
        snprintf(k, sizeof(k), "tls/%d", i);
        cu_fill(v, VALUE_LEN, 1000u + (uint64_t)i);
        memset(back, 0, VALUE_LEN);
        assert_int_equal(mc_get(c, k, back, VALUE_LEN), (int64_t)VALUE_LEN);
        assert_memory_equal(back, v, VALUE_LEN);
    }
    mc_client_close(c);

    /* mooncake_cli with the TLS flags: put a file, get it back */
    char in[128], out[128], m[128], ce[200], ke[200], ca[200];
    snprintf(in, sizeof(in), "%s/cli.in", g.cl.dir);
    snprintf(out, sizeof(out), "%s/cli.out", g.cl.dir);
    snprintf(m, sizeof(m), "--master=%s", g.cl.rpc);
    cu_fill(v, 300000, 77);
    assert_int_equal(cu_write_file(in, v, 300000), 0);
    const char *put[] = {g.cl.cli_bin,
                         m,
                         g.tok_flag,
                         flag(ce, sizeof(ce), "tls_cert_file", g.t_cert),
                         flag(ke, sizeof(ke), "tls_key_file", g.t_key),
                         flag(ca, sizeof(ca), "tls_ca_file", g.ca),
                         "put",
                         "tls/cli",
                         in,
                         NULL};
    struct cu_run r;
    cu_run(&r, g.cl.dir, put, NULL, CLI_MS);
    if (r.status != 0)
        fprintf(stderr, "cli put: %s\n", r.err);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    const char *get[] = {g.cl.cli_bin, m,         g.tok_flag, ce,  ke,  ca,
                         "get",        "tls/cli", "-o",       out, NULL};
    cu_run(&r, g.cl.dir, get, NULL, CLI_MS);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    size_t len = 0;
    char *got = cu_slurp(out, &len);
    assert_non_null(got);
    assert_int_equal(len, 300000);
    assert_memory_equal(got, v, 300000);
    free(got);
    free(v);
    free(back);
}

static void test_plain_refused(void **state)
{
    (void)state;
    struct mc_tls_ctx *ctx;
    struct mc_rpc_client *c = rpc(g.cl.rpc, NULL, NULL, NULL, &ctx);
    assert_int_equal(exist_key(c, "tls/0"), MC_ERR_TLS_REQUIRED);
    mc_rpc_client_free(c);
    int rc;
    struct mc_client *lc = lib_client(false, &rc);
    assert_null(lc);
    assert_int_equal(rc, MC_ERR_TLS_REQUIRED);
}

static void test_no_client_cert(void **state)
{
    (void)state;
    struct mc_tls_ctx *ctx;
    struct mc_rpc_client *c = rpc(g.cl.rpc, NULL, NULL, g.ca, &ctx);
    int rc = exist_key(c, "tls/0");
    assert_int_not_equal(rc, 0);
    assert_int_not_equal(rc, MC_ERR_OBJECT_NOT_FOUND);
    mc_rpc_client_free(c);
    mc_tls_ctx_free(ctx);
    /* the same with this test's certificate works */
    c = rpc(g.cl.rpc, g.t_cert, g.t_key, g.ca, &ctx);
    assert_int_equal(exist_key(c, "tls/0"), 0);
    mc_rpc_client_free(c);
    mc_tls_ctx_free(ctx);
}

static void test_wrong_ca(void **state)
{
    (void)state;
    struct mc_tls_ctx *ctx;
    /* a certificate of another CA, though it trusts the master's */
    struct mc_rpc_client *c = rpc(g.cl.rpc, g.x_cert, g.x_key, g.ca, &ctx);
    int rc = exist_key(c, "tls/0");
    assert_int_not_equal(rc, 0);
    assert_int_not_equal(rc, MC_ERR_OBJECT_NOT_FOUND);
    mc_rpc_client_free(c);
    mc_tls_ctx_free(ctx);
    /* trusting only the other CA: the master's certificate is refused by the client */
    c = rpc(g.cl.rpc, g.x_cert, g.x_key, g.ca2, &ctx);
    assert_int_equal(exist_key(c, "tls/0"), MC_ERR_UNAUTHENTICATED);
    mc_rpc_client_free(c);
    mc_tls_ctx_free(ctx);
}

/* A TLS connection the master closed (it sent garbage): writing to it fails, raising no
 * SIGPIPE (OpenSSL's own socket BIO would: this test process does not ignore it). */
static void test_no_sigpipe(void **state)
{
    (void)state;
    struct mc_tls_files f = {g.t_cert, g.t_key, g.ca};
    struct mc_tls_ctx *ctx = NULL;
    char err[256], host[64];
    assert_int_equal(mc_tls_ctx_new(&f, false, &ctx, err, sizeof(err)), 0);
    struct mc_rpc_client_config cfg;
    assert_int_equal(mc_rpc_parse_endpoint(g.cl.rpc, host, sizeof(host), &cfg), 0);
    struct mc_net_connect_opts o = {.connect_timeout_ms = 3000, .send_timeout_ms = 3000};
    int fd = -1;
    assert_int_equal(mc_net_connect(cfg.host, cfg.port, &o, &fd), MC_NET_OK);
    assert_int_equal(mc_tls_sock_connect(ctx, fd, 3000, "test", g.cl.rpc), 0);
    const char junk[] = "\x17\x03\x03\x00\x05hello"; /* a record the master cannot open */
    assert_true(send(fd, junk, sizeof(junk) - 1, MSG_NOSIGNAL) > 0);
    cu_sleep_ms(300); /* the master closes */
    uint8_t buf[4096];
    memset(buf, 1, sizeof(buf));
    int fails = 0;
    for (int i = 0; i < 50 && !fails; i++) {
        struct iovec v = {.iov_base = buf, .iov_len = sizeof(buf)};
        fails = mc_net_send_iov(fd, &v, 1) != 0;
        cu_sleep_ms(10);
    }
    assert_true(fails); /* and the process is still here */
    mc_tls_sock_close(fd);
    mc_tls_ctx_free(ctx);
}

struct caller {
    struct mc_rpc_client *c;
    pthread_t tid;
    int fails;
};

static void *caller_main(void *arg)
{
    struct caller *k = arg;
    for (int i = 0; i < 300; i++)
        k->fails += exist_key(k->c, "tls/0") != 0;
    return NULL;
}

/* Eight threads share one TLS connection (one reads for all while others write). */
static void test_shared_connection(void **state)
{
    (void)state;
    struct mc_tls_ctx *ctx;
    struct mc_rpc_client *c = rpc(g.cl.rpc, g.t_cert, g.t_key, g.ca, &ctx);
    struct caller k[8];
    for (int i = 0; i < 8; i++) {
        k[i] = (struct caller){.c = c};
        assert_int_equal(pthread_create(&k[i].tid, NULL, caller_main, &k[i]), 0);
    }
    int fails = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(k[i].tid, NULL);
        fails += k[i].fails;
    }
    assert_int_equal(fails, 0);
    mc_rpc_client_free(c);
    mc_tls_ctx_free(ctx);
}

/* ---- the relay ---------------------------------------------------------------------------- */

enum { RELAY_PASS = 0, RELAY_INJECT, RELAY_FLIP };

struct relay {
    int lfd, port, to_port;
    pthread_t tid;
    _Atomic int action;         /* RELAY_INJECT / RELAY_FLIP: done once, then back to PASS */
    _Atomic bool server_closed; /* the server side ended the connection */
    _Atomic bool stop;
    uint8_t inject[256];
    size_t inject_len;
};

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    int cfd = accept(r->lfd, NULL, NULL);
    if (cfd < 0)
        return NULL;
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)r->to_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(cfd);
        close(sfd);
        return NULL;
    }
    uint8_t buf[65536];
    while (!atomic_load(&r->stop)) {
        if (atomic_load(&r->action) == RELAY_INJECT) {
            (void)!write(sfd, r->inject, r->inject_len);
            atomic_store(&r->action, RELAY_PASS);
        }
        struct pollfd p[2] = {{.fd = cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, 20) <= 0)
            continue;
        if (p[0].revents) {
            ssize_t n = read(cfd, buf, sizeof(buf));
            if (n <= 0)
                break;
            if (n > 8 && atomic_load(&r->action) == RELAY_FLIP) {
                buf[n - 3] ^= 0x01; /* inside the record's ciphertext or tag */
                atomic_store(&r->action, RELAY_PASS);
            }
            (void)!write(sfd, buf, (size_t)n);
        }
        if (p[1].revents) {
            ssize_t n = read(sfd, buf, sizeof(buf));
            if (n <= 0) {
                atomic_store(&r->server_closed, true);
                break;
            }
            (void)!write(cfd, buf, (size_t)n);
        }
    }
    close(cfd);
    close(sfd);
    return NULL;
}

static void relay_start(struct relay *r, const char *to)
{
    memset(r, 0, sizeof(*r));
    r->to_port = atoi(strrchr(to, ':') + 1);
    uint16_t port;
    r->lfd = tl_listen(4, &port);
    r->port = port;
    /* the attacker's frame: RemoveAll(force), in plain text */
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.force = 1;
    size_t len = mc__remove_all_request__get_packed_size(&ra);
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_REMOVE_ALL, 0x7fff0001u, 0, (uint32_t)len);
    mc_wire_encode_header(&h, r->inject);
    mc__remove_all_request__pack(&ra, r->inject + MC_WIRE_HEADER_SIZE);
    r->inject_len = MC_WIRE_HEADER_SIZE + len;
    assert_int_equal(pthread_create(&r->tid, NULL, relay_main, r), 0);
}

static void relay_stop(struct relay *r)
{
    atomic_store(&r->stop, true);
    pthread_join(r->tid, NULL);
    close(r->lfd);
}

static void wait_action_done(struct relay *r)
{
    for (int i = 0; i < 200 && atomic_load(&r->action) != RELAY_PASS; i++)
        cu_sleep_ms(10);
    cu_sleep_ms(300); /* let the master act on it */
}

/* Through a relay to master (tls or not): the handshakes pass, then the relay injects a plain
 * RemoveAll(force) (or flips a byte of the client's next record). Returns whether the key
 * survived, read on a direct connection. */
static bool relay_attack(const char *master, bool tls, int action, bool *closed)
{
    struct relay r;
    relay_start(&r, master);
    char via[64];
    snprintf(via, sizeof(via), "127.0.0.1:%d", r.port);
    struct mc_tls_ctx *ctx, *dctx;
    const char *ca = tls ? g.ca : NULL;
    struct mc_rpc_client *c = rpc(via, g.t_cert, g.t_key, ca, &ctx);
    int rc = exist_key(c, "victim"); /* handshakes done through the relay */
    assert_true(rc == 0);
    atomic_store(&r.action, action);
    if (action == RELAY_FLIP)
        (void)exist_key(c, "victim"); /* its record is the one tampered with */
    wait_action_done(&r);
    for (int i = 0; i < 100 && tls && !atomic_load(&r.server_closed); i++)
        cu_sleep_ms(20);
    *closed = atomic_load(&r.server_closed);
    mc_rpc_client_free(c);
    relay_stop(&r);
    mc_tls_ctx_free(ctx);
    struct mc_rpc_client *d = rpc(master, g.t_cert, g.t_key, ca, &dctx);
    /* a RemoveAll that got through answers once the delete rule is met: give it time */
    bool kept = true;
    uint64_t until = cu_now_ms() + 3000;
    while (kept && cu_now_ms() < until) {
        kept = exist_key(d, "victim") == 0;
        cu_sleep_ms(50);
    }
    mc_rpc_client_free(d);
    mc_tls_ctx_free(dctx);
    return kept;
}

static struct mc_client *put_victim(const char *master, bool tls)
{
    int rc;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = master;
    cfg.host = "127.0.0.1";
    cfg.auth_token_file = g.tok;
    cfg.segment_size = 16u << 20;
    if (tls) {
        cfg.tls_cert_file = g.t_cert;
        cfg.tls_key_file = g.t_key;
        cfg.tls_ca_file = g.ca;
    }
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), 0);
    uint8_t v[4096];
    cu_fill(v, sizeof(v), 5);
    rc = mc_put(c, "victim", v, sizeof(v), NULL);
    assert_int_equal(rc, 0);
    return c; /* open: its segment holds the value */
}

static void test_relay(void **state)
{
    (void)state;
    /* the attack works on a plain master with a token: RemoveAll(force) rides the connection */
    struct cu_proc plain;
    struct cu_cluster saved = g.cl;
    assert_int_equal(start_master(&plain, false), 0);
    char plain_rpc[64];
    snprintf(plain_rpc, sizeof(plain_rpc), "%s", g.cl.rpc);
    g.cl = saved;
    struct mc_client *pc = put_victim(plain_rpc, false);
    bool closed;
    assert_false(relay_attack(plain_rpc, false, RELAY_INJECT, &closed));
    mc_client_close(pc);
    cu_stop(&plain, SIGTERM, 10000);

    /* with TLS: the injected bytes are not a valid record; the master closes, nothing goes */
    struct mc_client *tc = put_victim(g.cl.rpc, true);
    struct mc_tls_ctx *ctx;
    struct mc_rpc_client *d = rpc(g.cl.rpc, g.t_cert, g.t_key, g.ca, &ctx);
    assert_int_equal(exist_key(d, "victim"), 0);
    assert_true(relay_attack(g.cl.rpc, true, RELAY_INJECT, &closed));
    assert_true(closed);
    assert_true(relay_attack(g.cl.rpc, true, RELAY_FLIP, &closed));
    assert_true(closed);
    assert_int_equal(exist_key(d, "tls/0"), 0); /* the round trip's keys too */
    mc_rpc_client_free(d);
    mc_tls_ctx_free(ctx);
    mc_client_close(tc);
}

static void test_https(void **state)
{
    (void)state;
    /* mooncake_cli metrics: the HTTP port from the master over TLS, then HTTPS */
    char m[128], ce[200], ke[200], ca[200];
    snprintf(m, sizeof(m), "--master=%s", g.cl.rpc);
    const char *met[] = {g.cl.cli_bin,
                         m,
                         g.tok_flag,
                         flag(ce, sizeof(ce), "tls_cert_file", g.t_cert),
                         flag(ke, sizeof(ke), "tls_key_file", g.t_key),
                         flag(ca, sizeof(ca), "tls_ca_file", g.ca),
                         "metrics",
                         NULL};
    struct cu_run mr;
    cu_run(&mr, g.cl.dir, met, NULL, CLI_MS);
    if (mr.status != 0)
        fprintf(stderr, "cli metrics: %s\n", mr.err);
    assert_int_equal(mr.status, 0);
    assert_non_null(strstr(mr.out, "master_rpc_auth_failures_total"));
    cu_run_free(&mr);
    if (system("curl --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_https: no curl, skipped\n");
        return;
    }
    char url[128], plain[128], cacert[200];
    snprintf(url, sizeof(url), "https://%s/health", g.cl.metrics);
    snprintf(plain, sizeof(plain), "http://%s/health", g.cl.metrics);
    snprintf(cacert, sizeof(cacert), "%s", g.ca);
    const char *ok[] = {"curl", "-sf", "--max-time", "10", "--cacert", cacert, url, NULL};
    struct cu_run r;
    cu_run(&r, g.cl.dir, ok, NULL, CLI_MS);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"status\":\"ok\""));
    cu_run_free(&r);
    const char *bad[] = {"curl", "-sf", "--max-time", "10", plain, NULL};
    cu_run(&r, g.cl.dir, bad, NULL, CLI_MS);
    assert_int_not_equal(r.status, 0);
    cu_run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_plain_refused),
        cmocka_unit_test(test_no_client_cert),
        cmocka_unit_test(test_wrong_ca),
        cmocka_unit_test(test_shared_connection),
        cmocka_unit_test(test_no_sigpipe),
        cmocka_unit_test(test_https),
        cmocka_unit_test(test_relay),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
