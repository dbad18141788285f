/*
 * bench_promotion.c - `mooncake_bench promotion`: what promotion on hit buys (DESIGN.md §1.1).
 *
 * Every case starts its own mooncake_master (from --bin: --enable_offload --offload_on_evict,
 * --promotion_on_hit unless the case measures "off", threshold 2, a --lease_ms read lease) on
 * free loopback ports, and stops it at the end. Disk stores live under --dir (O_DIRECT: no
 * page cache) and are removed afterwards.
 *
 * latency (per --sizes value, default 4MiB), two readers:
 *   holder  the bench process is the holder: a client with a --segment_size DRAM segment and
 *           a disk store; it reads its own keys (disk-only: its store directly; promoted: a
 *           memcpy out of its own segment);
 *   remote  a mooncake_client daemon is the holder; the bench's client has no DRAM and reads
 *           over loopback TCP (disk-only: one PeerDiskRead; promoted: a peer read).
 *   Method: Put 2 × segment + --keys objects so eviction offloads most of them, take --keys
 *   LOCAL_DISK-only keys, read each twice (both reads served by the disk; the second one
 *   admits the promotion: phase disk_only), wait until each lists a MEMORY replica, then read
 *   each --runs times (phase promoted). Only reads the library reports as served by the tier of
 *   the phase are counted. Promotion lag: the master's master_promotion_lag_seconds histogram
 *   (admission to COMPLETE, master clock) scraped before and after, the difference's p50 / p99
 *   interpolated inside its buckets (1 ms, 2 ms, 4 ms, ... bounds).
 *   JSON: case=get/<phase>/<reader>/<size>, phase, reader, size; the promoted line carries
 *   ref = the disk_only p50 and ratio = disk_only p50 / promoted p50 (the speed-up), and
 *   lag_p50_ms / lag_p99_ms; a line case=lag/<reader>/<size> has the lag as p50_ms / p99_ms.
 *
 * zipf (unless --zipf_objects 0): --zipf_objects keys of --zipf_size (default 10000 × 1 MiB),
 *   DRAM = --dram_ratio (0.2) of the data, the bench process the holder, --threads readers
 *   drawing keys from a Zipf(--zipf_s = 0.99) distribution over a fixed random permutation of
 *   the keys; --warmup seconds (10) unmeasured, then --seconds (60) measured; promotion off,
 *   then on, each on a fresh master and store. JSON: case=zipf/<off|on>, promotion, ops_per_s,
 *   bytes_per_s, p50/p99 per Get, hit_memory (fraction of Gets served by DRAM), promoted (tasks
 *   completed in the measured window); the "on" line has ref = the off ops_per_s and ratio.
 *
 * oscillation (with --osc_seconds S > 0): promotion on, the bench the holder with a
 *   --segment_size segment; --osc_hot hot keys made disk-only, then for S seconds one thread
 *   reads the hot keys round robin while another Puts fresh cold keys non-stop (DRAM held at
 *   the watermark by eviction and offload); a poller looks at every hot key's replicas every
 *   10 ms and counts its disk-only -> MEMORY transitions. JSON: case=oscillation, admitted
 *   (master_promotion_admitted_total over the window), max_admitted_per_key (the most
 *   transitions of one key seen by the poller), hot_keys, cold_puts, seconds.
 *
 * cpu (remote reader only): CPU per promotion, master + holder, of half the hot keys (case
 *   cpu/remote/<size>, see cpu_phase). --cpu_settle 1 (default) first waits until the master has
 *   no offload task in flight. DRAM is full, so each promotion's staged replica makes eviction
 *   run, and with offload on evict a DRAM-only victim is written to disk before it goes: the
 *   line also carries the master's counters over the phase (admitted, completed,
 *   rejected_watermark, candidate_retried, evicted, eviction_cycles, offload_queued,
 *   offload_completed, ...), the holder's offload loop's CPU per promotion (its thread is named
 *   mc-offload; holder_offload_loop_us) and the figure without it (cpu_us_less_offload_loop):
 *   one eviction cycle that finds DRAM-only victims queues an offload for every one it can take,
 *   so whether such a burst falls into the phase moves the full figure 2-3x.
 *
 * Profiling: MC_BENCH_PROMO_PROFILE_S=S in the environment prints the master's and the holder's
 * pids before the remote case's CPU phase and waits S seconds, for `perf record -p`; after it,
 * it says so and waits S seconds again.
 *
 * Files: this one holds the options (one table, bench_opts.c), the processes, the metrics and
 * the latency cases; the Zipf runs are in bench_promotion_zipf.c, the oscillation run in
 * bench_promotion_osc.c (what they share: bench_promotion.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/parse.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "tools/bench_util.h"
#include "tools/metrics_scrape.h"
#include "tools/proc_harness.h"
#include "tools/bench_promotion.h"

#define NBUCKETS 64
#define SCRAPE_TIMEOUT_MS 5000 /* one /metrics GET; a master that stops answering fails it */

uint64_t mc_promo_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- processes (tools/proc_harness.h) ------------------------------------------------------- */

void mc_promo_stop(struct mc_proc *c)
{
    mc_proc_stop(c, SIGTERM, 10000);
}

int mc_promo_start_master(const struct promo_opts *o, struct promo_cluster *cl, bool promotion)
{
    char path[PATH_MAX + 32], lease[64];
    const char *argv[] = {path,
                          "--rpc_port=0",
                          "--rpc_address=127.0.0.1",
                          "--metrics_port=0",
                          "--metrics_host=127.0.0.1",
                          "--log_level=error",
                          "--enable_offload",
                          "--offload_on_evict",
                          "--promotion_admission_threshold=2",
                          lease,
                          promotion ? "--promotion_on_hit" : NULL,
                          NULL};
    struct mc_proc_ready r;
    snprintf(path, sizeof(path), "%s/mooncake_master", o->bin);
    snprintf(lease, sizeof(lease), "--default_kv_lease_ttl=%d", o->lease_ms);
    if (mc_proc_start(&cl->master, argv, NULL, MC_PROC_READY_MASTER, &r, 20000) != 0) {
        fprintf(stderr, "promotion: could not start %s\n", path);
        return -1;
    }
    snprintf(cl->rpc, sizeof(cl->rpc), "127.0.0.1:%u", r.rpc_port);
    snprintf(cl->metrics_host, sizeof(cl->metrics_host), "127.0.0.1");
    cl->metrics_port = r.metrics_port;
    return 0;
}

static int start_daemon(const struct promo_opts *o, struct promo_cluster *cl, const char *disk)
{
    char path[PATH_MAX + 32], m[128], seg[64], dp[PATH_MAX + 64], cap[64];
    const char *argv[] = {
        path, m, "--host=127.0.0.1", "--data_port=0", seg, dp, cap, "--log_level=error", NULL};
    struct mc_proc_ready r;
    snprintf(path, sizeof(path), "%s/mooncake_client", o->bin);
    snprintf(m, sizeof(m), "--master=%s", cl->rpc);
    snprintf(seg, sizeof(seg), "--segment_size=%llu", (unsigned long long)o->segment_size);
    snprintf(dp, sizeof(dp), "--disk_path=%s", disk);
    snprintf(cap, sizeof(cap), "--disk_capacity=%llu", (unsigned long long)(64ull << 30));
    if (mc_proc_start(&cl->daemon, argv, NULL, MC_PROC_READY_DAEMON, &r, 30000) != 0) {
        fprintf(stderr, "promotion: could not start %s\n", path);
        return -1;
    }
    snprintf(cl->ep, sizeof(cl->ep), "%s", r.endpoint);
    return 0;
}

/* Removes a store directory the bench made (only those: the name carries the bench's prefix). */
void mc_promo_rm_store(const char *dir)
{
    if (strstr(dir, "/mc_bench_promo."))
        mc_proc_rm_rf(dir);
}

/* ---- the lag histogram from /metrics ------------------------------------------------------- */

struct hist {
    int n;
    double le[NBUCKETS];
    double cum[NBUCKETS];
};

static int scrape(const struct promo_cluster *cl, char **out)
{
    char addr[96];
    snprintf(addr, sizeof(addr), "%s:%d", cl->metrics_host, cl->metrics_port);
    return mc_metrics_scrape(addr, SCRAPE_TIMEOUT_MS, out);
}

double mc_promo_metric(const struct promo_cluster *cl, const char *name)
{
    char *t = NULL;
    if (scrape(cl, &t) != 0)
        return -1;
    double v = mc_metrics_value(t, name);
    free(t);
    return v;
}

static void lag_hist(const struct promo_cluster *cl, struct hist *h)
{
    char *t = NULL;
    memset(h, 0, sizeof(*h));
    if (scrape(cl, &t) != 0)
        return;
    const char *pre = "master_promotion_lag_seconds_bucket{le=\"";
    for (const char *p = strstr(t, pre); p && h->n < NBUCKETS; p = strstr(p + 1, pre)) {
        const char *q = p + strlen(pre);
        h->le[h->n] = strncmp(q, "+Inf", 4) == 0 ? INFINITY : strtod(q, NULL);
        const char *sp = strchr(q, ' ');
        h->cum[h->n++] = sp ? strtod(sp + 1, NULL) : 0;
    }
    free(t);
}

/* The q-quantile (0..1) of after - before, in ms, linear inside a bucket; -1 when empty. */
static double lag_quantile(const struct hist *b, const struct hist *a, double q)
{
    if (a->n == 0 || a->n != b->n)
        return -1;
    double total = a->cum[a->n - 1] - b->cum[b->n - 1];
    if (total <= 0)
        return -1;
    double want = q * total, prev_le = 0, prev = 0;
    for (int i = 0; i < a->n; i++) {
        double c = a->cum[i] - b->cum[i];
        if (c >= want) {
            if (isinf(a->le[i]))
                return prev_le * 1e3;
            double f = c > prev ? (want - prev) / (c - prev) : 1;
            return (prev_le + f * (a->le[i] - prev_le)) * 1e3;
        }
        prev = c;
        prev_le = a->le[i];
    }
    return -1;
}

/* ---- helpers ------------------------------------------------------------------------------- */

void mc_promo_fill(uint8_t *buf, uint64_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
}

static int put_retry(struct mc_client *c, const char *key, const void *buf, uint64_t len)
{
    uint64_t deadline = mc_now_ms() + 30000;
    int rc;
    while ((rc = mc_put(c, key, buf, len, NULL)) != 0 && mc_now_ms() < deadline)
        usleep(5000);
    return rc;
}

/* 1 MEMORY, 2 LOCAL_DISK (bits) of COMPLETE replicas. */
int mc_promo_tiers_of(struct mc_client *c, const char *key)
{
    struct mc_object_info info;
    int t = 0;
    if (mc_query(c, key, &info) != 0)
        return 0;
    for (size_t k = 0; k < info.replica_count; k++)
        if (info.replicas[k].status == MC_REPLICA_COMPLETE)
            t |= info.replicas[k].type == MC_REPLICA_LOCAL_DISK ? 2 : 1;
    mc_object_info_free(&info);
    return t;
}

/* One Get of key into buf; *ms its latency, *tier what served it. */
int64_t mc_promo_timed_get(struct mc_client *c, const char *key, void *buf, size_t cap, double *ms,
                           int *tier)
{
    const char *kp = key;
    void *bp = buf;
    int64_t res = 0;
    uint64_t t0 = mc_promo_now_us();
    int rc = mc_batch_get_tiers(c, 1, &kp, &bp, &cap, &res, tier);
    *ms = (double)(mc_promo_now_us() - t0) / 1e3;
    return rc ? rc : res;
}

static void size_name(uint64_t size, char *buf, size_t cap)
{
    if (size >= (1u << 20) && size % (1u << 20) == 0)
        snprintf(buf, cap, "%lluMiB", (unsigned long long)(size >> 20));
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, cap, "%lluKiB", (unsigned long long)(size >> 10));
    else
        snprintf(buf, cap, "%lluB", (unsigned long long)size);
}

int mc_promo_open_client(const char *rpc, uint64_t seg, const char *disk, uint64_t disk_cap,
                         struct mc_client **out)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = rpc;
    cfg.segment_size = seg;
    cfg.disk_path = disk;
    cfg.disk_capacity = disk_cap;
    cfg.put_retry_window_ms = 5000;
    cfg.log_level = MC_CLIENT_LOG_ERROR;
    int rc = mc_client_open(&cfg, out);
    if (rc)
        fprintf(stderr, "promotion: cannot open a client on %s: %s\n", rpc, mc_strerror(rc));
    return rc;
}

/* Puts n keys "<prefix>-<i>" of size bytes. */
int mc_promo_put_keys(struct mc_client *c, const char *prefix, int n, uint64_t size, uint8_t *buf)
{
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s-%d", prefix, i);
        mc_promo_fill(buf, size, (uint64_t)i + 1);
        int rc = put_retry(c, key, buf, size);
        if (rc) {
            fprintf(stderr, "promotion: put %s: %s\n", key, mc_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* ---- CPU of the cluster's processes --------------------------------------------------------- */

#define MAX_THREADS 512

/* The CPU time (ns) of each live thread of a process, from /proc/PID/task/TID/schedstat (exact,
 * unlike the 10 ms ticks of /proc/PID/stat). */
struct thr_cpu {
    int n;
    int tid[MAX_THREADS];
    uint64_t ns[MAX_THREADS];
    bool offload[MAX_THREADS]; /* the holder's offload loop (its thread is named mc-offload) */
};

static void thr_cpu_read(pid_t pid, struct thr_cpu *t)
{
    char path[64];
    t->n = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = pid > 0 ? opendir(path) : NULL;
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && t->n < MAX_THREADS) {
        if (e->d_name[0] == '.')
            continue;
        char f[128];
        snprintf(f, sizeof(f), "/proc/%d/task/%.32s/schedstat", (int)pid, e->d_name);
        FILE *fp = fopen(f, "r");
        unsigned long long ns = 0;
        if (fp) {
            if (fscanf(fp, "%llu", &ns) == 1) {
                char comm[32] = "";
                snprintf(f, sizeof(f), "/proc/%d/task/%.32s/comm", (int)pid, e->d_name);
                FILE *cp = fopen(f, "r");
                if (cp) {
                    if (!fgets(comm, sizeof(comm), cp))
                        comm[0] = '\0';
                    fclose(cp);
                }
                t->offload[t->n] = strncmp(comm, "mc-offload", 10) == 0;
                t->tid[t->n] = atoi(e->d_name);
                t->ns[t->n++] = ns;
            }
            fclose(fp);
        }
    }
    closedir(d);
}

/* CPU (ns) the process used from a to b: per thread, a thread born since counting whole; a
 * thread that ended in between loses only its time since a (it cannot be read any more).
 * offload_only: only the offload loop's thread. */
static double thr_cpu_delta_sel(const struct thr_cpu *a, const struct thr_cpu *b, bool offload_only)
{
    double sum = 0;
    for (int i = 0; i < b->n; i++) {
        if (offload_only && !b->offload[i])
            continue;
        uint64_t base = 0;
        for (int j = 0; j < a->n; j++)
            if (a->tid[j] == b->tid[i]) {
                base = a->ns[j] <= b->ns[i] ? a->ns[j] : b->ns[i];
                break;
            }
        sum += (double)(b->ns[i] - base);
    }
    return sum;
}

static double thr_cpu_delta(const struct thr_cpu *a, const struct thr_cpu *b)
{
    return thr_cpu_delta_sel(a, b, false);
}

struct cpu_mark {
    struct thr_cpu master, holder;
    uint64_t at_us;
};

/* The master's counters around the CPU phase (one scrape each side, outside the windows): what
 * the promotions' CPU paid for. */
static const char *const cpu_counters[][2] = {
    {"master_promotion_admitted_total", "admitted"},
    {"master_promotion_completed_total", "completed"},
    {"master_promotion_rejected_watermark_total", "rejected_watermark"},
    {"master_promotion_candidate_retried_total", "candidate_retried"},
    {"master_promotion_candidate_dropped_total", "candidate_dropped"},
    {"master_evicted_key_count", "evicted"},
    {"master_successful_evictions_total", "eviction_cycles"},
    {"master_offload_queued_total", "offload_queued"},
    {"master_offload_completed_total", "offload_completed"},
};
#define NCPU_COUNTERS (sizeof(cpu_counters) / sizeof(cpu_counters[0]))

static void counters_read(const struct promo_cluster *cl, double *v)
{
    char *t = NULL;
    for (size_t i = 0; i < NCPU_COUNTERS; i++)
        v[i] = -1;
    if (scrape(cl, &t) != 0)
        return;
    for (size_t i = 0; i < NCPU_COUNTERS; i++)
        v[i] = mc_metrics_value(t, cpu_counters[i][0]);
    free(t);
}

/* Waits (bounded, 20 s) until the master has no offload task in flight: the eviction offloads
 * the Puts before the phase caused are then done, and the phase's CPU is not theirs. */
static double settle_offloads(const struct promo_cluster *cl)
{
    uint64_t deadline = mc_now_ms() + 20000;
    double f = 0;
    while (mc_now_ms() < deadline && (f = mc_promo_metric(cl, "master_offload_in_flight")) > 0)
        usleep(10000);
    return f;
}

static void cpu_mark(const struct promo_cluster *cl, struct cpu_mark *c)
{
    thr_cpu_read(cl->master.pid, &c->master);
    thr_cpu_read(cl->daemon.pid, &c->holder);
    c->at_us = mc_promo_now_us();
}

/* Waits (bounded) until the master counts want more completed or failed promotions than base:
 * its /metrics, polled every 10 ms, so the wait costs the master almost nothing (no Query per
 * key). Returns the completed ones. */
static int wait_promoted(const struct promo_cluster *cl, double base_done, double base_fail,
                         int want)
{
    uint64_t deadline = mc_now_ms() + 20000;
    double done = 0;
    while (mc_now_ms() < deadline) {
        done = mc_promo_metric(cl, "master_promotion_completed_total") - base_done;
        double failed = mc_promo_metric(cl, "master_promotion_failed_total") - base_fail;
        if (done + failed >= want)
            break;
        usleep(10000);
    }
    return (int)done;
}

/* The promotion CPU of the remote case, master + holder: the CPU of the second read pass and
 * the promotions it admitted (b -> c) less that of the first pass (a -> b), the same reads from
 * the disk that admit nothing; each side less its idle CPU (idle_*: ns per us, measured before)
 * over the two windows. */
static void emit_cpu(uint64_t size, const struct cpu_mark *a, const struct cpu_mark *b,
                     const struct cpu_mark *c, double idle_m, double idle_h, int promoted,
                     const double *before, const double *after, double offload_left)
{
    char name[96], sz[32];
    struct mc_bench_result r;
    double w1 = (double)(b->at_us - a->at_us), w2 = (double)(c->at_us - b->at_us);
    double m = (thr_cpu_delta(&b->master, &c->master) - idle_m * w2) -
               (thr_cpu_delta(&a->master, &b->master) - idle_m * w1);
    double h = (thr_cpu_delta(&b->holder, &c->holder) - idle_h * w2) -
               (thr_cpu_delta(&a->holder, &b->holder) - idle_h * w1);
    /* the holder's offload loop: the offloads of what the promotions' evictions displaced
     * (mode B writes a DRAM-only victim to disk before it goes); its idle CPU is nil */
    double ho = thr_cpu_delta_sel(&b->holder, &c->holder, true) -
                thr_cpu_delta_sel(&a->holder, &b->holder, true);
    double per = promoted > 0 ? 1.0 / promoted / 1e3 : 0; /* ns total -> us per promotion */
    double la[3] = {0, 0, 0};
    size_name(size, sz, sizeof(sz));
    snprintf(name, sizeof(name), "cpu/remote/%s", sz);
    mc_bench_result_init(&r, "promotion", name);
    r.runs = promoted;
    r.ms = (m + h) * per / 1e3;
    mc_bench_add_num(&r, "size", (double)size);
    mc_bench_add_num(&r, "promoted", promoted);
    mc_bench_add_num(&r, "cpu_us_per_promotion", (m + h) * per);
    mc_bench_add_num(&r, "master_us_per_promotion", m * per);
    mc_bench_add_num(&r, "holder_us_per_promotion", h * per);
    mc_bench_add_num(&r, "holder_offload_loop_us", ho * per);
    mc_bench_add_num(&r, "cpu_us_less_offload_loop", (m + h - ho) * per);
    for (size_t i = 0; i < NCPU_COUNTERS; i++)
        if (before[i] >= 0 && after[i] >= 0)
            mc_bench_add_num(&r, cpu_counters[i][1], after[i] - before[i]);
    mc_bench_add_num(&r, "offload_in_flight_at_start", offload_left);
    if (getloadavg(la, 3) > 0)
        mc_bench_add_num(&r, "loadavg1", la[0]);
    mc_bench_emit(&r);
}

/* GetReplicaList of "lat-<i>" for each i of idx over a bare RPC connection: the master's
 * read (and admission) only, no bytes moved, so the holder does nothing for it. */
static void bare_gets(struct mc_rpc_client *rc, const int *idx, int n)
{
    char key[64];
    for (int k = 0; k < n; k++) {
        snprintf(key, sizeof(key), "lat-%d", idx[k]);
        Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
        req.key = key;
        ProtobufCMessage *resp = NULL;
        (void)mc_rpc_client_call_msg(rc, MC_METHOD_GET_REPLICA_LIST, &req.base,
                                     &mc__get_replica_list_response__descriptor, 0, &resp);
        if (resp)
            protobuf_c_message_free_unpacked(resp, NULL);
    }
}

/* CPU per promotion, master + holder (case cpu/remote/<size>): keys idx[0..n) read twice with
 * bare GetReplicaList calls (the second pass admits each), then the wait for their promotions.
 * The promotions' CPU = (second pass + wait) - (first pass), each less the processes' idle CPU
 * measured just before. */
static void cpu_phase(const struct promo_cluster *cl, const int *idx, int n, uint64_t size,
                      bool settle)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    char host[64];
    snprintf(host, sizeof(host), "%s", cl->rpc);
    char *colon = strrchr(host, ':');
    if (!colon)
        return;
    *colon = '\0';
    cc.host = host;
    cc.port = (uint16_t)atoi(colon + 1);
    cc.call_timeout_ms = 30000;
    struct mc_rpc_client *rc = NULL;
    if (mc_rpc_client_new(&cc, &rc) != 0 || mc_rpc_client_connect(rc) != 0) {
        fprintf(stderr, "promotion: cpu: cannot connect to %s\n", cl->rpc);
        mc_rpc_client_free(rc);
        return;
    }
    static struct cpu_mark cm[3], idle0, idle1; /* 16 KiB each: off the stack */
    double before[NCPU_COUNTERS], after[NCPU_COUNTERS];
    double left = settle ? settle_offloads(cl) : mc_promo_metric(cl, "master_offload_in_flight");
    cpu_mark(cl, &idle0);
    usleep(300000);
    cpu_mark(cl, &idle1);
    double w = (double)(idle1.at_us - idle0.at_us);
    double idle_m = w > 0 ? thr_cpu_delta(&idle0.master, &idle1.master) / w : 0;
    double idle_h = w > 0 ? thr_cpu_delta(&idle0.holder, &idle1.holder) / w : 0;
    double done0 = mc_promo_metric(cl, "master_promotion_completed_total");
    double fail0 = mc_promo_metric(cl, "master_promotion_failed_total");
    /* MC_BENCH_PROMO_PROFILE_S=S: name the two processes and wait S s first, so a profiler
     * can attach to them for this phase (the figures printed stay comparable) */
    const char *hold = getenv("MC_BENCH_PROMO_PROFILE_S");
    if (hold && atoi(hold) > 0) {
        fprintf(stderr, "promotion: cpu phase in %d s: master=%d holder=%d\n", atoi(hold),
                (int)cl->master.pid, (int)cl->daemon.pid);
        sleep((unsigned)atoi(hold));
    }
    counters_read(cl, before);
    cpu_mark(cl, &cm[0]);
    bare_gets(rc, idx, n);
    cpu_mark(cl, &cm[1]);
    bare_gets(rc, idx, n);
    int done = wait_promoted(cl, done0, fail0, n);
    cpu_mark(cl, &cm[2]);
    counters_read(cl, after);
    if (hold && atoi(hold) > 0) {
        fprintf(stderr, "promotion: cpu phase done\n");
        sleep((unsigned)atoi(hold));
    }
    emit_cpu(size, &cm[0], &cm[1], &cm[2], idle_m, idle_h, done, before, after, left);
    mc_rpc_client_free(rc);
}

/* ---- latency ------------------------------------------------------------------------------- */

static void emit_lat(const char *phase, const char *reader, uint64_t size, double *lat, int n,
                     double ref_p50, double lag50, double lag99)
{
    char name[96], sz[32];
    struct mc_bench_result r;
    double total = 0;
    size_name(size, sz, sizeof(sz));
    snprintf(name, sizeof(name), "get/%s/%s/%s", phase, reader, sz);
    mc_bench_result_init(&r, "promotion", name);
    for (int i = 0; i < n; i++)
        total += lat[i];
    r.runs = n;
    r.p99_ms = mc_bench_percentile(lat, (size_t)n, 99);
    r.p50_ms = mc_bench_percentile(lat, (size_t)n, 50);
    r.ms = r.p50_ms;
    r.ops_per_s = total > 0 ? n / (total / 1e3) : 0;
    r.bytes_per_s = r.ops_per_s * (double)size;
    if (ref_p50 > 0 && r.p50_ms > 0)
        mc_bench_set_ref(&r, ref_p50, ref_p50 / r.p50_ms);
    mc_bench_add_str(&r, "phase", phase);
    mc_bench_add_str(&r, "reader", reader);
    mc_bench_add_num(&r, "size", (double)size);
    if (lag50 >= 0) {
        mc_bench_add_num(&r, "lag_p50_ms", lag50);
        mc_bench_add_num(&r, "lag_p99_ms", lag99);
    }
    mc_bench_emit(&r);
}

/* --cpu_room: Removes every "lat-<i>" that is not a hot key (force: their leases), then lets
 * the deletes settle, so the promotions measured find DRAM room and cause no eviction. */
static void free_dram(struct mc_client *c, const int *hot, int nhot, int nkeys)
{
    char key[64];
    bool *is_hot = calloc((size_t)nkeys, sizeof(*is_hot));
    if (!is_hot)
        return;
    for (int k = 0; k < nhot; k++)
        is_hot[hot[k]] = true;
    for (int i = 0; i < nkeys; i++) {
        if (is_hot[i])
            continue;
        snprintf(key, sizeof(key), "lat-%d", i);
        (void)mc_remove(c, key, true);
    }
    free(is_hot);
    usleep(500000);
}

static int latency_case(const struct promo_opts *o, uint64_t size, bool remote)
{
    const char *reader = remote ? "remote" : "holder";
    struct promo_cluster cl = {.master.out_fd = -1, .daemon.out_fd = -1};
    struct mc_client *c = NULL;
    char disk[PATH_MAX + 16], key[64];
    int rc = -1, nkeys = (int)(2 * o->segment_size / size) + o->keys;
    int *hot = calloc((size_t)nkeys, sizeof(*hot)), nhot = 0;
    double *dlat = calloc((size_t)o->keys * 2, sizeof(double));
    double *plat = calloc((size_t)o->keys * (size_t)o->runs, sizeof(double));
    size_t cap = (size + 4095) / 4096 * 4096;
    uint8_t *buf = aligned_alloc(4096, cap);
    snprintf(disk, sizeof(disk), "%s/%s", o->dir, reader);
    if (!hot || !dlat || !plat || !buf || mc_promo_start_master(o, &cl, true) != 0)
        goto out;
    if (remote) {
        if (start_daemon(o, &cl, disk) != 0 || mc_promo_open_client(cl.rpc, 0, NULL, 0, &c) != 0)
            goto out;
    } else if (mc_promo_open_client(cl.rpc, o->segment_size, disk, 64ull << 30, &c) != 0) {
        goto out;
    }
    if (mc_promo_put_keys(c, "lat", nkeys, size, buf) != 0)
        goto out;
    /* disk-only keys, after the offloads settle */
    uint64_t deadline = mc_now_ms() + 30000;
    do {
        nhot = 0;
        for (int i = 0; i < nkeys && nhot < o->keys; i++) {
            snprintf(key, sizeof(key), "lat-%d", i);
            if (mc_promo_tiers_of(c, key) == 2)
                hot[nhot++] = i;
        }
        if (nhot >= o->keys)
            break;
        usleep(50000);
    } while (mc_now_ms() < deadline);
    if (nhot < 1) {
        fprintf(stderr, "promotion: no LOCAL_DISK-only key appeared\n");
        goto out;
    }
    struct hist h0, h1;
    lag_hist(&cl, &h0);
    /* remote: half the hot keys measure the CPU of their promotions, the rest the latency */
    if (remote && nhot >= 2) {
        int half = nhot / 2;
        if (o->cpu_room)
            free_dram(c, hot, nhot, nkeys);
        cpu_phase(&cl, hot + half, nhot - half, size, o->cpu_settle != 0);
        nhot = half;
    }
    int nd = 0, np = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < nhot; k++) {
            double ms;
            int tier = -1;
            snprintf(key, sizeof(key), "lat-%d", hot[k]);
            int64_t n = mc_promo_timed_get(c, key, buf, cap, &ms, &tier);
            if (n == (int64_t)size && tier == MC_REPLICA_LOCAL_DISK)
                dlat[nd++] = ms;
        }
    }
    /* every hot key promoted (bounded wait) */
    int promoted = 0;
    deadline = mc_now_ms() + 20000;
    while (mc_now_ms() < deadline) {
        promoted = 0;
        for (int k = 0; k < nhot; k++) {
            snprintf(key, sizeof(key), "lat-%d", hot[k]);
            promoted += (mc_promo_tiers_of(c, key) & 1) != 0;
        }
        if (promoted == nhot)
            break;
        usleep(5000);
    }
    lag_hist(&cl, &h1);
    if (promoted < nhot)
        fprintf(stderr, "promotion: only %d of %d hot keys promoted within 20 s\n", promoted, nhot);
    for (int r = 0; r < o->runs; r++)
        for (int k = 0; k < nhot; k++) {
            double ms;
            int tier = -1;
            snprintf(key, sizeof(key), "lat-%d", hot[k]);
            int64_t n = mc_promo_timed_get(c, key, buf, cap, &ms, &tier);
            if (n == (int64_t)size && tier == MC_REPLICA_MEMORY)
                plat[np++] = ms;
        }
    double lag50 = lag_quantile(&h0, &h1, 0.5), lag99 = lag_quantile(&h0, &h1, 0.99);
    double d50 = nd ? mc_bench_percentile(dlat, (size_t)nd, 50) : 0;
    emit_lat("disk_only", reader, size, dlat, nd, 0, -1, -1);
    emit_lat("promoted", reader, size, plat, np, d50, lag50, lag99);
    {
        char name[96], sz[32];
        struct mc_bench_result r;
        size_name(size, sz, sizeof(sz));
        snprintf(name, sizeof(name), "lag/%s/%s", reader, sz);
        mc_bench_result_init(&r, "promotion", name);
        r.runs = promoted;
        r.ms = r.p50_ms = lag50;
        r.p99_ms = lag99;
        mc_bench_add_str(&r, "reader", reader);
        mc_bench_add_num(&r, "lag_p50_ms", lag50);
        mc_bench_add_num(&r, "lag_p99_ms", lag99);
        mc_bench_emit(&r);
    }
    rc = 0;
out:
    mc_client_close(c);
    mc_promo_stop(&cl.daemon);
    mc_promo_stop(&cl.master);
    mc_promo_rm_store(disk);
    free(hot);
    free(dlat);
    free(plat);
    free(buf);
    return rc;
}

/* ---- main ---------------------------------------------------------------------------------- */

/* Fills o from the command line (defaults first): 0 to run, else the exit code. */
static int parse(int argc, char **argv, struct promo_opts *o)
{
    const char *reader = "both", *bin = NULL, *dir = NULL;
    char self[PATH_MAX] = ".";
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
    }
    *o = (struct promo_opts){.sizes = {4u << 20},
                             .nsizes = 1,
                             .keys = 16,
                             .runs = 20,
                             .segment_size = 128u << 20,
                             .zipf_objects = 10000,
                             .zipf_size = 1u << 20,
                             .dram_ratio = 0.2,
                             .zipf_s = 0.99,
                             .warmup = 10,
                             .seconds = 60,
                             .threads = 4,
                             .osc_hot = 8,
                             .lease_ms = 100,
                             .cpu_settle = 1,
                             .seed = 0x5eed};
    const struct mc_bench_opt opts[] = {
        {.name = "sizes",
         .type = MC_BENCH_SIZES,
         .dst = o->sizes,
         .arg = "LIST",
         .help = "value sizes of the latency cases",
         .count = &o->nsizes,
         .max = MAX_SIZES},
        {.name = "keys",
         .type = MC_BENCH_INT,
         .dst = &o->keys,
         .arg = "N",
         .help = "hot keys per latency case (0 skips the latency cases)"},
        {.name = "runs",
         .type = MC_BENCH_INT,
         .dst = &o->runs,
         .arg = "N",
         .help = "promoted reads of each key"},
        {.name = "segment_size",
         .type = MC_BENCH_SIZE,
         .dst = &o->segment_size,
         .arg = "SIZE",
         .help = "the holder's DRAM segment (at least 8MiB)"},
        {.name = "reader",
         .type = MC_BENCH_STR,
         .dst = &reader,
         .arg = "WHO",
         .help = "holder, remote or both: who reads in the latency cases"},
        {.name = "zipf_objects",
         .type = MC_BENCH_INT,
         .dst = &o->zipf_objects,
         .arg = "N",
         .help = "keys of the Zipf runs (0 skips them, else at least 10)"},
        {.name = "zipf_size",
         .type = MC_BENCH_SIZE,
         .dst = &o->zipf_size,
         .arg = "SIZE",
         .help = "value size of the Zipf runs (at most 64MiB)"},
        {.name = "dram_ratio",
         .type = MC_BENCH_DOUBLE,
         .dst = &o->dram_ratio,
         .arg = "R",
         .help = "DRAM as a fraction of the Zipf data, 0 < R < 1"},
        {.name = "zipf_s",
         .type = MC_BENCH_DOUBLE,
         .dst = &o->zipf_s,
         .arg = "S",
         .help = "the Zipf exponent"},
        {.name = "warmup",
         .type = MC_BENCH_INT,
         .dst = &o->warmup,
         .arg = "SECONDS",
         .help = "unmeasured Zipf reads first"},
        {.name = "seconds",
         .type = MC_BENCH_INT,
         .dst = &o->seconds,
         .arg = "SECONDS",
         .help = "measured Zipf reads"},
        {.name = "threads",
         .type = MC_BENCH_INT,
         .dst = &o->threads,
         .arg = "N",
         .help = "Zipf readers"},
        {.name = "osc_seconds",
         .type = MC_BENCH_INT,
         .dst = &o->osc_seconds,
         .arg = "SECONDS",
         .help = "length of the oscillation run (0 skips it)"},
        {.name = "osc_hot",
         .type = MC_BENCH_INT,
         .dst = &o->osc_hot,
         .arg = "N",
         .help = "hot keys of the oscillation run"},
        {.name = "lease_ms",
         .type = MC_BENCH_INT,
         .dst = &o->lease_ms,
         .arg = "MS",
         .help = "the master's read lease (--default_kv_lease_ttl)"},
        {.name = "cpu_room",
         .type = MC_BENCH_INT,
         .dst = &o->cpu_room,
         .arg = "0|1",
         .help = "1: the CPU case first Removes every non-hot key (promotions cause no eviction)"},
        {.name = "cpu_settle",
         .type = MC_BENCH_INT,
         .dst = &o->cpu_settle,
         .arg = "0|1",
         .help = "1: the CPU case waits until no offload task is in flight before it measures"},
        {.name = "bin",
         .type = MC_BENCH_STR,
         .dst = &bin,
         .arg = "DIR",
         .help = "where mooncake_master and mooncake_client are",
         .dflt = "this executable's directory"},
        {.name = "dir",
         .type = MC_BENCH_STR,
         .dst = &dir,
         .arg = "DIR",
         .help = "where the disk stores go (a new directory inside, removed afterwards)",
         .dflt = "$TMPDIR or /tmp"},
        {.name = "seed",
         .type = MC_BENCH_U64,
         .dst = &o->seed,
         .arg = "N",
         .help = "seed of the Zipf draws and permutation"},
    };
    struct mc_bench_cli cli = {
        .bench = "promotion",
        .about = "Hot-key Get latency while LOCAL_DISK-only vs after promotion (reader in the\n"
                 "holder's process and in another one), promotion lag\n"
                 "(master_promotion_lag_seconds), Zipf Get throughput with promotion off vs on,\n"
                 "and (with --osc_seconds) promotions per hot key while cold Puts keep DRAM\n"
                 "full. Starts its own mooncake_master (+ mooncake_client) from --bin.",
        .opts = opts,
        .nopts = sizeof(opts) / sizeof(opts[0])};
    int prc = mc_bench_opts_parse(&cli, argc, argv);
    if (prc)
        return prc == 1 ? 1 : 2;
    o->holder = !strcmp(reader, "holder") || !strcmp(reader, "both");
    o->remote = !strcmp(reader, "remote") || !strcmp(reader, "both");
    const char *bad =
        !o->holder && !o->remote       ? "--reader must be holder, remote or both"
        : o->segment_size < (8u << 20) ? "--segment_size must be at least 8MiB"
        : o->zipf_size == 0 || o->zipf_size > (64u << 20) ? "--zipf_size must be 1 B .. 64MiB"
        : o->keys < 0                                     ? "--keys must not be negative"
        : o->runs < 1                                     ? "--runs must be at least 1"
        : o->zipf_objects < 0 || (o->zipf_objects > 0 && o->zipf_objects < 10)
            ? "--zipf_objects must be 0 or at least 10"
        : o->dram_ratio <= 0 || o->dram_ratio >= 1 ? "--dram_ratio must be between 0 and 1"
        : o->warmup < 0                            ? "--warmup must not be negative"
        : o->seconds < 1                           ? "--seconds must be at least 1"
        : o->osc_seconds < 0                       ? "--osc_seconds must not be negative"
        : o->osc_hot < 1                           ? "--osc_hot must be at least 1"
        : o->lease_ms < 1                          ? "--lease_ms must be at least 1"
        : o->cpu_room != 0 && o->cpu_room != 1     ? "--cpu_room must be 0 or 1"
        : o->cpu_settle != 0 && o->cpu_settle != 1 ? "--cpu_settle must be 0 or 1"
                                                   : NULL;
    if (bad) {
        fprintf(stderr, "bench promotion: %s\n", bad);
        mc_bench_opts_usage(stderr, &cli);
        return 2;
    }
    snprintf(o->bin, sizeof(o->bin), "%s", bin ? bin : self);
    /* the parent of the store directory (empty: $TMPDIR or /tmp), made in mc_bench_promotion */
    snprintf(o->dir, sizeof(o->dir), "%s", dir ? dir : "");
    return 0;
}

int mc_bench_promotion(int argc, char **argv)
{
    struct promo_opts o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", o.dir);
    if (mc_proc_mkdtemp(o.dir, sizeof(o.dir), parent[0] ? parent : NULL, "mc_bench_promo") != 0) {
        fprintf(stderr, "promotion: cannot create a directory in %s: %s\n",
                parent[0] ? parent : "$TMPDIR", strerror(errno));
        return 1;
    }
    int rc = 0;
    for (int i = 0; o.keys > 0 && i < o.nsizes; i++) {
        if (o.holder && latency_case(&o, o.sizes[i], false) != 0)
            rc = 1;
        if (o.remote && latency_case(&o, o.sizes[i], true) != 0)
            rc = 1;
    }
    if (o.zipf_objects > 0) {
        double off = 0, on = 0;
        if (mc_promo_zipf_case(&o, false, &off, 0) != 0 ||
            mc_promo_zipf_case(&o, true, &on, off) != 0)
            rc = 1;
    }
    if (o.osc_seconds > 0 && mc_promo_osc_case(&o) != 0)
        rc = 1;
    mc_promo_rm_store(o.dir);
    return rc;
}
