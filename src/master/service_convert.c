/*
 * service_convert.c - protobuf <-> core conversions the RPC adapters share (service_internal.h):
 * ids, replica descriptors, and the keys of a request.
 *
 * Replica views point into the core's result struct (which owns the strings), so a reply built
 * from them must be encoded before that struct goes away. Every MEMORY descriptor carries the
 * mount epoch of its own segment (MemoryLocation.mount_epoch, DESIGN.md §6): the owner's peer
 * server refuses requests naming another epoch, so a descriptor handed out before its segment
 * was unmounted (explicitly, by the client's expiry, or by a master restart) cannot reach bytes
 * a later mount gave to another object.
 *
 * Keys: protobuf-c cuts a decoded string at its first NUL, so every key taken from a request is
 * checked against the raw body (service_wire.h) and one that held a NUL gets length 0, which
 * the core answers with INVALID_KEY.
 */
#include <string.h>

#include "master/service_internal.h"
#include "master/service_wire.h"

struct mc_id mc_svc_id_from_pb(const Mc__Uuid *u)
{
    struct mc_id id = {0, 0};
    if (u) {
        id.hi = u->hi;
        id.lo = u->lo;
    }
    return id;
}

void mc_svc_id_to_pb(struct mc_id id, Mc__Uuid *u)
{
    mc__uuid__init(u);
    u->hi = id.hi;
    u->lo = id.lo;
}

Mc__Protocol mc_svc_protocol_to_pb(const char *p)
{
    return strcmp(p, "rdma") == 0 ? MC__PROTOCOL__PROTOCOL_RDMA : MC__PROTOCOL__PROTOCOL_TCP;
}

void mc_svc_replica_to_pb(const struct mc_replica_desc *r, struct mc_svc_pb_replica *p)
{
    mc__replica_descriptor__init(&p->d);
    p->d.id = r->id;
    p->d.status = (Mc__ReplicaStatus)r->status;
    if (r->type == MC_REPLICA_TYPE_LOCAL_DISK) {
        p->d.type = MC__REPLICA_TYPE__RT_LOCAL_DISK;
        mc__local_disk_location__init(&p->disk);
        mc_svc_id_to_pb(r->u.disk.holder, &p->uuid);
        p->disk.holder = &p->uuid;
        p->disk.endpoint = (char *)r->u.disk.endpoint;
        p->disk.size = r->size;
        p->d.local_disk = &p->disk;
    } else {
        p->d.type = MC__REPLICA_TYPE__RT_MEMORY;
        mc__memory_location__init(&p->mem);
        mc_svc_id_to_pb(r->u.mem.segment_id, &p->uuid);
        p->mem.segment_id = &p->uuid;
        p->mem.segment_name = (char *)r->u.mem.segment_name;
        p->mem.offset = r->u.mem.offset;
        p->mem.size = r->size;
        p->mem.endpoint = (char *)r->u.mem.endpoint;
        p->mem.protocol = mc_svc_protocol_to_pb(r->u.mem.protocol);
        p->mem.remote_addr = r->u.mem.addr;
        p->mem.rkey = r->u.mem.rkey;
        p->mem.mount_epoch = r->u.mem.mount_epoch;
        p->d.memory = &p->mem;
    }
}

uint32_t mc_svc_replicas_to_pb(const struct mc_replica_desc *src, uint32_t n,
                               struct mc_svc_pb_replica *reps, Mc__ReplicaDescriptor **ptrs)
{
    if (n > MC_MAX_REPLICAS)
        n = MC_MAX_REPLICAS;
    for (uint32_t i = 0; i < n; i++) {
        mc_svc_replica_to_pb(&src[i], &reps[i]);
        ptrs[i] = &reps[i].d;
    }
    return n;
}

uint32_t mc_svc_field_num(const ProtobufCMessageDescriptor *d, const char *name)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
    return f ? f->id : 0;
}

void mc_svc_mark_nul_keys(struct mc_rpc_call *call, uint32_t num, uint32_t sub, bool single,
                          struct mc_key_ref *keys, size_t n)
{
    size_t len = 0;
    const uint8_t *body = mc_rpc_call_body(call, &len);
    mc_svc_mark_nul_strings(body, len, num, sub, single, keys, n);
}

struct mc_key_ref mc_svc_key_from_pb(struct mc_rpc_call *call, uint32_t num, const char *key)
{
    struct mc_key_ref k = {.data = key ? key : "", .len = key ? strlen(key) : 0};
    mc_svc_mark_nul_keys(call, num, 0, true, &k, 1);
    return k;
}
