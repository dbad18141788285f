/*
 * holder_rereg.c - a DRAM holder re-registers the replicas its index lists after a master
 * restart (DESIGN.md §7 "Holder index"; holder_stream.h).
 *
 * The holder remounted its segment (same id, same range, a new mount epoch) and sends its
 * index in batches: per item, key, version, offset, size, CRC. Each item is applied under its
 * key's shard lock: the exact range is claimed in the segment's allocator
 * (mc_segments_claim), so a range already handed to a Put of this incarnation, or claimed by
 * another item, is refused and never handed out twice; the object is created with that one
 * MEMORY replica, complete, with no lease. Refused, and dropped by the holder:
 *   - a version above version_base: written by this incarnation (the holder was expired and
 *     came back: the master dropped that copy, and a Remove since may have answered
 *     NOT_FOUND) -> OBJECT_NOT_FOUND;
 *   - a key removed since this master started (its deletes outstanding, or a tombstone of the
 *     recovery window), or any absent key once the window closed -> OBJECT_NOT_FOUND;
 *   - a key this master already has -> INVALID_VERSION (a new Put has a version above every
 *     re-registered one, DESIGN.md §4; an older copy another holder listed first keeps the key),
 *     unless it is this very replica (same segment mount, offset, version, size): confirmed;
 *   - a range not free -> NO_AVAILABLE_HANDLE; a segment not the caller's current mount ->
 *     REPLICA_IS_GONE.
 *
 * Listings. A holder numbers each listing of a segment and marks its last batch complete. A
 * listing is authoritative for that segment's mount: every replica it brings back or confirms
 * gets a replica id from the listing's start on, and when it completes, the replicas of that
 * mount an earlier listing brought back (versions <= version_base) that it did not confirm are
 * dropped, their ranges freed (an entry the holder lost, or whose bytes no longer match their
 * CRC). Puts of this incarnation have higher versions and are never touched. The first listing
 * of a mount drops nothing: no earlier listing put anything on it.
 */
#include "master/holder_stream.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "master/delwait.h"
#include "master/fence.h"
#include "master/freelist.h"
#include "master/master.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/object_record.h"
#include "master/objects.h"
#include "master/shard.h"
#include "master/tombstone.h"
#include "mooncake/errors.h"

/* Whether o's replica on (client's) segment seg_id, mount mount_epoch, is the listed copy it: same
 * version, size, offset, CRC. Its index, or -1. */
static int same_replica(const struct mc_object *o, struct mc_id client, struct mc_id seg_id,
                        uint64_t mount_epoch, const struct mc_hrereg_item *it)
{
    if (o->version != it->version || o->size != it->size || !(o->flags & MC_OBJ_COMPLETE))
        return -1;
    if ((o->flags & MC_OBJ_HAS_CRC) && it->crc_valid && o->crc != it->crc32c)
        return -1;
    for (uint8_t i = 0; i < o->nrep; i++) {
        const struct mc_replica *r = &o->rep[i];
        if (r->type == MC_REPLICA_TYPE_MEMORY && r->u.seg &&
            r->status == MC_REPLICA_STATUS_COMPLETE && r->offset == it->offset &&
            r->u.seg->mount_epoch == mount_epoch && mc_id_eq(r->u.seg->desc.id, seg_id) &&
            mc_id_eq(r->u.seg->owner, client))
            return i;
    }
    return -1;
}

static int reregister_one(struct mc_master *m, const struct mc_hrereg_batch *b,
                          const struct mc_hrereg_item *it, uint32_t *hint)
{
    if (!it->key || it->key_len == 0 || it->key_len > m->cfg.max_key_len || it->size == 0 ||
        it->size > MC_OBJECT_SIZE_MAX)
        return MC_ERR_INVALID_PARAMS;
    if (it->version == 0 || it->version > m->version_base)
        return MC_ERR_OBJECT_NOT_FOUND;
    /* fenced: a delete of a copy at or below this version was never acknowledged */
    struct mc_fences *f = mc_master_fences(m);
    if (f && mc_fences_voids(f, b->client, it->version))
        return MC_ERR_OBJECT_NOT_FOUND;
    uint64_t hk = mc_hash_key(it->key, it->key_len);
    struct mc_shard *s = &m->shards[mc_master_key_shard(m, hk)];
    int rc;
    mc_shard_wrlock(s);
    struct mc_object *o = mc_shard_find(s, hk, it->key, it->key_len);
    if (o) {
        /* listed again (another listing of the same mount): confirmed by this listing */
        int ri = same_replica(o, b->client, b->segment, b->mount_epoch, it);
        if (ri >= 0)
            o->rep[ri].id =
                (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
        rc = ri >= 0 ? MC_OK : MC_ERR_INVALID_VERSION;
        goto out;
    }
    /* removed since this master started (the key absent now): its deletes still outstanding,
     * or a tombstone of the recovery window; or the window is over. Checked under the shard
     * lock, which every removal holds while it records both, so a Remove cannot slip between
     * the check and the insert. */
    if ((m->delwait && mc_delwait_blocks(m->delwait, it->key, it->key_len, it->version)) ||
        (m->recovery &&
         !mc_recovery_may_recreate(m->recovery, mc_master_now_ms(m), hk, it->version))) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
        goto out;
    }
    struct mc_segment_alloc a;
    rc = mc_segments_claim(m->segs, b->segment, b->client, b->mount_epoch, it->offset, it->size,
                           *hint, &a);
    if (rc != MC_OK)
        goto out;
    *hint = a.handle;
    const struct mc_restored c = {.key = it->key,
                                  .key_len = it->key_len,
                                  .version = it->version,
                                  .size = it->size,
                                  .crc32c = it->crc32c,
                                  .crc_valid = it->crc_valid,
                                  .type = MC_REPLICA_TYPE_MEMORY};
    o = mc_obj_new_restored(m, s, &c);
    if (!o) {
        mc_segment_alloc_release(&a);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    o->rep[0].u.seg = a.seg;
    o->rep[0].offset = a.offset;
    o->rep[0].handle = a.handle;
    rc = mc_obj_insert_restored(m, s, hk, o);
    if (rc != MC_OK)
        mc_segment_alloc_release(&a);
out:
    mc_shard_unlock(s);
    return rc;
}

/* ---- a complete listing -------------------------------------------------------------------- */

struct unconfirmed {
    const struct mc_hrereg_batch *b;
    uint32_t start_rid;
};

/* Whether replica r of o is one an earlier listing of the segment's mount brought back and the
 * completed one left out (not pinned: an offload reading it keeps it); arg: the listing. */
static bool left_out(const struct mc_master *m, const struct mc_object *o,
                     const struct mc_replica *r, const void *arg)
{
    const struct unconfirmed *u = arg;
    return r->type == MC_REPLICA_TYPE_MEMORY && r->u.seg &&
           r->status == MC_REPLICA_STATUS_COMPLETE && r->refcnt == 0 &&
           o->version <= m->version_base && (int32_t)(r->id - u->start_rid) < 0 &&
           r->u.seg->mount_epoch == u->b->mount_epoch &&
           mc_id_eq(r->u.seg->desc.id, u->b->segment) && mc_id_eq(r->u.seg->owner, u->b->client);
}

/* Drops o's replicas the completed listing left out (write lock); o is erased when no valid
 * replica is left and no Put is in flight. True when one was dropped. */
static bool drop_unconfirmed(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                             struct mc_freelist *fl, void *arg)
{
    return mc_obj_drop_picked(m, s, o, fl, left_out, arg, false) > 0;
}

int mc_master_holder_reregister_batch(struct mc_master *m, const struct mc_hrereg_batch *b,
                                      const struct mc_hrereg_item *items, size_t n, int *statuses)
{
    if (!m->hstream)
        return MC_ERR_NOT_SUPPORTED;
    if (mc_id_is_zero(b->client) || mc_id_is_zero(b->segment) || b->mount_epoch == 0 ||
        (n && (!items || !statuses)))
        return MC_ERR_INVALID_PARAMS;
    struct mc_hlisting l = {0};
    if (b->listing)
        mc_holder_stream_listing_note(
            m, b->segment, b->mount_epoch, b->listing,
            (uint32_t)atomic_load_explicit(&m->next_replica_id, memory_order_relaxed), &l);
    uint32_t hint = MC_OA_INVALID_HANDLE;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        statuses[i] = reregister_one(m, b, &items[i], &hint);
        ok += statuses[i] == MC_OK;
    }
    mc_holder_stream_count_rereg(m, ok, n - ok);
    if (b->listing && b->complete && l.prior) {
        struct unconfirmed u = {.b = b, .start_rid = l.start_rid};
        uint64_t dropped = mc_master_each_object(m, drop_unconfirmed, &u);
        mc_holder_stream_count_unlisted(m, dropped);
        if (dropped) {
            char buf[MC_ID_STRLEN];
            mc_warn(
                "holder_stream", "holder's listing left out DRAM copies the master had: dropped",
                "client=%s copies=%llu", mc_id_format(b->client, buf), (unsigned long long)dropped);
        }
    }
    return MC_OK;
}

int mc_master_holder_reregister(struct mc_master *m, struct mc_id client, struct mc_id seg_id,
                                uint64_t mount_epoch, const struct mc_hrereg_item *items, size_t n,
                                int *statuses)
{
    const struct mc_hrereg_batch b = {
        .client = client, .segment = seg_id, .mount_epoch = mount_epoch};
    return mc_master_holder_reregister_batch(m, &b, items, n, statuses);
}
