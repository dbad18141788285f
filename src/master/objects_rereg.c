/*
 * objects_rereg.c - the object a holder's re-registered copy brings back after a master restart
 * (objects.h): complete, the copy's version, size and CRC, one replica, no lease. Shared by the
 * LOCAL_DISK records (offload_rereg.c) and the DRAM replicas (holder_rereg.c), which differ only
 * in where the replica lives.
 */
#include <string.h>

#include "master/master_state.h"
#include "master/objects.h"
#include "master/objslab.h"
#include "master/shard.h"
#include "mooncake/errors.h"

struct mc_object *mc_obj_new_restored(struct mc_master *m, struct mc_shard *s,
                                      const struct mc_restored *c)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true));
    struct mc_object *o = mc_obj_alloc(s, sizeof(*o) + sizeof(o->rep[0]) + c->key_len);
    if (!o)
        return NULL;
    o->size = c->size;
    o->version = c->version;
    o->ent = MC_NO_INDEX;
    o->key_len = (uint16_t)c->key_len;
    o->nrep = 1;
    o->flags |= MC_OBJ_COMPLETE | (c->crc_valid ? MC_OBJ_HAS_CRC : 0);
    o->crc = c->crc_valid ? c->crc32c : 0;
    struct mc_replica *r = &o->rep[0];
    memset(r, 0, sizeof(*r));
    r->id = (uint32_t)atomic_fetch_add_explicit(&m->next_replica_id, 1, memory_order_relaxed);
    r->type = c->type;
    r->status = MC_REPLICA_STATUS_COMPLETE;
    memcpy(mc_obj_key(o), c->key, c->key_len);
    return o;
}

int mc_obj_insert_restored(struct mc_master *m, struct mc_shard *s, uint64_t key_hash,
                           struct mc_object *o)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true));
    if (mc_shard_insert(s, key_hash, o) != 0) {
        mc_obj_free_locked(s, o);
        return MC_ERR_INTERNAL_ERROR;
    }
    atomic_fetch_add_explicit(&m->c.key_count, 1, memory_order_relaxed);
    return MC_OK;
}
