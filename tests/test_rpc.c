/*
 * test_rpc.c - RPC server + client over loopback: round trips, pipelining with out-of-order
 * answers, deferred replies (from another thread, after the connection closed, parked at
 * shutdown), caps, timeouts, reconnect after a server restart, peer payload calls, version check.
 *
 * Handlers in the test range (MC_METHOD_TEST_FIRST..) park calls in a "parking lot" the test
 * thread drains; waits are condition-variable waits with deadlines, never sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/service_ready.h"
#include "common/rpc_server.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "proto/peer.pb-c.h"

enum {
    M_PARK = MC_METHOD_TEST_FIRST + 1,      /* parks the call */
    M_PEER_ECHO = MC_METHOD_TEST_FIRST + 2, /* peer body: echoes the payload back */
    M_SET_CTX = MC_METHOD_TEST_FIRST + 3,   /* stores a value in the connection context */
    M_BAD_VERSION = MC_METHOD_TEST_FIRST + 4,
};

/* ---- parking lot ------------------------------------------------------------------------- */

#define LOT_MAX 4096
struct lot {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mc_rpc_call *calls[LOT_MAX];
    int n, max_seen, closes;
    void *last_ctx;
};

static void lot_init(struct lot *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
}

static void lot_destroy(struct lot *l)
{
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
}

static void park_handler(void *arg, struct mc_rpc_call *call)
{
    struct lot *l = arg;
    pthread_mutex_lock(&l->mu);
    l->calls[l->n++] = call;
    if (l->n > l->max_seen)
        l->max_seen = l->n;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Waits (up to 5 s) until the lot holds n calls, or until `closes` reaches n when want_close. */
static int lot_wait(struct lot *l, int n, int want_close)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&l->mu);
    int rc = 0;
    while ((want_close ? l->closes : l->n) < n && rc == 0)
        rc = pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    int ok = (want_close ? l->closes : l->n) >= n;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

static struct mc_rpc_call *lot_take(struct lot *l, int i)
{
    pthread_mutex_lock(&l->mu);
    struct mc_rpc_call *c = l->calls[i];
    pthread_mutex_unlock(&l->mu);
    return c;
}

static void lot_clear(struct lot *l)
{
    pthread_mutex_lock(&l->mu);
    l->n = 0;
    pthread_mutex_unlock(&l->mu);
}

static void on_close(void *arg, uint64_t conn_id, void *ctx)
{
    struct lot *l = arg;
    (void)conn_id;
    pthread_mutex_lock(&l->mu);
    l->closes++;
    l->last_ctx = ctx;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    free(ctx);
}

static void set_ctx_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    void **slot = mc_rpc_call_conn_ctx(call);
    if (!*slot)
        *slot = strdup("client-A");
    mc_rpc_reply(call, 0, *slot, strlen(*slot));
}

static void peer_echo_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    const uint8_t *payload;
    size_t plen;
    Mc__PeerReadRequest *req = (Mc__PeerReadRequest *)mc_rpc_call_unpack_peer(
        call, &mc__peer_read_request__descriptor, &payload, &plen);
    if (!req)
        return;
    if (req->length != plen) {
        protobuf_c_message_free_unpacked(&req->base, NULL);
        mc_rpc_reply_status(call, MC_ERR_INVALID_PARAMS);
        return;
    }
    protobuf_c_message_free_unpacked(&req->base, NULL);
    Mc__PeerReadResponse r = MC__PEER_READ_RESPONSE__INIT;
    r.length = plen;
    /* the payload points into the request body, which lives until the call completes */
    struct iovec iov[2] = {{(void *)payload, plen / 2},
                           {(void *)(payload + plen / 2), plen - plen / 2}};
    mc_rpc_reply_peer(call, 0, &r.base, iov, 2, NULL, NULL);
}

static void bad_version_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    Mc__ServiceReadyResponse r = MC__SERVICE_READY_RESPONSE__INIT;
    r.version = "mooncake-c/9.9.9 proto=999";
    r.proto_version = 999;
    mc_rpc_reply_msg(call, 0, &r.base);
}

/* ---- fixture ----------------------------------------------------------------------------- */

struct fx {
    struct mc_rpc_server *srv;
    struct lot lot;
    uint16_t port;
};

static struct mc_rpc_server *start_server(struct fx *f, uint16_t port, int inflight, int conns)
{
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    cfg.port = port;
    cfg.io_threads = 2;
    cfg.max_inflight_per_conn = inflight;
    cfg.max_conns = conns;
    cfg.on_close = on_close;
    cfg.on_close_arg = &f->lot;
    struct mc_rpc_server *s = NULL;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(mc_rpc_server_register(s, M_PARK, park_handler, &f->lot), 0);
    assert_int_equal(mc_rpc_server_register(s, M_PEER_ECHO, peer_echo_handler, NULL), 0);
    assert_int_equal(mc_rpc_server_register(s, M_SET_CTX, set_ctx_handler, NULL), 0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    assert_int_not_equal(mc_rpc_server_port(s), 0);
    /* registering after start is refused */
    assert_int_equal(mc_rpc_server_register(s, M_BAD_VERSION, bad_version_handler, NULL),
                     MC_ERR_INVALID_PARAMS);
    return s;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    lot_init(&f->lot);
    f->srv = start_server(f, 0, 0, 0);
    f->port = mc_rpc_server_port(f->srv);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    mc_rpc_server_stop(f->srv);
    /* owners drop whatever is still parked (no-ops after stop) */
    for (int i = 0; i < f->lot.n; i++)
        mc_rpc_call_drop(f->lot.calls[i]);
    mc_rpc_server_free(f->srv);
    lot_destroy(&f->lot);
    free(f);
    return 0;
}

static struct mc_rpc_client *new_client(uint16_t port, uint32_t call_timeout_ms)
{
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    cfg.host = "127.0.0.1";
    cfg.port = port;
    cfg.call_timeout_ms = call_timeout_ms;
    cfg.connect_timeout_ms = 2000;
    cfg.reconnect_min_ms = 5;
    cfg.reconnect_max_ms = 50;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cfg, &c), 0);
    return c;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_round_trip(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 5000);
    assert_int_equal(mc_rpc_client_connect(c), 0);
    assert_true(mc_rpc_client_connected(c));
    size_t sizes[] = {0, 1, 31, 32, 65535, 65536 + 7, 3u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *buf = malloc(sizes[i] + 1);
        for (size_t j = 0; j < sizes[i]; j++)
            buf[j] = (uint8_t)(j * 31 + i);
        void *resp = NULL;
        size_t rl = 99;
        assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, buf, sizes[i], 0, &resp, &rl), 0);
        assert_int_equal(rl, sizes[i]);
        if (sizes[i])
            assert_memory_equal(resp, buf, sizes[i]);
        free(resp);
        free(buf);
    }
    /* the generic layer knows no master.proto method: ServiceReady is the service's to
     * register (test_service_ready) */
    char ver[64] = "";
    assert_int_equal(mc_service_ready_check(c, ver, sizeof(ver)), MC_ERR_NOT_SUPPORTED);
    assert_string_equal(ver, "");
    /* unknown method: an error answer, and the connection stays usable */
    assert_int_equal(mc_rpc_client_call(c, 0x3FE, "x", 1, 0, NULL, NULL), MC_ERR_NOT_SUPPORTED);
    assert_int_equal(mc_rpc_client_call(c, 0x7777, "x", 1, 0, NULL, NULL), MC_ERR_NOT_SUPPORTED);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "ok", 2, 0, NULL, NULL), 0);
    /* an answer that does not decode as the expected type: DESERIALIZE_FAIL, no crash */
    Mc__PingResponse pr = MC__PING_RESPONSE__INIT;
    pr.view_version = 5; /* field 1 as a varint; ServiceReadyResponse.version is a string */
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_ECHO, &pr.base,
                                            &mc__service_ready_response__descriptor, 0, &m),
                     MC_ERR_DESERIALIZE_FAIL);
    assert_null(m);
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(f->srv, &st);
    assert_true(st.unknown_methods >= 2);
    assert_true(st.requests >= 10);
    mc_rpc_client_free(c);
}

struct caller {
    struct mc_rpc_client *c;
    uint16_t method;
    int idx;
    uint32_t wait_ms;
    int rc;
    char got[32];
    uint64_t elapsed_ms;
};

static void *caller_main(void *arg)
{
    struct caller *k = arg;
    char body[32];
    snprintf(body, sizeof(body), "req-%d", k->idx);
    void *resp = NULL;
    size_t rl = 0;
    uint64_t t0 = mc_now_ms();
    k->rc = mc_rpc_client_call(k->c, k->method, body, strlen(body), k->wait_ms, &resp, &rl);
    k->elapsed_ms = mc_now_ms() - t0;
    if (k->rc == 0 && rl < sizeof(k->got))
        memcpy(k->got, resp, rl);
    free(resp);
    return NULL;
}

/* Echo back the parked call's own body. */
static void reply_echo(struct mc_rpc_call *call)
{
    size_t len;
    const uint8_t *b = mc_rpc_call_body(call, &len);
    mc_rpc_reply(call, 0, b, len);
}

/* K calls outstanding at once on ONE connection, answered in reverse order. */
static void test_pipelining_out_of_order(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 5000);
    enum { K = 64 };
    struct caller ks[K];
    pthread_t th[K];
    for (int i = 0; i < K; i++) {
        ks[i] = (struct caller){.c = c, .method = M_PARK, .idx = i};
        pthread_create(&th[i], NULL, caller_main, &ks[i]);
    }
    assert_true(lot_wait(&f->lot, K, 0));
    for (int i = K - 1; i >= 0; i--)
        reply_echo(lot_take(&f->lot, i));
    for (int i = 0; i < K; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(ks[i].rc, 0);
        char want[32];
        snprintf(want, sizeof(want), "req-%d", i);
        assert_string_equal(ks[i].got, want);
    }
    lot_clear(&f->lot);
    /* many threads hammering echo concurrently over one connection */
    enum { T = 8 };
    pthread_t ht[T];
    struct caller hk[T];
    for (int i = 0; i < T; i++) {
        hk[i] = (struct caller){.c = c, .method = MC_METHOD_ECHO, .idx = i};
        pthread_create(&ht[i], NULL, caller_main, &hk[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(ht[i], NULL);
        assert_int_equal(hk[i].rc, 0);
    }
    mc_rpc_client_free(c);
}

struct completer {
    struct lot *lot;
    int n;
};

static void *completer_main(void *arg)
{
    struct completer *k = arg;
    lot_wait(k->lot, k->n, 0);
    for (int i = 0; i < k->n; i++)
        reply_echo(lot_take(k->lot, i));
    return NULL;
}

static void test_deferred_from_other_thread(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 5000);
    struct completer k = {&f->lot, 3};
    pthread_t th;
    pthread_create(&th, NULL, completer_main, &k);
    struct caller ks[3];
    pthread_t ct[3];
    for (int i = 0; i < 3; i++) {
        ks[i] = (struct caller){.c = c, .method = M_PARK, .idx = i};
        pthread_create(&ct[i], NULL, caller_main, &ks[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(ct[i], NULL);
        assert_int_equal(ks[i].rc, 0);
    }
    pthread_join(th, NULL);
    lot_clear(&f->lot);
    mc_rpc_client_free(c);
}

/* The client goes away while its call is parked; completing it later is a harmless no-op, and
 * the connection-closed hook saw the per-connection context. */
static void test_deferred_after_close(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 5000);
    void *resp = NULL;
    size_t rl = 0;
    assert_int_equal(mc_rpc_client_call(c, M_SET_CTX, NULL, 0, 0, &resp, &rl), 0);
    assert_int_equal(rl, 8);
    free(resp);
    struct caller k = {.c = c, .method = M_PARK, .idx = 7};
    pthread_t th;
    pthread_create(&th, NULL, caller_main, &k);
    assert_true(lot_wait(&f->lot, 1, 0));
    assert_false(mc_rpc_call_conn_closed(f->lot.calls[0])); /* parked on an open connection */
    mc_rpc_client_disconnect(c);
    pthread_join(th, NULL);
    assert_int_equal(k.rc, MC_ERR_RPC_FAIL);
    assert_true(lot_wait(&f->lot, 1, 1)); /* on_close ran */
    assert_non_null(f->lot.last_ctx);
    /* its owner can tell before answering (a long-poll then hands it no task) */
    assert_true(mc_rpc_call_conn_closed(f->lot.calls[0]));
    reply_echo(lot_take(&f->lot, 0)); /* connection gone: no-op */
    lot_clear(&f->lot);
    /* the same client reconnects and the server still answers */
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "a", 1, 0, NULL, NULL), 0);
    mc_rpc_client_free(c);
}

/* Stop answers parked calls with UNAVAILABLE_IN_CURRENT_STATUS. */
static void test_parked_at_shutdown(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 5000);
    struct caller ks[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        ks[i] = (struct caller){.c = c, .method = M_PARK, .idx = i};
        pthread_create(&th[i], NULL, caller_main, &ks[i]);
    }
    assert_true(lot_wait(&f->lot, 4, 0));
    reply_echo(lot_take(&f->lot, 0)); /* one answered normally before the stop */
    mc_rpc_server_stop(f->srv);
    int ok = 0, unavailable = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ok += ks[i].rc == 0;
        unavailable += ks[i].rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    assert_int_equal(ok, 1); /* the one answered before the stop */
    assert_int_equal(unavailable, 3);
    /* owners completing after stop: no-ops (teardown drops the rest) */
    reply_echo(lot_take(&f->lot, 1));
    mc_rpc_call_drop(lot_take(&f->lot, 2));
    pthread_mutex_lock(&f->lot.mu);
    f->lot.calls[0] = f->lot.calls[3];
    f->lot.n = 1;
    pthread_mutex_unlock(&f->lot.mu);
    mc_rpc_client_free(c);
}

static void test_timeouts(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 60);
    /* never answered: fails after the call timeout */
    struct caller k = {.c = c, .method = M_PARK, .idx = 1};
    caller_main(&k);
    assert_int_equal(k.rc, MC_ERR_RPC_TIMEOUT);
    assert_true(k.elapsed_ms >= 60);
    /* asking the server to hold it W ms extends the deadline to W + timeout */
    k = (struct caller){.c = c, .method = M_PARK, .idx = 2, .wait_ms = 200};
    caller_main(&k);
    assert_int_equal(k.rc, MC_ERR_RPC_TIMEOUT);
    assert_true(k.elapsed_ms >= 260);
    assert_true(k.elapsed_ms < 5000);
    /* ... and an answer inside W + timeout (but after the bare timeout) succeeds */
    assert_true(lot_wait(&f->lot, 2, 0));
    k = (struct caller){.c = c, .method = M_PARK, .idx = 3, .wait_ms = 3000};
    pthread_t th;
    pthread_create(&th, NULL, caller_main, &k);
    assert_true(lot_wait(&f->lot, 3, 0));
    /* wait past the bare call timeout before answering */
    struct timespec ts = {0, 150 * 1000000L};
    nanosleep(&ts, NULL);
    reply_echo(lot_take(&f->lot, 2));
    pthread_join(th, NULL);
    assert_int_equal(k.rc, 0);
    assert_string_equal(k.got, "req-3");
    /* late answers to the timed-out calls are discarded; the connection still works */
    reply_echo(lot_take(&f->lot, 0));
    reply_echo(lot_take(&f->lot, 1));
    lot_clear(&f->lot);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "z", 1, 0, NULL, NULL), 0);
    mc_rpc_client_free(c);
    /* connecting to a port nobody listens on fails, without hanging */
    struct mc_rpc_client *d = new_client(1, 100);
    assert_int_equal(mc_rpc_client_connect(d), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_rpc_client_call(d, MC_METHOD_ECHO, "z", 1, 0, NULL, NULL), MC_ERR_RPC_FAIL);
    mc_rpc_client_free(d);
}

static void test_reconnect_after_restart(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 500);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "1", 1, 0, NULL, NULL), 0);
    mc_rpc_server_free(f->srv);
    f->srv = NULL;
    int rc = mc_rpc_client_call(c, MC_METHOD_ECHO, "2", 1, 0, NULL, NULL);
    assert_true(rc == MC_ERR_RPC_FAIL || rc == MC_ERR_RPC_TIMEOUT);
    f->srv = start_server(f, f->port, 0, 0);
    uint64_t deadline = mc_now_ms() + 5000;
    do {
        rc = mc_rpc_client_call(c, MC_METHOD_ECHO, "3", 1, 0, NULL, NULL);
    } while (rc != 0 && mc_now_ms() < deadline);
    assert_int_equal(rc, 0);
    assert_true(mc_rpc_client_connected(c));
    mc_rpc_client_free(c);
}

static void test_peer_payload(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 5000);
    size_t n = (8u << 20) + 13;
    uint8_t *src = malloc(n), *dst = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i ^ (i >> 9));
    memset(dst, 0, n);
    Mc__PeerReadRequest req = MC__PEER_READ_REQUEST__INIT;
    req.length = n;
    struct iovec iov[3] = {{src, 100}, {src + 100, n - 200}, {src + n - 100, 100}};
    struct mc_rpc_peer_call pc = {.method = M_PEER_ECHO,
                                  .ctl = &req.base,
                                  .payload = iov,
                                  .npayload = 3,
                                  .resp_desc = &mc__peer_read_response__descriptor,
                                  .recv_buf = dst,
                                  .recv_cap = n};
    assert_int_equal(mc_rpc_client_call_peer(c, &pc), 0);
    assert_int_equal(pc.recv_len, n);
    assert_memory_equal(src, dst, n);
    assert_non_null(pc.resp);
    assert_int_equal(((Mc__PeerReadResponse *)pc.resp)->length, n);
    protobuf_c_message_free_unpacked(pc.resp, NULL);
    /* a reply larger than the receive buffer: BUFFER_OVERFLOW, connection still usable */
    pc.recv_cap = n - 1;
    assert_int_equal(mc_rpc_client_call_peer(c, &pc), MC_ERR_BUFFER_OVERFLOW);
    assert_null(pc.resp);
    /* handler-side validation error travels as the header status */
    req.length = n + 1;
    pc.recv_cap = n;
    assert_int_equal(mc_rpc_client_call_peer(c, &pc), MC_ERR_INVALID_PARAMS);
    /* a peer body whose control length overruns it: DESERIALIZE_FAIL from the server */
    uint8_t bad[8] = {0xff, 0xff, 0, 0, 1, 2, 3, 4};
    assert_int_equal(mc_rpc_client_call(c, M_PEER_ECHO, bad, sizeof(bad), 0, NULL, NULL),
                     MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "k", 1, 0, NULL, NULL), 0);
    free(src);
    free(dst);
    mc_rpc_client_free(c);
}

/* A server whose service registers the ServiceReady answer: the protobuf helper and the
 * version check against it. */
static void test_service_ready(void **state)
{
    (void)state;
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    struct mc_rpc_server *s = NULL;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(
        mc_rpc_server_register(s, MC_METHOD_SERVICE_READY, mc_service_ready_reply, NULL), 0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    struct mc_rpc_client *c = new_client(mc_rpc_server_port(s), 2000);
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_SERVICE_READY, NULL,
                                            &mc__service_ready_response__descriptor, 0, &m),
                     0);
    assert_string_equal(((Mc__ServiceReadyResponse *)m)->version, MC_SERVICE_VERSION);
    assert_int_equal(((Mc__ServiceReadyResponse *)m)->proto_version, MC_PROTO_VERSION);
    protobuf_c_message_free_unpacked(m, NULL);
    char ver[64] = "";
    assert_int_equal(mc_service_ready_check(c, ver, sizeof(ver)), 0);
    assert_string_equal(ver, MC_SERVICE_VERSION);
    mc_rpc_client_free(c);
    mc_rpc_server_free(s);
}

static void test_version_mismatch(void **state)
{
    (void)state;
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    struct mc_rpc_server *s = NULL;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(mc_rpc_server_register(s, MC_METHOD_SERVICE_READY, bad_version_handler, NULL),
                     0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    struct mc_rpc_client *c = new_client(mc_rpc_server_port(s), 2000);
    char ver[64] = "";
    assert_int_equal(mc_service_ready_check(c, ver, sizeof(ver)), MC_ERR_INVALID_VERSION);
    assert_string_equal(ver, "mooncake-c/9.9.9 proto=999");
    mc_rpc_client_free(c);
    mc_rpc_server_free(s);
}

/* In-flight cap: a connection with `cap` unanswered calls is not read until one completes. */
static void test_inflight_cap(void **state)
{
    struct fx *f = *state;
    mc_rpc_server_free(f->srv);
    f->srv = start_server(f, 0, 4, 2);
    uint16_t port = mc_rpc_server_port(f->srv);
    struct mc_rpc_client *c = new_client(port, 5000);
    enum { K = 10 };
    struct caller ks[K];
    pthread_t th[K];
    for (int i = 0; i < K; i++) {
        ks[i] = (struct caller){.c = c, .method = M_PARK, .idx = i};
        pthread_create(&th[i], NULL, caller_main, &ks[i]);
    }
    int answered = 0;
    while (answered < K) {
        assert_true(lot_wait(&f->lot, answered + 1, 0));
        pthread_mutex_lock(&f->lot.mu);
        assert_true(f->lot.n - answered <= 4);
        pthread_mutex_unlock(&f->lot.mu);
        reply_echo(lot_take(&f->lot, answered++));
    }
    for (int i = 0; i < K; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(ks[i].rc, 0);
    }
    lot_clear(&f->lot);
    /* connection cap (2): a third client is accepted and closed at once */
    struct mc_rpc_client *d = new_client(port, 1000);
    assert_int_equal(mc_rpc_client_call(d, MC_METHOD_ECHO, "d", 1, 0, NULL, NULL), 0);
    struct mc_rpc_client *e = new_client(port, 1000);
    int rc = mc_rpc_client_call(e, MC_METHOD_ECHO, "e", 1, 0, NULL, NULL);
    assert_true(rc == MC_ERR_RPC_FAIL || rc == MC_ERR_RPC_TIMEOUT);
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(f->srv, &st);
    assert_true(st.conns_rejected >= 1);
    mc_rpc_client_free(e);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "c", 1, 0, NULL, NULL), 0);
    mc_rpc_client_free(d);
    mc_rpc_client_free(c);
}

/* Large request bodies reuse cached buffers: once warm, 1 MiB requests (a peer write slice's
 * size) need no new buffer (a fresh one is often fresh memory: page faults on every request,
 * and Put latency that changed from one process start to the next). */
static void test_large_bodies_reused(void **state)
{
    struct fx *f = *state;
    struct mc_rpc_client *c = new_client(f->port, 5000);
    assert_int_equal(mc_rpc_client_connect(c), 0);
    size_t len = 1u << 20;
    uint8_t *buf = malloc(len);
    for (size_t j = 0; j < len; j++)
        buf[j] = (uint8_t)(j * 7 + 3);
    for (int i = 0; i < 3; i++) {
        void *resp = NULL;
        size_t rl = 0;
        assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, buf, len, 0, &resp, &rl), 0);
        assert_int_equal(rl, len);
        free(resp);
    }
    struct mc_rpc_server_stats st0, st1;
    mc_rpc_server_get_stats(f->srv, &st0);
    assert_true(st0.body_buffers_new >= 1);
    for (int i = 0; i < 20; i++) {
        void *resp = NULL;
        size_t rl = 0;
        assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, buf, len, 0, &resp, &rl), 0);
        assert_int_equal(rl, len);
        assert_memory_equal(resp, buf, len);
        free(resp);
    }
    mc_rpc_server_get_stats(f->srv, &st1);
    assert_int_equal(st1.body_buffers_new, st0.body_buffers_new);
    assert_int_equal(st1.body_buffers_reused - st0.body_buffers_reused, 20);
    free(buf);
    mc_rpc_client_free(c);
}

static void test_config_validation(void **state)
{
    (void)state;
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    struct mc_rpc_server *s = NULL;
    cfg.max_frame_bytes = 100;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), MC_ERR_INVALID_PARAMS);
    cfg.max_frame_bytes = 0;
    cfg.io_threads = -1;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), MC_ERR_INVALID_PARAMS);
    cfg.io_threads = 1;
    cfg.bind_addr = "127.0.0.1";
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(mc_rpc_server_register(s, 0, park_handler, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_rpc_server_register(s, MC_METHOD_TABLE_SIZE, park_handler, NULL),
                     MC_ERR_INVALID_PARAMS);
    mc_rpc_server_free(s); /* never started */
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    char host[64];
    assert_int_equal(mc_rpc_parse_endpoint("10.0.0.1:50051", host, sizeof(host), &cc), 0);
    assert_string_equal(cc.host, "10.0.0.1");
    assert_int_equal(cc.port, 50051);
    assert_int_equal(mc_rpc_parse_endpoint("nohost", host, sizeof(host), &cc),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_rpc_parse_endpoint("h:0", host, sizeof(host), &cc), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_rpc_parse_endpoint("h:70000", host, sizeof(host), &cc),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_rpc_parse_endpoint(":80", host, sizeof(host), &cc), MC_ERR_INVALID_PARAMS);
    struct mc_rpc_client *c = NULL;
    cc.host = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), MC_ERR_INVALID_PARAMS);
    /* bind failure is reported, not fatal */
    struct mc_rpc_server *a = NULL, *b = NULL;
    assert_int_equal(mc_rpc_server_new(&cfg, &a), 0);
    assert_int_equal(mc_rpc_server_start(a), 0);
    cfg.port = mc_rpc_server_port(a);
    assert_int_equal(mc_rpc_server_new(&cfg, &b), 0);
    assert_int_equal(mc_rpc_server_start(b), MC_ERR_RPC_FAIL);
    mc_rpc_server_free(b);
    mc_rpc_server_free(a);
}

int main(void)
{
    mc_log_set_level(getenv("MC_TEST_LOG") ? MC_LOG_DEBUG : MC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelining_out_of_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_from_other_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_after_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parked_at_shutdown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect_after_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_payload, setup, teardown),
        cmocka_unit_test(test_service_ready),
        cmocka_unit_test(test_version_mismatch),
        cmocka_unit_test_setup_teardown(test_inflight_cap, setup, teardown),
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test_setup_teardown(test_large_bodies_reused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
