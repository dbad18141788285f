/*
 * eviction_life.c - the eviction module around its cycles (eviction.c): the loop's tick, the
 * test knobs, path names, accounting and metrics, and the evictor's lifecycle.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/metrics.h"
#include "master/eviction_state.h"
#include "master/master_state.h"
#include "mooncake/errors.h"

const char *mc_evict_path_name(enum mc_evict_path p)
{
    switch (p) {
    case MC_EVICT_SELECTIVE:
        return "selective";
    case MC_EVICT_FULL_BYPASS:
        return "full_bypass";
    case MC_EVICT_FULL_FALLBACK:
        return "full_fallback";
    case MC_EVICT_BY_CUT:
        return "by_cut";
    }
    return "unknown";
}

void ev_account(struct mc_master *m, struct mc_evictor *ev, const struct mc_evict_stats *st)
{
    if (st->evicted) {
        atomic_fetch_add_explicit(&m->c.successful_evictions, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->c.evicted_key_count, st->evicted, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->c.evicted_size_bytes, st->evicted_bytes,
                                  memory_order_relaxed);
    } else if (st->evictable) {
        atomic_fetch_add_explicit(&m->c.attempted_evictions, 1, memory_order_relaxed);
    }
    if (ev->cycles[st->path])
        mc_counter_inc(ev->cycles[st->path]);
    if (ev->materialized)
        mc_counter_add(ev->materialized, st->materialized);
    if (ev->refilled)
        mc_counter_add(ev->refilled, st->refills);
    if (ev->duration)
        mc_histogram_observe(ev->duration, (double)st->duration_ns / 1e6);
}

/* ---- the loop ------------------------------------------------------------------------------- */

int mc_eviction_tick(struct mc_master *m)
{
    if (!m || !m->evictor)
        return 0;
    double used = mc_segments_used_ratio(m->segs);
    double hw = m->cfg.eviction_high_watermark_ratio, r = m->cfg.eviction_ratio;
    bool need = atomic_load_explicit(&m->need_eviction, memory_order_relaxed);
    if (!(used > hw || (need && r > 0)))
        return 0;
    double target = used - hw + r > r ? used - hw + r : r;
    if (target > 1.0)
        target = 1.0;
    double lower = used - hw > target / 2 ? used - hw : target / 2;
    struct mc_evict_stats st;
    /* A failed PutStart asks for one cycle, not for eviction until something goes: a request
     * left armed while every candidate is leased would later evict objects Put long after the
     * failure, at any usage. A PutStart that fails again (a client retrying) asks again. */
    if (need)
        atomic_store_explicit(&m->need_eviction, false, memory_order_relaxed);
    if (mc_master_batch_evict(m, target, lower, &st) != MC_OK)
        return 0;
    return st.evicted > (uint64_t)INT32_MAX ? INT32_MAX : (int)st.evicted;
}

void mc_master_evict_set_test_opts(struct mc_master *m, const struct mc_evict_test_opts *opts)
{
    if (!m || !m->evictor)
        return;
    pthread_mutex_lock(&m->evictor->cycle_lock);
    if (opts)
        m->evictor->opts = *opts;
    else
        memset(&m->evictor->opts, 0, sizeof(m->evictor->opts));
    pthread_mutex_unlock(&m->evictor->cycle_lock);
}

/* ---- lifecycle and metrics ------------------------------------------------------------------ */

#define RD_COUNTER(fn, field)                                                                      \
    static double fn(void *arg)                                                                    \
    {                                                                                              \
        struct mc_master *m = arg;                                                                 \
        return (double)atomic_load_explicit(&m->c.field, memory_order_relaxed);                    \
    }
RD_COUNTER(rd_successful, successful_evictions)
RD_COUNTER(rd_attempted, attempted_evictions)
RD_COUNTER(rd_keys, evicted_key_count)
RD_COUNTER(rd_bytes, evicted_size_bytes)

static void register_metrics(struct mc_master *m, struct mc_evictor *ev)
{
    struct mc_metrics *reg = m->metrics;
    if (!reg)
        return;
    mc_metrics_counter_fn(reg, "master_successful_evictions_total",
                          "eviction cycles that evicted something", NULL, rd_successful, m);
    mc_metrics_counter_fn(reg, "master_attempted_evictions_total",
                          "eviction cycles that found candidates but evicted nothing", NULL,
                          rd_attempted, m);
    mc_metrics_counter_fn(reg, "master_evicted_key_count", "objects evicted from DRAM", NULL,
                          rd_keys, m);
    mc_metrics_counter_fn(reg, "master_evicted_size_bytes", "DRAM bytes released by eviction", NULL,
                          rd_bytes, m);
    static const char *const path_help = "eviction cycles by candidate path";
    for (int p = 0; p < 4; p++)
        ev->cycles[p] = mc_metrics_counter(reg, "master_eviction_cycles_total", path_help,
                                           MC_LABELS("path", mc_evict_path_name(p)));
    ev->materialized = mc_metrics_counter(
        reg, "master_eviction_materialized_total",
        "candidate identities built by eviction cycles (refills included)", NULL);
    ev->refilled = mc_metrics_counter(reg, "master_eviction_refilled_total",
                                      "candidate identities built by refill scans", NULL);
    double bounds[14];
    mc_metrics_exp_buckets(bounds, 14, 0.125, 2.0); /* 0.125 ms .. 1 s */
    ev->duration = mc_metrics_histogram(reg, "master_eviction_duration_ms",
                                        "wall time of one eviction cycle", NULL, bounds, 14);
}

int mc_eviction_init(struct mc_master *m)
{
    struct mc_evictor *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -1;
    pthread_mutex_init(&ev->cycle_lock, NULL);
    unsigned n = m->cfg.eviction_threads;
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 1 ? (unsigned)(cpus - 1) : 1;
    }
    ev->nthreads = n > EV_MAX_THREADS ? EV_MAX_THREADS : n;
    ev->parts = calloc(ev->nthreads, sizeof(*ev->parts));
    ev->workers = calloc(ev->nthreads, sizeof(*ev->workers));
    ev->hist = malloc(EV_HIST_SIZE * sizeof(*ev->hist));
    m->evictor = ev;
    if (!ev->parts || !ev->workers || !ev->hist) {
        mc_eviction_destroy(m);
        return -1;
    }
    register_metrics(m, ev);
    return 0;
}

void mc_eviction_destroy(struct mc_master *m)
{
    struct mc_evictor *ev = m->evictor;
    if (!ev)
        return;
    for (unsigned i = 0; ev->parts && i < ev->nthreads; i++) {
        free(ev->parts[i].leases.v);
        free(ev->parts[i].plain.v);
        free(ev->parts[i].soft.v);
    }
    for (unsigned i = 0; ev->workers && i < ev->nthreads; i++) {
        free(ev->workers[i].objs);
        free(ev->workers[i].members);
        free(ev->workers[i].ub.objs);
        free(ev->workers[i].map);
        ev_unlink_hashes_free(&ev->workers[i].uh);
        free(ev->workers[i].moved.v);
        ev_held_free(&ev->workers[i].held);
        free(ev->workers[i].shard_cands.v);
    }
    for (unsigned i = 0; i < MC_NSHARDS; i++) {
        free(ev->fwd[i].v);
    }
    free(ev->parts);
    free(ev->workers);
    free(ev->leases.v);
    free(ev->scratch.v);
    free(ev->sample.v);
    free(ev->plain.v);
    free(ev->soft.v);
    free(ev->ridx);
    free(ev->hist);
    pthread_mutex_destroy(&ev->cycle_lock);
    free(ev);
    m->evictor = NULL;
}
