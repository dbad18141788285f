/*
 * fuzz_peer.c - libFuzzer target: the bytes of one peer connection to a client's peer server.
 *
 * Each input is fed (mc_rpc_server_test_feed) to a peer server that serves one 64 KiB segment
 * (id 1:1, mount epoch 7): PeerWrite, PeerRead, PeerBatchWrite, PeerBatchRead and the rest go
 * through framing, the peer body split, the control message decoder and the segment id, epoch
 * and bounds checks. Bytes outside the segment are guarded by ASan (the segment is its own heap
 * block), so any write or read past it is a finding.
 *
 * Seeds: tests/fuzz/corpus/peer (from fuzz_seeds).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "client/peer_server.h"
#include "common/log.h"
#include "common/rpc_server.h"

#define SEG_BYTES (64u << 10)

static struct mc_peer_server *g_ps;
static uint8_t *g_seg;

/* libFuzzer's entry points (also called by fuzz_replay.c) */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(MC_LOG_OFF);
    struct mc_peer_server_config pc = {.bind_addr = "127.0.0.1", .io_threads = 1};
    g_seg = malloc(SEG_BYTES);
    struct mc_id id = {1, 1};
    if (!g_seg || mc_peer_server_new(&pc, &g_ps) != 0 ||
        mc_peer_server_add_segment(g_ps, id, g_seg, SEG_BYTES) != 0 ||
        mc_peer_server_set_segment_epoch(g_ps, id, 7) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_rpc_server_test_feed(mc_peer_server_test_rpc(g_ps), data, size);
    return 0;
}
