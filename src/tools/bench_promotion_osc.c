/*
 * bench_promotion_osc.c - `mooncake_bench promotion`'s oscillation run: promotions per hot key
 * while cold Puts keep DRAM full (described in bench_promotion.c).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/parse.h"
#include "mooncake/client.h"
#include "tools/bench_util.h"
#include "tools/proc_harness.h"
#include "tools/bench_promotion.h"

/* ---- oscillation --------------------------------------------------------------------------- */

struct osc_ctx {
    const struct promo_opts *o;
    struct mc_client *c;
    int nhot;
    int *hot;
    _Atomic bool stop;
    _Atomic uint64_t cold_puts;
};

static void *osc_reader(void *arg)
{
    struct osc_ctx *x = arg;
    uint8_t *buf = malloc(1u << 20);
    char key[64];
    for (int k = 0; buf && !atomic_load(&x->stop); k = (k + 1) % x->nhot) {
        snprintf(key, sizeof(key), "osc-%d", x->hot[k]);
        mc_get(x->c, key, buf, 1u << 20);
    }
    free(buf);
    return NULL;
}

static void *osc_putter(void *arg)
{
    struct osc_ctx *x = arg;
    uint8_t *buf = malloc(1u << 20);
    char key[64];
    for (uint64_t i = 0; buf && !atomic_load(&x->stop); i++) {
        snprintf(key, sizeof(key), "cold-%llu", (unsigned long long)i);
        mc_promo_fill(buf, 1u << 20, i + 99);
        if (mc_put(x->c, key, buf, 1u << 20, NULL) == 0)
            atomic_fetch_add(&x->cold_puts, 1);
        else
            usleep(2000);
    }
    free(buf);
    return NULL;
}

int mc_promo_osc_case(const struct promo_opts *o)
{
    struct promo_cluster cl = {.master.out_fd = -1, .daemon.out_fd = -1};
    struct mc_client *c = NULL;
    char disk[PATH_MAX + 16], key[64];
    int rc = -1, nkeys = (int)(2 * o->segment_size / (1u << 20)) + o->osc_hot;
    int *hot = calloc((size_t)nkeys, sizeof(int)), nhot = 0;
    int *trans = calloc((size_t)nkeys, sizeof(int)), *was_mem = calloc((size_t)nkeys, sizeof(int));
    uint8_t *buf = malloc(1u << 20);
    struct osc_ctx x = {.o = o};
    pthread_t tr, tp;
    bool started = false;
    snprintf(disk, sizeof(disk), "%s/osc", o->dir);
    if (!hot || !trans || !was_mem || !buf || mc_promo_start_master(o, &cl, true) != 0 ||
        mc_promo_open_client(cl.rpc, o->segment_size, disk, 64ull << 30, &c) != 0)
        goto out;
    if (mc_promo_put_keys(c, "osc", nkeys, 1u << 20, buf) != 0)
        goto out;
    for (int i = 0; i < nkeys && nhot < o->osc_hot; i++) {
        snprintf(key, sizeof(key), "osc-%d", i);
        if (mc_promo_tiers_of(c, key) == 2)
            hot[nhot++] = i;
    }
    if (!nhot)
        goto out;
    x.c = c;
    x.nhot = nhot;
    x.hot = hot;
    double adm0 = mc_promo_metric(&cl, "master_promotion_admitted_total");
    if (pthread_create(&tr, NULL, osc_reader, &x) != 0)
        goto out;
    if (pthread_create(&tp, NULL, osc_putter, &x) != 0) {
        atomic_store(&x.stop, true);
        pthread_join(tr, NULL);
        goto out;
    }
    started = true;
    uint64_t end = mc_now_ms() + (uint64_t)o->osc_seconds * 1000;
    while (mc_now_ms() < end) {
        for (int k = 0; k < nhot; k++) {
            snprintf(key, sizeof(key), "osc-%d", hot[k]);
            int mem = (mc_promo_tiers_of(c, key) & 1) != 0;
            if (mem && !was_mem[k])
                trans[k]++;
            was_mem[k] = mem;
        }
        usleep(10000);
    }
    double adm = mc_promo_metric(&cl, "master_promotion_admitted_total") - adm0;
    atomic_store(&x.stop, true);
    pthread_join(tr, NULL);
    pthread_join(tp, NULL);
    started = false;
    int maxt = 0;
    for (int k = 0; k < nhot; k++)
        maxt = trans[k] > maxt ? trans[k] : maxt;
    struct mc_bench_result r;
    mc_bench_result_init(&r, "promotion", "oscillation");
    r.runs = nhot;
    mc_bench_add_num(&r, "hot_keys", nhot);
    mc_bench_add_num(&r, "seconds", o->osc_seconds);
    mc_bench_add_num(&r, "admitted", adm);
    mc_bench_add_num(&r, "max_admitted_per_key", maxt);
    mc_bench_add_num(&r, "cold_puts", (double)atomic_load(&x.cold_puts));
    mc_bench_emit(&r);
    rc = 0;
out:
    if (started) {
        atomic_store(&x.stop, true);
        pthread_join(tr, NULL);
        pthread_join(tp, NULL);
    }
    mc_client_close(c);
    mc_promo_stop(&cl.master);
    mc_promo_rm_store(disk);
    free(hot);
    free(trans);
    free(was_mem);
    free(buf);
    return rc;
}
