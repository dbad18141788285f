/*
 * service_encode.c - GetReplicaListResponse and PutStartResponse written by hand, straight from the
 * core's result.
 *
 * PutStartResponse (its replicas and version) is written the same way, from struct
 * mc_put_start_result.
 *
 * Why. A GetReplicaList reply went core result -> protobuf-c view (a descriptor, a location and
 * a uuid struct per replica) -> protobuf-c's generic packer, which walks the descriptors field
 * by field; for a BatchGetReplicaList the views also took an arena and copies of the strings
 * (the core's window of results is reused), and the packing was ~14% of the master's time at
 * 128 keys a call. Here the bytes are written directly from struct mc_get_result.
 *
 * The bytes are the ones protobuf-c packs from the view get_fill makes (service_objects.c),
 * byte for byte (test_master_service_encode compares them, and decodes them back with the
 * generated code): proto3 fields in field-number order, a scalar only when it is not zero, a
 * string only when not empty, a sub-message whenever the view points to one (the replica's
 * location and its uuid always, even when all their fields are zero). Field numbers are those of
 * proto/master.proto and proto/common.proto; a change there must change this file (the test
 * fails otherwise).
 */
#include <string.h>

#include "common/pb_varint.h"
#include "master/service_internal.h"

/* wire types */
#define WT_VARINT 0
#define WT_LEN 2
#define TAG(num, wt) ((uint8_t)(((num) << 3) | (wt)))

static inline size_t vsize(uint64_t v)
{
    return mc_varint_size(v);
}

static inline uint8_t *vput(uint8_t *p, uint64_t v)
{
    return p + mc_varint_put(p, v);
}

/* A varint field when v != 0 (one-byte tags: every field number here is below 16). */
static inline size_t vfield_size(uint64_t v)
{
    return v ? 1 + vsize(v) : 0;
}

static inline uint8_t *vfield_put(uint8_t *p, unsigned num, uint64_t v)
{
    if (!v)
        return p;
    *p++ = TAG(num, WT_VARINT);
    return vput(p, v);
}

/* A length-delimited field of n bytes (its tag and length; the caller writes the bytes). */
static inline size_t lfield_size(size_t n)
{
    return 1 + vsize(n) + n;
}

static inline uint8_t *lfield_head(uint8_t *p, unsigned num, size_t n)
{
    *p++ = TAG(num, WT_LEN);
    return vput(p, n);
}

/* A string field, omitted when empty. */
static inline uint8_t *sfield_put(uint8_t *p, unsigned num, const char *s, size_t n)
{
    if (!n)
        return p;
    p = lfield_head(p, num, n);
    memcpy(p, s, n);
    return p + n;
}

static inline uint64_t zigzag32(int32_t v)
{
    return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

/* An enum is an int32 on the wire: a negative one takes ten bytes. */
static inline uint64_t enum_wire(int32_t v)
{
    return (uint64_t)(int64_t)v;
}

/* ---- the sizes, computed once per replica ----------------------------------------------- */

static size_t uuid_size(struct mc_id id)
{
    return vfield_size(id.hi) + vfield_size(id.lo);
}

static uint8_t *uuid_put(uint8_t *p, unsigned num, struct mc_id id, size_t n)
{
    p = lfield_head(p, num, n);
    p = vfield_put(p, 1, id.hi);
    return vfield_put(p, 2, id.lo);
}

static void rep_plan(const struct mc_replica_desc *r, struct mc_svc_rep_plan *pl)
{
    if (r->type == MC_REPLICA_TYPE_LOCAL_DISK) {
        pl->type = enum_wire(MC__REPLICA_TYPE__RT_LOCAL_DISK);
        pl->uuid = uuid_size(r->u.disk.holder);
        pl->ep_len = strlen(r->u.disk.endpoint);
        pl->name_len = 0;
        pl->prot = 0;
        pl->loc = lfield_size(pl->uuid) + (pl->ep_len ? lfield_size(pl->ep_len) : 0) +
                  vfield_size(r->size);
    } else {
        pl->type = enum_wire(MC__REPLICA_TYPE__RT_MEMORY);
        pl->uuid = uuid_size(r->u.mem.segment_id);
        pl->name_len = strlen(r->u.mem.segment_name);
        pl->ep_len = strlen(r->u.mem.endpoint);
        pl->prot = enum_wire(mc_svc_protocol_to_pb(r->u.mem.protocol));
        pl->loc = lfield_size(pl->uuid) + (pl->name_len ? lfield_size(pl->name_len) : 0) +
                  vfield_size(r->u.mem.offset) + vfield_size(r->size) +
                  (pl->ep_len ? lfield_size(pl->ep_len) : 0) + vfield_size(pl->prot) +
                  vfield_size(r->u.mem.addr) + vfield_size(r->u.mem.rkey) +
                  vfield_size(r->u.mem.mount_epoch);
    }
    pl->desc = vfield_size(r->id) + vfield_size(pl->type) +
               vfield_size(enum_wire((Mc__ReplicaStatus)r->status)) + lfield_size(pl->loc);
}

/* One ReplicaDescriptor as field num of the enclosing message (its tag and length first). */
static uint8_t *rep_put(uint8_t *p, unsigned num, const struct mc_replica_desc *r,
                        const struct mc_svc_rep_plan *pl)
{
    p = lfield_head(p, num, pl->desc);
    p = vfield_put(p, 1, r->id);
    p = vfield_put(p, 2, pl->type);
    p = vfield_put(p, 3, enum_wire((Mc__ReplicaStatus)r->status));
    if (r->type == MC_REPLICA_TYPE_LOCAL_DISK) {
        p = lfield_head(p, 5, pl->loc); /* ReplicaDescriptor.local_disk */
        p = uuid_put(p, 1, r->u.disk.holder, pl->uuid);
        p = sfield_put(p, 2, r->u.disk.endpoint, pl->ep_len);
        return vfield_put(p, 3, r->size);
    }
    p = lfield_head(p, 4, pl->loc); /* ReplicaDescriptor.memory */
    p = uuid_put(p, 1, r->u.mem.segment_id, pl->uuid);
    p = sfield_put(p, 2, r->u.mem.segment_name, pl->name_len);
    p = vfield_put(p, 3, r->u.mem.offset);
    p = vfield_put(p, 4, r->size);
    p = sfield_put(p, 5, r->u.mem.endpoint, pl->ep_len);
    p = vfield_put(p, 6, pl->prot);
    p = vfield_put(p, 7, r->u.mem.addr);
    p = vfield_put(p, 8, r->u.mem.rkey);
    return vfield_put(p, 9, r->u.mem.mount_epoch);
}

/* ---- GetReplicaListResponse -------------------------------------------------------------- */

void mc_svc_get_reply_plan(int status, const struct mc_get_result *g, struct mc_svc_get_plan *pl)
{
    pl->status = status;
    pl->g = g;
    pl->n = status != 0 ? 0 : g->nreplicas < MC_MAX_REPLICAS ? g->nreplicas : MC_MAX_REPLICAS;
    size_t n = vfield_size(zigzag32(status));
    for (uint32_t i = 0; i < pl->n; i++) {
        rep_plan(&g->replicas[i], &pl->reps[i]);
        n += lfield_size(pl->reps[i].desc);
    }
    if (status == 0)
        n += vfield_size(g->lease_ttl_ms) + vfield_size(g->size) + vfield_size(g->version) +
             vfield_size(g->crc32c) + (g->has_crc ? 2 : 0);
    pl->size = n;
}

uint8_t *mc_svc_get_reply_put(uint8_t *p, const struct mc_svc_get_plan *pl)
{
    const struct mc_get_result *g = pl->g;
    p = vfield_put(p, 1, zigzag32(pl->status));
    if (pl->status != 0)
        return p;
    for (uint32_t i = 0; i < pl->n; i++)
        p = rep_put(p, 2, &g->replicas[i], &pl->reps[i]); /* GetReplicaListResponse.replicas */
    p = vfield_put(p, 3, g->lease_ttl_ms);
    p = vfield_put(p, 4, g->size);
    p = vfield_put(p, 5, g->version);
    p = vfield_put(p, 6, g->crc32c);
    if (g->has_crc) {
        *p++ = TAG(7, WT_VARINT);
        *p++ = 1;
    }
    return p;
}

size_t mc_svc_batch_item_size(const struct mc_svc_get_plan *pl)
{
    return lfield_size(pl->size);
}

uint8_t *mc_svc_batch_item_put(uint8_t *p, const struct mc_svc_get_plan *pl)
{
    p = lfield_head(p, 1, pl->size); /* BatchGetReplicaListResponse.results */
    return mc_svc_get_reply_put(p, pl);
}

/* ---- PutStartResponse -------------------------------------------------------------------- */

void mc_svc_put_start_reply_plan(const struct mc_put_start_result *ps,
                                 struct mc_svc_put_start_plan *pl)
{
    pl->ps = ps;
    pl->n = ps->nreplicas < MC_MAX_REPLICAS ? ps->nreplicas : MC_MAX_REPLICAS;
    size_t n = vfield_size(ps->version);
    for (uint32_t i = 0; i < pl->n; i++) {
        rep_plan(&ps->replicas[i], &pl->reps[i]);
        n += lfield_size(pl->reps[i].desc);
    }
    pl->size = n;
}

uint8_t *mc_svc_put_start_reply_put(uint8_t *p, const struct mc_svc_put_start_plan *pl)
{
    for (uint32_t i = 0; i < pl->n; i++) /* PutStartResponse.replicas */
        p = rep_put(p, 1, &pl->ps->replicas[i], &pl->reps[i]);
    return vfield_put(p, 2, pl->ps->version); /* PutStartResponse.version */
}
