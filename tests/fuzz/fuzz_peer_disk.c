/*
 * fuzz_peer_disk.c - libFuzzer target: the bytes of one peer connection to a client whose
 * LOCAL_DISK store holds two records: PeerDiskRead requests (items, sizes, versions, the RDMA
 * mode without an RDMA transport) are decoded under the peer batch limits and served by the
 * disk tier's threads; anything else goes to the ordinary peer handlers. A crash, a sanitizer
 * report or a leak is a finding.
 *
 * The store lives in a temporary directory made at start and removed at exit.
 * Seeds: tests/fuzz/corpus/peer_disk (reads of the stored keys, of a missing one, with a wrong
 * size and a wrong version).
 */
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/peer_server.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/rpc_server.h"

static char g_dir[64];
static struct mc_disk_tier *g_tier;
static struct mc_peer_server *g_ps;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* As mc_client_close: the tier first (its serve threads finish the reads queued to them, which
 * answer through the peer server's calls), then the peer server. */
static void cleanup(void)
{
    mc_disk_tier_close(g_tier);
    mc_peer_server_free(g_ps);
    if (g_dir[0])
        nftw(g_dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(MC_LOG_OFF);
    snprintf(g_dir, sizeof(g_dir), "/tmp/mc_fuzz_peer_disk.XXXXXX");
    if (!mkdtemp(g_dir))
        abort();
    struct mc_disk_tier_config tc = {.path = g_dir,
                                     .capacity = 64u << 20,
                                     .client_id = {1, 1},
                                     .endpoint = "127.0.0.1:1",
                                     .max_payload = 1u << 20,
                                     .serve_threads = 1};
    if (mc_disk_tier_open(&tc, &g_tier) != 0)
        abort();
    static const char v1[] = "value-one", v2[] = "value-two-is-longer";
    struct mc_disk_put puts[2] = {
        {"k1", 2, 7, mc_crc32c(v1, sizeof(v1)), v1, sizeof(v1)},
        {"k2", 2, 9, mc_crc32c(v2, sizeof(v2)), v2, sizeof(v2)},
    };
    if (mc_disk_store_append(mc_disk_tier_store(g_tier), puts, 2, NULL) != 0)
        abort();
    struct mc_peer_server_config pc = {.bind_addr = "127.0.0.1",
                                       .io_threads = 1,
                                       .on_disk_read = mc_disk_tier_on_peer_read,
                                       .disk_arg = g_tier};
    if (mc_peer_server_new(&pc, &g_ps) != 0)
        abort();
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_rpc_server_test_feed(mc_peer_server_test_rpc(g_ps), data, size);
    return 0;
}
