/*
 * bench_objects.c - `mooncake_bench objects`: the master core's object table in process.
 *
 * For each --objects count N (default 1M and 10M): a fresh master with one segment large enough,
 * N keys of --key-len bytes (default 40) Put with one replica of --value bytes (default 64),
 * then N random Gets, N random keys as BatchGetReplicaList calls of 16 (`batch_get`, ops/s are
 * keys/s), N Exists, N Removes, and (the N keys Put again) one RemoveAll, single-threaded; the
 * remove_all line's bytes figure is what stays resident per object after it. --remove_all_only
 * skips every phase between the Puts and the RemoveAll (the scale case of RemoveAll alone). The
 * remove_all line also has the process's CPU time (cpu_ms, cpu_ns_per_object: steadier than the
 * wall clock on a shared machine) and the resident MB before and after the RemoveAll.
 * Reported per phase: ops/s; and for the table itself the resident bytes per object beyond the key
 * bytes
 * ((RSS after the Puts - RSS before) / N - key length; target <= 128): this includes the object
 * record, the shard index and entry array, malloc overhead and the segment allocator's node.
 * No reference runs beside it (redis-benchmark is measured against the daemon by
 * `mooncake_bench master`).
 *
 * --promotion=off|on|disk_only (default off) prices the promotion gate on the Get path: `on`
 * enables offload and promotion with every object in DRAM (each Get pays the candidate check
 * only); `disk_only` also gives every object a disk copy (re-registration by a holder that is
 * the Put's client) and evicts its DRAM copy, so every Get runs the sketch and the funnel, and
 * keys read twice are admitted up to the in-flight cap (write lock, mailbox push), the rest
 * rejected by the cap and remembered as retry candidates. Each line then carries "promotion".
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "master/eviction.h"
#include "master/master.h"
#include "mooncake/errors.h"
#include "tools/bench_util.h"

/* --remove_all_only: the Puts, then one RemoveAll of that table (no other phase) */
static bool g_remove_all_only;

static void make_key(char *buf, size_t key_len, uint64_t i)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)i);
    memset(buf, 'k', key_len);
    if ((size_t)n <= key_len)
        memcpy(buf + key_len - (size_t)n, tmp, (size_t)n);
}

enum promo_mode { PROMO_OFF, PROMO_ON, PROMO_DISK_ONLY };
static const char *const g_promo_names[] = {"off", "on", "disk_only"};
static enum promo_mode g_promo = PROMO_OFF;

static void emit(const char *op, uint64_t n, double secs, double bytes_per_obj)
{
    char name[64];
    snprintf(name, sizeof(name), "%s_%llu", op, (unsigned long long)n);
    struct mc_bench_result r;
    mc_bench_result_init(&r, "objects", name);
    r.runs = 1;
    r.ms = secs * 1e3;
    r.p50_ms = r.ms;
    r.p99_ms = r.ms;
    r.ops_per_s = secs > 0 ? (double)n / secs : 0;
    mc_bench_add_str(&r, "op", op);
    mc_bench_add_num(&r, "objects", (double)n);
    if (g_promo != PROMO_OFF)
        mc_bench_add_str(&r, "promotion", g_promo_names[g_promo]);
    if (bytes_per_obj >= 0)
        mc_bench_add_num(&r, "bytes_per_object", bytes_per_obj);
    mc_bench_emit(&r);
}

/* CPU time of this process (the bench is single-threaded while it times): on a loaded machine
 * it moves less than the wall clock. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The remove_all line: wall and CPU time, and resident memory before the Puts (rss0), before
 * the RemoveAll (full) and after it (after); bytes_per_object is what stays per object. */
static void emit_remove_all(uint64_t n, double secs, double cpu_secs, uint64_t rss0, uint64_t full,
                            uint64_t after)
{
    char name[64];
    snprintf(name, sizeof(name), "remove_all_%llu", (unsigned long long)n);
    struct mc_bench_result r;
    mc_bench_result_init(&r, "objects", name);
    r.runs = 1;
    r.ms = secs * 1e3;
    r.p50_ms = r.ms;
    r.p99_ms = r.ms;
    r.ops_per_s = secs > 0 ? (double)n / secs : 0;
    mc_bench_add_str(&r, "op", "remove_all");
    mc_bench_add_num(&r, "objects", (double)n);
    if (g_promo != PROMO_OFF)
        mc_bench_add_str(&r, "promotion", g_promo_names[g_promo]);
    mc_bench_add_num(&r, "cpu_ms", cpu_secs * 1e3);
    mc_bench_add_num(&r, "cpu_ns_per_object", cpu_secs * 1e9 / (double)n);
    mc_bench_add_num(&r, "rss_before_mb", (double)full / (1 << 20));
    mc_bench_add_num(&r, "rss_after_mb", (double)after / (1 << 20));
    mc_bench_add_num(&r, "bytes_per_object", after > rss0 ? (double)(after - rss0) / (double)n : 0);
    mc_bench_emit(&r);
}

static int run(uint64_t n, size_t key_len, uint64_t value, uint64_t seed)
{
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.manual_ticks = true;
    c.default_kv_lease_ttl_ms = 0; /* Gets must not block the Remove phase */
    c.enable_offload = c.promotion_on_hit = g_promo != PROMO_OFF;
    struct mc_master *m = NULL;
    if (mc_master_new(&c, &m) != MC_OK)
        return 1;
    struct mc_id client = {0xbe, 0x17};
    struct mc_segment_desc d;
    memset(&d, 0, sizeof(d));
    d.id = (struct mc_id){0xbe, 1};
    snprintf(d.name, sizeof(d.name), "bench");
    d.base = 0x100000000ull;
    uint64_t unit = (value + 63) / 64 * 64;
    d.size = unit * n + (64ull << 20);
    snprintf(d.endpoint, sizeof(d.endpoint), "127.0.0.1:1");
    snprintf(d.protocol, sizeof(d.protocol), "tcp");
    if (mc_master_mount_segment(m, client, &d, NULL) != MC_OK ||
        (g_promo == PROMO_DISK_ONLY &&
         mc_master_mount_local_disk(m, client, "127.0.0.1:2", 0, false) != MC_OK)) {
        mc_master_free(m);
        return 1;
    }
    char *key = malloc(key_len + 1);
    struct mc_put_start_result *ps = malloc(sizeof(*ps));
    struct mc_get_result *g = malloc(sizeof(*g));
    int rc = 0;
    uint64_t rss0 = mc_bench_rss_bytes();
    uint64_t t0 = mc_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        make_key(key, key_len, i);
        if (mc_master_put_start(m, client, key, key_len, value, NULL, ps) != MC_OK ||
            mc_master_put_end(m, client, key, key_len, 0, 0, false) != MC_OK) {
            fprintf(stderr, "objects: put %llu failed\n", (unsigned long long)i);
            rc = 1;
            goto out;
        }
    }
    uint64_t t1 = mc_now_ns();
    uint64_t rss1 = mc_bench_rss_bytes();
    double per_obj = (double)(rss1 - rss0) / (double)n - (double)key_len;
    emit("put", n, (double)(t1 - t0) / 1e9, per_obj);
    if (g_promo == PROMO_DISK_ONLY) { /* a disk copy of every object, then DRAM evicted */
        for (uint64_t i = 0; i < n && rc == 0; i++) {
            make_key(key, key_len, i);
            struct mc_key_info ki;
            int irc = -1;
            struct mc_offload_result it = {.key = key, .key_len = key_len, .size = value};
            if (mc_master_query_key(m, key, key_len, &ki) != MC_OK)
                rc = 1;
            it.version = ki.version;
            if (rc == 0 &&
                (mc_master_notify_offload(m, client, &it, 1, true, &irc) != MC_OK || irc != MC_OK))
                rc = 1;
        }
        if (rc != 0 || mc_master_batch_evict(m, 1.0, 1.0, NULL) != MC_OK) {
            fprintf(stderr, "objects: disk-only set-up failed\n");
            rc = 1;
            goto out;
        }
    }

    if (g_remove_all_only)
        goto remove_all_phase; /* the table as the Puts left it */
    uint64_t rng = seed;
    t0 = mc_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        make_key(key, key_len, mc_bench_rand(&rng) % n);
        if (mc_master_get_replica_list(m, key, key_len, g) != MC_OK) {
            rc = 1;
            goto out;
        }
    }
    t1 = mc_now_ns();
    emit("get", n, (double)(t1 - t0) / 1e9, -1);

    enum { BATCH = 16 };
    char *bkeys = malloc(BATCH * key_len);
    struct mc_key_ref refs[BATCH];
    struct mc_get_result *bg = malloc(BATCH * sizeof(*bg));
    int brc[BATCH];
    if (!bkeys || !bg) {
        free(bkeys);
        free(bg);
        rc = 1;
        goto out;
    }
    t0 = mc_now_ns();
    for (uint64_t i = 0; i < n; i += BATCH) {
        size_t nb = n - i < BATCH ? (size_t)(n - i) : BATCH;
        for (size_t j = 0; j < nb; j++) {
            make_key(bkeys + j * key_len, key_len, mc_bench_rand(&rng) % n);
            refs[j].data = bkeys + j * key_len;
            refs[j].len = key_len;
        }
        if (mc_master_batch_get_replica_list(m, refs, nb, bg, brc) != MC_OK)
            rc = 1;
        for (size_t j = 0; j < nb; j++)
            rc |= brc[j] != MC_OK;
        if (rc)
            break;
    }
    t1 = mc_now_ns();
    free(bkeys);
    free(bg);
    if (rc)
        goto out;
    emit("batch_get", n, (double)(t1 - t0) / 1e9, -1);

    t0 = mc_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        bool ex;
        make_key(key, key_len, mc_bench_rand(&rng) % n);
        if (mc_master_exist_key(m, key, key_len, &ex) != MC_OK || !ex) {
            rc = 1;
            goto out;
        }
    }
    t1 = mc_now_ns();
    emit("exist", n, (double)(t1 - t0) / 1e9, -1);

    t0 = mc_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        make_key(key, key_len, i);
        if (mc_master_remove(m, key, key_len, false) != MC_OK) {
            rc = 1;
            goto out;
        }
    }
    t1 = mc_now_ns();
    emit("remove", n, (double)(t1 - t0) / 1e9, -1);

    /* RemoveAll: the table filled again, then emptied in one call; its figure is the resident
     * bytes per object the process keeps afterwards (RSS after - RSS before the first Puts) */
    for (uint64_t i = 0; i < n; i++) {
        make_key(key, key_len, i);
        if (mc_master_put_start(m, client, key, key_len, value, NULL, ps) != MC_OK ||
            mc_master_put_end(m, client, key, key_len, 0, 0, false) != MC_OK) {
            rc = 1;
            goto out;
        }
    }
remove_all_phase:;
    uint64_t removed = 0;
    uint64_t rss_full = mc_bench_rss_bytes(), cpu0 = cpu_ns();
    t0 = mc_now_ns();
    if (mc_master_remove_all(m, true, &removed) != MC_OK || removed != n) {
        rc = 1;
        goto out;
    }
    t1 = mc_now_ns();
    uint64_t cpu1 = cpu_ns(), rss2 = mc_bench_rss_bytes();
    emit_remove_all(n, (double)(t1 - t0) / 1e9, (double)(cpu1 - cpu0) / 1e9, rss0, rss_full, rss2);
out:
    free(key);
    free(ps);
    free(g);
    mc_master_free(m);
    return rc;
}

static void usage(void)
{
    fprintf(stderr, "usage: mooncake_bench objects [--objects 1000000,10000000] [--key-len 40]\n"
                    "                              [--value 64] [--seed S]\n"
                    "                              [--promotion off|on|disk_only]\n"
                    "                              [--remove_all_only]\n");
}

int mc_bench_objects(int argc, char **argv)
{
    uint64_t counts[8] = {1000000, 10000000};
    int ncounts = 2;
    size_t key_len = 40;
    uint64_t value = 64, seed = 0x2545f4914f6cdd1dull;
    static const struct option opts[] = {
        {"objects", required_argument, 0, 'n'},
        {"key-len", required_argument, 0, 'k'},
        {"value", required_argument, 0, 'v'},
        {"seed", required_argument, 0, 's'},
        {"runs", required_argument, 0, 'r'},
        {"promotion", required_argument, 0, 'p'},
        {"remove_all_only", no_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'n':
            ncounts = mc_bench_parse_sizes(optarg, counts, 8);
            break;
        case 'k':
            key_len = (size_t)strtoull(optarg, NULL, 0);
            break;
        case 'v':
            value = strtoull(optarg, NULL, 0);
            break;
        case 's':
            seed = strtoull(optarg, NULL, 0);
            break;
        case 'r':
            break; /* one run per count: the memory figure needs a fresh process state */
        case 'p':
            g_promo = !strcmp(optarg, "on")          ? PROMO_ON
                      : !strcmp(optarg, "disk_only") ? PROMO_DISK_ONLY
                      : !strcmp(optarg, "off")       ? PROMO_OFF
                                                     : (enum promo_mode) - 1;
            if ((int)g_promo < 0) {
                usage();
                return 2;
            }
            break;
        case 'R':
            g_remove_all_only = true;
            break;
        case 'h':
            usage();
            return 0;
        default:
            usage();
            return 2;
        }
    }
    if (ncounts <= 0 || key_len < 20 || key_len > 4096 || value == 0 || seed == 0) {
        usage();
        return 2;
    }
    for (int i = 0; i < ncounts; i++) {
        if (counts[i] == 0 || run(counts[i], key_len, value, seed) != 0) {
            fprintf(stderr, "objects: run with %llu objects failed\n",
                    (unsigned long long)counts[i]);
            return 1;
        }
    }
    return 0;
}
