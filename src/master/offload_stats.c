/*
 * offload_stats.c - the LOCAL_DISK tier's admin listing (ListLocalDisks), its stats
 * (mc_master_offload_stats) and its metrics: the funnel counters of offload_internal.h and the
 * gauges read from the holder table and the shards (see offload.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "master/delwait.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/offload_internal.h"
#include "master/shard.h"
#include "mooncake/errors.h"

/* ---- admin and stats ----------------------------------------------------------------------- */

int mc_master_list_local_disks(struct mc_master *m, struct mc_local_disk_info **out, size_t *n)
{
    if (!out || !n)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    *n = 0;
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_OK;
    table_lock(off);
    int rc = MC_OK;
    if (off->n) {
        struct mc_local_disk_info *v = calloc(off->n, sizeof(*v));
        if (!v) {
            rc = MC_ERR_INTERNAL_ERROR;
        } else {
            for (size_t i = 0; i < off->n; i++) {
                const struct holder_rec *rec = &off->v[i];
                v[i].client = rec->h->id;
                memcpy(v[i].endpoint, rec->h->endpoint, sizeof(v[i].endpoint));
                v[i].capacity_bytes = rec->capacity;
                int64_t b = atomic_load(&rec->h->bytes), c = atomic_load(&rec->h->nreplicas);
                v[i].used_bytes = b > 0 ? (uint64_t)b : 0;
                v[i].replica_count = c > 0 ? (uint64_t)c : 0;
                v[i].enable_offloading = rec->offloading;
            }
            *out = v;
            *n = off->n;
        }
    }
    table_unlock(off);
    return rc;
}

/* Objects of shard s whose readable replicas are all LOCAL_DISK (a scan under its read lock). */
static uint32_t count_disk_only(struct mc_shard *s)
{
    uint32_t n = 0;
    mc_shard_rdlock(s);
    for (uint32_t i = 0; i < s->n; i++) {
        const struct mc_object *o = mc_ent_obj(mc_shard_ent(s, i));
        bool disk = false, mem = false;
        for (uint8_t r = 0; r < o->nrep; r++) {
            if (!mc_replica_readable(&o->rep[r]))
                continue;
            if (o->rep[r].type == MC_REPLICA_TYPE_LOCAL_DISK)
                disk = true;
            else
                mem = true;
        }
        n += disk && !mem;
    }
    mc_shard_unlock(s);
    return n;
}

/* Whether any holder holds a LOCAL_DISK replica. */
static bool any_disk_replica(struct mc_offload *off)
{
    bool any = false;
    table_lock(off);
    for (size_t i = 0; i < off->n && !any; i++)
        any = atomic_load(&off->v[i].h->nreplicas) > 0;
    table_unlock(off);
    return any;
}

/* The census: a scrape reads census_total and never walks the objects; the ticker recounts
 * nshards shards per call, round robin, so the figure is at most one round old (MC_NSHARDS
 * steps). With no LOCAL_DISK replica anywhere nothing is scanned and the figure is 0. */
void mc_offload_census_step(struct mc_master *m, uint32_t nshards)
{
    struct mc_offload *off = m ? m->offload : NULL;
    if (!off || atomic_exchange(&off->census_busy, true))
        return;
    if (!any_disk_replica(off)) {
        if (atomic_load(&off->census_total)) {
            memset(off->census_n, 0, sizeof(off->census_n));
            atomic_store(&off->census_total, 0);
        }
    } else {
        for (uint32_t k = 0; k < nshards && k < MC_NSHARDS; k++) {
            uint32_t si = off->census_next;
            off->census_next = (si + 1) % MC_NSHARDS;
            uint32_t n = count_disk_only(&m->shards[si]);
            uint32_t was = off->census_n[si];
            off->census_n[si] = n;
            if (n >= was)
                atomic_fetch_add(&off->census_total, n - was);
            else
                atomic_fetch_sub(&off->census_total, was - n);
        }
    }
    atomic_store(&off->census_busy, false);
}

static void holder_totals(struct mc_offload *off, struct mc_offload_stats *st)
{
    table_lock(off);
    st->holders = off->n;
    for (size_t i = 0; i < off->n; i++) {
        int64_t b = atomic_load(&off->v[i].h->bytes), c = atomic_load(&off->v[i].h->nreplicas);
        st->file_capacity_bytes += off->v[i].capacity;
        st->file_allocated_bytes += b > 0 ? (uint64_t)b : 0;
        st->disk_replicas += c > 0 ? (uint64_t)c : 0;
    }
    table_unlock(off);
}

static void stats_fill(struct mc_master *m, struct mc_offload_stats *st)
{
    memset(st, 0, sizeof(*st));
    struct mc_offload *off = m->offload;
    if (!off)
        return;
    st->queued = atomic_load(&off->queued);
    st->completed = atomic_load(&off->completed);
    st->nacked = atomic_load(&off->nacked);
    st->expired = atomic_load(&off->expired);
    st->cancelled = atomic_load(&off->cancelled);
    st->refused = atomic_load(&off->refused);
    st->forced_evictions = atomic_load(&off->forced);
    st->reregistered = atomic_load(&off->rereg_ok);
    st->reregister_confirmed = atomic_load(&off->rereg_confirmed);
    st->reregister_refused = atomic_load(&off->rereg_refused);
    st->stale_refused = atomic_load(&off->stale);
    st->deletes_queued = atomic_load(&off->deletes);
    st->reregister_replaced = atomic_load(&off->rereg_replaced);
    st->unlisted_dropped = atomic_load(&off->unlisted);
    st->holder_backoffs = atomic_load(&off->backoffs);
    st->given_up = atomic_load(&off->given_up);
    st->deletes_acked = atomic_load(&off->deletes_acked);
    st->deletes_refused = atomic_load(&off->deletes_refused);
    st->holders_fenced = atomic_load(&off->fenced);
    st->deletes_outstanding = mc_delwait_outstanding(off->dw);
    int64_t f = atomic_load(&off->in_flight);
    st->in_flight = f > 0 ? (uint64_t)f : 0;
    holder_totals(off, st);
    st->disk_only_keys = st->disk_replicas ? atomic_load(&off->census_total) : 0;
}

void mc_master_offload_stats(struct mc_master *m, struct mc_offload_stats *out)
{
    stats_fill(m, out);
}

static double rd_file_bytes(void *arg)
{
    struct mc_offload_stats st;
    stats_fill(arg, &st);
    return (double)st.file_allocated_bytes;
}
static double rd_file_capacity(void *arg)
{
    struct mc_offload_stats st;
    stats_fill(arg, &st);
    return (double)st.file_capacity_bytes;
}
static double rd_disk_only(void *arg)
{
    struct mc_offload_stats st;
    stats_fill(arg, &st);
    return (double)st.disk_only_keys;
}
static double rd_in_flight(void *arg)
{
    int64_t v = atomic_load(&((struct mc_offload *)arg)->in_flight);
    return v > 0 ? (double)v : 0.0;
}
static double rd_u64(void *arg)
{
    return (double)atomic_load_explicit((_Atomic uint64_t *)arg, memory_order_relaxed);
}

int mc_offload_register_metrics(struct mc_master *m, struct mc_offload *off)
{
    struct mc_metrics *reg = m->metrics;
    int rc = 0;
#define X(f, n, h) rc |= mc_metrics_counter_fn(reg, n, h, NULL, rd_u64, &off->f);
    MC_OFFLOAD_COUNTERS(X)
#undef X
    rc |= mc_metrics_gauge_fn(reg, "master_offload_in_flight", "offload tasks queued or handed out",
                              NULL, rd_in_flight, off);
    rc |= mc_metrics_gauge_fn(reg, "master_allocated_file_size_bytes",
                              "object bytes held as LOCAL_DISK replicas", NULL, rd_file_bytes, m);
    rc |= mc_metrics_gauge_fn(reg, "master_total_file_capacity_bytes",
                              "SSD capacity the holders reported", NULL, rd_file_capacity, m);
    rc |= mc_metrics_gauge_fn(
        reg, "master_disk_only_key_count",
        "objects readable only from LOCAL_DISK (a census one shard per eviction "
        "tick: at most 1024 ticks, about 10 s, old)",
        NULL, rd_disk_only, m);
    return rc ? -1 : 0;
}
