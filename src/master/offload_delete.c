/*
 * offload_delete.c - the delete rule's side of the LOCAL_DISK tier (see offload.h):
 * a Remove takes an object's disk copies off and queues one delete per holder (waited for in
 * delwait.h), an erasure of a live disk copy deletes it with nobody waiting, acknowledgements
 * settle the deletes, those handed out but not acknowledged are pushed again, and a holder that
 * does not acknowledge in time (or has no mailbox) is fenced (fence.h) and deregistered. A
 * re-registered record is checked against the fences and the outstanding deletes here.
 */
#include <stdlib.h>

#include "common/mc_assert.h"
#include "common/hash.h"
#include "common/log.h"
#include "master/delwait.h"
#include "master/fence.h"
#include "master/freelist.h"
#include "master/mailbox.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/offload_internal.h"
#include "master/shard.h"
#include "mooncake/errors.h"

#define COMP "offload"

/* ---- the delete rule ----------------------------------------------------------------------- */

/* Raises holder's fence to version at once (a holder with no mailbox: nothing to wait for). */
void mc_offload_fence_now(struct mc_offload *off, struct mc_id holder, uint64_t version)
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

/* Fences holder at o's version at once (it has no mailbox). Under HA op also waits for the
 * fence's record in etcd: an entry due now that a tick settles once the record is stored (out
 * of memory, op completes at once, as without HA). */
static void fence_now_wait(struct mc_offload *off, struct mc_object *o, struct mc_id holder,
                           struct mc_delop *op)
{
    mc_offload_fence_now(off, holder, o->version);
    if (op && !mc_fences_durable(off->fences, holder, o->version))
        (void)mc_delwait_add(off->dw, op, 0, holder, mc_obj_key(o), o->key_len, o->version, 0);
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
        fence_now_wait(off, o, holder, op);
        return MC_OK;
    }
    if (rc != MC_OK)
        return rc;
    INC(off, deletes);
    /* cannot wait for it: the holder is fenced at the next tick (an entry due now) or, failing
     * even that, at once */
    if (!recorded &&
        mc_delwait_add(off->dw, NULL, 0, holder, mc_obj_key(o), o->key_len, o->version, 0) != 0)
        mc_offload_fence_now(off, holder, o->version);
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
    mc_offload_pin_release(off, s, o);
    return found && pulled;
}

/* ---- removing copies, the erase hook ------------------------------------------------------- */

int mc_offload_remove_copies_locked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                                    struct mc_delop *op, struct mc_freelist *fl)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_OK;
    mc_offload_recovery_note_removal(m, o);
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
            fence_now_wait(off, o, hid, op); /* its holder is gone: nobody to wait for */
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
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true)); /* write lock */
    struct mc_offload *off = m->offload;
    if (!off)
        return;
    struct mc_id th;
    if (offload_cancel(off, s, o, &th) && push_delete(m, o, th, NULL) != MC_OK &&
        mc_delwait_add(off->dw, NULL, 0, th, mc_obj_key(o), o->key_len, o->version, 0) != 0)
        mc_offload_fence_now(off, th, o->version);
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
            mc_offload_fence_now(off, hid, o->version);
    }
}

/* ---- fences, resends, acks ----------------------------------------------------------------- */

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
        if (v[i].version <= was) { /* fenced already; under HA, waiting for its etcd record */
            if (mc_fences_durable(off->fences, id, v[i].version))
                mc_delwait_settle_holder(off->dw, id, v[i].version);
            continue;
        }
        if (mc_fences_raise(off->fences, id, v[i].version) != 0)
            mc_error(COMP, "cannot record a fence (out of memory); the holder is dropped",
                     "version=%llu", (unsigned long long)v[i].version);
        INC(off, fenced);
        char buf[MC_ID_STRLEN];
        mc_warn(COMP, "holder fenced: a delete was not acknowledged in time",
                "client=%s fence_version=%llu timeout_ms=%llu", mc_id_format(id, buf),
                (unsigned long long)v[i].version, (unsigned long long)off->delete_timeout_ms);
        (void)mc_offload_holder_drop(m, id);                  /* settles what it had outstanding */
        if (mc_fences_durable(off->fences, id, v[i].version)) /* else a later tick settles */
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

/* The tick's part: overdue holders fenced, then unacknowledged deletes pushed again. */
size_t mc_offload_delete_tick(struct mc_master *m)
{
    size_t n = fence_overdue(m);
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
