/*
 * bench_replay.c - `mooncake_bench replay`: a Mooncake trace replayed against a running cluster
 * as a prefix-caching prefill node would, every byte verified, the store's hit ratio judged
 * against exact LRU caches of the same capacity and an unbounded cache (DESIGN.md §12).
 *
 * Per request, in trace order (--workers threads take the next request in order; with
 * --time_scale > 0 a request is not issued before its timestamp x time_scale):
 *   1. mc_batch_exist over its hash ids (each block is the key <key_prefix><id>);
 *   2. the longest present prefix is read with mc_batch_get_tiers and every byte is compared
 *      with the block's deterministic pattern (bench_trace.h); the hits are the leading blocks
 *      read whole and right, counted by the tier that served them (MEMORY / LOCAL_DISK);
 *   3. the rest of the request (from the first block not hit) is written with mc_batch_put.
 * A wrong byte (or a Get that returns a wrong length) is counted and makes the run exit 1.
 * Errors are counted per operation and name (mc_strerror); a refused Put is a block whose Put
 * failed (the engine could not cache it).
 *
 * The reference caches see the same block sequence in trace order with the same rule
 * (bench_lru.h): an exact LRU of the usable DRAM (--dram_bytes x --high_watermark, whole
 * blocks), an exact LRU of usable DRAM + disk (--disk_bytes x --disk_watermark, whole disk
 * records per store) and an unbounded cache. Their hit ratios are upper bounds for a store of
 * that capacity only in the sense of LRU: they judge the eviction policy, not the watermark.
 *
 * JSON (one line per run): bench=replay case=<trace>/<block size>[/<label>] runs (requests)
 * ms p50_ms p99_ms (per request: exist + get + put) ops_per_s (requests/s) bytes_per_s (read +
 * written), ref (the LRU the run is judged against: DRAM + disk when --disk_bytes is given,
 * else DRAM) and ratio (hit_ratio / ref), and hit_ratio lru_dram_ratio lru_total_ratio
 * unbounded_ratio vs_lru_dram vs_lru_total requests blocks hits mem_hits disk_hits wrong_bytes
 * refused_puts errors error_names get_p50_ms get_p99_ms put_p50_ms put_p99_ms block_size
 * lru_dram_blocks lru_total_blocks workers time_scale seed elapsed_s.
 */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/parse.h"
#include "mooncake/client.h"
#include "tools/bench_lru.h"
#include "tools/bench_trace.h"
#include "tools/bench_util.h"

#define MAX_STORES 64
#define MAX_ERR_KINDS 32
#define KEY_CAP 128

/* A Get batch by the tiers its hits came from (report: Get p50 by tier). */
enum get_tier { TIER_MEM, TIER_DISK, TIER_MIXED, TIER_NONE, NTIER };
static const char *const tier_name[NTIER] = {"mem", "disk", "mixed", "none"};

struct opts {
    const char *trace, *master, *label, *key_prefix, *auth_token_file;
    uint64_t block_size, seed;
    int workers;
    size_t limit;
    double time_scale, high_watermark, disk_watermark;
    uint64_t dram[MAX_STORES], disk[MAX_STORES];
    int ndram, ndisk;
    int progress; /* -1 auto (a terminal), 0 off, 1 on */
};

struct err_kind {
    const char *op;
    int code;
    uint64_t count;
};

struct wstats {
    uint64_t requests, blocks, hits, mem_hits, disk_hits, wrong_bytes, refused_puts;
    uint64_t bytes_read, bytes_written;
    double *get_ms, *put_ms, *req_ms;
    size_t nget, nput, nreq;
    double *tier_ms[NTIER]; /* Get latency by the tiers that served the batch's hits */
    size_t ntier[NTIER];
    uint64_t tier_blocks[NTIER]; /* blocks those Gets asked for */
    struct err_kind errs[MAX_ERR_KINDS];
    int nerrs;
    uint64_t other_errs; /* kinds past MAX_ERR_KINDS */
};

struct replay {
    const struct opts *o;
    const struct mc_trace *t;
    struct mc_client *client;
    char prefix[KEY_CAP / 2];
    uint64_t start_ns;
    _Atomic size_t next;
    _Atomic uint64_t done, hits, blocks, wrong, refused, errors;
    _Atomic int running;
};

struct worker {
    struct replay *r;
    pthread_t tid;
    struct wstats st;
    int failed; /* could not allocate its buffers */
};

/* ---- per-worker accounting ---------------------------------------------------------------- */

static void count_err(struct replay *r, struct wstats *st, const char *op, int code)
{
    atomic_fetch_add(&r->errors, 1);
    for (int i = 0; i < st->nerrs; i++) {
        if (st->errs[i].code == code && !strcmp(st->errs[i].op, op)) {
            st->errs[i].count++;
            return;
        }
    }
    if (st->nerrs == MAX_ERR_KINDS) {
        st->other_errs++;
        return;
    }
    st->errs[st->nerrs++] = (struct err_kind){op, code, 1};
}

static void merge_err(struct wstats *into, const struct err_kind *e)
{
    for (int i = 0; i < into->nerrs; i++) {
        if (into->errs[i].code == e->code && !strcmp(into->errs[i].op, e->op)) {
            into->errs[i].count += e->count;
            return;
        }
    }
    if (into->nerrs == MAX_ERR_KINDS)
        into->other_errs += e->count;
    else
        into->errs[into->nerrs++] = *e;
}

static double elapsed_ms(uint64_t t0)
{
    return (double)(mc_now_ns() - t0) / 1e6;
}

static void sleep_until_ns(uint64_t when)
{
    for (;;) {
        uint64_t now = mc_now_ns();
        if (now >= when)
            return;
        uint64_t d = when - now;
        struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

/* ---- one request -------------------------------------------------------------------------- */

struct bufs {
    char (*keys)[KEY_CAP];
    const char **kp;
    void **bp;
    size_t *lens;
    int *exist, *pres, *tiers;
    int64_t *gres;
    uint8_t *data;
};

static void bufs_free(struct bufs *b)
{
    free(b->keys);
    free(b->kp);
    free(b->bp);
    free(b->lens);
    free(b->exist);
    free(b->pres);
    free(b->tiers);
    free(b->gres);
    free(b->data);
}

static int bufs_alloc(struct bufs *b, size_t n, uint64_t block_size)
{
    memset(b, 0, sizeof(*b));
    if (n == 0)
        n = 1;
    b->keys = calloc(n, sizeof(*b->keys));
    b->kp = calloc(n, sizeof(*b->kp));
    b->bp = calloc(n, sizeof(*b->bp));
    b->lens = calloc(n, sizeof(*b->lens));
    b->exist = calloc(n, sizeof(*b->exist));
    b->pres = calloc(n, sizeof(*b->pres));
    b->tiers = calloc(n, sizeof(*b->tiers));
    b->gres = calloc(n, sizeof(*b->gres));
    b->data = malloc(n * block_size);
    if (!b->keys || !b->kp || !b->bp || !b->lens || !b->exist || !b->pres || !b->tiers ||
        !b->gres || !b->data) {
        bufs_free(b);
        return -1;
    }
    memset(b->data, 0, n * block_size);
    for (size_t i = 0; i < n; i++) {
        b->kp[i] = b->keys[i];
        b->bp[i] = b->data + i * block_size;
        b->lens[i] = block_size;
    }
    return 0;
}

static void run_request(struct replay *r, struct wstats *st, struct bufs *b,
                        const struct mc_trace_req *q)
{
    const struct opts *o = r->o;
    struct mc_replicate_config rc;
    size_t n = q->n, present, hits = 0, nput;
    uint64_t t_req = mc_now_ns(), t;
    int ret;

    mc_replicate_config_init(&rc);
    for (size_t k = 0; k < n; k++)
        snprintf(b->keys[k], KEY_CAP, "%s%llu", r->prefix, (unsigned long long)q->ids[k]);

    /* 1. which blocks the store has */
    ret = n ? mc_batch_exist(r->client, n, b->kp, b->exist) : 0;
    if (ret != 0) {
        count_err(r, st, "exist", ret);
        memset(b->exist, 0, n * sizeof(*b->exist));
    }
    for (size_t k = 0; ret == 0 && k < n; k++)
        if (b->exist[k] < 0)
            count_err(r, st, "exist", b->exist[k]);
    present = mc_prefix_present(b->exist, n);

    /* 2. read the present prefix; hits = the leading blocks read whole and right */
    if (present > 0) {
        t = mc_now_ns();
        ret = mc_batch_get_tiers(r->client, present, b->kp, b->bp, b->lens, b->gres, b->tiers);
        double get_ms = elapsed_ms(t);
        st->get_ms[st->nget++] = get_ms;
        size_t nmem = 0, ndisk = 0;
        if (ret != 0) {
            count_err(r, st, "get", ret);
            for (size_t k = 0; k < present; k++)
                b->gres[k] = ret;
        }
        bool prefix_ok = true;
        for (size_t k = 0; k < present; k++) {
            bool ok = false;
            if (b->gres[k] < 0) {
                if (ret == 0)
                    count_err(r, st, "get", (int)b->gres[k]);
            } else if ((uint64_t)b->gres[k] != o->block_size) {
                /* a value of the wrong length is wrong bytes, whatever it holds */
                st->wrong_bytes += o->block_size;
                atomic_fetch_add(&r->wrong, o->block_size);
                count_err(r, st, "get", MC_ERR_INTERNAL_ERROR);
            } else {
                uint64_t w = mc_block_check(b->bp[k], o->block_size, q->ids[k], o->seed);
                st->bytes_read += o->block_size;
                if (w) {
                    st->wrong_bytes += w;
                    atomic_fetch_add(&r->wrong, w);
                } else {
                    ok = true;
                }
            }
            if (!ok)
                prefix_ok = false;
            if (ok && prefix_ok) {
                hits++;
                if (b->tiers[k] == MC_REPLICA_LOCAL_DISK)
                    ndisk++;
                else if (b->tiers[k] == MC_REPLICA_MEMORY)
                    nmem++;
            }
        }
        st->disk_hits += ndisk;
        st->mem_hits += nmem;
        enum get_tier gt = ndisk && nmem ? TIER_MIXED
                           : ndisk       ? TIER_DISK
                           : nmem        ? TIER_MEM
                                         : TIER_NONE;
        st->tier_ms[gt][st->ntier[gt]++] = get_ms;
        st->tier_blocks[gt] += present;
    }

    /* 3. write the rest */
    nput = n - hits;
    if (nput > 0) {
        for (size_t k = hits; k < n; k++)
            mc_block_fill(b->bp[k], o->block_size, q->ids[k], o->seed);
        t = mc_now_ns();
        ret = mc_batch_put(r->client, nput, b->kp + hits, (const void *const *)(b->bp + hits),
                           b->lens + hits, &rc, b->pres);
        st->put_ms[st->nput++] = elapsed_ms(t);
        if (ret != 0) {
            count_err(r, st, "put", ret);
            st->refused_puts += nput;
            atomic_fetch_add(&r->refused, nput);
        } else {
            for (size_t k = 0; k < nput; k++) {
                if (b->pres[k] == 0) {
                    st->bytes_written += o->block_size;
                    continue;
                }
                count_err(r, st, "put", b->pres[k]);
                st->refused_puts++;
                atomic_fetch_add(&r->refused, 1);
            }
        }
    }
    st->req_ms[st->nreq++] = elapsed_ms(t_req);
    st->requests++;
    st->blocks += n;
    st->hits += hits;
    atomic_fetch_add(&r->blocks, n);
    atomic_fetch_add(&r->hits, hits);
    atomic_fetch_add(&r->done, 1);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct replay *r = w->r;
    const struct mc_trace *t = r->t;
    uint64_t ts0 = t->reqs[0].timestamp_ms;
    struct bufs b;

    if (bufs_alloc(&b, t->max_n, r->o->block_size) != 0) {
        w->failed = 1;
        atomic_store(&r->running, 0);
        return NULL;
    }
    while (atomic_load(&r->running)) {
        size_t i = atomic_fetch_add(&r->next, 1);
        if (i >= t->nreq)
            break;
        const struct mc_trace_req *q = &t->reqs[i];
        if (r->o->time_scale > 0 && q->timestamp_ms > ts0)
            sleep_until_ns(r->start_ns +
                           (uint64_t)((double)(q->timestamp_ms - ts0) * r->o->time_scale * 1e6));
        run_request(r, &w->st, &b, q);
    }
    bufs_free(&b);
    return NULL;
}

/* ---- the reference caches ----------------------------------------------------------------- */

/* Hits of an LRU of capacity blocks (MC_LRU_UNBOUNDED: unbounded) over the trace; -1 on OOM. */
static int64_t simulate(const struct mc_trace *t, uint64_t capacity)
{
    struct mc_lru *l = mc_lru_new(capacity);
    int64_t hits = 0;

    if (!l)
        return -1;
    for (size_t i = 0; i < t->nreq; i++) {
        int64_t h = mc_lru_request(l, t->reqs[i].ids, t->reqs[i].n);
        if (h < 0) {
            hits = -1;
            break;
        }
        hits += h;
    }
    mc_lru_free(l);
    return hits;
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: mooncake_bench replay --trace FILE --master HOST:PORT --dram_bytes SIZE[,SIZE..]\n"
        "                             [--disk_bytes SIZE[,SIZE..]] [options]\n"
        "Replays a Mooncake trace (JSON lines with timestamp and hash_ids) as a prefix-caching\n"
        "prefill node: per request, Exist over its blocks, Get of the longest present prefix\n"
        "(every byte checked), Put of the rest. Compares the store's hit ratio with exact LRU\n"
        "caches of the usable DRAM, of DRAM + disk, and with an unbounded cache.\n"
        "  --trace           the trace file (required)\n"
        "  --master          the cluster's mooncake_master (required)\n"
        "  --dram_bytes      DRAM of the cluster's segments, one size per segment or the sum\n"
        "                    (required: the LRU bound is computed from it)\n"
        "  --high_watermark  the master's --eviction_high_watermark_ratio (default 0.90)\n"
        "  --disk_bytes      LOCAL_DISK capacity of each daemon (--disk_capacity), one size per\n"
        "                    store (default none: DRAM only)\n"
        "  --disk_watermark  the disk store's high watermark (default 0.90)\n"
        "  --block_size      bytes per block (default 64KiB)\n"
        "  --workers         threads replaying requests in trace order (default 1)\n"
        "  --limit           replay the first N requests only (default all)\n"
        "  --time_scale      0 = flat out (default); 1 = the trace's own timing; 0.1 = 10x faster\n"
        "  --seed            seed of the block bytes (default 1)\n"
        "  --key_prefix      keys are <prefix><block id> (default replay/<seed>/)\n"
        "  --label           appended to the JSON case name (e.g. the cluster's mode)\n"
        "  --progress        on|off|auto: a progress line on stderr (auto: on a terminal)\n"
        "  --auth_token_file the cluster's shared secret (when its master has one)\n"
        "Exit status: 0, 1 when a byte read back was wrong or the replay could not run, 2 "
        "usage.\n");
}

static int parse_sizes_list(const char *s, uint64_t *out, int *n)
{
    *n = mc_bench_parse_sizes(s, out, MAX_STORES);
    return *n > 0 ? 0 : -1;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        {"trace", required_argument, NULL, 't'},
        {"master", required_argument, NULL, 'M'},
        {"dram_bytes", required_argument, NULL, 'D'},
        {"disk_bytes", required_argument, NULL, 'K'},
        {"high_watermark", required_argument, NULL, 'H'},
        {"disk_watermark", required_argument, NULL, 'W'},
        {"block_size", required_argument, NULL, 'B'},
        {"workers", required_argument, NULL, 'w'},
        {"limit", required_argument, NULL, 'l'},
        {"time_scale", required_argument, NULL, 'T'},
        {"seed", required_argument, NULL, 's'},
        {"key_prefix", required_argument, NULL, 'P'},
        {"label", required_argument, NULL, 'L'},
        {"progress", required_argument, NULL, 'p'},
        {"auth_token_file", required_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *end;
    int c;

    memset(o, 0, sizeof(*o));
    o->block_size = 64 * 1024;
    o->workers = 1;
    o->seed = 1;
    o->high_watermark = 0.90;
    o->disk_watermark = 0.90;
    o->progress = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 't':
            o->trace = optarg;
            break;
        case 'M':
            o->master = optarg;
            break;
        case 'A':
            o->auth_token_file = optarg;
            break;
        case 'D':
            if (parse_sizes_list(optarg, o->dram, &o->ndram) != 0) {
                fprintf(stderr, "replay: bad --dram_bytes '%s'\n", optarg);
                return 2;
            }
            break;
        case 'K':
            if (parse_sizes_list(optarg, o->disk, &o->ndisk) != 0) {
                fprintf(stderr, "replay: bad --disk_bytes '%s'\n", optarg);
                return 2;
            }
            break;
        case 'H':
        case 'W': {
            double v = strtod(optarg, &end);
            if (*end || !(v > 0 && v <= 1)) {
                fprintf(stderr, "replay: a watermark is a ratio in (0, 1], not '%s'\n", optarg);
                return 2;
            }
            *(c == 'H' ? &o->high_watermark : &o->disk_watermark) = v;
            break;
        }
        case 'B':
            if (mc_parse_size(optarg, &o->block_size, NULL, 0) != 0 || o->block_size == 0 ||
                o->block_size > (64ull << 20)) {
                fprintf(stderr, "replay: --block_size must be 1 B .. 64 MiB\n");
                return 2;
            }
            break;
        case 'w':
            o->workers = (int)strtol(optarg, &end, 10);
            if (*end || o->workers < 1 || o->workers > 256) {
                fprintf(stderr, "replay: --workers must be 1..256\n");
                return 2;
            }
            break;
        case 'l': {
            unsigned long long v = strtoull(optarg, &end, 10);
            if (*end || optarg[0] == '-') {
                fprintf(stderr, "replay: bad --limit '%s'\n", optarg);
                return 2;
            }
            o->limit = (size_t)v;
            break;
        }
        case 'T':
            o->time_scale = strtod(optarg, &end);
            if (*end || !(o->time_scale >= 0) || o->time_scale > 1e6) {
                fprintf(stderr, "replay: --time_scale must be >= 0\n");
                return 2;
            }
            break;
        case 's':
            o->seed = strtoull(optarg, &end, 0);
            if (*end) {
                fprintf(stderr, "replay: bad --seed '%s'\n", optarg);
                return 2;
            }
            break;
        case 'P':
            o->key_prefix = optarg;
            break;
        case 'L':
            o->label = optarg;
            break;
        case 'p':
            if (!strcmp(optarg, "on"))
                o->progress = 1;
            else if (!strcmp(optarg, "off"))
                o->progress = 0;
            else if (!strcmp(optarg, "auto"))
                o->progress = -1;
            else
                return 2;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "replay: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!o->trace || !o->master || o->ndram == 0) {
        fprintf(stderr, "replay: --trace, --master and --dram_bytes are required\n");
        return 2;
    }
    if (o->key_prefix && strlen(o->key_prefix) >= KEY_CAP / 2) {
        fprintf(stderr, "replay: --key_prefix is too long\n");
        return 2;
    }
    return 0;
}

/* ---- report ------------------------------------------------------------------------------- */

static double ratio(double a, double b)
{
    return b > 0 ? a / b : NAN;
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

static void error_names(const struct wstats *st, char *buf, size_t cap)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int i = 0; i < st->nerrs && n + 1 < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s:%s=%llu", n ? "," : "", st->errs[i].op,
                              mc_strerror(st->errs[i].code), (unsigned long long)st->errs[i].count);
    if (st->other_errs && n + 1 < cap)
        snprintf(buf + n, cap - n, "%sother=%llu", n ? "," : "",
                 (unsigned long long)st->other_errs);
}

struct refs {
    uint64_t dram_blocks, total_blocks;
    int64_t dram_hits, total_hits, unbounded_hits;
};

static void report(const struct opts *o, const struct refs *ref, struct wstats *st, double secs)
{
    struct mc_bench_result res;
    char name[96], bs[32], errs[256];
    const char *base = strrchr(o->trace, '/');
    double blocks = (double)st->blocks, hit = ratio((double)st->hits, blocks);
    double lru_d = ratio((double)ref->dram_hits, blocks);
    double lru_t = ratio((double)ref->total_hits, blocks);
    double unb = ratio((double)ref->unbounded_hits, blocks);
    double judge = o->ndisk ? lru_t : lru_d;
    uint64_t nerr = st->other_errs;
    char trace_name[48];

    base = base ? base + 1 : o->trace;
    snprintf(trace_name, sizeof(trace_name), "%s", base);
    if (strlen(trace_name) > 6 && !strcmp(trace_name + strlen(trace_name) - 6, ".jsonl"))
        trace_name[strlen(trace_name) - 6] = '\0';
    size_name(o->block_size, bs, sizeof(bs));
    snprintf(name, sizeof(name), "%s/%s%s%s", trace_name, bs, o->label ? "/" : "",
             o->label ? o->label : "");
    for (int i = 0; i < st->nerrs; i++)
        nerr += st->errs[i].count;
    error_names(st, errs, sizeof(errs));

    double get_p50 = mc_bench_percentile(st->get_ms, st->nget, 50);
    double get_p99 = mc_bench_percentile(st->get_ms, st->nget, 99);
    double put_p50 = mc_bench_percentile(st->put_ms, st->nput, 50);
    double put_p99 = mc_bench_percentile(st->put_ms, st->nput, 99);

    mc_bench_result_init(&res, "replay", name);
    res.runs = (int)st->requests;
    res.p99_ms = mc_bench_percentile(st->req_ms, st->nreq, 99);
    res.p50_ms = mc_bench_percentile(st->req_ms, st->nreq, 50);
    res.ms = mc_bench_median(st->req_ms, st->nreq);
    res.ops_per_s = secs > 0 ? (double)st->requests / secs : 0;
    res.bytes_per_s = secs > 0 ? (double)(st->bytes_read + st->bytes_written) / secs : 0;
    mc_bench_set_ref(&res, judge, ratio(hit, judge));
    mc_bench_add_num(&res, "hit_ratio", hit);
    mc_bench_add_num(&res, "lru_dram_ratio", lru_d);
    mc_bench_add_num(&res, "lru_total_ratio", lru_t);
    mc_bench_add_num(&res, "unbounded_ratio", unb);
    mc_bench_add_num(&res, "vs_lru_dram", ratio(hit, lru_d));
    mc_bench_add_num(&res, "vs_lru_total", ratio(hit, lru_t));
    mc_bench_add_num(&res, "requests", (double)st->requests);
    mc_bench_add_num(&res, "blocks", blocks);
    mc_bench_add_num(&res, "hits", (double)st->hits);
    mc_bench_add_num(&res, "mem_hits", (double)st->mem_hits);
    mc_bench_add_num(&res, "disk_hits", (double)st->disk_hits);
    mc_bench_add_num(&res, "wrong_bytes", (double)st->wrong_bytes);
    mc_bench_add_num(&res, "refused_puts", (double)st->refused_puts);
    mc_bench_add_num(&res, "errors", (double)nerr);
    mc_bench_add_str(&res, "error_names", errs);
    mc_bench_add_num(&res, "get_p50_ms", get_p50);
    mc_bench_add_num(&res, "get_p99_ms", get_p99);
    mc_bench_add_num(&res, "put_p50_ms", put_p50);
    mc_bench_add_num(&res, "put_p99_ms", put_p99);
    for (int g = 0; g < NTIER; g++) {
        char f[40];
        snprintf(f, sizeof(f), "get_%s_n", tier_name[g]);
        mc_bench_add_num(&res, f, (double)st->ntier[g]);
        snprintf(f, sizeof(f), "get_%s_blocks", tier_name[g]);
        mc_bench_add_num(&res, f, (double)st->tier_blocks[g]);
        snprintf(f, sizeof(f), "get_%s_p50_ms", tier_name[g]);
        mc_bench_add_num(&res, f, mc_bench_percentile(st->tier_ms[g], st->ntier[g], 50));
        snprintf(f, sizeof(f), "get_%s_p99_ms", tier_name[g]);
        mc_bench_add_num(&res, f, mc_bench_percentile(st->tier_ms[g], st->ntier[g], 99));
    }
    mc_bench_add_num(&res, "block_size", (double)o->block_size);
    mc_bench_add_num(&res, "lru_dram_blocks", (double)ref->dram_blocks);
    mc_bench_add_num(&res, "lru_total_blocks", (double)ref->total_blocks);
    mc_bench_add_num(&res, "workers", o->workers);
    mc_bench_add_num(&res, "time_scale", o->time_scale);
    mc_bench_add_num(&res, "seed", (double)o->seed);
    mc_bench_add_num(&res, "elapsed_s", secs);
    mc_bench_emit(&res);

    fprintf(stderr,
            "\nreplay of %s: %llu requests, %.0f blocks of %s, %d worker%s, %s (%.1f s)\n"
            "  %-34s %9s %12s\n"
            "  %-34s %9.4f %12s\n",
            base, (unsigned long long)st->requests, blocks, bs, o->workers,
            o->workers == 1 ? "" : "s", o->time_scale > 0 ? "trace timing" : "flat out", secs,
            "cache", "hit ratio", "store / it", "the store (measured)", hit, "");
    char lbl[64];
    snprintf(lbl, sizeof(lbl), "exact LRU, usable DRAM (%llu blk)",
             (unsigned long long)ref->dram_blocks);
    fprintf(stderr, "  %-34s %9.4f %12.3f\n", lbl, lru_d, ratio(hit, lru_d));
    if (o->ndisk) {
        snprintf(lbl, sizeof(lbl), "exact LRU, DRAM + disk (%llu blk)",
                 (unsigned long long)ref->total_blocks);
        fprintf(stderr, "  %-34s %9.4f %12.3f\n", lbl, lru_t, ratio(hit, lru_t));
    }
    fprintf(stderr, "  %-34s %9.4f %12.3f\n", "unbounded cache", unb, ratio(hit, unb));
    fprintf(stderr,
            "  hits by tier: MEMORY %llu, LOCAL_DISK %llu\n"
            "  Get p50/p99 %.3f/%.3f ms, Put p50/p99 %.3f/%.3f ms (per request batch)\n"
            "  wrong bytes %llu, refused Puts %llu, errors %llu%s%s\n",
            (unsigned long long)st->mem_hits, (unsigned long long)st->disk_hits, get_p50, get_p99,
            put_p50, put_p99, (unsigned long long)st->wrong_bytes,
            (unsigned long long)st->refused_puts, (unsigned long long)nerr, nerr ? ": " : "", errs);
    fprintf(stderr, "  Get by the tiers of its hits (batches, blocks asked, p50/p99 ms):\n");
    for (int g = 0; g < NTIER; g++)
        fprintf(stderr, "    %-6s %6zu %8llu %9.3f / %.3f\n", tier_name[g], st->ntier[g],
                (unsigned long long)st->tier_blocks[g],
                mc_bench_percentile(st->tier_ms[g], st->ntier[g], 50),
                mc_bench_percentile(st->tier_ms[g], st->ntier[g], 99));
}

/* ---- main --------------------------------------------------------------------------------- */

int mc_bench_replay(int argc, char **argv)
{
    struct opts o;
    struct mc_trace t = {0};
    struct mc_client_config cfg;
    struct replay r;
    struct worker *ws = NULL;
    struct wstats all;
    struct refs ref = {0};
    uint64_t dram_total = 0;
    char err[256];
    int rc = 1, started = 0;

    memset(&all, 0, sizeof(all));
    memset(&r, 0, sizeof(r));
    switch (parse_opts(argc, argv, &o)) {
    case 0:
        break;
    case 1:
        return 0;
    default:
        usage(stderr);
        return 2;
    }
    mc_log_set_level(MC_LOG_WARN);
    if (mc_trace_load(o.trace, o.limit, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "replay: %s\n", err);
        return 1;
    }

    /* the reference caches, over the same block sequence in trace order */
    for (int i = 0; i < o.ndram; i++)
        dram_total += o.dram[i];
    ref.dram_blocks = mc_lru_dram_blocks(dram_total, o.high_watermark, o.block_size);
    ref.total_blocks = ref.dram_blocks;
    for (int i = 0; i < o.ndisk; i++)
        ref.total_blocks += mc_lru_disk_blocks(o.disk[i], o.disk_watermark, o.block_size);
    ref.dram_hits = simulate(&t, ref.dram_blocks);
    ref.total_hits = o.ndisk ? simulate(&t, ref.total_blocks) : ref.dram_hits;
    ref.unbounded_hits = simulate(&t, MC_LRU_UNBOUNDED);
    if (ref.dram_hits < 0 || ref.total_hits < 0 || ref.unbounded_hits < 0) {
        fprintf(stderr, "replay: out of memory simulating the reference caches\n");
        goto out;
    }

    r.o = &o;
    r.t = &t;
    if (o.key_prefix)
        snprintf(r.prefix, sizeof(r.prefix), "%s", o.key_prefix);
    else
        snprintf(r.prefix, sizeof(r.prefix), "replay/%llu/", (unsigned long long)o.seed);
    mc_client_config_init(&cfg);
    cfg.master_address = o.master;
    cfg.auth_token_file = o.auth_token_file;
    cfg.segment_size = 0; /* a prefill node of the cluster: every byte goes to the daemons */
    int orc = mc_client_open(&cfg, &r.client);
    if (orc != 0) {
        fprintf(stderr, "replay: cannot connect to the master at %s: %s\n", o.master,
                mc_strerror(orc));
        goto out;
    }

    ws = calloc((size_t)o.workers, sizeof(*ws));
    if (!ws)
        goto out;
    for (int i = 0; i < o.workers; i++) {
        struct wstats *st = &ws[i].st;
        ws[i].r = &r;
        st->get_ms = calloc(t.nreq, sizeof(double));
        st->put_ms = calloc(t.nreq, sizeof(double));
        st->req_ms = calloc(t.nreq, sizeof(double));
        bool tier_ok = true;
        for (int g = 0; g < NTIER; g++)
            tier_ok &= (st->tier_ms[g] = calloc(t.nreq, sizeof(double))) != NULL;
        if (!st->get_ms || !st->put_ms || !st->req_ms || !tier_ok) {
            fprintf(stderr, "replay: out of memory\n");
            goto out;
        }
    }
    bool progress = o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO));
    atomic_store(&r.running, 1);
    r.start_ns = mc_now_ns();
    for (; started < o.workers; started++) {
        if (pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]) != 0) {
            fprintf(stderr, "replay: cannot start worker threads\n");
            atomic_store(&r.running, 0);
            break;
        }
    }
    /* the progress line, on a terminal only; the main thread just waits otherwise */
    while (started == o.workers && atomic_load(&r.done) < t.nreq && atomic_load(&r.running)) {
        struct timespec ts = {0, 250 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (!progress)
            continue;
        uint64_t d = atomic_load(&r.done), b = atomic_load(&r.blocks), h = atomic_load(&r.hits);
        fprintf(stderr,
                "\rreplay: %llu/%zu requests, hit ratio %.4f, wrong bytes %llu, refused Puts "
                "%llu, errors %llu  ",
                (unsigned long long)d, t.nreq, b ? (double)h / (double)b : 0.0,
                (unsigned long long)atomic_load(&r.wrong),
                (unsigned long long)atomic_load(&r.refused),
                (unsigned long long)atomic_load(&r.errors));
    }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].tid, NULL);
    if (progress)
        fputc('\n', stderr);
    double secs = (double)(mc_now_ns() - r.start_ns) / 1e9;
    int failed = started < o.workers;
    for (int i = 0; i < started; i++)
        failed |= ws[i].failed;
    if (failed) {
        fprintf(stderr, "replay: a worker could not start or allocate its buffers\n");
        goto out;
    }

    /* merge the workers' figures */
    size_t nreq = 0, nget = 0, nput = 0;
    for (int i = 0; i < o.workers; i++) {
        nreq += ws[i].st.nreq;
        nget += ws[i].st.nget;
        nput += ws[i].st.nput;
    }
    all.req_ms = calloc(nreq + 1, sizeof(double));
    all.get_ms = calloc(nget + 1, sizeof(double));
    all.put_ms = calloc(nput + 1, sizeof(double));
    if (!all.req_ms || !all.get_ms || !all.put_ms)
        goto out;
    for (int g = 0; g < NTIER; g++) {
        size_t ng = 0;
        for (int i = 0; i < o.workers; i++)
            ng += ws[i].st.ntier[g];
        if (!(all.tier_ms[g] = calloc(ng + 1, sizeof(double))))
            goto out;
    }
    for (int i = 0; i < o.workers; i++) {
        struct wstats *s = &ws[i].st;
        all.requests += s->requests;
        all.blocks += s->blocks;
        all.hits += s->hits;
        all.mem_hits += s->mem_hits;
        all.disk_hits += s->disk_hits;
        all.wrong_bytes += s->wrong_bytes;
        all.refused_puts += s->refused_puts;
        all.bytes_read += s->bytes_read;
        all.bytes_written += s->bytes_written;
        all.other_errs += s->other_errs;
        memcpy(all.req_ms + all.nreq, s->req_ms, s->nreq * sizeof(double));
        all.nreq += s->nreq;
        memcpy(all.get_ms + all.nget, s->get_ms, s->nget * sizeof(double));
        all.nget += s->nget;
        memcpy(all.put_ms + all.nput, s->put_ms, s->nput * sizeof(double));
        all.nput += s->nput;
        for (int g = 0; g < NTIER; g++) {
            memcpy(all.tier_ms[g] + all.ntier[g], s->tier_ms[g], s->ntier[g] * sizeof(double));
            all.ntier[g] += s->ntier[g];
            all.tier_blocks[g] += s->tier_blocks[g];
        }
        for (int e = 0; e < s->nerrs; e++)
            merge_err(&all, &s->errs[e]);
    }
    report(&o, &ref, &all, secs);
    if (all.wrong_bytes) {
        fprintf(stderr, "replay: FAILED: %llu wrong bytes read back\n",
                (unsigned long long)all.wrong_bytes);
        rc = 1;
    } else {
        rc = 0;
    }
out:
    if (ws) {
        for (int i = 0; i < o.workers; i++) {
            free(ws[i].st.get_ms);
            free(ws[i].st.put_ms);
            free(ws[i].st.req_ms);
            for (int g = 0; g < NTIER; g++)
                free(ws[i].st.tier_ms[g]);
        }
        free(ws);
    }
    free(all.req_ms);
    free(all.get_ms);
    free(all.put_ms);
    for (int g = 0; g < NTIER; g++)
        free(all.tier_ms[g]);
    mc_client_close(r.client);
    mc_trace_destroy(&t);
    return rc;
}
