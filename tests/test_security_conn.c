/*
 * test_security_conn.c - what one connection may cost the RPC server (README "Security"):
 * replies it never reads are bounded (soft limit: its requests are no longer read; hard limit:
 * it is closed), a queue that does not drain or a body that stops arriving is closed after the
 * idle timeout.
 *
 * A real server on loopback, raw sockets for the misbehaving peers. Waits poll the server's
 * counters with a generous deadline (a safety net, never a timing assertion).
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
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "mooncake/errors.h"

#define KIB (1u << 10)
#define MIB (1u << 20)
#define REPLY (64u * KIB)
#define SOFT (1u * MIB)
#define HARD (4u * MIB)
#define MAX_PARKED 512

enum { M_BIG = MC_METHOD_TEST_FIRST + 1, M_PARK };

static uint8_t g_reply[REPLY];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mc_rpc_call *g_parked[MAX_PARKED];
static int g_nparked;

static void big_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    mc_rpc_reply(call, 0, g_reply, sizeof(g_reply));
}

static void park_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    pthread_mutex_lock(&g_lock);
    if (g_nparked < MAX_PARKED)
        g_parked[g_nparked++] = call;
    else
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
    pthread_mutex_unlock(&g_lock);
}

static struct mc_rpc_server *server(uint32_t idle_ms)
{
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.body_ahead_bytes = 1; /* nothing allocated ahead of a body's bytes */
    cfg.bind_addr = "127.0.0.1";
    cfg.io_threads = 1;
    cfg.out_soft_bytes = SOFT;
    cfg.out_hard_bytes = HARD;
    cfg.idle_timeout_ms = idle_ms;
    cfg.max_inflight_per_conn = MAX_PARKED;
    struct mc_rpc_server *s;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(mc_rpc_server_register(s, M_BIG, big_handler, NULL), 0);
    assert_int_equal(mc_rpc_server_register(s, M_PARK, park_handler, NULL), 0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    return s;
}

/* A client socket with a small receive buffer (so the kernel holds little of what it does
 * not read). */
static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int rcv = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void send_requests(int fd, uint16_t method, int n)
{
    uint8_t *buf = malloc((size_t)n * MC_WIRE_HEADER_SIZE);
    assert_non_null(buf);
    for (int i = 0; i < n; i++) {
        struct mc_wire_header h;
        mc_wire_header_init(&h, MC_WIRE_REQUEST, method, (uint64_t)i + 1, 0, 0);
        mc_wire_encode_header(&h, buf + (size_t)i * MC_WIRE_HEADER_SIZE);
    }
    size_t len = (size_t)n * MC_WIRE_HEADER_SIZE, off = 0;
    while (off < len) {
        ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        assert_true(w > 0);
        off += (size_t)w;
    }
    free(buf);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static struct mc_rpc_server_stats stats(struct mc_rpc_server *s)
{
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(s, &st);
    return st;
}

/* Reads one response; returns its body length (content checked against g_reply), -1 at EOF. */
static long read_reply(int fd)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    size_t got = 0;
    while (got < sizeof(hb)) {
        ssize_t n = recv(fd, hb + got, sizeof(hb) - got, 0);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    assert_int_equal(h.status, 0);
    static uint8_t body[REPLY];
    assert_true(h.body_length <= REPLY);
    got = 0;
    while (got < h.body_length) {
        ssize_t n = recv(fd, body + got, h.body_length - got, 0);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    assert_memory_equal(body, g_reply, h.body_length);
    return (long)h.body_length;
}

/* 1,000 requests whose replies (64 MiB in all) are not read: past the soft limit the server
 * stops reading the connection, so what it holds stays near the limit; once the client reads,
 * every request is answered. */
static void test_soft_limit_stops_reading(void **state)
{
    (void)state;
    struct mc_rpc_server *s = server(0);
    int fd = raw_connect(mc_rpc_server_port(s));
    enum { N = 1000 };
    send_requests(fd, M_BIG, N);
    for (int i = 0; i < 1000 && stats(s).out_paused == 0; i++)
        sleep_ms(10);
    sleep_ms(200); /* a server without the limit would go on answering meanwhile */
    struct mc_rpc_server_stats st = stats(s);
    print_message("paused=%llu queued=%llu requests=%llu\n", (unsigned long long)st.out_paused,
                  (unsigned long long)st.out_bytes_queued, (unsigned long long)st.requests);
    assert_true(st.out_paused >= 1);
    assert_true(st.out_bytes_queued <= SOFT + REPLY + MC_WIRE_HEADER_SIZE);
    assert_true(st.requests < N);
    for (int i = 0; i < N; i++)
        assert_int_equal(read_reply(fd), REPLY);
    st = stats(s);
    assert_int_equal(st.requests, N);
    assert_int_equal(st.out_closed, 0);
    close(fd);
    mc_rpc_server_free(s);
}

/* Deferred replies keep coming while the connection is not read: past the hard limit it is
 * closed (counted), and what it held is freed. */
static void test_hard_limit_closes(void **state)
{
    (void)state;
    struct mc_rpc_server *s = server(0);
    int fd = raw_connect(mc_rpc_server_port(s));
    enum { N = 300 }; /* 300 x 64 KiB = 19 MiB of replies, hard limit 4 MiB */
    g_nparked = 0;
    send_requests(fd, M_PARK, N);
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&g_lock);
        int n = g_nparked;
        pthread_mutex_unlock(&g_lock);
        if (n == N)
            break;
        sleep_ms(10);
    }
    assert_int_equal(g_nparked, N);
    for (int i = 0; i < N; i++)
        mc_rpc_reply(g_parked[i], 0, g_reply, sizeof(g_reply)); /* off the I/O thread */
    for (int i = 0; i < 1000 && stats(s).conns_open > 0; i++)
        sleep_ms(10);
    struct mc_rpc_server_stats st = stats(s);
    assert_int_equal(st.out_closed, 1);
    assert_int_equal(st.conns_open, 0);
    assert_int_equal(st.out_bytes_queued, 0);
    close(fd);
    mc_rpc_server_free(s);
}

/* With an idle timeout, a connection whose replies do not drain is closed (it is not "busy"),
 * and so is one that stops in the middle of a request body. */
static void test_idle_covers_stalled_output_and_body(void **state)
{
    (void)state;
    struct mc_rpc_server *s = server(300);
    int fd = raw_connect(mc_rpc_server_port(s));
    send_requests(fd, M_BIG, 200);
    /* a second connection: a header announcing 1 MiB, then 100 KiB of it, then nothing */
    int fd2 = raw_connect(mc_rpc_server_port(s));
    uint8_t *part = calloc(1, MC_WIRE_HEADER_SIZE + 100 * KIB);
    assert_non_null(part);
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_ECHO, 1, 0, MIB);
    mc_wire_encode_header(&h, part);
    assert_int_equal(send(fd2, part, MC_WIRE_HEADER_SIZE + 100 * KIB, MSG_NOSIGNAL),
                     (ssize_t)(MC_WIRE_HEADER_SIZE + 100 * KIB));
    free(part);
    for (int i = 0; i < 1000 && stats(s).conns_accepted < 2; i++)
        sleep_ms(10);
    for (int i = 0; i < 1000 && stats(s).conns_open > 0; i++)
        sleep_ms(10);
    struct mc_rpc_server_stats st = stats(s);
    print_message("open=%llu idle_closed=%llu\n", (unsigned long long)st.conns_open,
                  (unsigned long long)st.idle_closed);
    assert_int_equal(st.conns_open, 0);
    assert_true(st.idle_closed >= 2);
    assert_int_equal(st.bodies_receiving, 0);
    close(fd);
    close(fd2);
    mc_rpc_server_free(s);
}

/* A header's claim is not an allocation: 100 KiB of a body announced as 60 MiB hold about what
 * arrived, not the 2 MiB (or 60 MiB) the claim would suggest, once the server's budget for
 * allocating ahead (body_ahead_bytes, here none) is spent. */
static void test_body_claim_allocates_nothing_ahead(void **state)
{
    (void)state;
    struct mc_rpc_server *s = server(0);
    int fd = raw_connect(mc_rpc_server_port(s));
    uint8_t f[MC_WIRE_HEADER_SIZE + 100 * KIB];
    memset(f, 0x33, sizeof(f));
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_ECHO, 1, 0, 60u * MIB);
    mc_wire_encode_header(&h, f);
    assert_int_equal(send(fd, f, sizeof(f), MSG_NOSIGNAL), (ssize_t)sizeof(f));
    for (int i = 0; i < 1000 && stats(s).body_bytes_buffered < 100 * KIB; i++)
        sleep_ms(10);
    struct mc_rpc_server_stats st = stats(s);
    print_message("buffered=%llu\n", (unsigned long long)st.body_bytes_buffered);
    assert_int_equal(st.bodies_receiving, 1);
    assert_true(st.body_bytes_buffered >= 100 * KIB - 32 * KIB); /* what arrived is held */
    assert_true(st.body_bytes_buffered <= 256 * KIB);            /* and little more */
    close(fd);
    mc_rpc_server_free(s);
}

/* With a token, connections that have not finished the handshake have a pool of their own
 * with a per-address share that includes loopback: 10 silent sockets from 127.0.0.1 take 4
 * slots and the rest are closed at accept; an authenticated connection still gets in once the
 * silent ones are gone (after the handshake deadline), and does not count against the pool. */
static void test_handshake_pool_per_addr(void **state)
{
    (void)state;
    struct mc_auth_key key;
    const char tok[] = "0123456789abcdef0123456789abcdef-test-token";
    assert_int_equal(mc_auth_key_from_token(tok, sizeof(tok) - 1, &key), 0);
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    cfg.io_threads = 1;
    cfg.auth = &key;
    cfg.max_pending_conns = 8;
    cfg.max_pending_per_addr = 4;
    cfg.handshake_timeout_ms = 500;
    struct mc_rpc_server *s;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    uint16_t port = mc_rpc_server_port(s);
    int fds[10];
    for (int i = 0; i < 10; i++)
        fds[i] = raw_connect(port);
    for (int i = 0; i < 1000 && stats(s).pending_refusals < 6; i++)
        sleep_ms(10);
    struct mc_rpc_server_stats st = stats(s);
    assert_int_equal(st.pending_refusals, 6);
    assert_int_equal(st.conns_open, 4);
    /* an authenticated client: once the silent ones hit the deadline it connects, and while
     * it is open 4 more silent sockets still fit (it left the handshake pool) */
    for (int i = 0; i < 1000 && stats(s).conns_open > 0; i++)
        sleep_ms(10);
    int afd = raw_connect(port);
    assert_int_equal(mc_auth_client_handshake(afd, &key, 3000, "test", "server"), 0);
    int more[4];
    for (int i = 0; i < 4; i++)
        more[i] = raw_connect(port);
    for (int i = 0; i < 1000 && stats(s).conns_open < 5; i++)
        sleep_ms(10);
    st = stats(s);
    assert_int_equal(st.conns_open, 5);
    assert_int_equal(st.pending_refusals, 6);
    for (int i = 0; i < 4; i++)
        close(more[i]);
    close(afd);
    for (int i = 0; i < 10; i++)
        close(fds[i]);
    mc_rpc_server_free(s);
}

int main(void)
{
    mc_log_set_level(getenv("LOGI") ? MC_LOG_INFO : MC_LOG_ERROR);
    for (size_t i = 0; i < sizeof(g_reply); i++)
        g_reply[i] = (uint8_t)(i * 7 + 3);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soft_limit_stops_reading),
        cmocka_unit_test(test_hard_limit_closes),
        cmocka_unit_test(test_idle_covers_stalled_output_and_body),
        cmocka_unit_test(test_body_claim_allocates_nothing_ahead),
        cmocka_unit_test(test_handshake_pool_per_addr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
