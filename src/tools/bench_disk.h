/*
 * bench_disk.h - what the files of `mooncake_bench disk` share (bench_disk.c: options and
 * dispatch; bench_disk_read.c: local and --remote reads; bench_disk_write.c: --write;
 * bench_disk_evict.c: --evict). The bench itself is described in bench_disk.c.
 */
#ifndef MC_TOOLS_BENCH_DISK_H
#define MC_TOOLS_BENCH_DISK_H

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/disk_store.h"
#include "mooncake/errors.h"
#include "tools/proc_harness.h"

#define BATCH_BYTES_MAX (64ull << 20)

struct disk_opts {
    uint64_t data;
    int runs;
    unsigned qd, batch;
    unsigned readers; /* local reads: threads, each with a ring of qd / readers */
    uint64_t seed;
    double ref;
    double seconds; /* > 0: each run lasts this long (time-based) instead of reading data bytes */
    int remote;     /* also read through a holder process (PeerDiskRead over loopback tcp) */
    int write;      /* measure appends (the offload path) instead of reads */
    int keep;       /* --write: keep the store directory (a later run appends over it) */
    int evict;      /* time evictions that move read records (second chance) */
};

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* rm -rf of a store directory (the harness's: a symlink is removed, never followed). */
static inline void rm_rf(const char *dir)
{
    mc_proc_rm_rf(dir);
}

/* Opens the store of cfg, or says why not and returns NULL. */
static inline struct mc_disk_store *open_store(const struct mc_disk_store_config *cfg)
{
    struct mc_disk_store *s = NULL;
    char err[512] = "";
    int rc = mc_disk_store_open(cfg, &s, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "bench disk: %s\n", err[0] ? err : mc_strerror(rc));
    return rc == 0 ? s : NULL;
}

static inline void case_name(char *out, size_t cap, const char *prefix, uint64_t vsize)
{
    if (vsize % (1u << 20) == 0)
        snprintf(out, cap, "%s_%" PRIu64 "MiB", prefix, vsize >> 20);
    else if (vsize % 1024 == 0)
        snprintf(out, cap, "%s_%" PRIu64 "KiB", prefix, vsize >> 10);
    else
        snprintf(out, cap, "%s_%" PRIu64 "B", prefix, vsize);
}

/* One mode of the bench for one value size, its directory under root: 0, 1 (failed) or 2. */
int mc_bench_disk_read(const char *root, const struct disk_opts *o, uint64_t vsize);
int mc_bench_disk_write(const char *root, const struct disk_opts *o, uint64_t vsize);
int mc_bench_disk_evict(const char *root, const struct disk_opts *o, uint64_t vsize);

/* The subcommand (bench_main.c). */
int mc_bench_disk(int argc, char **argv);

#endif
