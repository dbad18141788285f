/*
 * bench_master.h - what the files of `mooncake_bench master` share (bench_master.c: the
 * event-loop load and the command line; bench_master_setup.c: client, mount, prefill, pinger;
 * bench_master_remove.c: the remove ops and their holder thread; bench_master_probe.c and
 * bench_master_hstream.c: the probe and the holder stream). Internal to mooncake_bench.
 */
#ifndef MC_TOOLS_BENCH_MASTER_H
#define MC_TOOLS_BENCH_MASTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/id.h"
#include "common/rpc_client.h"

#define FAKE_BASE 0x100000000000ull
#define SEG_SIZE (1ull << 40) /* 1 TiB of address space nobody touches */
#define KEY_FMT "key:%012u"
#define PREFILL_BATCH 512
#define MAX_BATCH 8192                  /* keys per BatchGetReplicaList call (--batch) */
#define MC_OFFLOAD_MAX_ITEMS_BENCH 1024 /* tasks per holder heartbeat */

enum op { OP_GET, OP_EXIST, OP_BATCH_GET, OP_PUT, OP_REMOVE, OP_BATCH_REMOVE };
extern const char *const mc_bm_op_names[];
#define NOPS 6

struct opts {
    const char *master;
    char host[256];
    uint16_t port;
    int conns, threads, depth, runs, batch;
    unsigned keys;
    enum op op;
    double seconds;
    uint64_t value_size;
    int prefill;
    int disk_holder;
    uint64_t seed;
    const char *bench_id; /* --bench_id: names the client and its segment (reused across runs) */
    double probe_hz;      /* --probe_hz: open-loop probe Gets per second (0: none) */
};

struct shared {
    const struct opts *o;
    struct mc_id client;
    _Atomic int stop;
    _Atomic int measuring;
    unsigned run_no;
    int pid;          /* this process's, in put keys (read once: getpid(2) is a syscall) */
    uint64_t misses;  /* Gets of keys not found (evicted or removed since the prefill) */
    uint64_t refused; /* PutStarts refused for space (NO_AVAILABLE_HANDLE) */
};

/* The open-loop probe (bench_master_probe.c): one blocking connection sends a GetReplicaList of
 * a random key every 1/hz s on a fixed schedule, whatever the answers' delays; a call's latency
 * runs from its scheduled time, so a stall shows whole (no coordinated omission). */
struct mc_bm_probe {
    struct shared *sh;
    struct mc_rpc_client *c;
    double hz;
    pthread_t th;
    _Atomic int stop;
    int started;
    uint64_t calls, misses, errors;
    double max_ms, p99_ms; /* p99_ms: set by mc_bm_probe_stop */
    double *lat_ms;
    size_t nlat;
};
int mc_bm_probe_start(struct mc_bm_probe *p, struct shared *sh, double hz);
void mc_bm_probe_stop(struct mc_bm_probe *p);
/* The fake segment's side of the DRAM holder stream (bench_master_hstream.c): a thread that
 * long-polls HolderIndexHeartbeat for the bench's client and acknowledges every drop on its
 * next poll, for the whole invocation. */
struct mc_bm_hstream {
    struct shared *sh;
    struct mc_rpc_client *c;
    pthread_t th;
    int started;
    _Atomic int stop, off;
    _Atomic uint64_t polls, items, acked, fenced;
};
int mc_bm_hstream_start(struct mc_bm_hstream *h, struct shared *sh);
void mc_bm_hstream_stop(struct mc_bm_hstream *h);
/* The bench's client and segment ids, derived from --bench_id: a second invocation with the same
 * id mounts the same segment again (the master answers "the same mount") instead of adding
 * another 1 TiB of capacity. */
struct mc_id mc_bm_derived_id(const char *name, const char *what);
/* Whether key is found (GetReplicaList answers OK). */
int mc_bm_key_exists(struct mc_rpc_client *c, const char *key);

/* A blocking client connected to o->master (NULL on failure, logged). */
struct mc_rpc_client *mc_bm_new_client(const struct opts *o);
/* Creates the --keys objects KEY_FMT (BatchPutStart/BatchPutEnd); 0 or -1. */
int mc_bm_prefill(struct shared *sh);
/* Mounts the bench's fake segment of segment_bytes (named by bench_id); 0 or -1. */
int mc_bm_mount_segment(struct mc_rpc_client *c, struct mc_id client, const char *bench_id,
                        uint64_t segment_bytes);
/* Response bytes per object of one sample call (header included), for redis-benchmark -d; 0 if
 * no key was found (misses), -1 on failure (said why). */
double mc_bm_sample_bytes_per_object(struct mc_rpc_client *c, const struct opts *o);
/* The pinger: a Ping for the bench's client every second on c, for the whole invocation. */
struct mc_bm_pinger {
    struct shared *sh;
    struct mc_rpc_client *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, started;
    pthread_t th;
};
int mc_bm_pinger_start(struct mc_bm_pinger *p);
void mc_bm_pinger_stop(struct mc_bm_pinger *p); /* a no-op if not started */
/* The remove ops (bench_master_remove.c): 0 or 1 (failed). */
int mc_bm_run_remove(struct shared *sh, struct mc_rpc_client *c);
/* --prefill with --disk_holder for the other ops: every object gets a LOCAL_DISK copy. */
int mc_bm_prefill_with_disk(struct shared *sh, struct mc_rpc_client *c);

#endif
