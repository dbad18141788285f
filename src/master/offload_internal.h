/*
 * offload_internal.h - what offload.c (holders, offload tasks, completions, mount, heartbeat,
 * lifecycle), offload_delete.c (the delete rule), offload_rereg.c (re-registration and the
 * recovery window) and offload_stats.c (admin listing, stats, metrics) share: struct mc_offload,
 * the holder table's record and its helpers, the funnel counters, and the calls one file makes
 * into another. See offload.c for the design.
 */
#ifndef MC_MASTER_OFFLOAD_INTERNAL_H
#define MC_MASTER_OFFLOAD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/id.h"
#include "master/lock_order.h"
#include "master/master_state.h"
#include "master/mailbox.h"
#include "master/objects.h"
#include "master/offload.h"
#include "master/shard.h"

#define OFF_KIND MC_TASK_KIND_BIT(MC_TASK_OFFLOAD)

struct holder_rec {
    struct mc_holder *h; /* the table's reference */
    uint64_t capacity;
    bool offloading;
    bool may_recreate; /* first registration with this incarnation, no heartbeat yet */
    uint32_t list_gen; /* its listing since its last mount: replicas it confirmed carry it */
    /* disk-full back-off: no offload task before backoff_until_ms */
    uint32_t backoff_ms;
    uint64_t backoff_until_ms;
    uint64_t backoff_log_ms;   /* when the last back-off line was logged */
    uint32_t backoff_unlogged; /* back-off decisions since then, not logged */
};

/* Funnel counters, one X-macro table: field, metric name, help. */
#define MC_OFFLOAD_COUNTERS(X)                                                                     \
    X(queued, "master_offload_queued_total", "offload tasks queued")                               \
    X(completed, "master_offload_completed_total", "offload tasks that attached a disk copy")      \
    X(nacked, "master_offload_nacked_total", "offload tasks the holder reported failed")           \
    X(expired, "master_offload_expired_total", "offload tasks expired by the reaper")              \
    X(cancelled, "master_offload_cancelled_total",                                                 \
      "offload tasks cancelled (object gone, holder gone, offloading disabled)")                   \
    X(refused, "master_offload_refused_total",                                                     \
      "offload tasks not queued (no holder, or its offload queue full): one per decision, so an "  \
      "object that a later eviction cycle picks again counts again")                               \
    X(forced, "master_offload_forced_evictions_total", "objects evicted without offload (force)")  \
    X(stale, "master_offload_stale_refused_total", "offload reports refused (stale or mismatch)")  \
    X(rereg_ok, "master_offload_reregistered_total",                                               \
      "LOCAL_DISK copies the master learnt from re-registration (each copy once)")                 \
    X(rereg_confirmed, "master_offload_reregister_confirmed_total",                                \
      "re-registered disk records the master already had (listed again): not counted above")       \
    X(rereg_refused, "master_offload_reregister_refused_total", "disk records refused")            \
    X(rereg_replaced, "master_offload_reregister_replaced_total",                                  \
      "objects replaced by a re-registered disk record of a higher version")                       \
    X(unlisted, "master_offload_unlisted_dropped_total",                                           \
      "LOCAL_DISK copies dropped because their holder's complete listing left them out")           \
    X(backoffs, "master_offload_holder_backoffs_total",                                            \
      "back-off decisions: a holder answered UNABLE_OFFLOAD and gets no offload task for a while") \
    X(given_up, "master_offload_given_up_total",                                                   \
      "objects no longer offered for offload after repeated UNABLE_OFFLOAD answers")               \
    X(deletes, "master_offload_deletes_queued_total", "disk record deletes queued")                \
    X(deletes_acked, "master_offload_deletes_acked_total",                                         \
      "disk record deletes the holder acknowledged durable")                                       \
    X(deletes_resent, "master_offload_deletes_resent_total",                                       \
      "deletes pushed again: handed out, not acknowledged within a quarter of the timeout")        \
    X(deletes_refused, "master_offload_deletes_refused_total",                                     \
      "Removes failed because a delete could not be queued at a holder")                           \
    X(fenced, "master_holders_fenced_total",                                                       \
      "holders fenced (a delete unacknowledged past holder_delete_timeout, or no mailbox)")

struct mc_offload {
    struct mc_mailboxes *mb;
    pthread_mutex_t lock; /* the holder table: a leaf */
    struct holder_rec *v;
    size_t n, cap;
    struct mc_id *seen; /* every holder that mounted in this incarnation (under lock) */
    size_t nseen, seen_cap;
    uint32_t last_gen;             /* the last listing generation handed out (under lock) */
    uint64_t cycle_cap;            /* mode C: offloads per eviction cycle */
    _Atomic uint64_t cycle_queued; /* offloads queued in the current cycle */
    _Atomic int64_t in_flight;     /* offload tasks existing = pins held */
    struct mc_fences *fences;      /* the delete rule: holders fenced (fence.h) */
    struct mc_delwait *dw;         /* the delete rule: deletes awaiting acks (delwait.h) */
    uint64_t delete_timeout_ms;    /* holder_delete_timeout */
    struct mc_recovery *recovery;  /* the recovery window and its tombstones (tombstone.h) */
#define X(f, n, h) _Atomic uint64_t f;
    MC_OFFLOAD_COUNTERS(X)
#undef X
    /* The disk-only census (offload_stats.c): per shard, its objects readable only from
     * LOCAL_DISK when a census step last counted it; census_total is their sum, what a scrape
     * reads. One step recounts one shard (census_busy: one stepper at a time). */
    _Atomic bool census_busy;
    uint32_t census_next;
    _Atomic uint64_t census_total;
    uint32_t census_n[MC_NSHARDS];
};

#define INC(off, f) atomic_fetch_add_explicit(&(off)->f, 1, memory_order_relaxed)

static inline void table_lock(struct mc_offload *off)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&off->lock);
}
static inline void table_unlock(struct mc_offload *off)
{
    pthread_mutex_unlock(&off->lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

static inline ssize_t rec_find(struct mc_offload *off, struct mc_id id)
{
    for (size_t i = 0; i < off->n; i++)
        if (mc_id_eq(off->v[i].h->id, id))
            return (ssize_t)i;
    return -1;
}

enum holder_flag { HF_MAY_RECREATE, HF_OFFLOADING };

/* A flag of holder id's record (false when not mounted): whether a record of it may recreate an
 * absent object now (see the header), or whether it takes offload tasks at now_ms (it asked for
 * them and is not backing off after a full disk). */
static inline bool holder_flag(struct mc_offload *off, struct mc_id id, enum holder_flag f,
                               uint64_t now_ms)
{
    table_lock(off);
    ssize_t i = rec_find(off, id);
    bool ok =
        i >= 0 && (f == HF_OFFLOADING ? off->v[i].offloading && now_ms >= off->v[i].backoff_until_ms
                                      : off->v[i].may_recreate);
    table_unlock(off);
    return ok;
}

/* The listing generation of holder id (0 when not mounted). */
static inline uint32_t holder_gen(struct mc_offload *off, struct mc_id id)
{
    table_lock(off);
    ssize_t i = rec_find(off, id);
    uint32_t g = i >= 0 ? off->v[i].list_gen : 0;
    table_unlock(off);
    return g;
}

/* The holder of id with a reference (mc_holder_unref), NULL when not mounted. */
static inline struct mc_holder *holder_get(struct mc_offload *off, struct mc_id id)
{
    struct mc_holder *h = NULL;
    table_lock(off);
    ssize_t i = rec_find(off, id);
    if (i >= 0) {
        h = off->v[i].h;
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    }
    table_unlock(off);
    return h;
}

static inline bool same_bytes(const struct mc_object *o, const struct mc_offload_result *it)
{
    return !(it->crc_valid && (o->flags & MC_OBJ_HAS_CRC) && it->crc32c != o->crc);
}

/* ---- offload.c ----------------------------------------------------------------------------- */

/* Releases o's offload pin (write lock). */
void mc_offload_pin_release(struct mc_offload *off, struct mc_shard *s, struct mc_object *o);
/* Removes the holder of id: table, mailbox (tasks cancelled, pins released), replicas dead. */
bool mc_offload_holder_drop(struct mc_master *m, struct mc_id id);
/* Attaches a COMPLETE LOCAL_DISK replica of h to *op, or finds it there (write lock); either way
 * it carries listing generation gen. *op may move. */
int mc_offload_attach_disk(struct mc_master *m, struct mc_shard *s, struct mc_object **op,
                           struct mc_holder *h, uint32_t gen);

/* ---- offload_delete.c ---------------------------------------------------------------------- */

/* Raises holder's fence to version at once (a holder with no mailbox: nothing to wait for). */
void mc_offload_fence_now(struct mc_offload *off, struct mc_id holder, uint64_t version);
/* The tick's part of the delete rule: overdue holders fenced, then unacknowledged deletes pushed
 * again. Returns how many holders were fenced. */
size_t mc_offload_delete_tick(struct mc_master *m);

/* ---- offload_rereg.c ----------------------------------------------------------------------- */

/* A removal of o while the recovery window is open (see offload_rereg.c). */
void mc_offload_recovery_note_removal(struct mc_master *m, struct mc_object *o);

/* ---- offload_stats.c ----------------------------------------------------------------------- */

/* Registers the offload counters and gauges with m->metrics: 0 or -1. */
int mc_offload_register_metrics(struct mc_master *m, struct mc_offload *off);

#endif
