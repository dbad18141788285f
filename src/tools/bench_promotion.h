/*
 * bench_promotion.h - what the files of `mooncake_bench promotion` share: its options, the
 * processes it starts and its helpers (bench_promotion.c: options, processes, metrics,
 * latency cases; bench_promotion_zipf.c: the Zipf runs; bench_promotion_osc.c: the oscillation
 * run). The bench is described in bench_promotion.c.
 */
#ifndef MC_TOOLS_BENCH_PROMOTION_H
#define MC_TOOLS_BENCH_PROMOTION_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/client.h"
#include "tools/proc_harness.h"

#define MAX_SIZES 8

struct promo_opts {
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    int keys, runs;
    uint64_t segment_size;
    int zipf_objects;
    uint64_t zipf_size;
    double dram_ratio, zipf_s;
    int warmup, seconds, threads;
    int osc_seconds, osc_hot;
    int lease_ms;
    int cpu_room;   /* 1: the CPU case frees DRAM first (Removes every non-hot key) */
    int cpu_settle; /* 1: the CPU case waits for the earlier offloads to end first */
    bool holder, remote;
    uint64_t seed;
    char bin[PATH_MAX];
    char dir[PATH_MAX];
};

struct promo_cluster {
    struct mc_proc master, daemon;
    char rpc[64], metrics_host[64];
    int metrics_port;
    char ep[256];
};

/* Monotonic microseconds. */
uint64_t mc_promo_now_us(void);
/* Stops a process the bench started (SIGTERM, then SIGKILL after 10 s). */
void mc_promo_stop(struct mc_proc *c);
/* Starts mooncake_master from o->bin on free loopback ports (promotion on hit or not). */
int mc_promo_start_master(const struct promo_opts *o, struct promo_cluster *cl, bool promotion);
/* Removes a store directory the bench made (only those: the name carries its prefix). */
void mc_promo_rm_store(const char *dir);
/* A metric of the master's /metrics (-1 when it cannot be read or is absent). */
double mc_promo_metric(const struct promo_cluster *cl, const char *name);
/* Fills buf with bytes generated from seed. */
void mc_promo_fill(uint8_t *buf, uint64_t len, uint64_t seed);
/* 1 MEMORY, 2 LOCAL_DISK (bits) of COMPLETE replicas. */
int mc_promo_tiers_of(struct mc_client *c, const char *key);
/* One Get of key into buf; *ms its latency, *tier what served it. */
int64_t mc_promo_timed_get(struct mc_client *c, const char *key, void *buf, size_t cap, double *ms,
                           int *tier);
/* A client of the master at rpc with a seg-byte DRAM segment and (disk non-NULL) a disk store. */
int mc_promo_open_client(const char *rpc, uint64_t seg, const char *disk, uint64_t disk_cap,
                         struct mc_client **out);
/* Puts n keys "<prefix>-<i>" of size bytes. */
int mc_promo_put_keys(struct mc_client *c, const char *prefix, int n, uint64_t size, uint8_t *buf);

/* The Zipf run with promotion off or on (bench_promotion_zipf.c): its ops/s in *ops_out;
 * ref_ops (> 0) is the off run's, reported as ref and ratio. 0 or -1. */
int mc_promo_zipf_case(const struct promo_opts *o, bool promotion, double *ops_out, double ref_ops);
/* The oscillation run (bench_promotion_osc.c). 0 or -1. */
int mc_promo_osc_case(const struct promo_opts *o);

/* The subcommand (bench_main.c). */
int mc_bench_promotion(int argc, char **argv);

#endif
