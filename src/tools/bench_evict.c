/*
 * bench_evict.c - `mooncake_bench evict`: one BatchEvict cycle, in process, on the selective
 * path and on a forced full path, with a latency probe running beside it.
 *
 * For each --objects count N (default 100000,1000000): a fresh master (fake clock, manual ticks,
 * --threads eviction threads, default the library's max(1, ncpu - 1)) holds N objects of 4 KiB
 * with 64-byte keys, each read once in a random order so every object has its own lease
 * deadline (1 ms TTL; the clock then jumps past all of them). For each --targets ratio t
 * (default 0.01,0.05,0.5) and each mode (selective = the library's own choice, full = the
 * single-pass full collection forced), --runs cycles of mc_master_batch_evict(t, t / 2) are
 * timed; after each one the evicted objects (exactly the oldest, as leases are distinct) are
 * Put again and read at the newest time, so every run sees the same table size.
 *
 * A probe thread issues one library call every 1 ms — PutStart+PutEnd of a small hard-pinned
 * key, GetReplicaList of a fixed key, MountSegment of a fresh segment, in turn — and records its
 * latency while nothing else runs (baseline, 300 ms before the cycles) and while a cycle runs.
 *
 * --modes selective (or full) times one mode only; --no-probe runs no probe thread (upstream's
 * batch_evict_bench has nothing else in its process). With --runs 1 the one cycle is a fresh
 * table's first, which is what upstream's bench times.
 *
 * Output: one JSON line per (N, t, mode) with ms (median of runs), p50/p99 over runs, objects,
 * target, path (selective | full, what the cycle did), cycle_path (selective | full_bypass |
 * full_fallback | by_cut), materialized, refills, k, evicted, census, ns_per_census_obj,
 * ns_per_evicted, first_ms (the first run), user_ms / sys_ms / minflt (the cycle thread's CPU
 * and minor page faults, medians: on a loaded machine CPU time moves less than wall time),
 * runs_ms / runs_cpu_ms / runs_census (each run's wall ms, CPU ms, census entries, "/"-joined;
 * at most 256 characters each);
 * one "probe" line per N; and the gates, checked here (exit 1 if one fails):
 *   - selective cycles: materialized <= 1.1 * k + refills;
 *   - at t = 0.01: selective median ms <= full median ms;
 *   - probe p99 during cycles <= max(5 ms, 2 x probe p99 without a cycle).
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "master/eviction.h"
#include "master/master.h"
#include "mooncake/errors.h"
#include "tools/bench_util.h"

#define KEY_LEN 64
#define OBJ_SIZE 4096ull
#define MAX_LIST 16
#define MAX_RUNS 64

static const struct mc_id CLIENT = {0xe71c, 1};
static const struct mc_id PROBE_CLIENT = {0xe71c, 2};

static void make_key(char *buf, uint64_t i)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)i);
    memset(buf, 'e', KEY_LEN);
    memcpy(buf + KEY_LEN - n, tmp, (size_t)n);
    buf[KEY_LEN] = 0;
}

static struct mc_segment_desc seg_desc(uint64_t id, const char *name, uint64_t size)
{
    struct mc_segment_desc d;
    memset(&d, 0, sizeof(d));
    d.id = (struct mc_id){0x5e9, id};
    snprintf(d.name, sizeof(d.name), "%s", name);
    d.base = 0x100000000ull * (id + 1);
    d.size = size;
    snprintf(d.endpoint, sizeof(d.endpoint), "127.0.0.1:1");
    snprintf(d.protocol, sizeof(d.protocol), "tcp");
    return d;
}

/* ---- probe ---------------------------------------------------------------------------------- */

enum { PHASE_OTHER = 0, PHASE_IDLE = 1, PHASE_CYCLE = 2 };

struct samples {
    double *v;
    size_t n, cap;
};

static void samples_add(struct samples *s, double x)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        double *nv = realloc(s->v, nc * sizeof(*nv));
        if (!nv)
            return;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = x;
}

struct probe {
    struct mc_master *m;
    pthread_t th;
    _Atomic bool stop;
    _Atomic int phase;
    struct samples idle, cycle;
    uint64_t seq;
};

static void probe_op(struct probe *p, uint64_t seq, bool mount)
{
    char key[32];
    if (seq % 3 == 2 && !mount)
        seq--; /* a Get instead: segments are only mounted while measuring */
    switch (seq % 3) {
    case 0: { /* a small hard-pinned Put (never an eviction victim), the previous one removed */
        struct mc_master_replicate_config cfg;
        mc_master_replicate_config_init(&cfg);
        cfg.with_hard_pin = true;
        struct mc_put_start_result r;
        snprintf(key, sizeof(key), "probe-%llu", (unsigned long long)seq);
        if (mc_master_put_start(p->m, PROBE_CLIENT, key, strlen(key), 64, &cfg, &r) == MC_OK)
            mc_master_put_end(p->m, PROBE_CLIENT, key, strlen(key), 0, 0, false);
        break;
    }
    case 1: {
        struct mc_get_result g;
        mc_master_get_replica_list(p->m, "probe-anchor", 12, &g);
        break;
    }
    default: { /* a fresh segment, left mounted (an Unmount sweeps the whole table, which would
                * disturb what is measured); mc_master_free drops them */
        snprintf(key, sizeof(key), "probe-seg-%llu", (unsigned long long)seq);
        struct mc_segment_desc d = seg_desc(1000 + seq, key, 64ull << 20);
        mc_master_mount_segment(p->m, PROBE_CLIENT, &d, NULL);
        break;
    }
    }
}

/* Removes the Put of probe_op(seq) (not timed). */
static void probe_cleanup(struct probe *p, uint64_t seq)
{
    char key[32];
    if (seq % 3 == 0) {
        snprintf(key, sizeof(key), "probe-%llu", (unsigned long long)seq);
        mc_master_remove(p->m, key, strlen(key), true);
    }
}

static void *probe_main(void *arg)
{
    struct probe *p = arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!atomic_load(&p->stop)) {
        next.tv_nsec += 1000000;
        if (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        uint64_t seq = p->seq++;
        int ph0 = atomic_load(&p->phase);
        uint64_t t0 = mc_now_ns();
        probe_op(p, seq, ph0 != PHASE_OTHER);
        uint64_t t1 = mc_now_ns();
        int ph1 = atomic_load(&p->phase);
        double ms = (double)(t1 - t0) / 1e6;
        if (ph0 == ph1 && ph0 == PHASE_IDLE)
            samples_add(&p->idle, ms);
        else if (ph0 == ph1 && ph0 == PHASE_CYCLE)
            samples_add(&p->cycle, ms);
        probe_cleanup(p, seq);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec + 1) /* far behind (stopped machine): resynchronise */
            next = now;
    }
    return NULL;
}

/* ---- one table ------------------------------------------------------------------------------ */

struct table {
    struct mc_master *m;
    struct mc_fake_clock fc;
    uint64_t n;
    uint32_t *order; /* ring of key indices, oldest lease first */
    uint64_t head;
    uint64_t now_ms; /* fake time of the next read */
    char key[KEY_LEN + 1];
};

static void read_at(struct table *t, uint32_t idx)
{
    mc_fake_clock_set_ns(&t->fc, t->now_ms * 1000000ull);
    t->now_ms++;
    make_key(t->key, idx);
    struct mc_get_result g;
    mc_master_get_replica_list(t->m, t->key, KEY_LEN, &g);
}

static int put_key(struct table *t, uint32_t idx)
{
    make_key(t->key, idx);
    struct mc_put_start_result r;
    int rc = mc_master_put_start(t->m, CLIENT, t->key, KEY_LEN, OBJ_SIZE, NULL, &r);
    if (rc == MC_OK)
        rc = mc_master_put_end(t->m, CLIENT, t->key, KEY_LEN, 0, 0, false);
    return rc;
}

static int table_init(struct table *t, uint64_t n, uint32_t threads, uint64_t *seed)
{
    memset(t, 0, sizeof(*t));
    t->n = n;
    t->now_ms = 1000000;
    mc_fake_clock_init(&t->fc, t->now_ms * 1000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &t->fc.clock;
    c.manual_ticks = true;
    c.default_kv_lease_ttl_ms = 1;
    c.eviction_threads = threads;
    if (mc_master_new(&c, &t->m) != MC_OK)
        return -1;
    struct mc_segment_desc d = seg_desc(1, "bench-evict", OBJ_SIZE * n + (256ull << 20));
    if (mc_master_mount_segment(t->m, CLIENT, &d, NULL) != MC_OK)
        return -1;
    t->order = malloc(n * sizeof(*t->order));
    if (!t->order)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (put_key(t, (uint32_t)i) != MC_OK)
            return -1;
        t->order[i] = (uint32_t)i;
    }
    for (uint64_t i = n; i > 1; i--) { /* random read order: leases spread over the shards */
        uint64_t j = mc_bench_rand(seed) % i;
        uint32_t x = t->order[i - 1];
        t->order[i - 1] = t->order[j];
        t->order[j] = x;
    }
    for (uint64_t i = 0; i < n; i++)
        read_at(t, t->order[i]);
    return 0;
}

/* Puts back the `evicted` oldest objects (the ones a cycle took) and reads them now. */
static int table_refill(struct table *t, uint64_t evicted)
{
    for (uint64_t i = 0; i < evicted; i++) {
        uint32_t idx = t->order[t->head];
        t->head = (t->head + 1) % t->n;
        if (put_key(t, idx) != MC_OK)
            return -1; /* it was not evicted: the oldest-first order was not kept */
        read_at(t, idx);
        t->order[(t->head + t->n - 1) % t->n] = idx;
    }
    return 0;
}

static void table_free(struct table *t)
{
    mc_master_free(t->m);
    free(t->order);
}

/* ---- main ----------------------------------------------------------------------------------- */

struct cell {
    double ms[MAX_RUNS];
    struct mc_evict_stats st[MAX_RUNS];
    double user_ms[MAX_RUNS], sys_ms[MAX_RUNS], minflt[MAX_RUNS]; /* the cycle thread's */
    int runs;
};

struct usage {
    double user_ms, sys_ms, minflt;
};

static struct usage usage_now(void)
{
    struct rusage ru;
    struct usage u = {0, 0, 0};
    if (getrusage(RUSAGE_THREAD, &ru) == 0) {
        u.user_ms = (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec / 1e3;
        u.sys_ms = (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec / 1e3;
        u.minflt = (double)ru.ru_minflt;
    }
    return u;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: mooncake_bench evict [--objects N,N,...] [--targets t,t,...] [--runs R]\n"
            "                            [--threads T] [--seed S] [--modes selective,full]\n"
            "                            [--no-probe]\n"
            "  defaults: --objects 100000,1000000 --targets 0.01,0.05,0.5 --runs 3\n"
            "  --threads: eviction threads (0 = library default max(1, ncpu - 1))\n"
            "  --modes: the cycles to time, the library's own choice (selective) and/or the\n"
            "           forced full path (full); default both\n"
            "  --no-probe: no control-op probe thread beside the cycles (as upstream's\n"
            "           batch_evict_bench runs: nothing else in the process)\n");
}

static void emit_cell(uint64_t n, double t, const char *mode, struct cell *c, double *median)
{
    double ms[MAX_RUNS];
    memcpy(ms, c->ms, sizeof(double) * (size_t)c->runs);
    struct mc_bench_result r;
    char name[96];
    snprintf(name, sizeof(name), "n=%llu t=%g %s", (unsigned long long)n, t, mode);
    mc_bench_result_init(&r, "evict", name);
    r.runs = c->runs;
    r.ms = mc_bench_median(ms, (size_t)c->runs);
    r.p50_ms = r.ms;
    r.p99_ms = mc_bench_percentile(ms, (size_t)c->runs, 99);
    const struct mc_evict_stats *st = &c->st[c->runs - 1];
    r.ops_per_s = r.ms > 0 ? (double)st->evicted / (r.ms / 1e3) : 0;
    mc_bench_add_num(&r, "objects", (double)n);
    mc_bench_add_num(&r, "target", t);
    mc_bench_add_str(&r, "mode", mode);
    mc_bench_add_str(&r, "path", st->path == MC_EVICT_SELECTIVE ? "selective" : "full");
    mc_bench_add_str(&r, "cycle_path", mc_evict_path_name(st->path));
    mc_bench_add_num(&r, "materialized", (double)st->materialized);
    mc_bench_add_num(&r, "refills", (double)st->refills);
    mc_bench_add_num(&r, "k", (double)st->k);
    mc_bench_add_num(&r, "evicted", (double)st->evicted);
    mc_bench_add_num(&r, "census", (double)st->census);
    mc_bench_add_num(&r, "ns_per_census_obj", st->census ? r.ms * 1e6 / (double)st->census : 0);
    mc_bench_add_num(&r, "ns_per_evicted", st->evicted ? r.ms * 1e6 / (double)st->evicted : 0);
    /* the first cycle's figures apart (a fresh table's first cycle is what upstream's bench
     * times), then CPU and page faults of the process during the cycles (medians) */
    mc_bench_add_num(&r, "first_ms", c->ms[0]);
    double u[MAX_RUNS], sy[MAX_RUNS], f[MAX_RUNS];
    memcpy(u, c->user_ms, sizeof(double) * (size_t)c->runs);
    memcpy(sy, c->sys_ms, sizeof(double) * (size_t)c->runs);
    memcpy(f, c->minflt, sizeof(double) * (size_t)c->runs);
    mc_bench_add_num(&r, "user_ms", mc_bench_median(u, (size_t)c->runs));
    mc_bench_add_num(&r, "sys_ms", mc_bench_median(sy, (size_t)c->runs));
    mc_bench_add_num(&r, "minflt", mc_bench_median(f, (size_t)c->runs));
    /* every run's wall ms, cycle-thread CPU ms (user + sys) and census entries, in run order:
     * a median of a few runs hides the first cycles' warm-up (the sampled census's floors are
     * restored by the first rounds); 12 characters a run is room for each */
    char runs_ms[MAX_RUNS * 12], runs_cpu[MAX_RUNS * 12], runs_census[MAX_RUNS * 12];
    size_t a = 0, b = 0, k = 0;
    for (int i = 0; i < c->runs; i++) {
        const char *sep = i ? "/" : "";
        a += (size_t)snprintf(runs_ms + a, sizeof(runs_ms) - a, "%s%.1f", sep, c->ms[i]);
        b += (size_t)snprintf(runs_cpu + b, sizeof(runs_cpu) - b, "%s%.1f", sep,
                              c->user_ms[i] + c->sys_ms[i]);
        k += (size_t)snprintf(runs_census + k, sizeof(runs_census) - k, "%s%llu", sep,
                              (unsigned long long)c->st[i].census);
    }
    mc_bench_add_str(&r, "runs_ms", runs_ms);
    mc_bench_add_str(&r, "runs_cpu_ms", runs_cpu);
    mc_bench_add_str(&r, "runs_census", runs_census);
    mc_bench_emit(&r);
    *median = r.ms;
}

__attribute__((format(printf, 3, 4))) static bool gate(const char *name, bool ok, const char *fmt,
                                                       ...)
{
    /* fmt takes exactly two doubles: the value and its limit */
    char detail[128];
    va_list ap, cp;
    va_start(ap, fmt);
    va_copy(cp, ap);
    vsnprintf(detail, sizeof(detail), fmt, cp);
    va_end(cp);
    double a = va_arg(ap, double), b = va_arg(ap, double);
    va_end(ap);
    fprintf(stderr, "GATE %-40s %s (%s)\n", name, ok ? "PASS" : "FAIL", detail);
    struct mc_bench_result r;
    mc_bench_result_init(&r, "evict", "gate");
    r.runs = 1;
    mc_bench_add_str(&r, "gate", name);
    mc_bench_add_str(&r, "result", ok ? "pass" : "fail");
    mc_bench_add_num(&r, "value", a);
    mc_bench_add_num(&r, "limit", b);
    mc_bench_emit(&r);
    return ok;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

struct opts {
    int runs;
    uint32_t threads;
    bool modes[2]; /* selective, full */
    bool probe;
};

static int bench_one(uint64_t n, const double *targets, int ntargets, const struct opts *op,
                     uint64_t seed, bool *all_ok)
{
    struct table t;
    uint64_t t_fill = mc_now_ns();
    int runs = op->runs;
    if (table_init(&t, n, op->threads, &seed) != 0) {
        fprintf(stderr, "evict: cannot build a table of %llu objects\n", (unsigned long long)n);
        if (t.m)
            table_free(&t);
        return -1;
    }
    fprintf(stderr, "evict: %llu objects ready in %.1f s\n", (unsigned long long)n,
            (double)(mc_now_ns() - t_fill) / 1e9);

    static struct probe p;
    memset(&p, 0, sizeof(p));
    p.m = t.m;
    struct mc_master_replicate_config hard;
    mc_master_replicate_config_init(&hard);
    hard.with_hard_pin = true;
    struct mc_put_start_result pr;
    mc_master_put_start(t.m, PROBE_CLIENT, "probe-anchor", 12, 64, &hard, &pr);
    mc_master_put_end(t.m, PROBE_CLIENT, "probe-anchor", 12, 0, 0, false);
    bool probing = op->probe && pthread_create(&p.th, NULL, probe_main, &p) == 0;
    if (probing) {
        atomic_store(&p.phase, PHASE_IDLE);
        sleep_ms(300);
        atomic_store(&p.phase, PHASE_OTHER);
    }

    int rc = 0;
    for (int ti = 0; ti < ntargets && rc == 0; ti++) {
        double med[2] = {0, 0};
        for (int mode = 0; mode < 2 && rc == 0; mode++) {
            if (!op->modes[mode])
                continue;
            struct mc_evict_test_opts o = {.force_full = mode == 1};
            mc_master_evict_set_test_opts(t.m, &o);
            struct cell c = {.runs = 0};
            for (int r = 0; r < runs; r++) {
                t.now_ms += 2; /* every lease expired */
                mc_fake_clock_set_ns(&t.fc, t.now_ms * 1000000ull);
                atomic_store(&p.phase, PHASE_CYCLE);
                struct usage u0 = usage_now();
                uint64_t t0 = mc_now_ns();
                mc_master_batch_evict(t.m, targets[ti], targets[ti] / 2, &c.st[r]);
                c.ms[r] = (double)(mc_now_ns() - t0) / 1e6;
                struct usage u1 = usage_now();
                c.user_ms[r] = u1.user_ms - u0.user_ms;
                c.sys_ms[r] = u1.sys_ms - u0.sys_ms;
                c.minflt[r] = u1.minflt - u0.minflt;
                atomic_store(&p.phase, PHASE_OTHER);
                c.runs++;
                if (table_refill(&t, c.st[r].evicted) != 0) {
                    fprintf(stderr, "evict: a refilled key was still present (order broken)\n");
                    rc = -1;
                    break;
                }
            }
            if (c.runs == runs)
                emit_cell(n, targets[ti], mode ? "full" : "selective", &c, &med[mode]);
            if (mode == 0) {
                for (int r = 0; r < c.runs; r++) {
                    const struct mc_evict_stats *st = &c.st[r];
                    if (st->path != MC_EVICT_SELECTIVE)
                        continue;
                    char name[64];
                    snprintf(name, sizeof(name), "n=%llu t=%g materialized", (unsigned long long)n,
                             targets[ti]);
                    *all_ok &= gate(
                        name, (double)st->materialized <= 1.1 * (double)st->k + (double)st->refills,
                        "%.0f <= %.1f", (double)st->materialized,
                        1.1 * (double)st->k + (double)st->refills);
                    break;
                }
            }
        }
        if (rc == 0 && op->modes[0] && op->modes[1] && targets[ti] > 0.0099 &&
            targets[ti] < 0.0101) {
            char name[64];
            snprintf(name, sizeof(name), "n=%llu t=0.01 selective<=full", (unsigned long long)n);
            *all_ok &= gate(name, med[0] <= med[1], "%.3f ms <= %.3f ms", med[0], med[1]);
        }
    }
    mc_master_evict_set_test_opts(t.m, NULL);
    atomic_store(&p.stop, true);
    if (probing)
        pthread_join(p.th, NULL);
    if (rc == 0 && p.idle.n && p.cycle.n) {
        double idle99 = mc_bench_percentile(p.idle.v, p.idle.n, 99);
        double idle50 = mc_bench_percentile(p.idle.v, p.idle.n, 50);
        double cyc99 = mc_bench_percentile(p.cycle.v, p.cycle.n, 99);
        double cyc50 = mc_bench_percentile(p.cycle.v, p.cycle.n, 50);
        struct mc_bench_result r;
        char name[64];
        snprintf(name, sizeof(name), "n=%llu probe", (unsigned long long)n);
        mc_bench_result_init(&r, "evict", name);
        r.runs = (int)p.cycle.n;
        r.p50_ms = cyc50;
        r.p99_ms = cyc99;
        r.ms = cyc50;
        mc_bench_add_num(&r, "objects", (double)n);
        mc_bench_add_num(&r, "idle_p50_ms", idle50);
        mc_bench_add_num(&r, "idle_p99_ms", idle99);
        mc_bench_add_num(&r, "idle_samples", (double)p.idle.n);
        mc_bench_add_num(&r, "cycle_samples", (double)p.cycle.n);
        mc_bench_emit(&r);
        double limit = 2 * idle99 > 5.0 ? 2 * idle99 : 5.0;
        snprintf(name, sizeof(name), "n=%llu probe p99 during cycles", (unsigned long long)n);
        *all_ok &= gate(name, cyc99 <= limit, "%.3f ms <= %.3f ms", cyc99, limit);
    } else if (rc == 0) {
        fprintf(stderr, "evict: probe got no samples (idle %zu, cycle %zu)\n", p.idle.n, p.cycle.n);
    }
    free(p.idle.v);
    free(p.cycle.v);
    table_free(&t);
    return rc;
}

int mc_bench_evict(int argc, char **argv)
{
    static const struct option opts[] = {
        {"objects", required_argument, NULL, 'n'},
        {"targets", required_argument, NULL, 't'},
        {"runs", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 'j'},
        {"seed", required_argument, NULL, 's'},
        {"modes", required_argument, NULL, 'm'},
        {"no-probe", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t objects[MAX_LIST] = {100000, 1000000};
    int nobjects = 2;
    double targets[MAX_LIST] = {0.01, 0.05, 0.5};
    int ntargets = 3;
    struct opts op = {.runs = 3, .modes = {true, true}, .probe = true};
    uint64_t seed = 0x5eed5eedull;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            nobjects = mc_bench_parse_sizes(optarg, objects, MAX_LIST);
            break;
        case 't':
            ntargets = mc_bench_parse_doubles(optarg, targets, MAX_LIST);
            break;
        case 'r':
            op.runs = atoi(optarg);
            break;
        case 'j':
            op.threads = (uint32_t)atoi(optarg);
            break;
        case 'm':
            op.modes[0] = strstr(optarg, "selective") != NULL;
            op.modes[1] = strstr(optarg, "full") != NULL;
            break;
        case 'P':
            op.probe = false;
            break;
        case 's':
            seed = strtoull(optarg, NULL, 0);
            break;
        case 'h':
            usage();
            return 0;
        default:
            usage();
            return 2;
        }
    }
    if (nobjects <= 0 || ntargets <= 0 || op.runs < 1 || op.runs > MAX_RUNS || !seed ||
        !(op.modes[0] || op.modes[1])) {
        usage();
        return 2;
    }
    for (int i = 0; i < nobjects; i++)
        if (objects[i] < 100 || objects[i] > (1ull << 31)) {
            usage();
            return 2;
        }
    for (int i = 0; i < ntargets; i++)
        if (!(targets[i] > 0 && targets[i] <= 1)) {
            usage();
            return 2;
        }
    mc_log_set_level(MC_LOG_WARN);
    bool all_ok = true;
    for (int i = 0; i < nobjects; i++)
        if (bench_one(objects[i], targets, ntargets, &op, seed + (uint64_t)i, &all_ok) != 0)
            return 1;
    fprintf(stderr, "evict: gates %s\n", all_ok ? "all passed" : "FAILED");
    return all_ok ? 0 : 1;
}
