/*
 * fuzz_gate.c - libFuzzer target: the bytes of one connection to an RPC server that has an auth
 * token (rpc_server_gate.c): before the handshake every frame is judged from its header alone,
 * AuthChallenge and AuthProve bodies are fixed-size, anything else is refused and the
 * connection closed. A stranger must not get past the gate (the echo handler counts calls that
 * did: a finding), nor crash, leak or make the server allocate.
 *
 * Seeds: tests/fuzz/corpus/gate (a challenge, a challenge then a wrong proof, a request before
 * the handshake).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "common/wire.h"

static struct mc_rpc_server *g_srv;
static uint64_t g_passed;

static void echo(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    g_passed++;
    mc_rpc_reply(call, 0, NULL, 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(MC_LOG_OFF);
    static const char tok[] = "fuzz-gate-token-0123456789abcdef0123456789";
    struct mc_auth_key key;
    if (mc_auth_key_from_token(tok, strlen(tok), &key) != 0)
        abort();
    struct mc_rpc_server_config rc;
    mc_rpc_server_config_init(&rc);
    rc.io_threads = 1;
    rc.name = "fuzz";
    rc.auth = &key;
    if (mc_rpc_server_new(&rc, &g_srv) != 0 ||
        mc_rpc_server_register(g_srv, MC_METHOD_ECHO, echo, NULL) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_rpc_server_test_feed(g_srv, data, size);
    if (g_passed) /* a request reached a handler without the token: the gate is open */
        abort();
    return 0;
}
