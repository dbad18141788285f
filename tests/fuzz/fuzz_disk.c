/*
 * fuzz_disk.c - libFuzzer target: the LOCAL_DISK store's start-up scan over a damaged extent.
 *
 * Each input becomes the one extent file (0000000000000001.ext) of an otherwise empty store
 * directory, and the store is opened: recovery reads and verifies every record (header CRC,
 * lengths against the file, value CRC, tombstones), skips damage block by block and truncates
 * a torn tail (disk_recover.c). Then every recovered key is read back, and the store closed.
 * A crash, sanitizer report or leak is a finding; refusing the file is fine.
 *
 * Seeds: tests/fuzz/corpus/disk (real extents written by the store, from fuzz_seeds).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/disk_store.h"
#include "common/log.h"

static char g_dir[64];

/* libFuzzer's entry points (also called by fuzz_replay.c) */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(MC_LOG_OFF);
    snprintf(g_dir, sizeof(g_dir), "/tmp/mc_fuzz_disk.XXXXXX");
    if (!mkdtemp(g_dir))
        abort();
    return 0;
}

struct keys {
    int n;
    uint32_t len[64];
    char key[64][256];
};

static int collect(void *ctx, const struct mc_disk_record_info *r)
{
    struct keys *k = ctx;
    if (k->n < 64 && r->key_len <= sizeof(k->key[0])) {
        memcpy(k->key[k->n], r->key, r->key_len);
        k->len[k->n++] = r->key_len;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/0000000000000001.ext", g_dir);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size))
        abort();
    fclose(f);
    struct mc_disk_store_config cfg = {.path = g_dir,
                                       .capacity = 64u << 20,
                                       .extent_size = 1u << 20,
                                       .queue_depth = 4,
                                       .staging_bytes = 64u << 10};
    struct mc_disk_store *s = NULL;
    char err[256];
    if (mc_disk_store_open(&cfg, &s, err, sizeof(err)) == 0) {
        static struct keys k;
        static uint8_t buf[64u << 10];
        k.n = 0;
        mc_disk_store_foreach(s, collect, &k);
        for (int i = 0; i < k.n; i++) {
            struct mc_disk_get g = {
                .key = k.key[i], .key_len = k.len[i], .buf = buf, .cap = sizeof(buf)};
            (void)mc_disk_store_read(s, &g, 1);
        }
        mc_disk_store_close(s);
    }
    unlink(path);
    return 0;
}
