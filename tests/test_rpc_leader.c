/*
 * test_rpc_leader.c - the RPC client's leader/follower receive (rpc_client.c): callers read the
 * socket themselves, one at a time, and hand other callers their replies.
 *
 * Against a scripted fake server (a thread with a listening socket that reads request frames and
 * writes exactly the bytes a test tells it to, so partial frames are deterministic):
 *   - a leader that times out hands the read token to a waiting follower, which gets its reply;
 *   - a leader whose own payload is half received when its deadline passes returns RPC_TIMEOUT,
 *     its buffer is not written after that, and the next call on the same connection works
 *     (the rest of the frame is discarded, the stream stays in sync);
 *   - a follower whose payload a leader is receiving when the follower's deadline passes cuts
 *     the connection and returns RPC_TIMEOUT; the leader sees RPC_FAIL;
 *   - replies for followers, peer payloads included, are delivered by the leader into the
 *     followers' buffers, byte-exact;
 *   - an idle connection the server closed is noticed (mc_rpc_client_connected) and the next
 *     call reconnects and succeeds at its first attempt.
 * Waits are bounded (condition variables and polls with deadlines), never sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "test_listen.h"

#define M_TEST (MC_METHOD_TEST_FIRST + 1)

/* ---- fake server -------------------------------------------------------------------------- */

struct fake {
    int lfd, fd;
    uint16_t port;
};

static void fake_listen(struct fake *f)
{
    f->lfd = tl_listen(4, &f->port);
    f->fd = -1;
}

static void fake_close(struct fake *f)
{
    if (f->fd >= 0)
        close(f->fd);
    close(f->lfd);
}

static int read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 5000) != 1)
            return -1;
        ssize_t n = recv(fd, p, len, 0);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Accepts if needed and reads one request; returns its id (0 on failure). */
static uint64_t fake_read_request(struct fake *f)
{
    if (f->fd < 0) {
        struct pollfd pfd = {.fd = f->lfd, .events = POLLIN};
        if (poll(&pfd, 1, 5000) != 1)
            return 0;
        f->fd = accept(f->lfd, NULL, NULL);
        if (f->fd < 0)
            return 0;
    }
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    if (read_all(f->fd, hb, sizeof(hb)))
        return 0;
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    uint8_t *body = malloc(h.body_length + 1);
    int r = read_all(f->fd, body, h.body_length);
    free(body);
    return r ? 0 : h.request_id;
}

/* Writes a peer reply header (no control) announcing plen payload bytes, then `send` bytes of
 * the payload (byte value v). */
static void fake_peer_reply(struct fake *f, uint64_t id, size_t plen, size_t send_now, uint8_t v)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, M_TEST, id, 0,
                        (uint32_t)(MC_WIRE_PEER_PREFIX + plen));
    mc_wire_encode_header(&h, hb);
    mc_wire_put_u32(hb + MC_WIRE_HEADER_SIZE, 0);
    assert_int_equal(send(f->fd, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
    uint8_t *p = malloc(send_now + 1);
    memset(p, v, send_now);
    size_t off = 0;
    while (off < send_now) {
        ssize_t n = send(f->fd, p + off, send_now - off, MSG_NOSIGNAL);
        assert_true(n > 0);
        off += (size_t)n;
    }
    free(p);
}

static void fake_send_bytes(struct fake *f, size_t n, uint8_t v)
{
    uint8_t *p = malloc(n + 1);
    memset(p, v, n);
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(f->fd, p + off, n - off, MSG_NOSIGNAL);
        assert_true(w > 0);
        off += (size_t)w;
    }
    free(p);
}

/* An ordinary reply with body "ok". */
static void fake_ok(struct fake *f, uint64_t id)
{
    uint8_t b[MC_WIRE_HEADER_SIZE + 2];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, M_TEST, id, 0, 2);
    mc_wire_encode_header(&h, b);
    memcpy(b + MC_WIRE_HEADER_SIZE, "ok", 2);
    assert_int_equal(send(f->fd, b, sizeof(b), MSG_NOSIGNAL), (ssize_t)sizeof(b));
}

/* ---- callers on threads ------------------------------------------------------------------- */

struct caller {
    struct mc_rpc_client *c;
    bool peer;
    uint32_t wait_ms;
    uint8_t *buf;
    size_t cap;
    int rc;
    size_t got;
    char resp[8];
    /* completion, waited for with a deadline */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool finished;
};

static void *caller_main(void *arg)
{
    struct caller *k = arg;
    if (k->peer) {
        struct mc_rpc_peer_call pc = {
            .method = M_TEST, .recv_buf = k->buf, .recv_cap = k->cap, .server_wait_ms = k->wait_ms};
        k->rc = mc_rpc_client_call_peer(k->c, &pc);
        k->got = pc.recv_len;
    } else {
        void *resp = NULL;
        size_t rl = 0;
        k->rc = mc_rpc_client_call(k->c, M_TEST, "q", 1, k->wait_ms, &resp, &rl);
        if (resp && rl < sizeof(k->resp))
            memcpy(k->resp, resp, rl);
        free(resp);
    }
    pthread_mutex_lock(&k->mu);
    k->finished = true;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

static void caller_start(struct caller *k, pthread_t *th)
{
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    k->finished = false;
    assert_int_equal(pthread_create(th, NULL, caller_main, k), 0);
}

/* Waits (bounded: 20 s) for the caller to return; a lost wake-up or a token never handed over
 * fails here instead of hanging. */
static void caller_join(struct caller *k, pthread_t th)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 20;
    pthread_mutex_lock(&k->mu);
    while (!k->finished)
        if (pthread_cond_timedwait(&k->cv, &k->mu, &ts) == ETIMEDOUT)
            break;
    bool fin = k->finished;
    pthread_mutex_unlock(&k->mu);
    assert_true(fin);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
}

static struct mc_rpc_client *new_client(uint16_t port, uint32_t timeout_ms)
{
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    cfg.host = "127.0.0.1";
    cfg.port = port;
    cfg.call_timeout_ms = timeout_ms;
    cfg.reconnect_min_ms = 5;
    cfg.reconnect_max_ms = 50;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cfg, &c), 0);
    assert_int_equal(mc_rpc_client_connect(c), 0);
    return c;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* A (leader, short deadline) times out; B (follower, long server wait) takes over the token
 * and receives its reply. */
static void test_leader_timeout_hands_over(void **state)
{
    (void)state;
    struct fake f;
    fake_listen(&f);
    struct mc_rpc_client *c = new_client(f.port, 100);
    struct caller a = {.c = c}, b = {.c = c, .wait_ms = 60000};
    pthread_t ta, tb;
    caller_start(&a, &ta);
    uint64_t ida = fake_read_request(&f); /* A is in flight (and leads: it is alone) */
    assert_int_not_equal(ida, 0);
    caller_start(&b, &tb);
    uint64_t idb = fake_read_request(&f);
    assert_int_not_equal(idb, 0);
    caller_join(&a, ta);
    assert_int_equal(a.rc, MC_ERR_RPC_TIMEOUT);
    fake_ok(&f, idb);
    caller_join(&b, tb);
    assert_int_equal(b.rc, 0);
    assert_string_equal(b.resp, "ok");
    /* a late answer for A is discarded; the connection still works */
    fake_ok(&f, ida);
    struct caller d = {.c = c};
    pthread_t td;
    caller_start(&d, &td);
    uint64_t idd = fake_read_request(&f);
    fake_ok(&f, idd);
    caller_join(&d, td);
    assert_int_equal(d.rc, 0);
    mc_rpc_client_free(c);
    fake_close(&f);
}

/* The leader's own payload is half in when its deadline passes: RPC_TIMEOUT, the buffer is not
 * touched afterwards, and the stream stays in sync for the next call. */
static void test_leader_timeout_mid_payload(void **state)
{
    (void)state;
    struct fake f;
    fake_listen(&f);
    struct mc_rpc_client *c = new_client(f.port, 150);
    size_t n = 1u << 20, half = n / 2;
    uint8_t *buf = calloc(1, n);
    struct caller a = {.c = c, .peer = true, .buf = buf, .cap = n};
    pthread_t ta;
    caller_start(&a, &ta);
    uint64_t ida = fake_read_request(&f);
    assert_int_not_equal(ida, 0);
    fake_peer_reply(&f, ida, n, half, 0x5a);
    caller_join(&a, ta);
    assert_int_equal(a.rc, MC_ERR_RPC_TIMEOUT);
    /* the next call: the rest of A's frame arrives first, then this call's reply */
    uint8_t buf2[16] = {0};
    struct caller b = {.c = c, .peer = true, .buf = buf2, .cap = sizeof(buf2)};
    pthread_t tb;
    caller_start(&b, &tb);
    uint64_t idb = fake_read_request(&f);
    assert_int_not_equal(idb, 0);
    fake_send_bytes(&f, n - half, 0x77);
    fake_peer_reply(&f, idb, 3, 3, 0x33);
    caller_join(&b, tb);
    assert_int_equal(b.rc, 0);
    assert_int_equal(b.got, 3);
    assert_int_equal(buf2[0], 0x33);
    assert_int_equal(buf2[2], 0x33);
    assert_int_equal(buf2[3], 0);
    for (size_t i = half; i < n; i++)
        if (buf[i] != 0)
            fail_msg("byte %zu of the timed-out call's buffer was written after its timeout", i);
    assert_true(mc_rpc_client_connected(c));
    free(buf);
    mc_rpc_client_free(c);
    fake_close(&f);
}

/* A leads (its reply never comes); the server sends half of B's payload and stalls. B's deadline
 * passes while A writes into B's buffer: B cuts the connection and returns RPC_TIMEOUT, A fails
 * with RPC_FAIL. */
static void test_follower_timeout_while_receiving(void **state)
{
    (void)state;
    struct fake f;
    fake_listen(&f);
    struct mc_rpc_client *c = new_client(f.port, 200);
    size_t n = 1u << 20;
    uint8_t *buf = calloc(1, n);
    struct caller a = {.c = c, .wait_ms = 60000};
    struct caller b = {.c = c, .peer = true, .buf = buf, .cap = n};
    pthread_t ta, tb;
    caller_start(&a, &ta);
    assert_int_not_equal(fake_read_request(&f), 0);
    caller_start(&b, &tb);
    uint64_t idb = fake_read_request(&f);
    assert_int_not_equal(idb, 0);
    fake_peer_reply(&f, idb, n, n / 4, 0x11);
    caller_join(&b, tb);
    assert_int_equal(b.rc, MC_ERR_RPC_TIMEOUT);
    /* (if B happened to lead instead, it discarded its payload; the server going away then
     * ends A the same way) */
    close(f.fd);
    f.fd = -1;
    caller_join(&a, ta);
    assert_int_equal(a.rc, MC_ERR_RPC_FAIL);
    free(buf);
    mc_rpc_client_free(c);
    fake_close(&f);
}

/* Many callers, replies sent in reverse order (peer payloads of different sizes): whoever leads
 * delivers every reply into the right buffer. */
static void test_followers_get_their_payloads(void **state)
{
    (void)state;
    struct fake f;
    fake_listen(&f);
    struct mc_rpc_client *c = new_client(f.port, 10000);
    enum { K = 6 };
    struct caller ks[K];
    pthread_t th[K];
    uint64_t ids[K];
    size_t sizes[K] = {0, 1, 300, 70000, 1u << 20, (3u << 20) + 5};
    for (int i = 0; i < K; i++) {
        ks[i] = (struct caller){
            .c = c, .peer = true, .buf = calloc(1, sizes[i] + 1), .cap = sizes[i] + 1};
        caller_start(&ks[i], &th[i]);
        ids[i] = fake_read_request(&f); /* one at a time: request i is caller i's */
        assert_int_not_equal(ids[i], 0);
    }
    for (int i = K - 1; i >= 0; i--)
        fake_peer_reply(&f, ids[i], sizes[i], sizes[i], (uint8_t)(0x40 + i));
    for (int i = 0; i < K; i++) {
        caller_join(&ks[i], th[i]);
        assert_int_equal(ks[i].rc, 0);
        assert_int_equal(ks[i].got, sizes[i]);
        for (size_t j = 0; j < sizes[i]; j++)
            if (ks[i].buf[j] != 0x40 + i)
                fail_msg("caller %d byte %zu", i, j);
        assert_int_equal(ks[i].buf[sizes[i]], 0);
        free(ks[i].buf);
    }
    mc_rpc_client_free(c);
    fake_close(&f);
}

/* The server closes an idle connection: the client notices without a call in flight, and the
 * next call reconnects and succeeds at once. */
static void test_idle_close_then_reconnect(void **state)
{
    (void)state;
    struct fake f;
    fake_listen(&f);
    struct mc_rpc_client *c = new_client(f.port, 5000);
    struct caller a = {.c = c};
    pthread_t ta;
    caller_start(&a, &ta);
    uint64_t ida = fake_read_request(&f);
    fake_ok(&f, ida);
    caller_join(&a, ta);
    assert_int_equal(a.rc, 0);
    close(f.fd); /* idle close by the server */
    f.fd = -1;
    uint64_t deadline = mc_now_ms() + 5000;
    while (mc_rpc_client_connected(c) && mc_now_ms() < deadline) {
        struct pollfd none;
        poll(&none, 0, 2); /* a bounded poll loop, as process tests do */
    }
    assert_false(mc_rpc_client_connected(c));
    struct caller b = {.c = c};
    pthread_t tb;
    caller_start(&b, &tb);
    uint64_t idb = fake_read_request(&f); /* accepts the new connection */
    assert_int_not_equal(idb, 0);
    fake_ok(&f, idb);
    caller_join(&b, tb);
    assert_int_equal(b.rc, 0);
    mc_rpc_client_free(c);
    fake_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leader_timeout_hands_over),
        cmocka_unit_test(test_leader_timeout_mid_payload),
        cmocka_unit_test(test_follower_timeout_while_receiving),
        cmocka_unit_test(test_followers_get_their_payloads),
        cmocka_unit_test(test_idle_close_then_reconnect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
