/*
 * holder_stream.c - see holder_stream.h for the design.
 */
#include "master/holder_stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/lock_order.h"
#include "common/log.h"
#include "common/mc_assert.h"
#include "master/delwait.h"
#include "master/fence.h"
#include "master/master_state.h"
#include "master/offload.h"
#include "master/object_events.h"
#include "master/object_record.h"
#include "master/shard.h"
#include "master/tombstone.h"
#include "mooncake/errors.h"

#define HS_KIND MC_TASK_DELETE /* fire and forget: a pull hands items out and forgets them */
#define HS_MAX_PER_POLL 4096u
#define HS_MAX_FENCED 1024
#define HS_MAX_LISTINGS 4096 /* segments whose listing is remembered (the oldest forgotten) */

struct mc_holder_stream {
    struct mc_mailboxes *mb;
    uint32_t flush_ms;
    _Atomic uint64_t last_wake_ms;
    _Atomic bool urgent; /* a drop was queued: wake at the next unlock, not at the interval */
    _Atomic uint64_t commits, dropped, fenced, polls, rereg, rereg_refused, unlisted;
    pthread_mutex_t mu; /* a leaf: guards fenced[] and listings */
    struct mc_id fenced_ids[HS_MAX_FENCED];
    size_t nfenced;
    struct mc_hlisting *listings; /* under mu: per segment, its last listing */
    size_t nlistings;
    struct mc_delwait *own_dw;        /* m->delwait when there is no LOCAL_DISK tier to share it */
    struct mc_recovery *own_recovery; /* m->recovery when there is no LOCAL_DISK tier */
    uint64_t delete_timeout_ms;
};

static void mark_fenced(struct mc_holder_stream *hs, struct mc_id holder)
{
    pthread_mutex_lock(&hs->mu);
    bool found = false;
    for (size_t i = 0; i < hs->nfenced && !found; i++)
        found = mc_id_eq(hs->fenced_ids[i], holder);
    if (!found && hs->nfenced < HS_MAX_FENCED)
        hs->fenced_ids[hs->nfenced++] = holder;
    pthread_mutex_unlock(&hs->mu);
}

static bool take_fenced(struct mc_holder_stream *hs, struct mc_id holder)
{
    bool found = false;
    pthread_mutex_lock(&hs->mu);
    for (size_t i = 0; i < hs->nfenced; i++)
        if (mc_id_eq(hs->fenced_ids[i], holder)) {
            hs->fenced_ids[i] = hs->fenced_ids[--hs->nfenced];
            found = true;
            break;
        }
    pthread_mutex_unlock(&hs->mu);
    return found;
}

/* Voids holder's index: its mailbox closed (the backlog dropped), its next poll answered
 * REPLICA_IS_GONE, on which it drops every entry. */
static void fence_index(struct mc_holder_stream *hs, struct mc_id holder, const char *why)
{
    struct mc_task_list l = {0};
    (void)mc_mailbox_close(hs->mb, holder, &l);
    mc_task_list_free(&l);
    mark_fenced(hs, holder);
    atomic_fetch_add_explicit(&hs->fenced, 1, memory_order_relaxed);
    char idb[40];
    mc_warn("holder_stream", "holder index fenced", "holder=%s why=%s", mc_id_format(holder, idb),
            why);
}

/* The object whose Remove just queued its holders' tracked drops (BEFORE_REMOVE, this thread):
 * its erasure, which follows at once under the same shard lock, sends those holders no second,
 * untracked drop. */
static _Thread_local const struct mc_object *drops_queued_for;

/* Queues one item for the owner of each MEMORY replica of o (quiet: woken once unlocked);
 * skip_live: a drop only for the replicas on dead segments (the live ones got tracked drops). */
static void push_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o, bool drop,
                        bool skip_live)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, false));
    struct mc_holder_stream *hs = m->hstream;
    const char *key = mc_obj_key(o);
    /* no holder keeps a stream: no mailbox to find (each lookup locks the table) */
    const bool any = mc_mailboxes_any(hs->mb);
    for (uint32_t i = 0; i < o->nrep; i++) {
        const struct mc_replica *r = &o->rep[i];
        if (r->type != MC_REPLICA_TYPE_MEMORY || !r->u.seg)
            continue;
        if (skip_live && mc_segment_alive(r->u.seg))
            continue;
        if (!drop && r->status != MC_REPLICA_STATUS_COMPLETE)
            continue;
        const struct mc_segment *seg = r->u.seg;
        struct mc_task_src src = {
            .segment = seg->desc.id, .mount_epoch = seg->mount_epoch, .offset = r->offset};
        int rc;
        if (!any) {
            rc = MC_ERR_CLIENT_NOT_FOUND;
        } else if (drop) {
            /* the holder acks every drop by its id, and an ack settles the waiting delete of
             * that id (delwait): a drop's id comes from the one space the tracked deletes use
             * (offload's table when there is one), or a holder's ack of this drop would settle
             * another key's Remove that drew the same number from the other table */
            struct mc_mailboxes *ids = m->offload ? mc_offload_mailboxes(m) : hs->mb;
            rc = mc_mailbox_push_quiet_from(hs->mb, seg->owner, HS_KIND, key, o->key_len,
                                            o->version, ids);
        } else {
            rc = mc_mailbox_push_quiet(hs->mb, seg->owner, HS_KIND, key, o->key_len, o->version,
                                       o->size, o->crc, (o->flags & MC_OBJ_HAS_CRC) != 0, 0, &src,
                                       NULL);
        }
        if (rc == MC_OK) {
            atomic_fetch_add_explicit(&hs->commits, 1, memory_order_relaxed);
            if (drop)
                atomic_store_explicit(&hs->urgent, true, memory_order_relaxed);
        } else if (rc == MC_ERR_TASK_PENDING_LIMIT_EXCEEDED) {
            /* past the backlog: the holder's index is void (the mailbox locks nest below the
             * shard's) */
            if (mc_mailbox_exists(hs->mb, seg->owner))
                fence_index(hs, seg->owner, "backlog past its limit");
        } else {
            atomic_fetch_add_explicit(&hs->dropped, 1, memory_order_relaxed);
        }
    }
}

static void on_put_end(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    push_locked(m, s, o, false, false);
}

/* The delete rule for DRAM copies: a Remove (op) waits until each owner of o's MEMORY replicas
 * acknowledges dropping its index entry (or is fenced after holder_delete_timeout). An owner
 * with no stream to this master cannot be waited for: its index is fenced. */
static int on_before_remove(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            const struct mc_obj_remove_ev *ev)
{
    (void)s;
    struct mc_holder_stream *hs = m->hstream;
    /* no disk tier: this stream keeps the recovery window's tombstones (with one, offload's
     * BEFORE_REMOVE, earlier in the table, notes them) */
    if (hs->own_recovery)
        mc_recovery_note_removal(hs->own_recovery, mc_clock_now_ms(m->clock),
                                 mc_hash_key(mc_obj_key(o), o->key_len), o->version);
    if (!ev->op || !m->delwait)
        return 0;
    struct mc_mailboxes *ids = m->offload ? mc_offload_mailboxes(m) : hs->mb;
    const char *key = mc_obj_key(o);
    for (uint32_t i = 0; i < o->nrep; i++) {
        const struct mc_replica *r = &o->rep[i];
        /* a dead segment (unmounted, its owner expired) holds nothing to drop */
        if (r->type != MC_REPLICA_TYPE_MEMORY || !r->u.seg || !mc_segment_alive(r->u.seg))
            continue;
        struct mc_id owner = r->u.seg->owner;
        if (!mc_mailbox_exists(hs->mb, owner)) {
            mark_fenced(hs, owner);
            continue;
        }
        /* one id space with the disk deletes (a holder acks both kinds in one table) */
        uint64_t id = mc_mailboxes_reserve_id(ids);
        uint64_t deadline = mc_clock_now_ms(m->clock) + hs->delete_timeout_ms;
        bool recorded = mc_delwait_add(m->delwait, ev->op, id, owner, key, o->key_len, o->version,
                                       deadline) == 0;
        int rc = mc_mailbox_push_quiet_id(hs->mb, owner, HS_KIND, key, o->key_len, o->version, 0, 0,
                                          false, 0, id);
        if (rc == MC_OK) {
            atomic_store_explicit(&hs->urgent, true, memory_order_relaxed);
            continue;
        }
        if (recorded)
            mc_delwait_forget(m->delwait, owner, id);
        fence_index(hs, owner, "a delete could not be queued");
    }
    drops_queued_for = o;
    return 0;
}

static void on_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    bool tracked = drops_queued_for == o;
    drops_queued_for = NULL;
    push_locked(m, s, o, true, tracked);
}

static void wake_now(struct mc_master *m, uint64_t now)
{
    atomic_store_explicit(&m->hstream->last_wake_ms, now, memory_order_relaxed);
    mc_mailboxes_wake(m->hstream->mb);
}

static void on_unlocked(struct mc_master *m)
{
    struct mc_holder_stream *hs = m->hstream;
    uint64_t now = mc_clock_now_ms(m->clock);
    if (atomic_exchange_explicit(&hs->urgent, false, memory_order_relaxed) ||
        now - atomic_load_explicit(&hs->last_wake_ms, memory_order_relaxed) >= hs->flush_ms)
        wake_now(m, now);
}

static void on_client_expired(struct mc_master *m, struct mc_id client)
{
    struct mc_task_list l = {0};
    (void)mc_mailbox_close(m->hstream->mb, client, &l);
    mc_task_list_free(&l);
}

void mc_holder_stream_tick(struct mc_master *m)
{
    if (!m || !m->hstream)
        return;
    struct mc_holder_stream *hs = m->hstream;
    uint64_t now = mc_clock_now_ms(m->clock);
    if (hs->own_recovery)
        mc_recovery_tick(hs->own_recovery, now);
    if (hs->own_dw) {
        /* no disk tier: this stream's deletes are the only ones; with it, offload's tick fences
         * the overdue holders and resends (its worker drops the index entries too) */
        struct mc_delwait_overdue *v;
        size_t n = mc_delwait_overdue(hs->own_dw, now, &v);
        struct mc_fences *f = mc_master_fences(m);
        for (size_t i = 0; i < n; i++) {
            /* a fence record (holder, version): re-registration refuses that holder's copies at
             * or below it, here and, under HA, at the next leader (the record is in etcd before
             * the Remove answers) */
            struct mc_id id = v[i].holder;
            if (!f || v[i].version > mc_fences_get(f, id)) {
                if (f && mc_fences_raise(f, id, v[i].version) != 0)
                    mc_error("holder_stream", "cannot record a fence (out of memory)",
                             "version=%llu", (unsigned long long)v[i].version);
                fence_index(hs, id, "a delete was not acknowledged in time");
            }
            if (!f || mc_fences_durable(f, id, v[i].version)) /* else a later tick settles */
                mc_delwait_settle_holder(hs->own_dw, id, v[i].version);
        }
        free(v);
        uint64_t iv = hs->delete_timeout_ms / 4 ? hs->delete_timeout_ms / 4 : 1;
        struct mc_delwait_resend *rv;
        n = mc_delwait_due_resend(hs->own_dw, now, iv, hs->delete_timeout_ms - iv, 1024, &rv);
        for (size_t i = 0; i < n; i++)
            (void)mc_mailbox_push_id(hs->mb, rv[i].holder, HS_KIND, rv[i].key, rv[i].key_len,
                                     rv[i].version, 0, 0, false, 0, rv[i].task_id);
        mc_delwait_resend_free(rv, n);
    }
    wake_now(m, now);
    mc_mailboxes_tick_polls(hs->mb); /* polls past their wait answered empty */
}

int mc_master_holder_ack(struct mc_master *m, struct mc_id client, const uint64_t *ids, size_t n)
{
    if (!m->hstream || !m->delwait)
        return MC_ERR_NOT_SUPPORTED;
    if (n && !ids)
        return MC_ERR_INVALID_PARAMS;
    return (int)mc_delwait_ack(m->delwait, client, ids, n);
}

static const struct mc_obj_subscriber holder_stream_sub = {
    .name = "holder_stream",
    .put_end = on_put_end,
    .before_remove = on_before_remove,
    .erased = on_erased,
    .client_expired = on_client_expired,
    .unlocked = on_unlocked,
};

int mc_holder_stream_init(struct mc_master *m)
{
    if (!m->cfg.holder_stream)
        return 0;
    struct mc_holder_stream *hs = calloc(1, sizeof(*hs));
    if (!hs)
        return -1;
    hs->mb = mc_mailboxes_new(m->clock, 0);
    if (!hs->mb) {
        free(hs);
        return -1;
    }
    mc_mailboxes_set_limit(hs->mb, HS_KIND, m->cfg.holder_backlog_limit);
    hs->flush_ms = m->cfg.holder_index_flush_ms;
    hs->delete_timeout_ms =
        m->cfg.holder_delete_timeout_ms ? m->cfg.holder_delete_timeout_ms : 2000;
    if (!m->delwait) { /* no LOCAL_DISK tier: the delete rule's table is this stream's */
        hs->own_dw = mc_delwait_new();
        if (!hs->own_dw) {
            mc_mailboxes_free(hs->mb);
            free(hs);
            return -1;
        }
        m->delwait = hs->own_dw;
    }
    if (!mc_master_fences(m)) { /* no offload: the fences of DRAM holders are kept here */
        m->own_fences = mc_fences_new();
        if (!m->own_fences)
            goto fail;
    }
    if (!m->recovery) { /* no offload: the recovery window of DRAM re-registration is here */
        hs->own_recovery = mc_recovery_new(mc_clock_now_ms(m->clock),
                                           m->cfg.disk_recovery_window_ms, MC_RECOVERY_TOMBS_MAX);
        if (!hs->own_recovery)
            goto fail;
        m->recovery = hs->own_recovery;
    }
    pthread_mutex_init(&hs->mu, NULL);
    m->hstream = hs;
    return 0;
fail:
    mc_fences_free(m->own_fences);
    m->own_fences = NULL;
    if (hs->own_dw) {
        m->delwait = NULL;
        mc_delwait_free(hs->own_dw);
    }
    mc_mailboxes_free(hs->mb);
    free(hs);
    return -1;
}

void mc_holder_stream_destroy(struct mc_master *m)
{
    struct mc_holder_stream *hs = m->hstream;
    if (!hs)
        return;
    m->hstream = NULL;
    if (hs->own_dw) {
        m->delwait = NULL;
        mc_delwait_free(hs->own_dw); /* the waiting Removes complete */
    }
    mc_mailboxes_free(hs->mb);
    mc_fences_free(m->own_fences);
    m->own_fences = NULL;
    if (hs->own_recovery) {
        m->recovery = NULL;
        mc_recovery_free(hs->own_recovery);
    }
    pthread_mutex_destroy(&hs->mu);
    free(hs->listings);
    free(hs);
}

int mc_holder_stream_subscribe(struct mc_master *m)
{
    return m->hstream ? mc_obj_events_register(m, &holder_stream_sub) : 0;
}

void mc_holder_stream_stats(struct mc_master *m, struct mc_holder_stream_stats *st)
{
    memset(st, 0, sizeof(*st));
    struct mc_holder_stream *hs = m->hstream;
    if (!hs)
        return;
    st->commits = atomic_load(&hs->commits);
    st->dropped = atomic_load(&hs->dropped);
    st->fenced = atomic_load(&hs->fenced);
    st->polls = atomic_load(&hs->polls);
    st->reregistered = atomic_load(&hs->rereg);
    st->rereg_refused = atomic_load(&hs->rereg_refused);
    st->unlisted = atomic_load(&hs->unlisted);
}

void mc_holder_stream_count_rereg(struct mc_master *m, uint64_t ok, uint64_t refused)
{
    if (!m->hstream)
        return;
    atomic_fetch_add_explicit(&m->hstream->rereg, ok, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->hstream->rereg_refused, refused, memory_order_relaxed);
}

void mc_holder_stream_count_unlisted(struct mc_master *m, uint64_t n)
{
    if (m->hstream)
        atomic_fetch_add_explicit(&m->hstream->unlisted, n, memory_order_relaxed);
}

struct mc_mailboxes *mc_holder_stream_mailboxes(struct mc_master *m)
{
    return m && m->hstream ? m->hstream->mb : NULL;
}

int mc_master_holder_heartbeat(struct mc_master *m, struct mc_id client, uint32_t max,
                               uint32_t wait_ms, mc_mailbox_reply_fn reply, void *arg)
{
    struct mc_holder_stream *hs = m->hstream;
    if (!hs)
        return MC_ERR_NOT_SUPPORTED;
    if (mc_id_is_zero(client) || !reply)
        return MC_ERR_INVALID_PARAMS;
    atomic_fetch_add_explicit(&hs->polls, 1, memory_order_relaxed);
    if (take_fenced(hs, client)) {
        (void)mc_mailbox_open(hs->mb, client);
        return MC_ERR_REPLICA_IS_GONE;
    }
    if (mc_mailbox_open(hs->mb, client) != MC_OK)
        return MC_ERR_INTERNAL_ERROR;
    if (max == 0 || max > HS_MAX_PER_POLL)
        max = HS_MAX_PER_POLL;
    int rc = mc_mailbox_park(hs->mb, client, HS_KIND, max, wait_ms, reply, arg);
    return rc < 0 ? rc : 0;
}

void mc_holder_stream_listing_note(struct mc_master *m, struct mc_id segment, uint64_t mount_epoch,
                                   uint64_t listing, uint32_t next_rid, struct mc_hlisting *out)
{
    struct mc_holder_stream *hs = m->hstream;
    const struct mc_hlisting fresh = {.segment = segment,
                                      .mount_epoch = mount_epoch,
                                      .listing = listing,
                                      .start_rid = next_rid,
                                      .prior = false};
    *out = fresh;
    pthread_mutex_lock(&hs->mu);
    struct mc_hlisting *l = NULL;
    for (size_t i = 0; i < hs->nlistings && !l; i++)
        if (mc_id_eq(hs->listings[i].segment, segment))
            l = &hs->listings[i];
    if (!l) {
        if (!hs->listings)
            hs->listings = calloc(HS_MAX_LISTINGS, sizeof(*hs->listings));
        if (!hs->listings)
            goto out; /* forgotten: a later listing of this mount drops nothing (safe) */
        if (hs->nlistings == HS_MAX_LISTINGS)
            memmove(hs->listings, hs->listings + 1, --hs->nlistings * sizeof(*hs->listings));
        l = &hs->listings[hs->nlistings++];
        *l = fresh;
    } else if (l->mount_epoch != mount_epoch) {
        *l = fresh; /* a new mount: nothing an earlier listing made is on it */
    } else if (l->listing != listing) {
        l->listing = listing; /* another listing of the same mount */
        l->start_rid = next_rid;
        l->prior = true;
    }
    *out = *l;
out:
    pthread_mutex_unlock(&hs->mu);
}
