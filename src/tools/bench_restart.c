/*
 * bench_restart.c - mooncake_bench restart: how long a master restart keeps DRAM objects away.
 *
 * Set-up (once): a mooncake_master on a loopback port and --daemons mooncake_client daemons,
 * each with a DRAM segment and no disk tier, and an in-process library client without DRAM.
 * The client puts --objects values of --size bytes (content derived from the key's index) in
 * batches; the master places them over the daemons' segments, and each daemon's holder index
 * records its own. After a pause (the index's flush interval is 10 ms) each run SIGKILLs the
 * master, starts it again on the same port, and times, from the kill:
 *   seconds_to_first_get: until one Get returns an object's exact bytes;
 *   seconds_to_all:       until the master knows every object again (BatchExist passes over
 *                         the objects not known yet, so the bench's reads do not pace it);
 *   seconds_to_all_read:  until, after that, every object was read and compared (a full
 *                         read of the data: on a small machine the reads dominate).
 * The holders see the new master epoch, remount their segments with the same ranges and
 * re-register what their index lists. Reported as one JSON line: objects, back (objects read
 * back with their bytes in the worst run), wrong (objects read back with other bytes, over
 * every run: must be 0), the median seconds over --runs.
 */
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "tools/bench_procs.h"
#include "tools/bench_util.h"
#include "tools/bench_values.h"
#include "tools/proc_harness.h"

#define MAX_RUNS 64
#define MAX_DAEMONS 16
#define BATCH MC_BENCH_VALUES_BATCH

struct rs_opts {
    int objects, daemons, runs, wait_s, pause_ms;
    uint64_t size;
    const char *bin, *dir;
    char bindir[PATH_MAX], tmp[PATH_MAX];
};

struct rs_state {
    struct rs_opts o;
    struct mc_bench_values v; /* the objects: keys rs-%08d */
    struct mc_proc master;
    uint16_t port;
    struct mc_proc daemon[MAX_DAEMONS];
    struct mc_client *c;
    uint8_t *bufs, *want;
    bool *back, *known;
    uint64_t wrong, t_first;
};

/* ---- processes ------------------------------------------------------------------------------ */

static int start_master(struct rs_state *s)
{
    const struct mc_bench_procs b = {.bench = "restart", .bin = s->o.bindir, .dir = s->o.tmp};
    /* the port of the killed master may still be in TIME_WAIT for a moment: retried */
    return mc_bench_start_master(&b, s->port, NULL, 20000, &s->master, &s->port);
}

static int start_daemon(struct rs_state *s, int i)
{
    const struct mc_bench_procs b = {.bench = "restart", .bin = s->o.bindir, .dir = s->o.tmp};
    /* twice the daemon's share of the data: the master's placement need not be even */
    uint64_t seg =
        (uint64_t)s->o.objects * (s->o.size + 64) * 2 / (uint64_t)s->o.daemons + (64ull << 20);
    char master[64], name[32];
    snprintf(master, sizeof(master), "127.0.0.1:%u", (unsigned)s->port);
    snprintf(name, sizeof(name), "daemon%d", i);
    return mc_bench_start_daemon(&b, name, master, seg, NULL, &s->daemon[i]);
}

/* ---- data ----------------------------------------------------------------------------------- */

static int put_all(struct rs_state *s)
{
    const struct rs_opts *o = &s->o;
    char kb[BATCH][24];
    const char *keys[BATCH];
    const void *bp[BATCH];
    size_t lens[BATCH];
    int res[BATCH];
    for (int i0 = 0; i0 < o->objects; i0 += BATCH) {
        int n = o->objects - i0 < BATCH ? o->objects - i0 : BATCH;
        for (int j = 0; j < n; j++) {
            mc_bench_value_key(&s->v, i0 + j, kb[j], sizeof(kb[j]));
            keys[j] = kb[j];
            mc_bench_value_fill(s->bufs + (size_t)j * o->size, o->size, (uint64_t)(i0 + j));
            bp[j] = s->bufs + (size_t)j * o->size;
            lens[j] = o->size;
        }
        int rc = mc_batch_put(s->c, (size_t)n, keys, bp, lens, NULL, res);
        for (int j = 0; rc == 0 && j < n; j++)
            rc = res[j];
        if (rc != 0) {
            fprintf(stderr, "restart: put of %s..: %s\n", keys[0], mc_strerror(rc));
            return -1;
        }
    }
    return 0;
}

/* ---- the bench ------------------------------------------------------------------------------ */

static int parse(int argc, char **argv, struct rs_opts *o)
{
    *o = (struct rs_opts){.objects = 10000,
                          .daemons = 2,
                          .runs = 1,
                          .wait_s = 120,
                          .pause_ms = 500,
                          .size = 4096,
                          .bin = "",
                          .dir = ""};
    const struct mc_bench_opt opts[] = {
        {.name = "objects",
         .type = MC_BENCH_INT,
         .dst = &o->objects,
         .arg = "N",
         .help = "objects put into DRAM before the kill"},
        {.name = "size",
         .type = MC_BENCH_SIZE,
         .dst = &o->size,
         .arg = "SIZE",
         .help = "value size (8 B .. 64MiB)"},
        {.name = "daemons",
         .type = MC_BENCH_INT,
         .dst = &o->daemons,
         .arg = "N",
         .help = "mooncake_client daemons holding the DRAM segments (1..16)"},
        {.name = "runs",
         .type = MC_BENCH_INT,
         .dst = &o->runs,
         .arg = "N",
         .help = "master kills and restarts (the same objects each time)"},
        {.name = "wait",
         .type = MC_BENCH_INT,
         .dst = &o->wait_s,
         .arg = "SECONDS",
         .help = "how long a run waits for every object to come back"},
        {.name = "pause_ms",
         .type = MC_BENCH_INT,
         .dst = &o->pause_ms,
         .arg = "MS",
         .help = "pause between the last Put and the kill (the index flushes every 10 ms)"},
        {.name = "bin",
         .type = MC_BENCH_STR,
         .dst = &o->bin,
         .arg = "DIR",
         .help = "where mooncake_master and mooncake_client are",
         .dflt = "this executable's directory"},
        {.name = "dir",
         .type = MC_BENCH_STR,
         .dst = &o->dir,
         .arg = "DIR",
         .help = "where the logs go (a new directory inside, removed afterwards)",
         .dflt = "$TMPDIR or /tmp"},
    };
    struct mc_bench_cli cli = {
        .bench = "restart",
        .about = "Times a master restart with DRAM objects: a master and --daemons daemons,\n"
                 "--objects values put into DRAM, the master SIGKILLed and started again on\n"
                 "the same port; from the kill to the first Get with the right bytes, and to\n"
                 "every object read back with its bytes. Binaries from --bin.",
        .opts = opts,
        .nopts = sizeof(opts) / sizeof(opts[0])};
    int prc = mc_bench_opts_parse(&cli, argc, argv);
    if (prc)
        return prc;
    const char *bad = o->objects < 1                               ? "--objects must be at least 1"
                      : o->size < 8 || o->size > (64u << 20)       ? "--size must be 8 B .. 64MiB"
                      : o->daemons < 1 || o->daemons > MAX_DAEMONS ? "--daemons must be 1..16"
                      : o->runs < 1 || o->runs > MAX_RUNS          ? "--runs must be 1..64"
                      : o->wait_s < 1                              ? "--wait must be at least 1"
                      : o->pause_ms < 0 ? "--pause_ms must not be negative"
                                        : NULL;
    if (bad) {
        fprintf(stderr, "bench restart: %s\n", bad);
        mc_bench_opts_usage(stderr, &cli);
        return 2;
    }
    if (o->bin[0])
        snprintf(o->bindir, sizeof(o->bindir), "%s", o->bin);
    else
        mc_bench_self_dir(o->bindir, sizeof(o->bindir));
    return 0;
}

/* One kill and restart; first/all in seconds from the kill. Returns the objects back. */
/* The first Get: key i, just seen by the master, read and compared. */
static void first_get(struct rs_state *s, int i)
{
    char key[24];
    mc_bench_value_key(&s->v, i, key, sizeof(key));
    int64_t got = mc_get(s->c, key, s->bufs, s->o.size);
    if (got < 0)
        return;
    mc_bench_value_fill(s->want, s->o.size, (uint64_t)i);
    if (got != (int64_t)s->o.size || memcmp(s->bufs, s->want, s->o.size) != 0) {
        fprintf(stderr, "restart: %s read back other bytes\n", key);
        s->wrong++;
        return;
    }
    s->t_first = mc_proc_now_ms();
}

/* Asks the master (BatchExist) about every object it did not know yet; the first one known is
 * read (first_get). Returns how many it knows now, or -1 when it did not answer a batch. */
static int exist_pass(struct rs_state *s)
{
    const struct rs_opts *o = &s->o;
    char kb[BATCH][24];
    const char *keys[BATCH];
    int res[BATCH], idx[BATCH], nknown = 0;
    for (int i = 0; i < o->objects;) {
        int n = 0;
        for (; i < o->objects && n < BATCH; i++) {
            if (s->known[i]) {
                nknown++;
                continue;
            }
            mc_bench_value_key(&s->v, i, kb[n], sizeof(kb[n]));
            keys[n] = kb[n];
            res[n] = 0;
            idx[n++] = i;
        }
        if (!n)
            break;
        if (mc_batch_exist(s->c, (size_t)n, keys, res) != 0)
            return -1;
        for (int j = 0; j < n; j++)
            if (res[j] == 1) {
                s->known[idx[j]] = true;
                nknown++;
                if (!s->t_first)
                    first_get(s, idx[j]);
            }
    }
    return nknown;
}

/* One kill and restart: from the kill, seconds to the first Get with the right bytes (first),
 * to every object known and readable (all: BatchExist), and to every object read and compared
 * (all_read; the reads start once all are known). Returns the objects read back right. */
static int one_run(struct rs_state *s, int run, double *first, double *all, double *all_read)
{
    const struct rs_opts *o = &s->o;
    memset(s->back, 0, (size_t)o->objects * sizeof(bool));
    memset(s->known, 0, (size_t)o->objects * sizeof(bool));
    s->t_first = 0;
    uint64_t t0 = mc_proc_now_ms(), t_end = t0 + (uint64_t)o->wait_s * 1000;
    mc_proc_stop(&s->master, SIGKILL, 5000);
    if (start_master(s) != 0)
        return -1;
    uint64_t t_up = mc_proc_now_ms();
    int nk = 0, nb = 0;
    while (nk < o->objects && mc_proc_now_ms() < t_end) {
        int got = exist_pass(s);
        if (got > nk)
            nk = got;
        if (nk < o->objects)
            mc_proc_sleep_ms(5);
    }
    uint64_t t_all = mc_proc_now_ms();
    while (nb < o->objects && mc_proc_now_ms() < t_end) {
        int got = mc_bench_read_pass(s->c, &s->v, s->back, s->bufs, s->want, &s->wrong);
        if (got > nb)
            nb = got;
        if (nb < o->objects)
            mc_proc_sleep_ms(5);
    }
    uint64_t t_read = mc_proc_now_ms();
    *first = s->t_first ? (double)(s->t_first - t0) / 1000.0 : -1;
    *all = nk == o->objects ? (double)(t_all - t0) / 1000.0 : -1;
    *all_read = nb == o->objects ? (double)(t_read - t0) / 1000.0 : -1;
    fprintf(stderr,
            "  run %d: master up in %.3f s, first Get %.3f s, %d/%d known in %.3f s, %d read "
            "back right in %.3f s, %llu wrong\n",
            run, (double)(t_up - t0) / 1000.0, *first, nk, o->objects,
            (double)(t_all - t0) / 1000.0, nb, (double)(t_read - t0) / 1000.0,
            (unsigned long long)s->wrong);
    return nb;
}

int mc_bench_restart(int argc, char **argv)
{
    struct rs_state *s = calloc(1, sizeof(*s));
    if (!s)
        return 1;
    int prc = parse(argc, argv, &s->o), status = 1;
    if (prc) {
        free(s);
        return prc == 1 ? 0 : 2;
    }
    struct rs_opts *o = &s->o;
    s->v = (struct mc_bench_values){
        .bench = "restart", .prefix = "rs", .objects = o->objects, .size = o->size};
    if (mc_proc_mkdtemp(o->tmp, sizeof(o->tmp), o->dir[0] ? o->dir : NULL, "mc_bench_restart") !=
        0) {
        fprintf(stderr, "restart: cannot create a directory\n");
        free(s);
        return 1;
    }
    double first[MAX_RUNS], all[MAX_RUNS], all_read[MAX_RUNS];
    int min_back = o->objects, failed_runs = 0;
    s->bufs = malloc(BATCH * o->size);
    s->want = malloc(o->size);
    s->back = calloc((size_t)o->objects, sizeof(bool));
    s->known = calloc((size_t)o->objects, sizeof(bool));
    if (!s->bufs || !s->want || !s->back || !s->known)
        goto out;
    if (start_master(s) != 0)
        goto out;
    for (int i = 0; i < o->daemons; i++)
        if (start_daemon(s, i) != 0)
            goto out;
    char url[64];
    snprintf(url, sizeof(url), "127.0.0.1:%u", (unsigned)s->port);
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = url;
    cfg.segment_size = 0;
    cfg.rpc_timeout_ms = 2000;
    if (mc_client_open(&cfg, &s->c) != 0) {
        fprintf(stderr, "restart: cannot open a client of %s\n", url);
        goto out;
    }
    uint64_t tp = mc_proc_now_ms();
    if (put_all(s) != 0)
        goto out;
    fprintf(stderr, "restart: %d objects of %llu bytes put over %d daemons in %.2f s\n", o->objects,
            (unsigned long long)o->size, o->daemons, (double)(mc_proc_now_ms() - tp) / 1000.0);
    mc_proc_sleep_ms(o->pause_ms);
    for (int r = 0; r < o->runs; r++) {
        int nb = one_run(s, r, &first[r], &all[r], &all_read[r]);
        if (nb < 0)
            goto out;
        if (nb < min_back)
            min_back = nb;
        if (nb < o->objects)
            failed_runs++;
        if (all[r] < 0)
            all[r] = (double)o->wait_s; /* counted at the limit in the median */
        if (all_read[r] < 0)
            all_read[r] = (double)o->wait_s;
        if (first[r] < 0)
            first[r] = (double)o->wait_s;
    }
    struct mc_bench_result res;
    mc_bench_result_init(&res, "restart", "master_sigkill");
    res.runs = o->runs;
    double tmp[MAX_RUNS];
    memcpy(tmp, all, sizeof(double) * (size_t)o->runs);
    double all_med = mc_bench_median(all, (size_t)o->runs), first_med;
    res.p99_ms = mc_bench_percentile(tmp, (size_t)o->runs, 99) * 1000.0;
    res.p50_ms = mc_bench_percentile(tmp, (size_t)o->runs, 50) * 1000.0;
    res.ms = all_med * 1000.0;
    memcpy(tmp, first, sizeof(double) * (size_t)o->runs);
    first_med = mc_bench_median(tmp, (size_t)o->runs);
    mc_bench_add_num(&res, "objects", o->objects);
    mc_bench_add_num(&res, "back", min_back);
    mc_bench_add_num(&res, "wrong", (double)s->wrong);
    mc_bench_add_num(&res, "seconds_to_first_get", first_med);
    mc_bench_add_num(&res, "seconds_to_all", all_med);
    mc_bench_add_num(&res, "seconds_to_all_read", mc_bench_median(all_read, (size_t)o->runs));
    mc_bench_add_num(&res, "daemons", o->daemons);
    mc_bench_add_num(&res, "size", (double)o->size);
    mc_bench_emit(&res);
    status = failed_runs || s->wrong ? 1 : 0;
out:
    if (status)
        for (int i = 0; i < o->daemons; i++)
            mc_proc_dump_log(&s->daemon[i], "daemon", 2000);
    mc_client_close(s->c);
    for (int i = 0; i < o->daemons; i++)
        mc_proc_stop(&s->daemon[i], SIGTERM, 10000);
    mc_proc_stop(&s->master, SIGTERM, 10000);
    if (strstr(o->tmp, "/mc_bench_restart."))
        mc_proc_rm_rf(o->tmp);
    free(s->bufs);
    free(s->want);
    free(s->back);
    free(s->known);
    free(s);
    return status;
}
