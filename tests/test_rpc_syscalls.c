/*
 * test_rpc_syscalls.c - what a call costs in syscalls, on both sides of the RPC layer, and that
 * the cheaper paths keep every reply whole and in order.
 *
 * The binary is linked with -Wl,--wrap for recv, poll, sendmsg and io_uring_submit: the
 * project's code (statically linked here) goes through the counters below, each told apart by
 * the calling thread (the test's callers or the server's I/O thread).
 *
 *  - client: a lone caller's call is one sendmsg and one recv (no liveness peek while the
 *    connection just answered, no poll before the read);
 *  - server: the replies of one epoll round go out in one io_uring submission, not one
 *    sendmsg per connection, and the requests of the connections one round finds readable are
 *    read in one submission too, not one read(2) each; replies larger than a socket buffer
 *    arrive whole through that path; many requests pipelined on one connection, frames split
 *    across reads and bodies larger than the read buffer are answered in order, byte for
 *    byte.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <liburing.h>

#include "common/clock.h"
#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "test_skip.h"

/* ---- counters -------------------------------------------------------------------------------- */

ssize_t __real_recv(int fd, void *b, size_t n, int flags);
ssize_t __wrap_recv(int fd, void *b, size_t n, int flags);
int __real_poll(struct pollfd *p, nfds_t n, int ms);
int __wrap_poll(struct pollfd *p, nfds_t n, int ms);
ssize_t __real_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags);
int __real_io_uring_submit(struct io_uring *r);
int __wrap_io_uring_submit(struct io_uring *r);
ssize_t __real_read(int fd, void *b, size_t n);
ssize_t __wrap_read(int fd, void *b, size_t n);

static _Atomic bool g_counting;
static pthread_t g_caller; /* client counts: this thread only; server counts: any other */
static _Atomic uint64_t c_recv, c_poll, c_sendmsg, s_sendmsg, s_submit, s_read;

static bool is_caller(void)
{
    return pthread_equal(pthread_self(), g_caller);
}

ssize_t __wrap_recv(int fd, void *b, size_t n, int flags)
{
    if (atomic_load(&g_counting) && is_caller())
        atomic_fetch_add(&c_recv, 1);
    return __real_recv(fd, b, n, flags);
}

int __wrap_poll(struct pollfd *p, nfds_t n, int ms)
{
    if (atomic_load(&g_counting) && is_caller())
        atomic_fetch_add(&c_poll, 1);
    return __real_poll(p, n, ms);
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags)
{
    if (atomic_load(&g_counting))
        atomic_fetch_add(is_caller() ? &c_sendmsg : &s_sendmsg, 1);
    return __real_sendmsg(fd, m, flags);
}

int __wrap_io_uring_submit(struct io_uring *r)
{
    if (atomic_load(&g_counting) && !is_caller())
        atomic_fetch_add(&s_submit, 1);
    return __real_io_uring_submit(r);
}

ssize_t __wrap_read(int fd, void *b, size_t n)
{
    if (atomic_load(&g_counting) && !is_caller())
        atomic_fetch_add(&s_read, 1);
    return __real_read(fd, b, n);
}

static void counters_reset(void)
{
    atomic_store(&s_read, 0);
    atomic_store(&c_recv, 0);
    atomic_store(&c_poll, 0);
    atomic_store(&c_sendmsg, 0);
    atomic_store(&s_sendmsg, 0);
    atomic_store(&s_submit, 0);
    g_caller = pthread_self();
}

/* ---- a server with a gate the test opens ------------------------------------------------------
 */

enum { M_HOLD = MC_METHOD_TEST_FIRST + 1 }; /* holds the I/O thread until released */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static bool g_held, g_release;

static void hold_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    g_held = true;
    pthread_cond_broadcast(&g_cv);
    while (!g_release)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    mc_rpc_reply(call, 0, "held", 4);
}

static struct mc_rpc_server *start_server(void)
{
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    cfg.port = 0;
    cfg.io_threads = 1;
    cfg.name = "test";
    struct mc_rpc_server *s = NULL;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(mc_rpc_server_register(s, M_HOLD, hold_handler, NULL), 0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    return s;
}

static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void send_all(int fd, const void *b, size_t n)
{
    const uint8_t *p = b;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

static void recv_all(int fd, void *b, size_t n)
{
    uint8_t *p = b;
    while (n) {
        ssize_t r = __real_recv(fd, p, n, 0);
        assert_true(r > 0);
        p += r;
        n -= (size_t)r;
    }
}

static void send_request(int fd, uint16_t method, uint64_t id, const void *body, size_t len)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, id, 0, (uint32_t)len);
    mc_wire_encode_header(&h, hb);
    send_all(fd, hb, sizeof(hb));
    if (len)
        send_all(fd, body, len);
}

/* Reads one reply and checks its id, status and body bytes. */
static void expect_reply(int fd, uint64_t id, const void *body, size_t len)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    recv_all(fd, hb, sizeof(hb));
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    assert_int_equal(h.kind, MC_WIRE_RESPONSE);
    assert_int_equal(h.request_id, id);
    assert_int_equal(h.status, 0);
    assert_int_equal(h.body_length, len);
    uint8_t *got = malloc(len ? len : 1);
    assert_non_null(got);
    recv_all(fd, got, len);
    assert_memory_equal(got, body, len);
    free(got);
}

/* Holds the server's I/O thread inside M_HOLD (sent on fd). */
static void hold(int fd)
{
    pthread_mutex_lock(&g_mu);
    g_held = g_release = false;
    pthread_mutex_unlock(&g_mu);
    send_request(fd, M_HOLD, 1, NULL, 0);
    pthread_mutex_lock(&g_mu);
    while (!g_held)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
}

static void release(void)
{
    pthread_mutex_lock(&g_mu);
    g_release = true;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static bool uring_usable(void)
{
    struct io_uring r;
    if (io_uring_queue_init(4, &r, 0) < 0)
        return false;
    io_uring_queue_exit(&r);
    return true;
}

/* ---- client -----------------------------------------------------------------------------------
 */

#define CALLS 200

static void client_calls(uint32_t spin_us, uint64_t *recvs, uint64_t *polls, uint64_t *sends)
{
    struct mc_rpc_server *s = start_server();
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = mc_rpc_server_port(s);
    cc.call_timeout_ms = 20000;
    cc.spin_us = spin_us;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "warm", 4, 0, NULL, NULL), 0);
    counters_reset();
    atomic_store(&g_counting, true);
    for (int i = 0; i < CALLS; i++) {
        char req[32];
        int n = snprintf(req, sizeof(req), "call-%d", i);
        void *resp = NULL;
        size_t rl = 0;
        assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, req, (size_t)n, 0, &resp, &rl), 0);
        assert_int_equal(rl, (size_t)n);
        assert_memory_equal(resp, req, (size_t)n);
        free(resp);
    }
    atomic_store(&g_counting, false);
    *recvs = atomic_load(&c_recv);
    *polls = atomic_load(&c_poll);
    *sends = atomic_load(&c_sendmsg);
    mc_rpc_client_free(c);
    mc_rpc_server_free(s);
}

/* A lone caller, not spinning: one sendmsg and one (blocking) recv per call. Before: a
 * MSG_PEEK recv, a poll and a recv per call. A call slower than the liveness window (a loaded
 * machine) may peek again: a tenth of the calls is allowed for that. */
static void test_client_call_is_one_send_one_recv(void **state)
{
    (void)state;
    uint64_t recvs, polls, sends;
    client_calls(0, &recvs, &polls, &sends);
    print_message("client, no spin: %d calls: recv=%llu poll=%llu sendmsg=%llu\n", CALLS,
                  (unsigned long long)recvs, (unsigned long long)polls, (unsigned long long)sends);
    assert_int_equal(sends, CALLS);
    assert_true(recvs >= CALLS);
    assert_true(recvs <= CALLS + CALLS / 10);
    assert_true(polls <= CALLS / 10);
}

/* Spinning: the spin reads (no poll), so the reply is taken by the read that finds it. */
static void test_client_spin_reads_without_poll(void **state)
{
    (void)state;
    uint64_t recvs, polls, sends;
    client_calls(MC_RPC_DEFAULT_SPIN_US, &recvs, &polls, &sends);
    print_message("client, spin: %d calls: recv=%llu poll=%llu sendmsg=%llu\n", CALLS,
                  (unsigned long long)recvs, (unsigned long long)polls, (unsigned long long)sends);
    assert_int_equal(sends, CALLS);
    assert_true(recvs >= CALLS);
    assert_true(polls <= CALLS / 10);
}

/* ---- server -----------------------------------------------------------------------------------
 */

#define NCONN 8

/* NCONN connections' requests wait while the I/O thread is held; released, the thread reads
 * them in one round and writes the NCONN replies with one submission. */
static void test_server_round_is_one_submission(void **state)
{
    (void)state;
    if (!uring_usable()) {
        MC_SKIP("io_uring is not available here");
        return;
    }
    struct mc_rpc_server *s = start_server();
    uint16_t port = mc_rpc_server_port(s);
    int holder = raw_connect(port);
    int fds[NCONN];
    for (int i = 0; i < NCONN; i++) {
        fds[i] = raw_connect(port);
        send_request(fds[i], MC_METHOD_ECHO, 7, "hi", 2); /* accepted and served once */
        expect_reply(fds[i], 7, "hi", 2);
    }
    hold(holder);
    char body[NCONN][16];
    for (int i = 0; i < NCONN; i++) {
        snprintf(body[i], sizeof(body[i]), "conn-%d", i);
        send_request(fds[i], MC_METHOD_ECHO, 100 + (uint64_t)i, body[i], strlen(body[i]));
    }
    counters_reset();
    atomic_store(&g_counting, true);
    release();
    expect_reply(holder, 1, "held", 4);
    for (int i = 0; i < NCONN; i++)
        expect_reply(fds[i], 100 + (uint64_t)i, body[i], strlen(body[i]));
    atomic_store(&g_counting, false);
    uint64_t sends = atomic_load(&s_sendmsg), submits = atomic_load(&s_submit);
    print_message("server: %d replies in one round: sendmsg=%llu io_uring_submit=%llu\n", NCONN + 1,
                  (unsigned long long)sends, (unsigned long long)submits);
    /* the held reply goes alone (a round of one connection writes with sendmsg); the NCONN
     * echoes share one submission. Before: NCONN + 1 sendmsg. */
    assert_true(sends <= 2);
    assert_true(submits >= 1 && submits <= 2);
    for (int i = 0; i < NCONN; i++)
        close(fds[i]);
    close(holder);
    mc_rpc_server_free(s);
}

/* Replies of 3 MiB, several per round through the batched write, partly taken by the socket:
 * every byte arrives, in order. */
#define BIG (3u << 20)
struct big_arg {
    int fd;
    uint8_t *req;
    bool ok;
};

static void *big_sender(void *arg)
{
    struct big_arg *a = arg;
    send_request(a->fd, MC_METHOD_ECHO, 9, a->req, BIG);
    return NULL;
}

static void test_server_large_replies_whole(void **state)
{
    (void)state;
    struct mc_rpc_server *s = start_server();
    uint16_t port = mc_rpc_server_port(s);
    int holder = raw_connect(port);
    struct big_arg a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i].fd = raw_connect(port);
        send_request(a[i].fd, MC_METHOD_ECHO, 7, "hi", 2);
        expect_reply(a[i].fd, 7, "hi", 2);
        a[i].req = malloc(BIG);
        assert_non_null(a[i].req);
        for (size_t k = 0; k < BIG; k++)
            a[i].req[k] = (uint8_t)(k * 31u + (size_t)i * 7u + (k >> 12));
    }
    hold(holder);
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, big_sender, &a[i]);
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    release();
    expect_reply(holder, 1, "held", 4);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        expect_reply(a[i].fd, 9, a[i].req, BIG);
        /* the connection still works after the large reply */
        send_request(a[i].fd, MC_METHOD_ECHO, 10, "after", 5);
        expect_reply(a[i].fd, 10, "after", 5);
        close(a[i].fd);
        free(a[i].req);
    }
    close(holder);
    mc_rpc_server_free(s);
}

/* 500 requests pipelined on one connection (written at once): answered in order, each with
 * its own bytes. */
static void test_server_pipelined_replies_in_order(void **state)
{
    (void)state;
    struct mc_rpc_server *s = start_server();
    int fd = raw_connect(mc_rpc_server_port(s));
    enum { N = 500 };
    size_t cap = (size_t)N * (MC_WIRE_HEADER_SIZE + 16), len = 0;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    for (int i = 0; i < N; i++) {
        char b[16];
        int n = snprintf(b, sizeof(b), "req-%d", i);
        struct mc_wire_header h;
        mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_ECHO, 1000 + (uint64_t)i, 0,
                            (uint32_t)n);
        mc_wire_encode_header(&h, buf + len);
        memcpy(buf + len + MC_WIRE_HEADER_SIZE, b, (size_t)n);
        len += MC_WIRE_HEADER_SIZE + (size_t)n;
    }
    send_all(fd, buf, len);
    for (int i = 0; i < N; i++) {
        char b[16];
        int n = snprintf(b, sizeof(b), "req-%d", i);
        expect_reply(fd, 1000 + (uint64_t)i, b, (size_t)n);
    }
    free(buf);
    close(fd);
    mc_rpc_server_free(s);
}

/* One request frame (header and body) at buf; returns its length. */
static size_t frame(uint8_t *buf, uint64_t id, const void *body, size_t len)
{
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_ECHO, id, 0, (uint32_t)len);
    mc_wire_encode_header(&h, buf);
    memcpy(buf + MC_WIRE_HEADER_SIZE, body, len);
    return MC_WIRE_HEADER_SIZE + len;
}

/* NCONN connections each hold three whole requests and half of a fourth while the I/O thread
 * is held; released, the thread reads all of them in one submission (no read(2) per
 * connection: before, NCONN reads), answers the three of each in order, and the fourth once
 * its second half comes in a later round. */
static void test_server_round_reads_in_one_submission(void **state)
{
    (void)state;
    if (!uring_usable()) {
        MC_SKIP("io_uring is not available here");
        return;
    }
    struct mc_rpc_server *s = start_server();
    uint16_t port = mc_rpc_server_port(s);
    int holder = raw_connect(port);
    int fds[NCONN];
    char body[NCONN][4][24];
    uint8_t buf[NCONN][4 * (MC_WIRE_HEADER_SIZE + 24)];
    size_t len[NCONN], half[NCONN];
    for (int i = 0; i < NCONN; i++) {
        fds[i] = raw_connect(port);
        send_request(fds[i], MC_METHOD_ECHO, 7, "hi", 2); /* accepted and served once */
        expect_reply(fds[i], 7, "hi", 2);
        len[i] = 0;
        for (int j = 0; j < 4; j++) {
            int n = snprintf(body[i][j], sizeof(body[i][j]), "conn-%d-req-%d-%s", i, j,
                             j == 3 ? "split" : "whole");
            if (j == 3)
                half[i] = len[i] + MC_WIRE_HEADER_SIZE + (size_t)n / 2; /* mid-body */
            len[i] += frame(buf[i] + len[i], 200 + (uint64_t)j, body[i][j], (size_t)n);
        }
    }
    hold(holder);
    for (int i = 0; i < NCONN; i++)
        send_all(fds[i], buf[i], half[i]);
    counters_reset();
    atomic_store(&g_counting, true);
    release();
    expect_reply(holder, 1, "held", 4);
    for (int i = 0; i < NCONN; i++)
        for (int j = 0; j < 3; j++)
            expect_reply(fds[i], 200 + (uint64_t)j, body[i][j], strlen(body[i][j]));
    atomic_store(&g_counting, false);
    uint64_t reads = atomic_load(&s_read), submits = atomic_load(&s_submit);
    print_message("server: %d connections read in one round: read=%llu io_uring_submit=%llu\n",
                  NCONN, (unsigned long long)reads, (unsigned long long)submits);
    assert_true(reads < NCONN / 2);
    assert_true(submits >= 1 && submits <= 3); /* the reads, the replies (the held one alone) */
    for (int i = 0; i < NCONN; i++)            /* the second halves, each alone in its round */
        send_all(fds[i], buf[i] + half[i], len[i] - half[i]);
    for (int i = 0; i < NCONN; i++)
        expect_reply(fds[i], 203, body[i][3], strlen(body[i][3]));
    for (int i = 0; i < NCONN; i++)
        close(fds[i]);
    close(holder);
    mc_rpc_server_free(s);
}

/* Requests around a body larger than the read buffer, on NCONN connections read together:
 * the ring's read fills the buffer, the rest of the body is read straight into its own
 * buffer, and every reply comes whole and in order. */
#define MID (200u << 10)
struct mid_arg {
    int fd;
    uint8_t *buf;
    size_t len;
};

static void *mid_sender(void *arg)
{
    struct mid_arg *a = arg;
    send_all(a->fd, a->buf, a->len);
    return NULL;
}

static void test_server_ring_reads_large_frames(void **state)
{
    (void)state;
    struct mc_rpc_server *s = start_server();
    uint16_t port = mc_rpc_server_port(s);
    int holder = raw_connect(port);
    uint8_t *big = malloc(MID);
    assert_non_null(big);
    for (size_t k = 0; k < MID; k++)
        big[k] = (uint8_t)(k * 131 + 7);
    struct mid_arg a[NCONN];
    pthread_t th[NCONN];
    for (int i = 0; i < NCONN; i++) {
        a[i].fd = raw_connect(port);
        send_request(a[i].fd, MC_METHOD_ECHO, 7, "hi", 2);
        expect_reply(a[i].fd, 7, "hi", 2);
        a[i].buf = malloc(MID + 4 * MC_WIRE_HEADER_SIZE + 64);
        assert_non_null(a[i].buf);
        a[i].len = frame(a[i].buf, 1, "one", 3);
        a[i].len += frame(a[i].buf + a[i].len, 2, "two", 3);
        big[0] = (uint8_t)i; /* each connection's own bytes */
        a[i].len += frame(a[i].buf + a[i].len, 3, big, MID);
        a[i].len += frame(a[i].buf + a[i].len, 4, "four", 4);
    }
    hold(holder);
    for (int i = 0; i < NCONN; i++)
        pthread_create(&th[i], NULL, mid_sender, &a[i]);
    release();
    expect_reply(holder, 1, "held", 4);
    for (int i = 0; i < NCONN; i++) {
        expect_reply(a[i].fd, 1, "one", 3);
        expect_reply(a[i].fd, 2, "two", 3);
        big[0] = (uint8_t)i;
        expect_reply(a[i].fd, 3, big, MID);
        expect_reply(a[i].fd, 4, "four", 4);
    }
    for (int i = 0; i < NCONN; i++) {
        pthread_join(th[i], NULL);
        close(a[i].fd);
        free(a[i].buf);
    }
    free(big);
    close(holder);
    mc_rpc_server_free(s);
}

/* Many callers on one client connection (leader/follower): every caller gets its own reply. */
struct caller {
    struct mc_rpc_client *c;
    int idx;
    int bad;
};

static void *caller_main(void *arg)
{
    struct caller *k = arg;
    for (int i = 0; i < 300; i++) {
        char req[32];
        int n = snprintf(req, sizeof(req), "t%d-%d", k->idx, i);
        void *resp = NULL;
        size_t rl = 0;
        int rc = mc_rpc_client_call(k->c, MC_METHOD_ECHO, req, (size_t)n, 0, &resp, &rl);
        k->bad += rc != 0 || rl != (size_t)n || memcmp(resp, req, (size_t)n) != 0;
        free(resp);
    }
    return NULL;
}

static void test_client_many_callers_one_connection(void **state)
{
    (void)state;
    struct mc_rpc_server *s = start_server();
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = mc_rpc_server_port(s);
    cc.call_timeout_ms = 20000;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    struct caller k[16];
    pthread_t th[16];
    for (int i = 0; i < 16; i++) {
        k[i] = (struct caller){.c = c, .idx = i};
        pthread_create(&th[i], NULL, caller_main, &k[i]);
    }
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(k[i].bad, 0);
    }
    mc_rpc_client_free(c);
    mc_rpc_server_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_call_is_one_send_one_recv),
        cmocka_unit_test(test_client_spin_reads_without_poll),
        cmocka_unit_test(test_client_many_callers_one_connection),
        cmocka_unit_test(test_server_round_is_one_submission),
        cmocka_unit_test(test_server_large_replies_whole),
        cmocka_unit_test(test_server_pipelined_replies_in_order),
        cmocka_unit_test(test_server_round_reads_in_one_submission),
        cmocka_unit_test(test_server_ring_reads_large_frames),
    };
    return MC_RUN_TESTS(tests, NULL, NULL);
}
