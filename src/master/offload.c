/*
 * offload.c - the master half of the LOCAL_DISK tier: holders, their mailboxes, offload tasks
 * in the three modes, completions and re-registration checked by version, disk evictions.
 *
 * State. A holder table (id -> struct mc_holder, capacity, whether it takes offload tasks) under
 * one mutex that is a leaf of the lock order, and the mailbox table (mailbox.h), which keeps
 * every task. An object with a task has MC_OBJ_OFFLOADING and exactly one pinned MEMORY
 * replica (refcnt + 1); nothing else pins MEMORY replicas, so the pin is found again by
 * looking for it. A task names the key and version it was made for; every path that ends a
 * task (report, NACK, expiry, cancel by heartbeat, holder gone) looks the object up by key and
 * releases the pin only if the object still has that version and the flag. Erasing an object
 * (Remove, RemoveAll, eviction in mode C, sweeps) cancels its task in the hook, under the
 * shard lock, so no mailbox keeps a task for an object that is gone.
 *
 * Versions (DESIGN.md §11): a LOCAL_DISK replica is attached only to the version it holds; a
 * re-registered record of an absent object recreates it only if its version predates this
 * incarnation (<= version_base), and only during the holder's first registration with this
 * incarnation: from its first LOCAL_DISK mount until its first offload heartbeat (a holder
 * re-registers before it polls). After that, an absent object was erased by this incarnation
 * (Remove, the holder's expiry, eviction), so a record of it is stale however old it is: a holder
 * that restarts, or comes back after its expiry, never resurrects what this master dropped. The
 * holders seen are remembered for the incarnation's life (one id per distinct holder). Where a
 * re-registered record and the object differ in version, the higher one wins, never the first
 * registrant's: a record newer than an object that is itself a copy from before this incarnation
 * (version <= version_base: recreated from another holder's older record) replaces it in the
 * holder's first registration (the object is erased, so its holders get deletes, and recreated
 * from the record); an older record is refused. Every re-registration answer carries the
 * master's version of the key (0: none), and a holder deletes a refused record only when that
 * version is 0 or not below the record's.
 *
 * Listings (DESIGN §7 "Holder index"). A holder's re-registration is authoritative for that
 * holder. Every LOCAL_DISK mount starts a new listing generation (holder_rec.list_gen, distinct
 * across the incarnation); every replica the holder's re-registration confirms or attaches, and
 * every replica a completed offload attaches, carries it (struct mc_replica.handle, unused by
 * LOCAL_DISK otherwise). A re-registration request marked complete ends the listing: the
 * holder's replicas carrying another generation — records it no longer has, e.g. dropped by its
 * recovery — are dropped, and objects left with none erased. A listing cut by another mount
 * drops nothing.
 *
 * A full disk. A holder that NACKs an offload with UNABLE_OFFLOAD gets no offload task for
 * BACKOFF_FIRST_MS, doubling with every NACK after a pause ended up to BACKOFF_MAX_MS, until it
 * stores one (or mounts again). Each object counts its full-disk NACKs (2 bits of its flags);
 * after OBJ_MAX_FULL_NACKS it is no longer offered for offload, and eviction treats it as an
 * object no holder can take: it stays in DRAM (offload_on_evict: nothing is dropped without a
 * disk copy) or is evicted without offload (offload_force_evict; offload at PutEnd evicts as
 * ever). One log line per holder per BACKOFF_LOG_MS at most; the decisions are
 * counted (master_offload_holder_backoffs_total, master_offload_given_up_total).
 *
 * Pushes made under a shard lock are quiet (mailbox.h); whoever made them calls
 * mc_offload_wake once unlocked (PutEnd, the eviction cycle's end), and mc_master_tick_offload
 * wakes any that were missed.
 */
#include "master/offload.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/metrics.h"
#include "master/clients.h"
#include "master/delwait.h"
#include "master/fence.h"
#include "master/tombstone.h"
#include "master/freelist.h"
#include "master/mailbox.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/promotion_core.h"
#include "master/shard.h"
#include "mooncake/errors.h"

#define COMP "offload"
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

/* Disk-full back-off (a holder NACKed an offload with UNABLE_OFFLOAD): the first pause, the
 * longest, at most one log line per holder per BACKOFF_LOG_MS, and the NACKs one object may
 * collect before it is no longer offered for offload (then evicted as without the tier). */
#define BACKOFF_FIRST_MS 500u
#define BACKOFF_MAX_MS 60000u
#define BACKOFF_LOG_MS 10000u
#define OBJ_MAX_FULL_NACKS 3u

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
    X(rereg_ok, "master_offload_reregistered_total", "disk records re-registered")                 \
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
    struct mc_tombs *tombs;        /* removals of the recovery window (tombstone.h) */
    uint64_t recovery_end_ms;      /* master clock: the recovery window ends here */
    _Atomic bool recovery_closed;  /* the window ended (or its tombstones ran out) */
#define X(f, n, h) _Atomic uint64_t f;
    MC_OFFLOAD_COUNTERS(X)
#undef X
};

#define INC(off, f) atomic_fetch_add_explicit(&(off)->f, 1, memory_order_relaxed)
/* Removals remembered in a recovery window at most (16 bytes each at half load: 128 MiB);
 * past it the window closes early. */
#define TOMBS_MAX (4u << 20)

static void table_lock(struct mc_offload *off)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    pthread_mutex_lock(&off->lock);
}
static void table_unlock(struct mc_offload *off)
{
    pthread_mutex_unlock(&off->lock);
    mc_lo_release(MC_LO_LEAF, 0);
}

static ssize_t rec_find(struct mc_offload *off, struct mc_id id)
{
    for (size_t i = 0; i < off->n; i++)
        if (mc_id_eq(off->v[i].h->id, id))
            return (ssize_t)i;
    return -1;
}

/* Records id as seen (table lock held); true when it was not seen before. An allocation failure
 * counts as seen: the safe answer (no recreation). */
static bool seen_first(struct mc_offload *off, struct mc_id id)
{
    for (size_t i = 0; i < off->nseen; i++)
        if (mc_id_eq(off->seen[i], id))
            return false;
    if (off->nseen == off->seen_cap) {
        size_t cap = off->seen_cap ? off->seen_cap * 2 : 16;
        struct mc_id *nv = realloc(off->seen, cap * sizeof(*nv));
        if (!nv)
            return false;
        off->seen = nv;
        off->seen_cap = cap;
    }
    off->seen[off->nseen++] = id;
    return true;
}

enum holder_flag { HF_MAY_RECREATE, HF_OFFLOADING };

/* A flag of holder id's record (false when not mounted): whether a record of it may recreate an
 * absent object now (see the header), or whether it takes offload tasks at now_ms (it asked for
 * them and is not backing off after a full disk). */
static bool holder_flag(struct mc_offload *off, struct mc_id id, enum holder_flag f,
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
static uint32_t holder_gen(struct mc_offload *off, struct mc_id id)
{
    table_lock(off);
    ssize_t i = rec_find(off, id);
    uint32_t g = i >= 0 ? off->v[i].list_gen : 0;
    table_unlock(off);
    return g;
}

/* ---- disk-full back-off -------------------------------------------------------------------- */

/* Holder id answered an offload with UNABLE_OFFLOAD at now_ms (no lock held). A NACK that
 * arrives while the holder already backs off (tasks handed out before the pause) changes
 * nothing; the first one after a pause doubles it (BACKOFF_FIRST_MS .. BACKOFF_MAX_MS). One log
 * line per holder per BACKOFF_LOG_MS at most, counting the decisions it stood for. */
static void holder_backoff(struct mc_offload *off, struct mc_id id, uint64_t now_ms)
{
    uint32_t pause = 0, unlogged = 0;
    bool log = false;
    table_lock(off);
    ssize_t i = rec_find(off, id);
    if (i >= 0 && now_ms >= off->v[i].backoff_until_ms) {
        struct holder_rec *r = &off->v[i];
        r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : BACKOFF_FIRST_MS;
        if (r->backoff_ms > BACKOFF_MAX_MS)
            r->backoff_ms = BACKOFF_MAX_MS;
        r->backoff_until_ms = now_ms + r->backoff_ms;
        pause = r->backoff_ms;
        INC(off, backoffs);
        r->backoff_unlogged++;
        if (r->backoff_log_ms == 0 || now_ms >= r->backoff_log_ms + BACKOFF_LOG_MS) {
            log = true;
            unlogged = r->backoff_unlogged;
            r->backoff_unlogged = 0;
            r->backoff_log_ms = now_ms;
        }
    }
    table_unlock(off);
    if (log) {
        char buf[MC_ID_STRLEN];
        mc_warn(COMP, "holder cannot take offloads (disk full): no offload task to it for a while",
                "client=%s pause_ms=%u decisions=%u", mc_id_format(id, buf), pause, unlogged);
    }
}

/* Holder id stored an offload: its back-off ends. */
static void holder_backoff_end(struct mc_offload *off, struct mc_id id)
{
    table_lock(off);
    ssize_t i = rec_find(off, id);
    if (i >= 0) {
        off->v[i].backoff_ms = 0;
        off->v[i].backoff_until_ms = 0;
    }
    table_unlock(off);
}

static unsigned full_nacks(const struct mc_object *o)
{
    return (o->flags & MC_OBJ_OFFLOAD_NACKS_MASK) >> MC_OBJ_OFFLOAD_NACKS_SHIFT;
}

/* o's offload was refused for a full disk once more (write lock); true when o is given up now. */
static bool count_full_nack(struct mc_offload *off, struct mc_object *o)
{
    unsigned n = full_nacks(o);
    if (n >= OBJ_MAX_FULL_NACKS)
        return false;
    n++;
    o->flags =
        (o->flags & ~(unsigned)MC_OBJ_OFFLOAD_NACKS_MASK) | (n << MC_OBJ_OFFLOAD_NACKS_SHIFT);
    if (n < OBJ_MAX_FULL_NACKS)
        return false;
    INC(off, given_up);
    return true;
}

/* The holder of id with a reference (mc_holder_unref), NULL when not mounted. */
static struct mc_holder *holder_get(struct mc_offload *off, struct mc_id id)
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

static struct mc_holder *holder_new(struct mc_id id, const char *endpoint)
{
    struct mc_holder *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    atomic_init(&h->refs, 1);
    atomic_init(&h->dead, false);
    h->id = id;
    snprintf(h->endpoint, sizeof(h->endpoint), "%s", endpoint);
    return h;
}

/* ---- pins ---------------------------------------------------------------------------------- */

/* Releases o's offload pin (write lock). */
static void pin_release(struct mc_offload *off, struct mc_shard *s, struct mc_object *o)
{
    if (!(o->flags & MC_OBJ_OFFLOADING))
        return;
    for (uint8_t i = 0; i < o->nrep; i++) {
        struct mc_replica *r = &o->rep[i];
        if (r->type == MC_REPLICA_TYPE_MEMORY && r->refcnt > 0) {
            r->refcnt--;
            break;
        }
    }
    o->flags &= ~(unsigned)MC_OBJ_OFFLOADING;
    atomic_fetch_sub_explicit(&off->in_flight, 1, memory_order_relaxed);
    if (o->ent != MC_NO_INDEX)
        mc_shard_refresh_bits(s, o);
}

/* Ends a task the mailbox handed back (expired, cancelled): releases the pin of its object if
 * the object still has the task's version. No lock held. */
static void task_unpin(struct mc_master *m, const struct mc_task *t)
{
    struct mc_shard *s;
    struct mc_object *o =
        mc_master_lock_find(m, mc_hash_key(t->key, t->key_len), t->key, t->key_len, true, &s);
    if (!o)
        return;
    if (o->version == t->version)
        pin_release(m->offload, s, o);
    mc_shard_unlock(s);
}

/* Unpins every offload task of l (counted in *counter) and frees l. */
static size_t tasks_end(struct mc_master *m, struct mc_task_list *l, _Atomic uint64_t *counter)
{
    size_t n = 0;
    for (struct mc_task *t = l->head; t; t = t->next) {
        if (t->kind != MC_TASK_OFFLOAD)
            continue;
        task_unpin(m, t);
        atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
        n++;
    }
    mc_task_list_free(l);
    return n;
}

/* ---- queueing ------------------------------------------------------------------------------ */

static bool has_disk_copy(const struct mc_object *o)
{
    for (uint8_t i = 0; i < o->nrep; i++)
        if (o->rep[i].type == MC_REPLICA_TYPE_LOCAL_DISK && mc_replica_readable(&o->rep[i]))
            return true;
    return false;
}

/* Queues o's offload task to the owner of one of its COMPLETE MEMORY replicas (refcnt 0 when
 * evictable_only) that is a holder taking tasks, and pins that replica (write lock). */
static int queue_task(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                      bool evictable_only)
{
    struct mc_offload *off = m->offload;
    int rc = MC_ERR_UNABLE_OFFLOADING;
    if (full_nacks(o) >= OBJ_MAX_FULL_NACKS)
        return rc; /* given up: no holder had room for it */
    uint64_t now = mc_master_now_ms(m);
    uint64_t deadline = now + m->cfg.put_start_release_timeout_ms;
    for (uint8_t i = 0; i < o->nrep; i++) {
        struct mc_replica *r = &o->rep[i];
        if (r->type != MC_REPLICA_TYPE_MEMORY || r->status != MC_REPLICA_STATUS_COMPLETE ||
            !mc_segment_alive(r->u.seg) || r->refcnt >= MC_REPLICA_REFCNT_MAX ||
            (evictable_only && r->refcnt))
            continue;
        struct mc_id owner = r->u.seg->owner;
        if (!holder_flag(off, owner, HF_OFFLOADING, now))
            continue;
        /* the source named in the task: the holder copies it out without asking (QueryKey) */
        struct mc_task_src src = {.segment = r->u.seg->desc.id,
                                  .mount_epoch = r->u.seg->mount_epoch,
                                  .offset = r->offset};
        rc = mc_mailbox_push_quiet(off->mb, owner, MC_TASK_OFFLOAD, mc_obj_key(o), o->key_len,
                                   o->version, o->size, o->crc, (o->flags & MC_OBJ_HAS_CRC) != 0,
                                   deadline, &src, NULL);
        if (rc == MC_OK) {
            r->refcnt++;
            o->flags |= MC_OBJ_OFFLOADING;
            atomic_fetch_add_explicit(&off->in_flight, 1, memory_order_relaxed);
            INC(off, queued);
            mc_shard_refresh_bits(s, o);
            return MC_OK;
        }
    }
    INC(off, refused);
    return rc;
}

void mc_offload_put_end_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    if (!(o->flags & MC_OBJ_OFFLOADING) && !has_disk_copy(o))
        (void)queue_task(m, s, o, false);
}

void mc_offload_wake(struct mc_master *m)
{
    if (m->offload)
        mc_mailboxes_wake(m->offload->mb);
}

uint64_t mc_offload_evict_object(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                 struct mc_freelist *fl, struct mc_unlink_batch *ub)
{
    struct mc_offload *off = m->offload;
    /* A disk copy of this version, or a task already queued: the DRAM copies that are not
     * pinned go now, with no new offload. (An object given up after OBJ_MAX_FULL_NACKS gets no
     * task below: it stays, or is evicted without offload with offload_force_evict.) */
    if (!off || (o->flags & MC_OBJ_OFFLOADING) || has_disk_copy(o))
        return mc_master_evict_memory(m, s, o, fl, ub);
    bool force = m->cfg.offload_force_evict;
    if (force && atomic_load_explicit(&off->cycle_queued, memory_order_relaxed) >= off->cycle_cap) {
        INC(off, forced);
        return mc_master_evict_memory(m, s, o, fl, ub);
    }
    if (queue_task(m, s, o, true) == MC_OK) {
        atomic_fetch_add_explicit(&off->cycle_queued, 1, memory_order_relaxed);
        return mc_master_evict_memory(m, s, o, fl, ub); /* the redundant copies, if any */
    }
    if (!force)
        return 0; /* nobody can take a copy: the object stays (no data is dropped) */
    INC(off, forced);
    return mc_master_evict_memory(m, s, o, fl, ub);
}

void mc_offload_cycle_begin(struct mc_master *m)
{
    if (m->offload)
        atomic_store_explicit(&m->offload->cycle_queued, 0, memory_order_relaxed);
}

void mc_offload_cycle_end(struct mc_master *m)
{
    mc_offload_wake(m);
}

/* ---- erase hook, holders going away, reaper ------------------------------------------------ */

/* ---- the delete rule ----------------------------------------------------------------------- */

/* Raises holder's fence to version at once (a holder with no mailbox: nothing to wait for). */
static void fence_now(struct mc_offload *off, struct mc_id holder, uint64_t version)
{
    uint64_t was = mc_fences_get(off->fences, holder);
    if (was >= version)
        return;
    (void)mc_fences_raise(off->fences, holder, version);
    if (was)
        return; /* raised: logged and counted when first fenced */
    INC(off, fenced);
    char buf[MC_ID_STRLEN];
    mc_info(COMP, "holder fenced: a copy was removed while it had no mailbox",
            "client=%s fence_version=%llu", mc_id_format(holder, buf), (unsigned long long)version);
}

/* Queues one delete of o's disk record at holder (write lock) and records it in dw for op (NULL:
 * nobody waits). Pushes under a shard lock are quiet: the caller wakes (mc_offload_wake) once
 * unlocked, and mailbox.c hands deletes out ahead of offloads. A holder with no mailbox is
 * fenced at once: MC_OK. Else the push's error (nothing recorded). */
static int push_delete(struct mc_master *m, struct mc_object *o, struct mc_id holder,
                       struct mc_delop *op)
{
    struct mc_offload *off = m->offload;
    /* recorded before it is pushed: the holder may pull and acknowledge it at once */
    uint64_t id = mc_mailboxes_reserve_id(off->mb);
    uint64_t deadline = mc_master_now_ms(m) + off->delete_timeout_ms;
    bool recorded = mc_delwait_add(off->dw, op, id, holder, mc_obj_key(o), o->key_len, o->version,
                                   deadline) == 0;
    int rc = mc_mailbox_push_quiet_id(off->mb, holder, MC_TASK_DELETE, mc_obj_key(o), o->key_len,
                                      o->version, o->size, o->crc, (o->flags & MC_OBJ_HAS_CRC) != 0,
                                      0, id);
    if (rc != MC_OK && recorded)
        mc_delwait_forget(off->dw, holder, id);
    if (rc == MC_ERR_CLIENT_NOT_FOUND) { /* deregistered meanwhile (expiry, unmount) */
        fence_now(off, holder, o->version);
        return MC_OK;
    }
    if (rc != MC_OK)
        return rc;
    INC(off, deletes);
    /* cannot wait for it: the holder is fenced at the next tick (an entry due now) or, failing
     * even that, at once */
    if (!recorded &&
        mc_delwait_add(off->dw, NULL, 0, holder, mc_obj_key(o), o->key_len, o->version, 0) != 0)
        fence_now(off, holder, o->version);
    return MC_OK;
}

/* Cancels o's offload task (write lock) and releases its pin. *holder gets the holder it was
 * handed to when it had been pulled (it may be writing a record right now): true then. */
static bool offload_cancel(struct mc_offload *off, struct mc_shard *s, struct mc_object *o,
                           struct mc_id *holder)
{
    if (!(o->flags & MC_OBJ_OFFLOADING))
        return false;
    bool found = false;
    for (uint8_t i = 0; i < o->nrep && !found; i++) {
        const struct mc_replica *r = &o->rep[i];
        if (r->type == MC_REPLICA_TYPE_MEMORY && r->refcnt > 0) {
            *holder = r->u.seg->owner;
            found = true;
        }
    }
    struct mc_task_list l = {0};
    size_t n = mc_mailboxes_cancel_key_kinds(off->mb, OFF_KIND, mc_obj_key(o), o->key_len, &l);
    bool pulled = false;
    for (struct mc_task *t = l.head; t; t = t->next)
        pulled |= t->in_flight != 0;
    mc_task_list_free(&l);
    atomic_fetch_add_explicit(&off->cancelled, n, memory_order_relaxed);
    pin_release(off, s, o);
    return found && pulled;
}

/* ---- the recovery window ------------------------------------------------------------------ */

/* Whether records of absent keys may still be recreated (tombstone.h): the window is open until
 * recovery_end_ms, or until its tombstones ran out. Closing empties the tombstones: from then on
 * no record recreates anything, so none is needed. */
static bool recovery_open(struct mc_master *m)
{
    struct mc_offload *off = m->offload;
    if (atomic_load_explicit(&off->recovery_closed, memory_order_relaxed))
        return false;
    if (mc_master_now_ms(m) < off->recovery_end_ms)
        return true;
    return false;
}

static void recovery_close(struct mc_master *m, const char *why)
{
    struct mc_offload *off = m->offload;
    if (atomic_exchange(&off->recovery_closed, true))
        return;
    size_t n = mc_tombs_count(off->tombs);
    mc_tombs_clear(off->tombs);
    mc_info(COMP, "disk recovery window closed: records of unknown keys are no longer recreated",
            "why=%s tombstones=%zu", why, n);
}

/* A removal of o while the window is open: a slower holder's record of it at or below this
 * version must not bring it back. No room left: the window closes (safe: nothing recreated). */
static void recovery_note_removal(struct mc_master *m, struct mc_object *o)
{
    struct mc_offload *off = m->offload;
    if (!recovery_open(m))
        return;
    if (!mc_tombs_add(off->tombs, mc_hash_key(mc_obj_key(o), o->key_len), o->version))
        recovery_close(m, "tombstones_full");
}

int mc_offload_remove_copies_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                    struct mc_delop *op, struct mc_freelist *fl)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_OK;
    recovery_note_removal(m, o);
    int rc = MC_OK;
    struct mc_id th, bad = {0, 0};
    if (offload_cancel(off, s, o, &th)) {
        bool also_disk = false;
        for (uint8_t i = 0; i < o->nrep && !also_disk; i++)
            also_disk = o->rep[i].type == MC_REPLICA_TYPE_LOCAL_DISK &&
                        mc_id_eq(o->rep[i].u.holder->id, th);
        if (!also_disk && (rc = push_delete(m, o, th, op)) != MC_OK) {
            INC(off, deletes_refused);
            return rc;
        }
    }
    for (uint8_t i = 0; i < o->nrep;) {
        struct mc_replica *r = &o->rep[i];
        if (r->type != MC_REPLICA_TYPE_LOCAL_DISK) {
            i++;
            continue;
        }
        struct mc_id hid = r->u.holder->id;
        if (!mc_replica_valid(r))
            fence_now(off, hid, o->version); /* its holder is gone: nobody to wait for */
        else if ((rc = push_delete(m, o, hid, op)) != MC_OK) {
            bad = hid;
            break;
        }
        /* the copy is on its way out: the master no longer lists it (so a failed Remove leaves
         * no replica whose record its holder is deleting) */
        mc_freelist_add_replica(fl, r, o->size);
        mc_obj_drop_replica(o, i);
    }
    if (rc != MC_OK) {
        INC(off, deletes_refused);
        char buf[MC_ID_STRLEN];
        mc_warn(COMP, "remove refused: a delete cannot be queued at a holder",
                "key_len=%u client=%s rc=%s", (unsigned)o->key_len, mc_id_format(bad, buf),
                mc_strerror(rc));
    }
    if (o->ent != MC_NO_INDEX)
        mc_shard_refresh_bits(s, o);
    return rc;
}

void mc_offload_object_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return;
    struct mc_id th;
    if (offload_cancel(off, s, o, &th) && push_delete(m, o, th, NULL) != MC_OK &&
        mc_delwait_add(off->dw, NULL, 0, th, mc_obj_key(o), o->key_len, o->version, 0) != 0)
        fence_now(off, th, o->version);
    /* Removes took their disk copies off first (mc_offload_remove_copies_locked) and wait for
     * them; any other erasure of a live disk copy still deletes it under the rule, with nobody
     * waiting: the delete is tracked (tombstone, fence on timeout). A push that fails fences
     * the holder at the next tick. A copy on a holder that is gone (expired, unmounted) is
     * left: that erasure is the expiry's sweep, which needs no delete. */
    for (uint8_t i = 0; i < o->nrep; i++) {
        const struct mc_replica *r = &o->rep[i];
        if (r->type != MC_REPLICA_TYPE_LOCAL_DISK)
            continue;
        struct mc_id hid = r->u.holder->id;
        if (!mc_replica_valid(r))
            continue; /* its holder expired or left: eviction and expiry need no delete */
        if (push_delete(m, o, hid, NULL) != MC_OK &&
            mc_delwait_add(off->dw, NULL, 0, hid, mc_obj_key(o), o->key_len, o->version, 0) != 0)
            fence_now(off, hid, o->version);
    }
}

/* Removes the holder of id: table, mailbox (tasks cancelled, pins released), replicas dead. */
static bool holder_drop(struct mc_master *m, struct mc_id id)
{
    struct mc_offload *off = m->offload;
    table_lock(off);
    ssize_t i = rec_find(off, id);
    struct mc_holder *h = NULL;
    if (i >= 0) {
        h = off->v[i].h;
        off->v[i] = off->v[--off->n];
    }
    table_unlock(off);
    struct mc_task_list l = {0};
    bool had_box = mc_mailbox_close(off->mb, id, &l) == MC_OK;
    tasks_end(m, &l, &off->cancelled);
    /* its queued deletes went with the mailbox: the copies they name are fenced instead (the
     * Removes waiting for them complete now) */
    uint64_t fv = mc_delwait_holder_version(off->dw, id);
    if (fv) {
        fence_now(off, id, fv);
        mc_delwait_settle_holder(off->dw, id, fv);
    }
    if (!h)
        return had_box;
    atomic_store_explicit(&h->dead, true, memory_order_release);
    if (atomic_load_explicit(&h->nreplicas, memory_order_relaxed) > 0)
        atomic_store_explicit(&m->sweep_pending, true, memory_order_release);
    char buf[MC_ID_STRLEN];
    mc_info(COMP, "holder deregistered", "client=%s replicas=%lld", mc_id_format(id, buf),
            (long long)atomic_load(&h->nreplicas));
    mc_holder_unref(h);
    return true;
}

void mc_offload_client_expired(struct mc_master *m, struct mc_id client)
{
    if (m->offload)
        (void)holder_drop(m, client);
}

int mc_offload_reap(struct mc_master *m)
{
    struct mc_offload *off = m->offload;
    if (!off || atomic_load_explicit(&off->in_flight, memory_order_relaxed) <= 0)
        return 0;
    struct mc_task_list l = {0};
    mc_mailboxes_tick_kinds(off->mb, OFF_KIND, &l);
    size_t n = tasks_end(m, &l, &off->expired);
    if (n)
        mc_info(COMP, "offload tasks expired", "count=%zu", n);
    return (int)n;
}

/* Holders with a delete unacknowledged past holder_delete_timeout: each is fenced at the
 * highest version among its outstanding deletes (every copy it has at or below it is void),
 * then deregistered as by its expiry (mailbox closed, replicas dead; it registers again and its
 * re-registration at or below the fence is refused, so it drops those records itself), then the
 * Removes that waited for it complete. Returns how many holders. */
static size_t fence_overdue(struct mc_master *m)
{
    struct mc_offload *off = m->offload;
    struct mc_delwait_overdue *v;
    size_t n = mc_delwait_overdue(off->dw, mc_master_now_ms(m), &v);
    for (size_t i = 0; i < n; i++) {
        struct mc_id id = v[i].holder;
        uint64_t was = mc_fences_get(off->fences, id);
        if (v[i].version > was && mc_fences_raise(off->fences, id, v[i].version) != 0)
            mc_error(COMP, "cannot record a fence (out of memory); the holder is dropped",
                     "version=%llu", (unsigned long long)v[i].version);
        INC(off, fenced);
        char buf[MC_ID_STRLEN];
        mc_warn(COMP, "holder fenced: a delete was not acknowledged in time",
                "client=%s fence_version=%llu timeout_ms=%llu", mc_id_format(id, buf),
                (unsigned long long)v[i].version, (unsigned long long)off->delete_timeout_ms);
        (void)holder_drop(m, id); /* settles what it had outstanding */
        mc_delwait_settle_holder(off->dw, id, v[i].version);
    }
    free(v);
    return n;
}

/* Deletes handed out but not acknowledged within a quarter of the timeout are pushed again (a
 * heartbeat answer lost with a dropped connection loses its deletes: the mailbox forgets a
 * delete once handed out, and applying one twice is harmless), so a lost answer costs a resend,
 * not a fence. */
static void resend_unacked(struct mc_master *m)
{
    struct mc_offload *off = m->offload;
    uint64_t interval = off->delete_timeout_ms / 4 ? off->delete_timeout_ms / 4 : 1;
    struct mc_delwait_resend *v;
    size_t n = mc_delwait_due_resend(off->dw, mc_master_now_ms(m), interval,
                                     off->delete_timeout_ms - interval, 1024, &v);
    /* the same task id: whichever copy the holder acknowledges settles it */
    for (size_t i = 0; i < n; i++)
        if (mc_mailbox_push_id(off->mb, v[i].holder, MC_TASK_DELETE, v[i].key, v[i].key_len,
                               v[i].version, 0, 0, false, 0, v[i].task_id) == MC_OK)
            INC(off, deletes_resent);
    mc_delwait_resend_free(v, n);
}

int mc_master_tick_offload(struct mc_master *m)
{
    if (!m->offload)
        return 0;
    mc_mailboxes_tick_polls(m->offload->mb);
    mc_mailboxes_wake(m->offload->mb);
    if (!atomic_load_explicit(&m->offload->recovery_closed, memory_order_relaxed) &&
        !recovery_open(m))
        recovery_close(m, "window_ended");
    int n = (int)fence_overdue(m);
    resend_unacked(m);
    return n;
}

int mc_master_offload_ack_deletes(struct mc_master *m, struct mc_id client, const uint64_t *ids,
                                  size_t n)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_ERR_UNABLE_OFFLOAD;
    if (n && !ids)
        return MC_ERR_INVALID_PARAMS;
    size_t k = mc_delwait_ack(off->dw, client, ids, n);
    atomic_fetch_add_explicit(&off->deletes_acked, k, memory_order_relaxed);
    return (int)k;
}

/* Whether key has an object now (a read lock, dropped). */
static bool key_present(struct mc_master *m, const char *key, size_t key_len)
{
    struct mc_shard *s;
    struct mc_object *o =
        mc_master_lock_find(m, mc_hash_key(key, key_len), key, key_len, false, &s);
    if (o)
        mc_shard_unlock(s);
    return o != NULL;
}

int mc_offload_rereg_check(struct mc_master *m, struct mc_id holder, const char *key,
                           size_t key_len, uint64_t version)
{
    struct mc_offload *off = m->offload;
    if (mc_fences_voids(off->fences, holder, version))
        return MC_ERR_OBJECT_NOT_FOUND; /* the copy is void */
    /* removed, its deletes still outstanding: a tombstone (an object present again has a newer
     * version, which the version check refuses on its own) */
    if (mc_delwait_blocks(off->dw, key, key_len, version) && !key_present(m, key, key_len))
        return MC_ERR_OBJECT_NOT_FOUND;
    return MC_OK;
}

/* ---- mount / unmount ----------------------------------------------------------------------- */

/* Moves every LOCAL_DISK replica of old to nh (a re-mounted holder's new endpoint). */
static void holder_rebind(struct mc_master *m, struct mc_holder *old, struct mc_holder *nh)
{
    int64_t moved = 0, bytes = 0;
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *s = &m->shards[si];
        mc_shard_wrlock(s);
        for (uint32_t i = 0; i < s->n; i++) {
            struct mc_object *o = mc_ent_obj(mc_shard_ent(s, i));
            for (uint8_t r = 0; r < o->nrep; r++) {
                if (o->rep[r].type != MC_REPLICA_TYPE_LOCAL_DISK || o->rep[r].u.holder != old)
                    continue;
                atomic_fetch_add_explicit(&nh->refs, 1, memory_order_relaxed);
                o->rep[r].u.holder = nh;
                atomic_fetch_sub_explicit(&old->refs, 1, memory_order_relaxed); /* old >= 2 */
                moved++;
                bytes += (int64_t)o->size;
            }
        }
        mc_shard_unlock(s);
    }
    atomic_fetch_add(&nh->nreplicas, moved);
    atomic_fetch_add(&nh->bytes, bytes);
    atomic_fetch_sub(&old->nreplicas, moved);
    atomic_fetch_sub(&old->bytes, bytes);
}

int mc_master_mount_local_disk(struct mc_master *m, struct mc_id client, const char *endpoint,
                               uint64_t capacity_bytes, bool enable_offloading)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client) || !endpoint || strlen(endpoint) >= MC_ENDPOINT_MAX)
        return MC_ERR_INVALID_PARAMS;
    if (mc_clients_touch(m, client) != MC_OK || mc_mailbox_open(off->mb, client) != MC_OK)
        return MC_ERR_INTERNAL_ERROR;
    struct mc_holder *nh = holder_new(client, endpoint);
    if (!nh)
        return MC_ERR_INTERNAL_ERROR;
    struct mc_holder *old = NULL;
    int rc = MC_OK;
    table_lock(off);
    ssize_t i = rec_find(off, client);
    bool first = seen_first(off, client);
    /* every mount starts a new listing of its records (a restarted holder's, or its first) */
    uint32_t gen = ++off->last_gen ? off->last_gen : ++off->last_gen;
    if (i >= 0) {
        off->v[i].capacity = capacity_bytes;
        off->v[i].offloading = enable_offloading;
        off->v[i].may_recreate = off->v[i].may_recreate && first; /* a repeat: first is false */
        off->v[i].list_gen = gen;
        off->v[i].backoff_ms = 0; /* a new start may have room again */
        off->v[i].backoff_until_ms = 0;
        if (strcmp(off->v[i].h->endpoint, endpoint) != 0) {
            old = off->v[i].h; /* the table's reference moves to the caller */
            off->v[i].h = nh;
            atomic_fetch_add_explicit(&nh->refs, 1, memory_order_relaxed); /* for the rebind */
        }
    } else {
        if (off->n == off->cap) {
            size_t cap = off->cap ? off->cap * 2 : 8;
            struct holder_rec *nv = realloc(off->v, cap * sizeof(*nv));
            if (!nv) {
                rc = MC_ERR_INTERNAL_ERROR;
                goto unlock;
            }
            off->v = nv;
            off->cap = cap;
        }
        off->v[off->n++] = (struct holder_rec){.h = nh,
                                               .capacity = capacity_bytes,
                                               .offloading = enable_offloading,
                                               .may_recreate = first,
                                               .list_gen = gen};
        nh = NULL; /* the table owns it */
        char buf[MC_ID_STRLEN];
        mc_info(COMP, "holder registered", "client=%s endpoint=%s capacity=%llu offloading=%d",
                mc_id_format(client, buf), endpoint, (unsigned long long)capacity_bytes,
                (int)enable_offloading);
    }
unlock:
    table_unlock(off);
    if (old) {
        holder_rebind(m, old, nh);
        mc_holder_unref(nh); /* the rebind's reference; the table keeps its own */
        nh = NULL;
        atomic_store_explicit(&old->dead, true, memory_order_release);
        mc_holder_unref(old);
    }
    if (nh)
        mc_holder_unref(nh); /* same endpoint (not needed), or out of memory */
    if (rc == MC_OK && i >= 0) {
        /* mounted again (a restart within the TTL): what the earlier incarnation took is lost */
        mc_mailbox_requeue_in_flight(off->mb, client, OFF_KIND);
        mc_promotion_holder_remounted(m, client);
    }
    return rc;
}

int mc_master_unmount_local_disk(struct mc_master *m, struct mc_id client)
{
    if (!m->offload)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client))
        return MC_ERR_INVALID_PARAMS;
    (void)holder_drop(m, client);
    return MC_OK;
}

/* ---- heartbeat ----------------------------------------------------------------------------- */

int mc_master_offload_heartbeat(struct mc_master *m, struct mc_id client, bool enable_offloading,
                                uint32_t max_items, uint32_t wait_ms, mc_mailbox_reply_fn reply,
                                void *arg)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client) || !reply)
        return MC_ERR_INVALID_PARAMS;
    uint32_t max = max_items == 0 || max_items > MC_OFFLOAD_MAX_PER_HEARTBEAT
                       ? MC_OFFLOAD_MAX_PER_HEARTBEAT
                       : max_items;
    table_lock(off);
    ssize_t i = rec_find(off, client);
    if (i >= 0) {
        off->v[i].offloading = enable_offloading;
        off->v[i].may_recreate = false; /* its first registration is over */
    }
    table_unlock(off);
    if (i < 0)
        return MC_ERR_SEGMENT_NOT_FOUND;
    struct mc_task_list got = {0};
    if (!enable_offloading) {
        /* cancel what is queued (handed-out tasks end with their report or expiry) */
        struct mc_task_list q = {0};
        if (mc_mailbox_pull(off->mb, client, OFF_KIND, 0, &q) != MC_OK)
            return MC_ERR_SEGMENT_NOT_FOUND;
        for (struct mc_task *t = q.head; t; t = t->next)
            free(mc_mailbox_complete_kind(off->mb, client, t->task_id, OFF_KIND, true));
        tasks_end(m, &q, &off->cancelled);
        mc_mailbox_pull(off->mb, client, MC_TASK_KIND_BIT(MC_TASK_DELETE), max, &got);
        reply(arg, &got);
        return 1;
    }
    if (mc_mailbox_pull(off->mb, client, MC_TASK_KIND_BIT(MC_TASK_DELETE), max, &got) != MC_OK)
        return MC_ERR_SEGMENT_NOT_FOUND;
    if (got.n > 0) { /* deletes go out alone, so the holder acknowledges them at once */
        reply(arg, &got);
        return 1;
    }
    int rc = mc_mailbox_park(off->mb, client, MC_TASK_OFFLOAD, max, wait_ms, reply, arg);
    return rc == MC_ERR_CLIENT_NOT_FOUND ? MC_ERR_SEGMENT_NOT_FOUND : rc;
}

/* ---- completions and re-registration ------------------------------------------------------- */

/* Attaches a COMPLETE LOCAL_DISK replica of h to *op, or finds it there (write lock); either way
 * it carries listing generation gen (confirmed by the holder's current listing). *op may move. */
static int attach_disk(struct mc_master *m, struct mc_shard *s, struct mc_object **op,
                       struct mc_holder *h, uint32_t gen)
{
    struct mc_object *o = *op;
    for (uint8_t i = 0; i < o->nrep; i++) {
        struct mc_replica *r = &o->rep[i];
        if (r->type == MC_REPLICA_TYPE_LOCAL_DISK && r->u.holder == h) {
            r->handle = gen;
            return MC_OK; /* already there (a repeated report or re-registration) */
        }
    }
    struct mc_object *n = mc_shard_obj_grow(s, o);
    if (!n)
        return o->nrep >= MC_MAX_REPLICAS ? MC_ERR_INVALID_REPLICA : MC_ERR_INTERNAL_ERROR;
    struct mc_replica *r = &n->rep[n->nrep - 1];
    r->id = (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
    r->type = MC_REPLICA_TYPE_LOCAL_DISK;
    r->status = MC_REPLICA_STATUS_COMPLETE;
    r->handle = gen;
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    r->u.holder = h;
    atomic_fetch_add_explicit(&h->nreplicas, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->bytes, (int64_t)n->size, memory_order_relaxed);
    mc_shard_refresh_bits(s, n);
    *op = n;
    return MC_OK;
}

static bool same_bytes(const struct mc_object *o, const struct mc_offload_result *it)
{
    return !(it->crc_valid && (o->flags & MC_OBJ_HAS_CRC) && it->crc32c != o->crc);
}

static int notify_task(struct mc_master *m, struct mc_holder *h, uint32_t gen,
                       const struct mc_offload_result *it)
{
    struct mc_offload *off = m->offload;
    struct mc_task *t =
        mc_mailbox_complete_kind(off->mb, h->id, it->task_id, OFF_KIND, it->status != 0);
    if (!t)
        return MC_ERR_TASK_NOT_FOUND;
    int rc = MC_OK;
    bool full = it->status == MC_ERR_UNABLE_OFFLOAD; /* the holder's disk has no room */
    if (it->key_len != t->key_len || memcmp(it->key, t->key, t->key_len) != 0)
        rc = MC_ERR_INVALID_PARAMS;
    struct mc_shard *s;
    struct mc_object *o =
        mc_master_lock_find(m, mc_hash_key(t->key, t->key_len), t->key, t->key_len, true, &s);
    if (o && o->version == t->version) {
        pin_release(off, s, o);
        if (full)
            (void)count_full_nack(off, o);
    }
    if (it->status != 0) {
        INC(off, nacked);
        rc = MC_OK;
    } else if (rc != MC_OK) {
    } else if (!o || o->version != t->version || it->version != t->version) {
        rc = MC_ERR_INVALID_VERSION;
    } else if (it->size != o->size) {
        rc = MC_ERR_INVALID_PARAMS;
    } else if (!same_bytes(o, it)) {
        rc = MC_ERR_CHECKSUM_MISMATCH;
    } else {
        rc = attach_disk(m, s, &o, h, gen);
        if (rc == MC_OK)
            INC(off, completed);
    }
    if (o)
        mc_shard_unlock(s);
    if (rc != MC_OK && it->status == 0)
        INC(off, stale);
    if (full)
        holder_backoff(off, h->id, mc_master_now_ms(m));
    else if (it->status == 0 && rc == MC_OK)
        holder_backoff_end(off, h->id);
    free(t);
    return rc;
}

/* Creates the absent object of a disk record, disk-only, with the record's version, size and
 * CRC and no lease (s write-locked, hk = the key's hash). */
static int create_from_record(struct mc_master *m, struct mc_shard *s, uint64_t hk,
                              struct mc_holder *h, uint32_t gen, const struct mc_offload_result *it)
{
    struct mc_object *o = mc_obj_alloc(s, sizeof(*o) + sizeof(o->rep[0]) + it->key_len);
    if (!o)
        return MC_ERR_INTERNAL_ERROR;
    o->size = it->size;
    o->version = it->version;
    o->ent = MC_NO_INDEX;
    o->key_len = (uint16_t)it->key_len;
    o->nrep = 1;
    o->flags |= MC_OBJ_COMPLETE | (it->crc_valid ? MC_OBJ_HAS_CRC : 0);
    o->crc = it->crc_valid ? it->crc32c : 0;
    struct mc_replica *r = &o->rep[0];
    memset(r, 0, sizeof(*r));
    r->id = (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
    r->type = MC_REPLICA_TYPE_LOCAL_DISK;
    r->status = MC_REPLICA_STATUS_COMPLETE;
    r->handle = gen;
    r->u.holder = h;
    memcpy(mc_obj_key(o), it->key, it->key_len);
    if (mc_shard_insert(s, hk, o) != 0) {
        mc_obj_free_locked(s, o);
        return MC_ERR_INTERNAL_ERROR;
    }
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->nreplicas, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->bytes, (int64_t)o->size, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->c.key_count, 1, memory_order_relaxed);
    return MC_OK;
}

/* Whether a re-registered record of a higher version may take o's place (write lock): o is
 * itself a copy from before this incarnation (recreated from a record, never written here) and
 * no Put of it is in flight. */
static bool replaceable(const struct mc_master *m, const struct mc_object *o)
{
    return o->version <= m->version_base && (o->flags & MC_OBJ_COMPLETE) &&
           !(o->flags & MC_OBJ_PROCESSING);
}

/* The checks of one re-registered record that need no object: MC_OK, or the refusal. Every
 * per-record rule that refuses a record of this holder by what it is (its version, say) goes
 * here. Called with no shard lock held. */
static int record_admissible(struct mc_master *m, struct mc_holder *h,
                             const struct mc_offload_result *it)
{
    if (it->status != 0 || it->size == 0 || it->size > MC_OBJECT_SIZE_MAX || it->version == 0)
        return MC_ERR_INVALID_PARAMS;
    /* the delete rule: a fenced holder's copy, or a key whose Remove is still outstanding (it
     * may look the key up: called with no shard lock held) */
    return mc_offload_rereg_check(m, h->id, it->key, it->key_len, it->version);
}

/* One re-registered record of holder h, listing gen (no lock held). Where the record and the
 * master's object differ in version, the higher version wins (DESIGN §4): a record newer than a
 * copy from before this incarnation replaces it (its holders are told to delete theirs by the
 * erase hook); an older one is refused. *master_version: the key's version at the master
 * afterwards (0: none), which the holder compares with its record before deleting it. */
static int reregister(struct mc_master *m, struct mc_holder *h, uint32_t gen, bool may_recreate,
                      const struct mc_offload_result *it, uint64_t *master_version)
{
    struct mc_offload *off = m->offload;
    uint64_t hk = mc_hash_key(it->key, it->key_len);
    struct mc_shard *s = &m->shards[mc_master_key_shard(m, hk)];
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    int rc = record_admissible(m, h, it);
    mc_shard_wrlock(s);
    struct mc_object *o = mc_shard_find(s, hk, it->key, it->key_len);
    if (rc != MC_OK) {
    } else if (o && o->version == it->version) {
        if (!(o->flags & MC_OBJ_COMPLETE))
            rc = MC_ERR_INVALID_VERSION;
        else if (it->size != o->size)
            rc = MC_ERR_INVALID_PARAMS;
        else if (!same_bytes(o, it))
            rc = MC_ERR_CHECKSUM_MISMATCH;
        else
            rc = attach_disk(m, s, &o, h, gen);
    } else if (o && (it->version < o->version || !replaceable(m, o))) {
        rc = MC_ERR_INVALID_VERSION; /* the master's is newer, or written by this incarnation */
    } else if (it->version > m->version_base) {
        rc = MC_ERR_OBJECT_NOT_FOUND; /* written by this incarnation, removed since */
    } else if (!may_recreate || !recovery_open(m) || mc_tombs_blocks(off->tombs, hk, it->version)) {
        /* this incarnation dropped it since it saw the holder, removed it while recovering, or
         * the recovery window is over: never resurrected */
        rc = o ? MC_ERR_INVALID_VERSION : MC_ERR_OBJECT_NOT_FOUND;
    } else {
        if (o) {
            /* a newer copy than the one recreated first: that one goes, its holders are told
             * to delete it (the erase hook), and the newer one takes the key */
            mc_master_erase_object(m, s, o, &fl);
            INC(off, rereg_replaced);
        }
        rc = create_from_record(m, s, hk, h, gen, it);
    }
    o = mc_shard_find(s, hk, it->key, it->key_len);
    *master_version = o ? o->version : 0;
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    return rc;
}

/* ---- a holder's complete listing ----------------------------------------------------------- */

struct unlisted {
    struct mc_id holder;
    uint32_t gen; /* its listing: replicas carrying another generation were left out */
};

/* Drops o's LOCAL_DISK replica of a->holder that its listing left out (write lock): a promotion
 * reading it is cancelled first, and o is erased when no valid replica is left and no Put is in
 * flight. True when one was dropped. */
static bool drop_unlisted(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                          struct mc_freelist *fl, void *arg)
{
    const struct unlisted *a = arg;
    uint8_t i;
    for (i = 0; i < o->nrep; i++) {
        const struct mc_replica *r = &o->rep[i];
        if (r->type == MC_REPLICA_TYPE_LOCAL_DISK && mc_id_eq(r->u.holder->id, a->holder) &&
            r->handle != a->gen)
            break;
    }
    if (i == o->nrep)
        return false;
    if (o->flags & MC_OBJ_PROMOTING)
        mc_promotion_cancel_locked(m, s, o, fl); /* the source may be the copy that goes */
    for (i = 0; i < o->nrep; i++) {
        struct mc_replica *r = &o->rep[i];
        if (r->type == MC_REPLICA_TYPE_LOCAL_DISK && mc_id_eq(r->u.holder->id, a->holder) &&
            r->handle != a->gen) {
            mc_freelist_add_replica(fl, r, o->size);
            mc_obj_drop_replica(o, i);
            break;
        }
    }
    bool valid = false;
    for (i = 0; i < o->nrep && !valid; i++)
        valid = mc_replica_valid(&o->rep[i]);
    if (!valid && !(o->flags & MC_OBJ_PROCESSING))
        mc_master_erase_object(m, s, o, fl);
    else
        mc_shard_refresh_bits(s, o);
    return true;
}

/* The holder's listing gen is complete: its copies the listing did not confirm are dropped (a
 * record lost on its disk is no longer listed as a readable replica). */
static void listing_complete(struct mc_master *m, struct mc_id client, uint32_t gen)
{
    struct mc_offload *off = m->offload;
    if (gen == 0 || holder_gen(off, client) != gen)
        return; /* not mounted, or mounted again since: a new listing runs */
    struct unlisted a = {.holder = client, .gen = gen};
    uint64_t n = mc_master_each_object(m, drop_unlisted, &a);
    if (n == 0)
        return;
    atomic_fetch_add_explicit(&off->unlisted, n, memory_order_relaxed);
    char buf[MC_ID_STRLEN];
    mc_warn(COMP, "holder's listing left out copies the master had: dropped",
            "client=%s copies=%llu", mc_id_format(client, buf), (unsigned long long)n);
}

int mc_master_reregister_disk(struct mc_master *m, struct mc_id client,
                              const struct mc_offload_result *items, size_t n, bool complete,
                              int *rcs, uint64_t *versions)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client) || (n && (!items || !rcs)))
        return MC_ERR_INVALID_PARAMS;
    struct mc_holder *h = holder_get(off, client);
    if (!h)
        return MC_ERR_SEGMENT_NOT_FOUND;
    uint32_t gen = holder_gen(off, client);
    bool may_recreate = holder_flag(off, client, HF_MAY_RECREATE, 0);
    for (size_t i = 0; i < n; i++) {
        const struct mc_offload_result *it = &items[i];
        uint64_t mv = 0;
        int rc = mc_master_check_key(m, it->key, it->key_len);
        if (rc == MC_OK)
            rc = reregister(m, h, gen, may_recreate, it, &mv);
        INC(off, rereg_ok);
        if (rc != MC_OK) {
            atomic_fetch_sub_explicit(&off->rereg_ok, 1, memory_order_relaxed);
            INC(off, rereg_refused);
        }
        rcs[i] = rc;
        if (versions)
            versions[i] = mv;
    }
    if (complete)
        listing_complete(m, client, gen);
    mc_holder_unref(h);
    return MC_OK;
}

int mc_master_notify_offload(struct mc_master *m, struct mc_id client,
                             const struct mc_offload_result *items, size_t n, bool reregister_,
                             int *rcs)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_ERR_UNABLE_OFFLOAD;
    if (reregister_)
        return mc_master_reregister_disk(m, client, items, n, false, rcs, NULL);
    if (mc_id_is_zero(client) || (n && (!items || !rcs)))
        return MC_ERR_INVALID_PARAMS;
    struct mc_holder *h = holder_get(off, client);
    if (!h)
        return MC_ERR_SEGMENT_NOT_FOUND;
    uint32_t gen = holder_gen(off, client);
    for (size_t i = 0; i < n; i++) {
        const struct mc_offload_result *it = &items[i];
        int rc = mc_master_check_key(m, it->key, it->key_len);
        if (rc != MC_OK) {
            /* a task report with a bad key still ends its task */
            struct mc_task *t =
                mc_mailbox_complete_kind(off->mb, client, it->task_id, OFF_KIND, true);
            if (t) {
                task_unpin(m, t);
                free(t);
            }
        } else {
            rc = notify_task(m, h, gen, it);
        }
        rcs[i] = rc;
    }
    mc_holder_unref(h);
    return MC_OK;
}

/* ---- disk evictions ------------------------------------------------------------------------ */

int mc_master_evict_disk_replica(struct mc_master *m, struct mc_id client, const char *key,
                                 size_t key_len, uint64_t version)
{
    if (!m->offload)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client))
        return MC_ERR_INVALID_PARAMS;
    int rc = mc_master_check_key(m, key, key_len);
    if (rc != MC_OK)
        return rc;
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct mc_shard *s;
    struct mc_object *o = mc_master_lock_find(m, mc_hash_key(key, key_len), key, key_len, true, &s);
    if (!o)
        return MC_ERR_OBJECT_NOT_FOUND;
    rc = MC_ERR_REPLICA_NOT_FOUND;
    if (version && o->version != version) {
        rc = MC_ERR_INVALID_VERSION;
        goto unlock;
    }
    for (uint8_t i = 0; i < o->nrep && (o->flags & MC_OBJ_PROMOTING); i++)
        if (o->rep[i].type == MC_REPLICA_TYPE_LOCAL_DISK &&
            mc_id_eq(o->rep[i].u.holder->id, client))
            mc_promotion_cancel_locked(m, s, o, &fl); /* the pinned source goes: cancel first */
    for (uint8_t i = 0; i < o->nrep; i++) {
        struct mc_replica *r = &o->rep[i];
        if (r->type != MC_REPLICA_TYPE_LOCAL_DISK || !mc_id_eq(r->u.holder->id, client))
            continue;
        mc_freelist_add_replica(&fl, r, o->size);
        mc_obj_drop_replica(o, i);
        rc = MC_OK;
        break;
    }
    if (rc != MC_OK)
        goto unlock;
    bool valid = false;
    for (uint8_t i = 0; i < o->nrep && !valid; i++)
        valid = mc_replica_valid(&o->rep[i]);
    if (!valid && !(o->flags & MC_OBJ_PROCESSING))
        mc_master_erase_object(m, s, o, &fl);
    else
        mc_shard_refresh_bits(s, o);
unlock:
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    return rc;
}

int mc_master_batch_evict_disk_replica(struct mc_master *m, struct mc_id client,
                                       const struct mc_key_ref *keys, const uint64_t *versions,
                                       size_t n, int *rcs)
{
    if (!m->offload)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client) || (n && (!keys || !rcs)))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++)
        rcs[i] = mc_master_evict_disk_replica(m, client, keys[i].data, keys[i].len,
                                              versions ? versions[i] : 0);
    return MC_OK;
}

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

/* Objects whose readable replicas are all LOCAL_DISK (a scan under read locks). */
static uint64_t count_disk_only(struct mc_master *m)
{
    uint64_t n = 0;
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *s = &m->shards[si];
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
    }
    return n;
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

static void stats_fill(struct mc_master *m, struct mc_offload_stats *st, bool scan)
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
    if (scan && st->disk_replicas)
        st->disk_only_keys = count_disk_only(m);
}

void mc_master_offload_stats(struct mc_master *m, struct mc_offload_stats *out)
{
    stats_fill(m, out, true);
}

static double rd_file_bytes(void *arg)
{
    struct mc_offload_stats st;
    stats_fill(arg, &st, false);
    return (double)st.file_allocated_bytes;
}
static double rd_file_capacity(void *arg)
{
    struct mc_offload_stats st;
    stats_fill(arg, &st, false);
    return (double)st.file_capacity_bytes;
}
static double rd_disk_only(void *arg)
{
    struct mc_offload_stats st;
    stats_fill(arg, &st, true);
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

static int register_metrics(struct mc_master *m, struct mc_offload *off)
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
    rc |= mc_metrics_gauge_fn(reg, "master_disk_only_key_count",
                              "objects readable only from LOCAL_DISK", NULL, rd_disk_only, m);
    return rc ? -1 : 0;
}

int mc_offload_init(struct mc_master *m)
{
    if (!m->cfg.enable_offload)
        return 0;
    if (m->cfg.offload_force_evict && !m->cfg.offload_on_evict) {
        mc_warn(COMP, "offload_force_evict without offload_on_evict is ignored",
                "mode=offload_at_put_end");
        m->cfg.offload_force_evict = false;
    }
    struct mc_offload *off = calloc(1, sizeof(*off));
    if (!off)
        return -1;
    pthread_mutex_init(&off->lock, NULL);
    off->mb = mc_mailboxes_new(m->clock, m->cfg.offloading_queue_limit);
    if (off->mb) { /* each kind its own bound: promotions are capped by promotion_queue_limit */
        uint64_t pl = m->cfg.promotion_queue_limit;
        mc_mailboxes_set_limit(off->mb, MC_TASK_PROMOTION,
                               pl > UINT32_MAX ? UINT32_MAX : (uint32_t)pl);
        mc_mailboxes_set_limit(off->mb, MC_TASK_DELETE, m->cfg.delete_queue_limit);
    }
    off->fences = mc_fences_new();
    off->dw = mc_delwait_new();
    off->tombs = mc_tombs_new(TOMBS_MAX);
    off->recovery_end_ms =
        mc_master_now_ms(m) +
        (m->cfg.disk_recovery_window_ms ? m->cfg.disk_recovery_window_ms : 60000);
    off->delete_timeout_ms =
        m->cfg.holder_delete_timeout_ms ? m->cfg.holder_delete_timeout_ms : 2000;
    off->cycle_cap = (uint64_t)((double)m->cfg.offloading_queue_limit * m->cfg.offload_cap_ratio);
    m->offload = off;
    if (!off->mb || !off->fences || !off->dw || !off->tombs || register_metrics(m, off) != 0)
        return -1;
    mc_info(COMP, "offload enabled", "mode=%s queue_limit=%u cycle_cap=%llu",
            !m->cfg.offload_on_evict     ? "put_end"
            : m->cfg.offload_force_evict ? "on_evict_force"
                                         : "on_evict",
            m->cfg.offloading_queue_limit, (unsigned long long)off->cycle_cap);
    return 0;
}

struct mc_delwait *mc_offload_delwait(struct mc_master *m)
{
    return m->offload ? m->offload->dw : NULL;
}

struct mc_mailboxes *mc_offload_mailboxes(struct mc_master *m)
{
    return m->offload ? m->offload->mb : NULL;
}

void mc_offload_destroy(struct mc_master *m)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return;
    mc_mailboxes_free(off->mb); /* answers parked polls */
    mc_delwait_free(off->dw);   /* waiting Removes get UNAVAILABLE_IN_CURRENT_STATUS */
    mc_fences_free(off->fences);
    mc_tombs_free(off->tombs);
    for (size_t i = 0; i < off->n; i++) {
        atomic_store(&off->v[i].h->dead, true);
        mc_holder_unref(off->v[i].h);
    }
    free(off->v);
    free(off->seen);
    pthread_mutex_destroy(&off->lock);
    free(off);
    m->offload = NULL;
}
