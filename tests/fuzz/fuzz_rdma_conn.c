/*
 * fuzz_rdma_conn.c - libFuzzer target: the RDMA connection messages (rdma_plan.h), the private
 * data of every rdma_cm connect, accept and reject, which a peer on the fabric writes before
 * any token is proved. The input is one message as it arrives. Findings: a crash, a message
 * that decodes with an unknown kind or a zero client id, one whose decoded form does not
 * encode back to the bytes it came from (the decoder read past what it checked, or dropped
 * what it should keep), and a PROVE that passes the token check for a challenge the target
 * issued (a stranger would be past the gate).
 *
 * Seeds: tests/fuzz/corpus/rdma_conn (one of each kind); regressions: truncated, bad magic,
 * zero id, non-zero padding.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/rdma_plan.h"
#include "common/auth.h"
#include "common/log.h"

static struct mc_auth_key g_key;
static uint8_t g_cnonce[MC_AUTH_NONCE_BYTES], g_snonce[MC_AUTH_NONCE_BYTES];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(MC_LOG_OFF);
    static const char tok[] = "fuzz-rdma-token-0123456789abcdef0123456789";
    if (mc_auth_key_from_token(tok, strlen(tok), &g_key) != 0 ||
        mc_auth_random(g_cnonce, sizeof(g_cnonce)) || mc_auth_random(g_snonce, sizeof(g_snonce)))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mc_rdma_conn_msg m;
    /* the decoder gets exactly the bytes (no slack after them), as rdma_cm hands them over */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    int rc = mc_rdma_conn_msg_decode(copy, size, &m);
    free(copy);
    if (rc != 0)
        return 0;
    size_t len = mc_rdma_conn_msg_len(m.kind);
    if (len == 0 || len > MC_RDMA_CONN_MSG_MAX || len > size || mc_id_is_zero(m.client_id))
        abort();
    uint8_t out[MC_RDMA_CONN_MSG_MAX];
    if (mc_rdma_conn_msg_encode(&m, out) != len || memcmp(out, data, len) != 0)
        abort();
    if (m.kind == MC_RDMA_CONN_PROVE &&
        mc_auth_check_client_proof(&g_key, g_cnonce, g_snonce, m.mac))
        abort();
    return 0;
}
