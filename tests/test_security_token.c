/*
 * test_security_token.c - the token file's rules (README "Security"): at least 32 bytes, a
 * file others may read is refused unless allowed, a guessable token is warned about, and a file
 * may list two tokens for rotation (the first is proved, both are accepted), through a real
 * RPC server's handshake.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "mooncake/errors.h"

#define TOK_A "a1f9c3e07b5d42e8a6c1f0d9b3e57a28c4d6e1f0a9b8c7d6"
#define TOK_B "7c2e9a41d08f6b35e1c7a9d2f4b60e83a5c7d9e1f3b2a4c6"
#define TOK_C "e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2"

static char g_dir[64];

static const char *write_token(const char *name, const char *text, mode_t mode)
{
    static char path[8][128];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 128, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

static int warnings;

static void count_warnings(void *arg, enum mc_log_level level, const char *line, size_t len)
{
    (void)arg;
    (void)len;
    if (level == MC_LOG_WARN && strstr(line, "guessable"))
        warnings++;
}

static void test_token_rules(void **state)
{
    (void)state;
    struct mc_auth_key k;
    char err[200];
    /* 31 bytes: refused; 32: fine */
    const char *p = write_token("short", "0123456789abcdef0123456789abcde\n", 0600);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "32"));
    p = write_token("ok", "0123456789abcdef0123456789abcdef\n", 0600);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), 0);
    assert_true(k.set);
    assert_false(k.has_alt);
    /* readable by others: refused, unless allowed */
    p = write_token("open", TOK_A "\n", 0644);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "chmod 600"));
    mc_auth_allow_readable_token_file(true);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), 0);
    mc_auth_allow_readable_token_file(false);
    /* three tokens: refused */
    p = write_token("three", TOK_A "\n" TOK_B "\n" TOK_C "\n", 0600);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    /* a guessable token loads, with a warning; a random one without */
    struct mc_logger lg = {.level = MC_LOG_INFO, .sink = count_warnings};
    const struct mc_logger *prev = mc_log_set_current(&lg);
    warnings = 0;
    p = write_token("weak", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", 0600);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), 0);
    assert_int_equal(warnings, 1);
    p = write_token("strong", TOK_A "\n", 0600);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), 0);
    assert_int_equal(warnings, 1);
    mc_log_set_current(prev);
    assert_true(mc_auth_token_entropy_bits(TOK_A, strlen(TOK_A)) >= MC_AUTH_WEAK_TOKEN_BITS);
}

static uint16_t g_port;

static int handshake(const struct mc_auth_key *key)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(g_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int rc = mc_auth_client_handshake(fd, key, 3000, "test", "server");
    close(fd);
    return rc;
}

/* Rotation through a real server: the server's file lists A then B. */
static void test_two_tokens_rotation(void **state)
{
    (void)state;
    char err[200];
    struct mc_auth_key srv_key, a, ba, b, c;
    assert_int_equal(
        mc_auth_key_load(write_token("srv", TOK_A "\n" TOK_B "\n", 0600), &srv_key, err, 200), 0);
    assert_true(srv_key.has_alt);
    assert_int_equal(mc_auth_key_load(write_token("a", TOK_A "\n", 0600), &a, err, 200), 0);
    assert_int_equal(
        mc_auth_key_load(write_token("ba", TOK_B "\n" TOK_A "\n", 0600), &ba, err, 200), 0);
    assert_int_equal(mc_auth_key_load(write_token("b", TOK_B "\n", 0600), &b, err, 200), 0);
    assert_int_equal(mc_auth_key_load(write_token("c", TOK_C "\n", 0600), &c, err, 200), 0);
    struct mc_rpc_server_config cfg;
    mc_rpc_server_config_init(&cfg);
    cfg.bind_addr = "127.0.0.1";
    cfg.io_threads = 1;
    cfg.auth = &srv_key;
    struct mc_rpc_server *s;
    assert_int_equal(mc_rpc_server_new(&cfg, &s), 0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    g_port = mc_rpc_server_port(s);
    assert_int_equal(handshake(&a), 0);  /* the old token */
    assert_int_equal(handshake(&ba), 0); /* proves the new one, accepts the server's old one */
    /* a client that already dropped the old token does not accept this server's proof: the
     * rotation's phases (README) finish everywhere before the next starts */
    assert_int_equal(handshake(&b), MC_ERR_UNAUTHENTICATED);
    assert_int_equal(handshake(&c), MC_ERR_UNAUTHENTICATED);
    /* the HTTP admin check accepts either token */
    struct mc_auth_key pa, pb, pc;
    assert_int_equal(mc_auth_key_from_token(TOK_A, strlen(TOK_A), &pa), 0);
    assert_int_equal(mc_auth_key_from_token(TOK_B, strlen(TOK_B), &pb), 0);
    assert_int_equal(mc_auth_key_from_token(TOK_C, strlen(TOK_C), &pc), 0);
    assert_true(mc_auth_key_matches(&srv_key, &pa));
    assert_true(mc_auth_key_matches(&srv_key, &pb));
    assert_false(mc_auth_key_matches(&srv_key, &pc));
    mc_rpc_server_free(s);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/mc_sec_token.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = {"short", "ok", "open", "three", "weak", "strong",
                           "srv",   "a",  "ba",   "b",     "c"};
    char p[128];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    rmdir(g_dir);
    return 0;
}

int main(void)
{
    mc_log_set_level(MC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_rules),
        cmocka_unit_test(test_two_tokens_rotation),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
