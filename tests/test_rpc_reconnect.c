/*
 * test_rpc_reconnect.c - a call sent on a connection the server has just closed.
 *
 * Right after a reply the client skips its liveness peek (RPCC_FRESH_MS), so a call made just
 * after the server closed the connection (a restart) is written into a dead socket. It must
 * then be sent again on a new connection when the server's socket never took a byte of it,
 * and fail (never sent twice) when the server may have read it. A call whose send fails on a
 * connection shut locally (another call's timeout cut it) never reached the server whole, and
 * is sent again too. The server here is a raw one in a thread of the test, so that the test
 * decides when it closes and can see every request and connection it gets.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "test_listen.h"

enum { FIRST_CLOSE_AFTER_REPLY = 0, FIRST_CLOSE_AFTER_READ = 1, FIRST_KEPT = 2 };

struct fake {
    int lfd;
    uint16_t port;
    int mode;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool first_closed;
    int conns;            /* connections accepted */
    int requests;         /* whole requests read, over all connections */
    char seen[8][32];     /* their bodies */
    bool second_answered; /* a request was answered on the second connection */
};

static bool read_all(int fd, void *b, size_t n)
{
    uint8_t *p = b;
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* Reads one request; its id and body (NUL-terminated, at most 31 bytes). */
static bool read_request(int fd, struct mc_wire_header *h, char *body)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    if (!read_all(fd, hb, sizeof(hb)))
        return false;
    mc_wire_decode_header(hb, h);
    if (h->body_length > 31 || !read_all(fd, body, h->body_length))
        return false;
    body[h->body_length] = 0;
    return true;
}

static void answer(int fd, const struct mc_wire_header *req, const char *body)
{
    uint8_t f[MC_WIRE_HEADER_SIZE + 32];
    struct mc_wire_header h;
    size_t n = strlen(body);
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, req->method, req->request_id, 0, (uint32_t)n);
    mc_wire_encode_header(&h, f);
    memcpy(f + MC_WIRE_HEADER_SIZE, body, n);
    ssize_t w = send(fd, f, MC_WIRE_HEADER_SIZE + n, MSG_NOSIGNAL);
    assert_int_equal(w, (ssize_t)(MC_WIRE_HEADER_SIZE + n));
}

static void note(struct fake *f, const char *body)
{
    pthread_mutex_lock(&f->mu);
    if (f->requests < 8)
        snprintf(f->seen[f->requests], sizeof(f->seen[0]), "%s", body);
    f->requests++;
    pthread_mutex_unlock(&f->mu);
}

/* First connection: answers one request, then closes (mode AFTER_REPLY), or answers one,
 * reads a second and closes without answering it (AFTER_READ), or answers what comes until the
 * client leaves (KEPT). Second connection: answers what comes until the client leaves. */
static void *fake_main(void *arg)
{
    struct fake *f = arg;
    struct mc_wire_header h;
    char body[32];
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    pthread_mutex_lock(&f->mu);
    f->conns++;
    pthread_mutex_unlock(&f->mu);
    if (read_request(fd, &h, body)) {
        note(f, body);
        answer(fd, &h, body);
    }
    if (f->mode == FIRST_CLOSE_AFTER_READ && read_request(fd, &h, body))
        note(f, body); /* read (the kernel acknowledged it), never answered */
    while (f->mode == FIRST_KEPT && read_request(fd, &h, body)) {
        note(f, body);
        answer(fd, &h, body);
    }
    close(fd); /* nothing unread: a FIN, as a server that exits */
    pthread_mutex_lock(&f->mu);
    f->first_closed = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    struct pollfd p = {.fd = f->lfd, .events = POLLIN};
    if (poll(&p, 1, 3000) <= 0)
        return NULL; /* no second connection */
    fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    pthread_mutex_lock(&f->mu);
    f->conns++;
    pthread_mutex_unlock(&f->mu);
    while (read_request(fd, &h, body)) {
        note(f, body);
        answer(fd, &h, body);
        pthread_mutex_lock(&f->mu);
        f->second_answered = true;
        pthread_mutex_unlock(&f->mu);
    }
    close(fd);
    return NULL;
}

static void fake_start(struct fake *f, int mode, pthread_t *th)
{
    memset(f, 0, sizeof(*f));
    f->mode = mode;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->lfd = tl_listen(8, &f->port);
    assert_int_equal(pthread_create(th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f, pthread_t th)
{
    shutdown(f->lfd, SHUT_RDWR);
    pthread_join(th, NULL);
    close(f->lfd);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
}

static struct mc_rpc_client *client_for(uint16_t port)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = port;
    cc.call_timeout_ms = 5000;
    cc.reconnect_min_ms = 1;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    return c;
}

static int echo(struct mc_rpc_client *c, const char *s, char *out)
{
    void *resp = NULL;
    size_t rl = 0;
    int rc = mc_rpc_client_call(c, MC_METHOD_ECHO, s, strlen(s), 0, &resp, &rl);
    if (rc == 0) {
        assert_true(rl < 32);
        memcpy(out, resp, rl);
        out[rl] = 0;
    }
    free(resp);
    return rc;
}

/* Waits until the fake server closed its first connection (its FIN is then in the client's
 * socket, well within the client's fresh window of the reply). */
static void wait_first_closed(struct fake *f)
{
    pthread_mutex_lock(&f->mu);
    while (!f->first_closed)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

/* The server closed the connection before the call: the call goes out on a new connection and
 * succeeds; the server saw it once. Before, the call failed (RPC_FAIL) and only the next one
 * reconnected. */
static void test_call_after_server_close_reconnects(void **state)
{
    (void)state;
    struct fake f;
    pthread_t th;
    fake_start(&f, FIRST_CLOSE_AFTER_REPLY, &th);
    struct mc_rpc_client *c = client_for(f.port);
    char got[32];
    assert_int_equal(echo(c, "first", got), 0);
    assert_string_equal(got, "first");
    wait_first_closed(&f);
    assert_int_equal(echo(c, "second", got), 0);
    assert_string_equal(got, "second");
    assert_int_equal(echo(c, "third", got), 0);
    assert_string_equal(got, "third");
    mc_rpc_client_free(c);
    fake_stop(&f, th);
    assert_int_equal(f.conns, 2);
    assert_int_equal(f.requests, 3);
    assert_string_equal(f.seen[0], "first");
    assert_string_equal(f.seen[1], "second");
    assert_string_equal(f.seen[2], "third");
}

/* The server read the request, then closed without answering: it may have run it, so the call
 * fails and is not sent again (the server sees it once, no second connection carries it). */
static void test_call_read_by_server_not_resent(void **state)
{
    (void)state;
    struct fake f;
    pthread_t th;
    fake_start(&f, FIRST_CLOSE_AFTER_READ, &th);
    struct mc_rpc_client *c = client_for(f.port);
    char got[32];
    assert_int_equal(echo(c, "first", got), 0);
    assert_int_equal(echo(c, "second", got), MC_ERR_RPC_FAIL);
    wait_first_closed(&f);
    pthread_mutex_lock(&f.mu);
    bool answered = f.second_answered;
    pthread_mutex_unlock(&f.mu);
    assert_false(answered);
    mc_rpc_client_free(c);
    fake_stop(&f, th);
    assert_int_equal(f.requests, 2);
    assert_string_equal(f.seen[1], "second");
    assert_false(f.second_answered);
}

#ifdef MC_TEST_HOOKS
/* The client shuts its connection just before a request is written (as another call's timeout
 * would), so the send fails: the request never reached the server, and goes out again on a
 * new connection. The server sees it once, on the second connection. Before, the call failed
 * with RPC_FAIL. */
static void test_call_whose_send_failed_resent(void **state)
{
    (void)state;
    struct fake f;
    pthread_t th;
    fake_start(&f, FIRST_KEPT, &th);
    struct mc_rpc_client *c = client_for(f.port);
    char got[32];
    assert_int_equal(echo(c, "first", got), 0);
    uint64_t fired = mc_rpc_test_drops_fired();
    mc_rpc_test_drop_next(MC_METHOD_ECHO, MC_RPC_TEST_DROP_SEND_FAILS);
    assert_int_equal(echo(c, "second", got), 0);
    assert_string_equal(got, "second");
    assert_int_equal(mc_rpc_test_drops_fired(), fired + 1);
    assert_int_equal(echo(c, "third", got), 0);
    mc_rpc_client_free(c);
    fake_stop(&f, th);
    assert_int_equal(f.conns, 2);
    assert_int_equal(f.requests, 3); /* "second" once: its failed send carried nothing */
    assert_string_equal(f.seen[1], "second");
    assert_string_equal(f.seen[2], "third");
    assert_true(f.second_answered);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_after_server_close_reconnects),
        cmocka_unit_test(test_call_read_by_server_not_resent),
#ifdef MC_TEST_HOOKS
        cmocka_unit_test(test_call_whose_send_failed_resent),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
