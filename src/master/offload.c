/*
 * offload.c - the master half of the LOCAL_DISK tier: holders, their mailboxes, offload tasks
 * in the three modes, completions checked by version, mount/unmount, the heartbeat, disk
 * evictions and the lifecycle. The rest lives beside it, sharing offload_internal.h:
 * offload_delete.c (the delete rule: removing copies, deletes, acks, fences),
 * offload_rereg.c (re-registration, listings and the recovery window) and offload_stats.c (the
 * admin listing, stats and metrics).
 *
 * State. A holder table (id -> struct mc_holder, capacity, whether it takes offload tasks) under
 * one mutex that is a leaf of the lock order, and the mailbox table (mailbox.h), which keeps
 * every task. An object with a task has MC_OBJ_OFFLOADING and exactly one pinned MEMORY
 * replica (refcnt + 1); nothing else pins MEMORY replicas, so the pin is found again by
 * looking for it. A task names the key and version it was made for; every path that ends a
 * task (report, NACK, expiry, cancel by heartbeat, holder gone) looks the object up by key and
 * releases the pin only if the object still has that version and the flag. Erasing an object
 * (Remove, RemoveAll, eviction in mode C, sweeps) cancels its task in the hook (offload_delete.c),
 * under the shard lock, so no mailbox keeps a task for an object that is gone. Versions,
 * re-registration and listings: offload_rereg.c.
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
#include "common/mc_assert.h"
#include "master/offload.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "master/clients.h"
#include "master/delwait.h"
#include "master/fence.h"
#include "master/tombstone.h"
#include "master/freelist.h"
#include "master/mailbox.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/offload_internal.h"
#include "master/object_events.h"
#include "master/shard.h"
#include "mooncake/errors.h"

#define COMP "offload"

/* Disk-full back-off (a holder NACKed an offload with UNABLE_OFFLOAD): the first pause, the
 * longest, at most one log line per holder per BACKOFF_LOG_MS, and the NACKs one object may
 * collect before it is no longer offered for offload (then evicted as without the tier). */
#define BACKOFF_FIRST_MS 500u
#define BACKOFF_MAX_MS 60000u
#define BACKOFF_LOG_MS 10000u
#define OBJ_MAX_FULL_NACKS 3u

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
void mc_offload_pin_release(struct mc_offload *off, struct mc_shard *s, struct mc_object *o)
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
        mc_offload_pin_release(m->offload, s, o);
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
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
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
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
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

/* ---- holders going away, reaper, tick ------------------------------------------------------ */

/* Removes the holder of id: table, mailbox (tasks cancelled, pins released), replicas dead. */
bool mc_offload_holder_drop(struct mc_master *m, struct mc_id id)
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
        mc_offload_fence_now(off, id, fv);
        if (mc_fences_durable(off->fences, id, fv)) /* HA: once in etcd (offload_delete.c) */
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
        (void)mc_offload_holder_drop(m, client);
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

int mc_master_tick_offload(struct mc_master *m)
{
    if (!m->offload)
        return 0;
    mc_mailboxes_tick_polls(m->offload->mb);
    mc_mailboxes_wake(m->offload->mb);
    mc_recovery_tick(m->offload->recovery, mc_master_now_ms(m));
    return (int)mc_offload_delete_tick(m);
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
        /* a repeat mount before any heartbeat is the same first registration retried (its
         * listing was cut: a broken connection, a call that timed out): it may still recreate,
         * or the records after the cut would be refused and deleted by the holder. Removals
         * meanwhile are tombstones; a holder dropped since has no entry (i < 0, first false):
         * may_recreate is left as it is */
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
        char buf[MC_ID_STRLEN], qe[MC_LOG_QUOTE_MAX];
        mc_info(COMP, "holder registered", "client=%s endpoint=%s capacity=%llu offloading=%d",
                mc_id_format(client, buf), mc_log_quote(endpoint, qe, sizeof(qe)),
                (unsigned long long)capacity_bytes, (int)enable_offloading);
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
        mc_obj_ev_holder_remounted(m, client); /* promotion ends its tasks */
    }
    return rc;
}

int mc_master_unmount_local_disk(struct mc_master *m, struct mc_id client)
{
    if (!m->offload)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client))
        return MC_ERR_INVALID_PARAMS;
    (void)mc_offload_holder_drop(m, client);
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

/* ---- completions --------------------------------------------------------------------------- */

/* Attaches a COMPLETE LOCAL_DISK replica of h to *op, or finds it there (write lock); either way
 * it carries listing generation gen (confirmed by the holder's current listing). *op may move. */
int mc_offload_attach_disk(struct mc_master *m, struct mc_shard *s, struct mc_object **op,
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
        mc_offload_pin_release(off, s, o);
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
        rc = mc_offload_attach_disk(m, s, &o, h, gen);
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

/* Whether replica r is the LOCAL_DISK copy of the holder *arg (a struct mc_id). */
static bool holders_disk_copy(const struct mc_master *m, const struct mc_object *o,
                              const struct mc_replica *r, const void *arg)
{
    (void)m;
    (void)o;
    return r->type == MC_REPLICA_TYPE_LOCAL_DISK &&
           mc_id_eq(r->u.holder->id, *(const struct mc_id *)arg);
}

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
    if (version && o->version != version)
        rc = MC_ERR_INVALID_VERSION;
    else if (mc_obj_drop_picked(m, s, o, &fl, holders_disk_copy, &client, true) == 0)
        rc = MC_ERR_REPLICA_NOT_FOUND;
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

/* ---- lifecycle ----------------------------------------------------------------------------- */

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
    off->recovery =
        mc_recovery_new(mc_master_now_ms(m), m->cfg.disk_recovery_window_ms, MC_RECOVERY_TOMBS_MAX);
    off->delete_timeout_ms =
        m->cfg.holder_delete_timeout_ms ? m->cfg.holder_delete_timeout_ms : 2000;
    off->cycle_cap = (uint64_t)((double)m->cfg.offloading_queue_limit * m->cfg.offload_cap_ratio);
    m->offload = off;
    m->delwait = off->dw;
    m->recovery = off->recovery;
    if (!off->mb || !off->fences || !off->dw || !off->recovery ||
        mc_offload_register_metrics(m, off) != 0)
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
    m->delwait = NULL;
    mc_delwait_free(off->dw); /* waiting Removes get UNAVAILABLE_IN_CURRENT_STATUS */
    mc_fences_free(off->fences);
    m->recovery = NULL;
    mc_recovery_free(off->recovery);
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

/* ---- the object events offload subscribes to (object_events.h) ------------------------------ */

static void ev_put_end(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    mc_offload_put_end_locked(m, s, o);
}

static int ev_before_remove(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            const struct mc_obj_remove_ev *ev)
{
    return mc_offload_remove_copies_locked(m, s, o, ev->op, ev->fl);
}

static void ev_evict_chosen(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            struct mc_obj_evict_ev *ev)
{
    ev->freed = mc_offload_evict_object(m, s, o, ev->fl, ev->ub);
    ev->taken = true;
}

/* Mode A queues at PutEnd; modes B and C (offload_on_evict) when eviction picks the object. */
static const struct mc_obj_subscriber offload_at_put_end = {
    .name = "offload",
    .put_end = ev_put_end,
    .before_remove = ev_before_remove,
    .erased = mc_offload_object_erased,
    .evict_cycle_begin = mc_offload_cycle_begin,
    .client_expired = mc_offload_client_expired,
    .unlocked = mc_offload_wake,
};
static const struct mc_obj_subscriber offload_on_evict = {
    .name = "offload",
    .before_remove = ev_before_remove,
    .erased = mc_offload_object_erased,
    .evict_chosen = ev_evict_chosen,
    .evict_cycle_begin = mc_offload_cycle_begin,
    .client_expired = mc_offload_client_expired,
    .unlocked = mc_offload_wake,
};

int mc_offload_subscribe(struct mc_master *m)
{
    if (!m->offload)
        return 0;
    return mc_obj_events_register(m, m->cfg.offload_on_evict ? &offload_on_evict
                                                             : &offload_at_put_end);
}

struct mc_fences *mc_master_fences(struct mc_master *m)
{
    return m->offload ? m->offload->fences : m->own_fences;
}
