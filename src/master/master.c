/*
 * master.c - lifecycle of the master core (config, new/free), the reaper and eviction ticks, and
 * statistics.
 *
 * The reaper tick does three things: frees the buffers whose release time came on the
 * deferred-free list (taken-over Puts, objects force-removed under a read lease), erases Puts still
 * unfinished put_start_release_timeout after their PutStart (their writers are presumed dead), and,
 * at most every MC_SOFT_PIN_SWEEP_MS, clears expired soft pins so the eviction census sees them as
 * plain objects (soft pins are also checked against their deadline wherever they matter, so the
 * sweep is only bookkeeping).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "master/clients.h"
#include "master/discard.h"
#include "master/freelist.h"
#include "master/eviction.h"
#include "master/holder_stream.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/offload_internal.h"
#include "master/objects.h"
#include "master/offload.h"
#include "master/promotion_core.h"
#include "master/shard.h"
#include "master/tombstone.h"
#include "master/upsert.h"
#include "mooncake/errors.h"

#define MC_SOFT_PIN_SWEEP_MS 30000u

static int register_metrics(struct mc_master *m);

/* eviction.c's lifecycle (eviction.h): mc_master_new calls mc_eviction_init after the metrics
 * registry exists and mc_master_free calls mc_eviction_destroy first. Plain references: a
 * build without eviction.c is a link error, not a master that silently never evicts. */

void mc_master_config_init(struct mc_master_config *c)
{
    memset(c, 0, sizeof(*c));
    c->clock = NULL;
    c->manual_ticks = false;
    c->default_kv_lease_ttl_ms = 10000;
    c->default_kv_soft_pin_ttl_ms = 30ull * 60 * 1000;
    c->max_kv_soft_pin_ttl_ms = 24ull * 3600 * 1000;
    c->allow_evict_soft_pinned_objects = true;
    c->object_huge_pages = true;
    c->eviction_ratio = 0.05;
    c->eviction_high_watermark_ratio = 0.90;
    c->client_ttl_ms = 10000;
    c->put_start_discard_timeout_ms = 30000;
    c->put_start_release_timeout_ms = 600000;
    c->allocation_strategy = MC_ALLOC_RANDOM;
    c->max_key_len = 4096;
    c->epoch = 0;
    c->eviction_reserve_min = 1024;
    c->eviction_frontier_min = 65536;
    c->eviction_threads = 0;
    c->promotion_on_hit = false;
    c->promotion_admission_threshold = 2;
    c->promotion_batch_admission_threshold = 12;
    c->promotion_queue_limit = 50000;
    c->promotion_max_per_heartbeat = 32;
    c->promotion_task_timeout_ms = 30000;
    c->enable_offload = false;
    c->offload_on_evict = false;
    c->offload_force_evict = false;
    c->offload_cap_ratio = 0.5;
    c->offloading_queue_limit = 50000;
    c->delete_queue_limit = 1000000;
    c->holder_stream = true;
    c->holder_index_flush_ms = 10;
    c->holder_backlog_limit = 1000000;
}

static int check_config(const struct mc_master_config *c)
{
    if (!(c->eviction_ratio >= 0.0 && c->eviction_ratio <= 1.0) ||
        !(c->eviction_high_watermark_ratio >= 0.0 && c->eviction_high_watermark_ratio <= 1.0))
        return MC_ERR_INVALID_PARAMS;
    if (c->default_kv_soft_pin_ttl_ms > c->max_kv_soft_pin_ttl_ms)
        return MC_ERR_INVALID_PARAMS;
    if (c->put_start_release_timeout_ms <= c->put_start_discard_timeout_ms)
        return MC_ERR_INVALID_PARAMS;
    if (c->max_key_len == 0 || c->max_key_len > 65535)
        return MC_ERR_INVALID_PARAMS;
    if (c->offload_on_evict && !c->enable_offload)
        return MC_ERR_INVALID_PARAMS;
    if (!(c->offload_cap_ratio >= 0.0 && c->offload_cap_ratio <= 1.0))
        return MC_ERR_INVALID_PARAMS;
    if (c->allocation_strategy != MC_ALLOC_RANDOM &&
        c->allocation_strategy != MC_ALLOC_FREE_RATIO_FIRST)
        return MC_ERR_INVALID_PARAMS;
    return MC_OK;
}

static uint64_t realtime_now_ns(const struct mc_clock *clk)
{
    (void)clk;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const struct mc_clock g_realtime = {realtime_now_ns};

/* The incarnation's first version: its start in wall-clock ms since 2020 in the high bits. */
static uint64_t derive_version_base(const struct mc_clock *wall)
{
    uint64_t ms = mc_clock_now_ms(wall ? wall : &g_realtime);
    if (ms <= MC_VERSION_EPOCH_UNIX_MS) {
        mc_warn("master", "wall clock before 2020: versions may not exceed earlier runs'",
                "unix_ms=%llu", (unsigned long long)ms);
        ms = MC_VERSION_EPOCH_UNIX_MS + 1;
    }
    return (ms - MC_VERSION_EPOCH_UNIX_MS) << MC_VERSION_SEQ_BITS;
}

/* The object events' subscribers, in their fixed order (object_events.h): promotion, then
 * offload (the holder stream will come last). Each registers only the events its configuration
 * needs. */
static int subscribe(struct mc_master *m)
{
    if (mc_promotion_subscribe(m) != 0 || mc_offload_subscribe(m) != 0 ||
        mc_holder_stream_subscribe(m) != 0) {
        mc_error("master", "object events: subscriber table full", "max=%d", MC_OBJ_SUBS_MAX);
        return -1;
    }
    return 0;
}

int mc_master_new(const struct mc_master_config *c, struct mc_master **out)
{
    if (!c || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    int rc = check_config(c);
    if (rc != MC_OK)
        return rc;
    struct mc_master *m = calloc(1, sizeof(*m));
    if (!m)
        return MC_ERR_INTERNAL_ERROR;
    m->cfg = *c;
    mc_objslab_set_huge_pages(c->object_huge_pages);
    m->evict_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    m->clock = c->clock ? c->clock : mc_clock_system();
    m->version_base = derive_version_base(c->wall_clock);
    /* without HA: ms since 2020 at start, so a restarted master's epoch only grows */
    m->epoch = c->epoch ? c->epoch : m->version_base >> MC_VERSION_SEQ_BITS;
    m->cfg.wall_clock = NULL; /* read once */
    atomic_init(&m->next_version, 1);
    atomic_init(&m->next_replica_id, 1);
    m->discard = calloc(1, sizeof(*m->discard));
    if (m->discard)
        mc_discard_init(m->discard);
    m->segs = mc_segments_new(c->allocation_strategy);
    m->metrics = mc_metrics_new();
    if (!m->discard || !m->segs || !m->metrics || mc_shards_init(m) != 0 ||
        mc_routes_init(m) != 0 || mc_clients_init(m) != 0 || register_metrics(m) != 0 ||
        mc_offload_init(m) != 0 || mc_eviction_init(m) != 0 || mc_promotion_init(m) != 0 ||
        mc_holder_stream_init(m) != 0 || subscribe(m) != 0) {
        mc_master_free(m);
        return MC_ERR_INTERNAL_ERROR;
    }
    mc_info("master", "master core created", "epoch=%llu version_base=%llu strategy=%s shards=%u",
            (unsigned long long)m->epoch, (unsigned long long)m->version_base,
            mc_alloc_strategy_name(c->allocation_strategy), MC_NSHARDS);
    *out = m;
    return MC_OK;
}

void mc_master_free(struct mc_master *m)
{
    if (!m)
        return;
    if (m->evict_wake_fd >= 0)
        close(m->evict_wake_fd);
    m->evict_wake_fd = -1;
    /* nobody listens any more: the policies go first, then the objects */
    memset(&m->events, 0, sizeof(m->events));
    mc_eviction_destroy(m);
    /* promotion before offload, whose mailbox table it uses; then erasing the objects below
     * queues nothing */
    mc_promotion_destroy(m);
    mc_offload_destroy(m);
    mc_holder_stream_destroy(m);
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    if (m->shards) {
        for (uint32_t si = 0; si < MC_NSHARDS; si++) {
            struct mc_shard *s = &m->shards[si];
            if (!s->n)
                continue; /* (a shard mc_shards_init did not reach is empty) */
            mc_shard_wrlock(s);
            while (s->n)
                mc_master_erase_object(m, s, mc_ent_obj(mc_shard_ent(s, s->n - 1)), &fl);
            mc_shard_unlock(s);
            mc_freelist_flush(&fl);
        }
    }
    if (m->discard) {
        mc_discard_destroy(m->discard, &fl);
        mc_freelist_flush(&fl);
        free(m->discard);
    }
    mc_upserts_free(m); /* reservations hold segment space */
    mc_clients_destroy(m);
    mc_routes_destroy(m);
    mc_shards_destroy(m);
    mc_segments_free(m->segs);
    mc_metrics_free(m->metrics);
    free(m);
}

uint64_t mc_master_epoch(const struct mc_master *m)
{
    return m->epoch;
}

void mc_master_take_over(struct mc_master *m, uint64_t epoch)
{
    m->epoch = epoch;
    uint64_t vb = derive_version_base(NULL);
    if (vb > m->version_base)
        m->version_base = vb;
    if (m->recovery) /* the disk tier's or the DRAM holder stream's (tombstone.h) */
        mc_recovery_restart(m->recovery, mc_master_now_ms(m));
    mc_info("master", "serving as the leader", "epoch=%llu version_base=%llu",
            (unsigned long long)epoch, (unsigned long long)m->version_base);
}

uint64_t mc_master_version_base(const struct mc_master *m)
{
    return m->version_base;
}

const struct mc_master_config *mc_master_config_get(const struct mc_master *m)
{
    return &m->cfg;
}

/* ---- reaper -------------------------------------------------------------------------------- */

/* Releases the deferred-free entries whose time came; *puts = how many were taken-over Puts. */
static int reap_discarded(struct mc_master *m, uint64_t now, int *puts)
{
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    int n = mc_discard_reap(m->discard, now, &fl, puts);
    mc_freelist_flush(&fl);
    return n;
}

/* Erases Puts unfinished put_start_release_timeout after their start. A shard is locked only
 * when its oldest-start hint says one may be due: an idle master locks nothing, and a shard whose
 * Puts all finished is looked at once, when its hint runs out, which makes the hint exact again. */
static int reap_stale_puts(struct mc_master *m, uint64_t now)
{
    int n = 0;
    uint64_t timeout = m->cfg.put_start_release_timeout_ms;
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *s = &m->shards[si];
        uint64_t oldest = atomic_load_explicit(&s->pend_oldest_ms, memory_order_relaxed);
        if (oldest == UINT64_MAX || now < oldest + timeout)
            continue;
        mc_shard_wrlock(s);
        atomic_fetch_add_explicit(&m->reaper_shard_locks, 1, memory_order_relaxed);
        oldest = UINT64_MAX;
        for (uint32_t j = s->npend; j-- > 0;) {
            struct mc_pending *p = &s->pend[j];
            if (now < p->start_ms + timeout) {
                oldest = p->start_ms < oldest ? p->start_ms : oldest;
                continue;
            }
            mc_master_erase_object(m, s, p->obj, &fl);
            n++;
        }
        atomic_store_explicit(&s->pend_oldest_ms, oldest, memory_order_relaxed);
        mc_shard_unlock(s);
        mc_freelist_flush(&fl);
    }
    if (n)
        mc_info("master", "stale puts reaped", "count=%d", n);
    return n;
}

static int sweep_soft_pins(struct mc_master *m, uint64_t now)
{
    int n = 0;
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *s = &m->shards[si];
        mc_shard_wrlock(s);
        for (uint32_t i = 0; i < s->n; i++) {
            struct mc_obj_ent *e = mc_shard_ent(s, i);
            if (!(mc_ent_bits(e) & MC_ENT_SOFT_PIN))
                continue;
            struct mc_object *o = mc_ent_obj(e);
            if (mc_obj_soft_pinned(o, now))
                continue;
            o->flags &= ~(uint64_t)MC_OBJ_SOFT_PIN;
            o->soft_pin_deadline_ms = 0;
            atomic_fetch_sub_explicit(&m->c.soft_pin_key_count, 1, memory_order_relaxed);
            mc_shard_refresh_bits(s, o);
            n++;
        }
        mc_shard_unlock(s);
    }
    return n;
}

int mc_master_tick_reaper(struct mc_master *m)
{
    uint64_t now = mc_master_now_ms(m);
    int puts;
    int n = reap_discarded(m, now, &puts);
    int stale = reap_stale_puts(m, now);
    atomic_fetch_add_explicit(&m->c.put_start_release_cnt, (uint64_t)(puts + stale),
                              memory_order_relaxed);
    n += stale;
    n += mc_offload_reap(m);
    n += mc_promotion_reap(m);
    n += mc_upserts_reap(m); /* upsert reservations never ended */
    if (now >= m->next_soft_pin_sweep_ms) {
        m->next_soft_pin_sweep_ms = now + MC_SOFT_PIN_SWEEP_MS;
        if (atomic_load_explicit(&m->c.soft_pin_key_count, memory_order_relaxed) > 0)
            n += sweep_soft_pins(m, now);
    }
    return n;
}

/* mc_master_tick_eviction: eviction.c */

/* ---- stats --------------------------------------------------------------------------------- */

#define LD(f) atomic_load_explicit(&m->c.f, memory_order_relaxed)

void mc_master_get_stats(struct mc_master *m, struct mc_master_stats *o)
{
    memset(o, 0, sizeof(*o));
    int64_t v;
#define GAUGE(f, ...) o->f = (v = LD(f)) > 0 ? (uint64_t)v : 0;
#define COUNTER(f, ...) o->f = LD(f);
    MC_MASTER_GAUGES(GAUGE)
    MC_MASTER_CALL_COUNTERS(COUNTER)
    MC_MASTER_EVICTION_COUNTERS(COUNTER)
#undef GAUGE
#undef COUNTER
    o->total_capacity_bytes = mc_segments_capacity(m->segs);
    o->allocated_bytes = mc_segments_allocated(m->segs);
    o->used_ratio = mc_segments_used_ratio(m->segs);
    o->segment_count = mc_segments_count(m->segs);
    o->active_clients = mc_master_active_clients(m);
}

struct mc_metrics *mc_master_metrics(struct mc_master *m)
{
    return m->metrics;
}

/* ---- metrics registry: upstream names, values read from the counters at scrape time -------- */

static double rd_u64(void *arg)
{
    return (double)atomic_load_explicit((_Atomic uint64_t *)arg, memory_order_relaxed);
}

static double rd_i64(void *arg)
{
    int64_t v = atomic_load_explicit((_Atomic int64_t *)arg, memory_order_relaxed);
    return v > 0 ? (double)v : 0.0;
}

static double rd_allocated(void *arg)
{
    return (double)mc_segments_allocated(((struct mc_master *)arg)->segs);
}

static double rd_capacity(void *arg)
{
    return (double)mc_segments_capacity(((struct mc_master *)arg)->segs);
}

static double rd_clients(void *arg)
{
    return (double)mc_master_active_clients(arg);
}

static double rd_segments(void *arg)
{
    return (double)mc_segments_count(((struct mc_master *)arg)->segs);
}

struct counter_def {
    const char *name, *help;
    size_t off; /* offset of an _Atomic uint64_t in struct mc_master_counters */
};

#define CDEF(f, n, h) {n, h, offsetof(struct mc_master_counters, f)},
static const struct counter_def g_counters[] = {MC_MASTER_CALL_COUNTERS(CDEF)};
/* Upstream's Get cache-hit family. */
static const struct counter_def g_get_counters[] = {MC_MASTER_GET_COUNTERS(CDEF)};
#undef CDEF

static const char *const g_batch_ops[MC_BATCH_NOPS] = {
    [MC_BATCH_EXIST_KEY] = "exist_key",   [MC_BATCH_GET_REPLICA_LIST] = "get_replica_list",
    [MC_BATCH_PUT_START] = "put_start",   [MC_BATCH_PUT_END] = "put_end",
    [MC_BATCH_PUT_REVOKE] = "put_revoke",
};
static const char *const g_batch_fields[MC_BF_N][2] = {
    [MC_BF_REQUESTS] = {"requests", "calls"},
    [MC_BF_FAILURES] = {"failures", "calls where every item failed (or the call itself)"},
    [MC_BF_PARTIAL] = {"partial_successes", "calls where some items failed"},
    [MC_BF_ITEMS] = {"items", "items (keys) in the calls"},
    [MC_BF_FAILED_ITEMS] = {"failed_items", "items that failed"},
};

/* Per mounted segment, at scrape time: segment_{allocated,total_capacity}_bytes{segment}. */
static void collect_segments(struct mc_master *m, struct mc_metrics_emitter *e, bool capacity)
{
    struct mc_segment_info *v = NULL;
    size_t n = 0;
    if (mc_segments_list(m->segs, &v, &n) != MC_OK)
        return;
    for (size_t i = 0; i < n; i++)
        mc_metrics_emit(e, MC_LABELS("segment", v[i].desc.name),
                        (double)(capacity ? v[i].capacity : v[i].allocated));
    free(v);
}
static void collect_seg_allocated(void *arg, struct mc_metrics_emitter *e)
{
    collect_segments(arg, e, false);
}
static void collect_seg_capacity(void *arg, struct mc_metrics_emitter *e)
{
    collect_segments(arg, e, true);
}

static int register_metrics(struct mc_master *m)
{
    struct mc_metrics *r = m->metrics;
    for (size_t i = 0; i < sizeof(g_get_counters) / sizeof(g_get_counters[0]); i++)
        if (mc_metrics_counter_fn(r, g_get_counters[i].name, g_get_counters[i].help, NULL, rd_u64,
                                  (char *)&m->c + g_get_counters[i].off) != 0)
            return -1;
    for (int op = 0; op < MC_BATCH_NOPS; op++) {
        for (int f = 0; f < MC_BF_N; f++) {
            char name[96], help[160];
            snprintf(name, sizeof(name), "master_batch_%s_%s_total", g_batch_ops[op],
                     g_batch_fields[f][0]);
            snprintf(help, sizeof(help), "Batch %s: %s", g_batch_ops[op], g_batch_fields[f][1]);
            if (mc_metrics_counter_fn(r, name, help, NULL, rd_u64, (void *)&m->c.batch[op][f]) != 0)
                return -1;
        }
    }
    static const double vs_bounds[] = {4096, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
    m->value_size = mc_metrics_histogram(r, "master_value_size_bytes", "value sizes at PutEnd",
                                         NULL, vs_bounds, sizeof(vs_bounds) / sizeof(vs_bounds[0]));
    if (!m->value_size ||
        mc_metrics_gauge_collector(r, "segment_allocated_bytes",
                                   "bytes allocated in each mounted segment", collect_seg_allocated,
                                   m) != 0 ||
        mc_metrics_gauge_collector(r, "segment_total_capacity_bytes",
                                   "capacity of each mounted segment", collect_seg_capacity,
                                   m) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(g_counters) / sizeof(g_counters[0]); i++)
        if (mc_metrics_counter_fn(r, g_counters[i].name, g_counters[i].help, NULL, rd_u64,
                                  (char *)&m->c + g_counters[i].off) != 0)
            return -1;
#define GAUGE(f, n, h, extra)                                                                      \
    if (mc_metrics_gauge_fn(r, n, h, NULL, rd_i64, (void *)&m->c.f) != 0)                          \
        return -1;
    MC_MASTER_GAUGES(GAUGE)
#undef GAUGE
    if (mc_metrics_gauge_fn(r, "master_allocated_bytes", "DRAM bytes allocated to replicas", NULL,
                            rd_allocated, m) != 0 ||
        mc_metrics_gauge_fn(r, "master_total_capacity_bytes", "DRAM bytes of mounted segments",
                            NULL, rd_capacity, m) != 0 ||
        mc_metrics_gauge_fn(r, "master_active_clients", "registered clients", NULL, rd_clients,
                            m) != 0 ||
        mc_metrics_gauge_fn(r, "master_segment_count", "mounted DRAM segments", NULL, rd_segments,
                            m) != 0)
        return -1;
    return 0;
}
