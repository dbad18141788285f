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
 *   - a key this master already has -> INVALID_VERSION (a new Put has a version above every
 *     re-registered one, DESIGN.md §4; an older copy another holder listed first keeps the key);
 *   - a range not free -> NO_AVAILABLE_HANDLE; a segment not the caller's current mount ->
 *     REPLICA_IS_GONE.
 */
#include "master/holder_stream.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "master/delwait.h"
#include "master/fence.h"
#include "master/master.h"
#include "master/master_state.h"
#include "master/object_record.h"
#include "master/objslab.h"
#include "master/offload.h"
#include "master/shard.h"
#include "mooncake/errors.h"

static int reregister_one(struct mc_master *m, struct mc_id client, struct mc_id seg_id,
                          uint64_t mount_epoch, const struct mc_hrereg_item *it, uint32_t *hint)
{
    if (!it->key || it->key_len == 0 || it->key_len > m->cfg.max_key_len || it->size == 0 ||
        it->size > MC_OBJECT_SIZE_MAX)
        return MC_ERR_INVALID_PARAMS;
    if (it->version == 0 || it->version > m->version_base)
        return MC_ERR_OBJECT_NOT_FOUND;
    /* fenced: a delete of a copy at or below this version was never acknowledged */
    struct mc_fences *f = mc_master_fences(m);
    if (f && mc_fences_voids(f, client, it->version))
        return MC_ERR_OBJECT_NOT_FOUND;
    uint64_t hk = mc_hash_key(it->key, it->key_len);
    struct mc_shard *s = &m->shards[mc_master_key_shard(m, hk)];
    int rc;
    mc_shard_wrlock(s);
    if (mc_shard_find(s, hk, it->key, it->key_len)) {
        rc = MC_ERR_INVALID_VERSION;
        goto out;
    }
    /* removed since this master started (the key absent now): its deletes still outstanding,
     * or a tombstone of the recovery window. Checked under the shard lock, which every removal
     * holds while it records both, so a Remove cannot slip between the check and the insert. */
    if ((m->delwait && mc_delwait_blocks(m->delwait, it->key, it->key_len, it->version)) ||
        mc_offload_recovery_removed(m, hk, it->version)) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
        goto out;
    }
    struct mc_segment_alloc a;
    rc = mc_segments_claim(m->segs, seg_id, client, mount_epoch, it->offset, it->size, *hint, &a);
    if (rc != MC_OK)
        goto out;
    *hint = a.handle;
    struct mc_object *o = mc_obj_alloc(s, sizeof(*o) + sizeof(o->rep[0]) + it->key_len);
    if (!o) {
        mc_segment_alloc_release(&a);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
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
    r->type = MC_REPLICA_TYPE_MEMORY;
    r->status = MC_REPLICA_STATUS_COMPLETE;
    r->u.seg = a.seg;
    r->offset = a.offset;
    r->handle = a.handle;
    memcpy(mc_obj_key(o), it->key, it->key_len);
    if (mc_shard_insert(s, hk, o) != 0) {
        mc_obj_free_locked(s, o);
        mc_segment_alloc_release(&a);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    atomic_fetch_add_explicit(&m->c.key_count, 1, memory_order_relaxed);
    rc = MC_OK;
out:
    mc_shard_unlock(s);
    return rc;
}

int mc_master_holder_reregister(struct mc_master *m, struct mc_id client, struct mc_id seg_id,
                                uint64_t mount_epoch, const struct mc_hrereg_item *items, size_t n,
                                int *statuses)
{
    if (!m->hstream)
        return MC_ERR_NOT_SUPPORTED;
    if (mc_id_is_zero(client) || mc_id_is_zero(seg_id) || mount_epoch == 0)
        return MC_ERR_INVALID_PARAMS;
    uint32_t hint = MC_OA_INVALID_HANDLE;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        statuses[i] = reregister_one(m, client, seg_id, mount_epoch, &items[i], &hint);
        ok += statuses[i] == MC_OK;
    }
    mc_holder_stream_count_rereg(m, ok, n - ok);
    return MC_OK;
}
