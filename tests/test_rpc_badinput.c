/*
 * test_rpc_badinput.c - hostile bytes against the RPC server (and a hostile server against the
 * client). After every case the server must still answer a valid request from a well-behaved
 * client; nothing may crash, leak (ASan) or block other connections.
 *
 * Raw sockets speak the wire format by hand; reads use SO_RCVTIMEO as a safety net only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "test_listen.h"

#define MAX_FRAME (256u << 10)
enum { M_DECODE = MC_METHOD_TEST_FIRST + 1 };

struct fx {
    struct mc_rpc_server *srv;
    uint16_t port;
    struct mc_rpc_client *good;
};

/* Decodes a PutStartRequest; answers its key length. */
static void decode_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    Mc__PutStartRequest *r =
        (Mc__PutStartRequest *)mc_rpc_call_unpack(call, &mc__put_start_request__descriptor);
    if (!r)
        return;
    Mc__RemoveAllResponse resp = MC__REMOVE_ALL_RESPONSE__INIT;
    resp.removed = strlen(r->key);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    mc_rpc_reply_msg(call, 0, &resp.base);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    cfg.max_frame_bytes = MAX_FRAME;
    cfg.io_threads = 2;
    assert_int_equal(mc_rpc_server_new(&cfg, &f->srv), 0);
    assert_int_equal(mc_rpc_server_register(f->srv, M_DECODE, decode_handler, NULL), 0);
    assert_int_equal(mc_rpc_server_start(f->srv), 0);
    f->port = mc_rpc_server_port(f->srv);
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = f->port;
    cc.call_timeout_ms = 3000;
    assert_int_equal(mc_rpc_client_new(&cc, &f->good), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    mc_rpc_client_free(f->good);
    mc_rpc_server_free(f->srv);
    free(f);
    return 0;
}

static void assert_server_ok(struct fx *f)
{
    void *resp = NULL;
    size_t rl = 0;
    assert_int_equal(mc_rpc_client_call(f->good, MC_METHOD_ECHO, "ping", 4, 0, &resp, &rl), 0);
    assert_int_equal(rl, 4);
    assert_memory_equal(resp, "ping", 4);
    free(resp);
}

static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void header(uint8_t out[32], uint16_t method, uint64_t id, uint32_t len)
{
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, id, 0, len);
    mc_wire_encode_header(&h, out);
}

/* Reads until EOF; returns the bytes read (the connection must be closed by the server). */
static ssize_t read_to_eof(int fd, uint8_t *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + got, cap - got, 0);
        if (n == 0)
            return (ssize_t)got;
        if (n < 0)
            return errno == ECONNRESET ? (ssize_t)got : -1;
        got += (size_t)n;
        if (got == cap)
            return (ssize_t)got;
    }
}

static int read_response(int fd, struct mc_wire_header *h, uint8_t *body, size_t cap)
{
    uint8_t hb[32];
    size_t got = 0;
    while (got < 32) {
        ssize_t n = recv(fd, hb + got, 32 - got, 0);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    mc_wire_decode_header(hb, h);
    if (h->body_length > cap)
        return -1;
    got = 0;
    while (got < h->body_length) {
        ssize_t n = recv(fd, body + got, h->body_length - got, 0);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static void test_truncated_header(void **state)
{
    struct fx *f = *state;
    uint8_t hb[32];
    header(hb, MC_METHOD_ECHO, 1, 0);
    int fd = raw_connect(f->port);
    raw_send(fd, hb, 10);
    close(fd);
    assert_server_ok(f);
}

static void test_wrong_magic(void **state)
{
    struct fx *f = *state;
    uint8_t hb[32];
    header(hb, MC_METHOD_ECHO, 1, 0);
    hb[0] ^= 0xff;
    int fd = raw_connect(f->port);
    raw_send(fd, hb, 32);
    uint8_t buf[64];
    assert_int_equal(read_to_eof(fd, buf, sizeof(buf)), 0); /* closed, nothing sent */
    close(fd);
    assert_server_ok(f);
}

static void test_wrong_version(void **state)
{
    struct fx *f = *state;
    uint8_t hb[32];
    header(hb, MC_METHOD_ECHO, 77, 0);
    hb[4] = 9; /* version 9 */
    int fd = raw_connect(f->port);
    raw_send(fd, hb, 32);
    struct mc_wire_header h;
    uint8_t body[16];
    assert_int_equal(read_response(fd, &h, body, sizeof(body)), 0);
    assert_int_equal(h.kind, MC_WIRE_RESPONSE);
    assert_int_equal(h.status, MC_ERR_INVALID_VERSION);
    assert_true(h.request_id == 77);
    assert_int_equal(read_to_eof(fd, body, sizeof(body)), 0);
    close(fd);
    assert_server_ok(f);
}

static void test_wrong_kind(void **state)
{
    struct fx *f = *state;
    uint8_t hb[32];
    header(hb, MC_METHOD_ECHO, 1, 0);
    hb[6] = MC_WIRE_RESPONSE; /* a response sent to a server */
    int fd = raw_connect(f->port);
    raw_send(fd, hb, 32);
    uint8_t buf[64];
    assert_int_equal(read_to_eof(fd, buf, sizeof(buf)), 0);
    close(fd);
    assert_server_ok(f);
}

static void test_oversized_body(void **state)
{
    struct fx *f = *state;
    uint8_t hb[32];
    header(hb, MC_METHOD_ECHO, 1, MAX_FRAME + 1);
    int fd = raw_connect(f->port);
    raw_send(fd, hb, 32);
    uint8_t buf[64];
    assert_int_equal(read_to_eof(fd, buf, sizeof(buf)), 0);
    close(fd);
    header(hb, MC_METHOD_ECHO, 1, 0xFFFFFFFFu);
    fd = raw_connect(f->port);
    raw_send(fd, hb, 32);
    assert_int_equal(read_to_eof(fd, buf, sizeof(buf)), 0);
    close(fd);
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(f->srv, &st);
    assert_true(st.protocol_errors >= 2);
    /* exactly max_frame_bytes is fine */
    uint8_t *big = calloc(1, MAX_FRAME);
    void *resp = NULL;
    size_t rl = 0;
    assert_int_equal(mc_rpc_client_call(f->good, MC_METHOD_ECHO, big, MAX_FRAME, 0, &resp, &rl), 0);
    assert_int_equal(rl, MAX_FRAME);
    free(resp);
    free(big);
    assert_server_ok(f);
}

/* A frame's body buffer grows as its bytes arrive: headers that claim 64 MiB and send a little
 * cost about BODY_FIRST_CHUNK (2 MiB) each, not 64 MiB; a body that does arrive whole is
 * delivered intact; a connection that leaves mid-body releases its buffer. */
static void test_body_allocated_as_it_arrives(void **state)
{
    (void)state;
    struct mc_rpc_server *srv = NULL;
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    assert_int_equal(mc_rpc_server_new(&cfg, &srv), 0);
    assert_int_equal(mc_rpc_server_start(srv), 0);
    uint16_t port = mc_rpc_server_port(srv);
    enum { K = 8, PART = 100 << 10 };
    static uint8_t part[PART];
    memset(part, 0x5a, sizeof(part));
    int fds[K];
    uint8_t hb[32];
    for (int i = 0; i < K; i++) {
        fds[i] = raw_connect(port);
        header(hb, MC_METHOD_ECHO, (uint64_t)i + 1, 64u << 20);
        raw_send(fds[i], hb, 32);
        raw_send(fds[i], part, sizeof(part));
    }
    struct mc_rpc_server_stats st;
    uint64_t deadline = mc_now_ms() + 10000;
    do {
        mc_rpc_server_get_stats(srv, &st);
    } while ((st.bodies_receiving < K || st.body_bytes_buffered < K * (uint64_t)PART) &&
             mc_now_ms() < deadline && usleep(1000) == 0);
    assert_int_equal(st.bodies_receiving, K);
    assert_true(st.body_bytes_buffered <= K * (2ull << 20)); /* not K * 64 MiB */

    /* one body of 8 MiB completes (2 -> 4 -> 8 MiB) and is echoed intact */
    const size_t big = 8u << 20;
    uint8_t *buf = malloc(big), *back = malloc(big);
    assert_non_null(buf);
    assert_non_null(back);
    for (size_t i = 0; i < big; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    int fd = raw_connect(port);
    header(hb, MC_METHOD_ECHO, 99, (uint32_t)big);
    raw_send(fd, hb, 32);
    for (size_t off = 0; off < big;) {
        ssize_t n = send(fd, buf + off, big - off, MSG_NOSIGNAL);
        assert_true(n > 0);
        off += (size_t)n;
    }
    struct mc_wire_header h;
    assert_int_equal(read_response(fd, &h, back, big), 0);
    assert_int_equal(h.status, 0);
    assert_int_equal(h.request_id, 99);
    assert_int_equal(h.body_length, big);
    assert_memory_equal(back, buf, big);
    close(fd);
    free(buf);
    free(back);

    /* the others leave mid-body: their buffers are released */
    for (int i = 0; i < K; i++)
        close(fds[i]);
    deadline = mc_now_ms() + 10000;
    do {
        mc_rpc_server_get_stats(srv, &st);
    } while ((st.bodies_receiving || st.body_bytes_buffered) && mc_now_ms() < deadline &&
             usleep(1000) == 0);
    assert_int_equal(st.bodies_receiving, 0);
    assert_int_equal(st.body_bytes_buffered, 0);
    mc_rpc_server_free(srv);
}

/* Idle connections are closed after idle_timeout_ms; one whose call is parked (a long-poll)
 * is not, however long it waits; a connection that never finishes the handshake is closed after
 * handshake_timeout_ms. */
static struct mc_rpc_call *_Atomic g_parked;
static void park_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    g_parked = call;
}

static bool wait_eof(int fd, int ms)
{
    uint64_t deadline = mc_now_ms() + (uint64_t)ms;
    while (mc_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        uint8_t b;
        ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return true;
    }
    return false;
}

static void test_idle_timeout(void **state)
{
    (void)state;
    enum { IDLE = 200, M_PARK = MC_METHOD_TEST_FIRST + 2 };
    struct mc_rpc_server *srv = NULL;
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    cfg.io_threads = 1;
    cfg.idle_timeout_ms = IDLE;
    assert_int_equal(mc_rpc_server_new(&cfg, &srv), 0);
    assert_int_equal(mc_rpc_server_register(srv, M_PARK, park_handler, NULL), 0);
    assert_int_equal(mc_rpc_server_start(srv), 0);
    uint16_t port = mc_rpc_server_port(srv);

    /* an idle connection, after one call, is closed */
    uint8_t hb[32], body[64];
    struct mc_wire_header h;
    int idle = raw_connect(port);
    header(hb, MC_METHOD_ECHO, 1, 0);
    raw_send(idle, hb, 32);
    assert_int_equal(read_response(idle, &h, body, sizeof(body)), 0);
    assert_int_equal(h.status, 0);
    /* a connection with a parked call */
    g_parked = NULL;
    int busy = raw_connect(port);
    header(hb, M_PARK, 2, 0);
    raw_send(busy, hb, 32);
    assert_true(wait_eof(idle, 5000));
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(srv, &st);
    assert_true(st.idle_closed >= 1);
    /* the busy one survives many sweeps well past the timeout */
    uint64_t t0 = mc_now_ms(), sweeps0 = st.idle_sweeps;
    do {
        mc_rpc_server_get_stats(srv, &st);
    } while ((st.idle_sweeps < sweeps0 + 4 || mc_now_ms() - t0 < 3 * IDLE) &&
             mc_now_ms() - t0 < 10000 && usleep(5000) == 0);
    assert_true(st.idle_sweeps >= sweeps0 + 4);
    assert_non_null(g_parked);
    mc_rpc_reply(g_parked, 0, "late", 4);
    assert_int_equal(read_response(busy, &h, body, sizeof(body)), 0);
    assert_int_equal(h.request_id, 2);
    assert_memory_equal(body, "late", 4);
    /* answered, it idles and goes too */
    assert_true(wait_eof(busy, 5000));
    close(idle);
    close(busy);
    mc_rpc_server_free(srv);

    /* with a token: a connection that never proves it is closed after the handshake timeout */
    struct mc_auth_key key;
    assert_int_equal(mc_auth_key_from_token("0123456789abcdef0123456789abcdef", 32, &key), 0);
    cfg.idle_timeout_ms = 0;
    cfg.handshake_timeout_ms = IDLE;
    cfg.auth = &key;
    assert_int_equal(mc_rpc_server_new(&cfg, &srv), 0);
    assert_int_equal(mc_rpc_server_start(srv), 0);
    int silent = raw_connect(mc_rpc_server_port(srv));
    assert_true(wait_eof(silent, 5000));
    close(silent);
    mc_rpc_server_get_stats(srv, &st);
    assert_int_equal(st.idle_closed, 1);
    mc_rpc_server_free(srv);
}

static void test_unknown_method_keeps_connection(void **state)
{
    struct fx *f = *state;
    int fd = raw_connect(f->port);
    uint8_t hb[32 + 3];
    header(hb, 0x1234, 5, 3);
    memcpy(hb + 32, "abc", 3);
    raw_send(fd, hb, sizeof(hb));
    header(hb, MC_METHOD_ECHO, 6, 3); /* pipelined right behind it */
    raw_send(fd, hb, sizeof(hb));
    struct mc_wire_header h;
    uint8_t body[16];
    assert_int_equal(read_response(fd, &h, body, sizeof(body)), 0);
    assert_true(h.request_id == 5);
    assert_int_equal(h.status, MC_ERR_NOT_SUPPORTED);
    assert_int_equal(h.body_length, 0);
    assert_int_equal(read_response(fd, &h, body, sizeof(body)), 0);
    assert_true(h.request_id == 6);
    assert_int_equal(h.status, 0);
    assert_memory_equal(body, "abc", 3);
    close(fd);
    assert_server_ok(f);
}

static void test_garbage_protobuf(void **state)
{
    struct fx *f = *state;
    static const uint8_t junk[][8] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, /* endless varint */
        {0x12, 0x7f, 'a', 'b', 0, 0, 0, 0},               /* key length overruns */
        {0x0a, 0x05, 0x08, 0x01, 0, 0, 0, 0},             /* nested message overruns */
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        assert_int_equal(mc_rpc_client_call(f->good, M_DECODE, junk[i], 8, 0, NULL, NULL),
                         MC_ERR_DESERIALIZE_FAIL);
    /* and a valid body decodes */
    Mc__PutStartRequest req = MC__PUT_START_REQUEST__INIT;
    req.key = "hello";
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(f->good, M_DECODE, &req.base,
                                            &mc__remove_all_response__descriptor, 0, &m),
                     0);
    assert_int_equal(((Mc__RemoveAllResponse *)m)->removed, 5);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_server_ok(f);
}

static void test_vanish_mid_frame(void **state)
{
    struct fx *f = *state;
    /* small frame: header + part of the body */
    uint8_t buf[32 + 100] = {0};
    header(buf, MC_METHOD_ECHO, 1, 1000);
    int fd = raw_connect(f->port);
    raw_send(fd, buf, sizeof(buf));
    close(fd);
    /* large frame (read straight into its own buffer): header + 100 KiB of 200 KiB */
    uint8_t *big = calloc(1, 32 + (100u << 10));
    header(big, MC_METHOD_ECHO, 2, 200u << 10);
    fd = raw_connect(f->port);
    raw_send(fd, big, 32 + (100u << 10));
    close(fd);
    free(big);
    assert_server_ok(f);
}

/* Connections that send nothing, or half a header, do not hold up anybody else. */
static void test_silent_clients(void **state)
{
    struct fx *f = *state;
    int quiet[8];
    for (int i = 0; i < 8; i++) {
        quiet[i] = raw_connect(f->port);
        if (i & 1) {
            uint8_t hb[32];
            header(hb, MC_METHOD_ECHO, 1, 10);
            raw_send(quiet[i], hb, 20);
        }
    }
    for (int i = 0; i < 20; i++)
        assert_server_ok(f);
    for (int i = 0; i < 8; i++)
        close(quiet[i]);
    assert_server_ok(f);
}

static void test_thousand_connections(void **state)
{
    struct fx *f = *state;
    uint8_t hb[32];
    for (int round = 0; round < 10; round++) {
        int fds[100];
        for (int i = 0; i < 100; i++) {
            fds[i] = raw_connect(f->port);
            switch (i % 4) {
            case 1: /* a valid request, never read */
                header(hb, MC_METHOD_ECHO, (uint64_t)i, 0);
                raw_send(fds[i], hb, 32);
                break;
            case 2: /* half a header */
                header(hb, MC_METHOD_ECHO, (uint64_t)i, 0);
                raw_send(fds[i], hb, 16);
                break;
            default:
                break;
            }
        }
        for (int i = 0; i < 100; i++)
            close(fds[i]);
    }
    assert_server_ok(f);
    /* every dropped connection is eventually closed on the server too */
    struct mc_rpc_server_stats st;
    uint64_t deadline = mc_now_ms() + 5000;
    do {
        mc_rpc_server_get_stats(f->srv, &st);
    } while (st.conns_open > 1 && mc_now_ms() < deadline);
    assert_int_equal(st.conns_open, 1); /* the good client */
    assert_true(st.conns_accepted >= 1001);
}

/* A hostile server: the client fails the call cleanly and recovers. */
struct evil {
    int lfd;
    uint16_t port;
    int mode;
};

static void *evil_main(void *arg)
{
    struct evil *e = arg;
    int fd = accept(e->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    uint8_t req[64];
    ssize_t n = recv(fd, req, sizeof(req), 0);
    (void)n;
    struct mc_wire_header h;
    mc_wire_decode_header(req, &h);
    uint8_t out[32 + 8];
    struct mc_wire_header r;
    mc_wire_header_init(&r, MC_WIRE_RESPONSE, h.method, h.request_id, 0, 8);
    if (e->mode == 0)
        r.magic = 0xdeadbeef; /* bad magic */
    else if (e->mode == 1)
        r.body_length = 0x7fffffff; /* oversized */
    else
        r.body_length = 1000; /* vanishes mid-body */
    mc_wire_encode_header(&r, out);
    memset(out + 32, 'x', 8);
    send(fd, out, sizeof(out), MSG_NOSIGNAL);
    close(fd);
    return NULL;
}

static void test_hostile_server(void **state)
{
    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        struct evil e = {.mode = mode};
        uint16_t port;
        e.lfd = tl_listen(4, &port);
        pthread_t th;
        pthread_create(&th, NULL, evil_main, &e);
        struct mc_rpc_client_config cc;
        mc_rpc_client_config_init(&cc);
        cc.host = "127.0.0.1";
        cc.port = port;
        cc.call_timeout_ms = 3000;
        cc.max_frame_bytes = 1u << 20;
        struct mc_rpc_client *c = NULL;
        assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
        assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "hi", 2, 0, NULL, NULL),
                         MC_ERR_RPC_FAIL);
        pthread_join(th, NULL);
        close(e.lfd);
        mc_rpc_client_free(c);
    }
}

int main(void)
{
    mc_log_set_level(getenv("MC_TEST_LOG") ? MC_LOG_DEBUG : MC_LOG_OFF);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_truncated_header),
        T(test_wrong_magic),
        T(test_wrong_version),
        T(test_wrong_kind),
        T(test_oversized_body),
        T(test_unknown_method_keeps_connection),
        cmocka_unit_test(test_body_allocated_as_it_arrives),
        cmocka_unit_test(test_idle_timeout),
        T(test_garbage_protobuf),
        T(test_vanish_mid_frame),
        T(test_silent_clients),
        T(test_thousand_connections),
        cmocka_unit_test(test_hostile_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
