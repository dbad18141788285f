/*
 * test_auth.c - the client side of the shared-token handshake (common/auth.h) checks the
 * server too: a client with a token never sends its proof to, nor talks on with, a server that
 * cannot prove the same token.
 *
 *   wrong_server_proof     a fake server answers the challenge with a proof made from another
 *                          token: the handshake fails UNAUTHENTICATED and the client sends
 *                          nothing more (no AuthProve); the same fake server with the right
 *                          token completes the handshake and sees a valid client proof
 *   server_without_token   an RPC server with no token (protected mode, loopback client): a
 *                          client with a token fails its call with UNAUTHENTICATED
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "mooncake/errors.h"

static const char TOKEN[] = "the-cluster-secret-0123456789abcdef";
static const char OTHER[] = "another-cluster-secret-9876543210fedcba";

/* Reads exactly n bytes within 2 s; false on EOF, error or timeout. */
static bool read_n(int fd, uint8_t *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0)
            return false;
        ssize_t r = recv(fd, buf + off, n - off, 0);
        if (r <= 0)
            return false;
        off += (size_t)r;
    }
    return true;
}

static void send_answer(int fd, uint16_t method, const uint8_t *body, uint32_t len)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, method, method, 0, len);
    mc_wire_encode_header(&h, hb);
    assert_int_equal(send(fd, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
    if (len)
        assert_int_equal(send(fd, body, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* A fake server on one end of a socketpair, proving `key` (which may not be the client's). */
struct fake_server {
    int fd;
    struct mc_auth_key key;
    bool challenged;  /* a well-formed AuthChallenge came in */
    bool got_more;    /* anything arrived after our answer to it */
    bool proof_valid; /* that was an AuthProve with the client proof for `key` */
};

static void *fake_server_main(void *arg)
{
    struct fake_server *s = arg;
    uint8_t hb[MC_WIRE_HEADER_SIZE], cnonce[MC_AUTH_NONCE_BYTES];
    uint8_t ans[MC_AUTH_NONCE_BYTES + MC_AUTH_MAC_BYTES];
    struct mc_wire_header h;
    if (!read_n(s->fd, hb, sizeof(hb)))
        return NULL;
    mc_wire_decode_header(hb, &h);
    if (h.method != MC_METHOD_AUTH_CHALLENGE || h.body_length != MC_AUTH_NONCE_BYTES ||
        !read_n(s->fd, cnonce, sizeof(cnonce)))
        return NULL;
    s->challenged = true;
    assert_int_equal(mc_auth_random(ans, MC_AUTH_NONCE_BYTES), 0);
    mc_auth_server_proof(&s->key, cnonce, ans, ans + MC_AUTH_NONCE_BYTES);
    send_answer(s->fd, MC_METHOD_AUTH_CHALLENGE, ans, sizeof(ans));
    if (!read_n(s->fd, hb, sizeof(hb)))
        return NULL; /* the client hung up or went quiet */
    s->got_more = true;
    mc_wire_decode_header(hb, &h);
    uint8_t proof[MC_AUTH_MAC_BYTES], want[MC_AUTH_MAC_BYTES];
    if (h.method != MC_METHOD_AUTH_PROVE || h.body_length != MC_AUTH_MAC_BYTES ||
        !read_n(s->fd, proof, sizeof(proof)))
        return NULL;
    mc_auth_client_proof(&s->key, cnonce, ans, want);
    s->proof_valid = mc_auth_mac_equal(want, proof);
    send_answer(s->fd, MC_METHOD_AUTH_PROVE, NULL, 0);
    return NULL;
}

/* The client's handshake against a fake server proving server_token. */
static int handshake_against(const char *server_token, struct fake_server *s)
{
    struct mc_auth_key mine;
    assert_int_equal(mc_auth_key_from_token(TOKEN, strlen(TOKEN), &mine), 0);
    memset(s, 0, sizeof(*s));
    assert_int_equal(mc_auth_key_from_token(server_token, strlen(server_token), &s->key), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    s->fd = sv[1];
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fake_server_main, s), 0);
    int rc = mc_auth_client_handshake(sv[0], &mine, 2000, "test", "fake");
    close(sv[0]); /* a client that gave up leaves: the fake server reads EOF */
    pthread_join(th, NULL);
    close(sv[1]);
    return rc;
}

static void test_wrong_server_proof(void **state)
{
    (void)state;
    struct fake_server s;
    assert_int_equal(handshake_against(OTHER, &s), MC_ERR_UNAUTHENTICATED);
    assert_true(s.challenged);
    assert_false(s.got_more); /* no proof went to a server that did not prove the token */
    /* the control: the same fake server with the right token */
    assert_int_equal(handshake_against(TOKEN, &s), 0);
    assert_true(s.challenged);
    assert_true(s.got_more);
    assert_true(s.proof_valid);
}

static void test_server_without_token(void **state)
{
    (void)state;
    struct mc_rpc_server_config sc;
    struct mc_rpc_server *srv = NULL;
    mc_rpc_server_config_init(&sc);
    sc.bind_addr = "127.0.0.1";
    assert_int_equal(mc_rpc_server_new(&sc, &srv), 0);
    assert_int_equal(mc_rpc_server_start(srv), 0);
    struct mc_auth_key key;
    assert_int_equal(mc_auth_key_from_token(TOKEN, strlen(TOKEN), &key), 0);
    struct mc_rpc_client_config cc;
    struct mc_rpc_client *c = NULL;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = mc_rpc_server_port(srv);
    cc.call_timeout_ms = 3000;
    cc.auth = &key;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "x", 1, 0, NULL, NULL),
                     MC_ERR_UNAUTHENTICATED);
    mc_rpc_client_free(c);
    /* the same server serves a client without a token (loopback, protected mode) */
    cc.auth = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_ECHO, "x", 1, 0, NULL, NULL), 0);
    mc_rpc_client_free(c);
    mc_rpc_server_free(srv);
}

int main(void)
{
    mc_log_set_level(MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_server_proof),
        cmocka_unit_test(test_server_without_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
