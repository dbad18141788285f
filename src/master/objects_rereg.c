/*
 * objects_rereg.c - the object a holder's re-registered copy brings back after a master restart
 * (objects.h): complete, the copy's version, size and CRC, one replica, no lease. Shared by the
 * LOCAL_DISK records (offload_rereg.c) and the DRAM replicas (holder_rereg.c), which differ only
 * in where the replica lives; and the drop of the copies a holder no longer lists (or, for
 * offload.c, no longer has), which differ only in which replicas go.
 */
#include <string.h>

#include "master/freelist.h"
#include "master/master_state.h"
#include "master/object_events.h"
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

static bool any_valid(const struct mc_object *o)
{
    for (uint8_t i = 0; i < o->nrep; i++)
        if (mc_replica_valid(&o->rep[i]))
            return true;
    return false;
}

unsigned mc_obj_drop_picked(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                            struct mc_freelist *fl, mc_replica_pick_fn pick, const void *arg,
                            bool first_only)
{
    MC_ASSERT(mc_lo_holds(MC_LO_SHARD, s->index, true));
    uint8_t i;
    for (i = 0; i < o->nrep && !pick(m, o, &o->rep[i], arg); i++)
        ;
    if (i == o->nrep)
        return 0;
    const struct mc_obj_drop_ev ev = {.fl = fl, .storage_lost = false};
    mc_obj_ev_replica_dropping(m, s, o, &ev); /* may end a task reading the copy */
    unsigned dropped = 0;
    for (i = 0; i < o->nrep && !(first_only && dropped);) {
        if (!pick(m, o, &o->rep[i], arg)) {
            i++;
            continue;
        }
        mc_freelist_add_replica(fl, &o->rep[i], o->size);
        mc_obj_drop_replica(o, i);
        dropped++;
    }
    /* settled: erased when nothing valid is left and no Put is in flight */
    if (!any_valid(o) && !(o->flags & MC_OBJ_PROCESSING))
        mc_master_erase_object(m, s, o, fl);
    else
        mc_shard_refresh_bits(s, o);
    return dropped;
}
