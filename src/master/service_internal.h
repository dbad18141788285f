/*
 * service_internal.h - what the master's RPC adapter files share. Private to them.
 *
 * The adapters are split by concern, one file per family of methods; a new RPC goes where its
 * family is and gets one line in service.c's table:
 *   service.c           the method table, the service's lifetime
 *   service_segments.c  ServiceReady, Ping, Mount/ReMount/UnmountSegment, the connection's
 *                       client binding
 *   service_objects.c   Put*, Get*, Exist*, Remove and their batches
 *   service_admin.c     QueryKey, ListSegments, GetStats, RemoveAll
 *   service_disk.c      the LOCAL_DISK tier and offload
 *   service_promotion.c promotion (holder side)
 *   service_ha.c        GetLeader and the standby's gate (master/ha.h)
 * and the helpers they share:
 *   service_convert.c   ids, replica descriptors and keys between protobuf and the core
 *   service_batch.c     the generic batch adapter and the heartbeats' task-list reply
 *   service_wire.c      NUL-holding strings in a raw request body
 *
 * A batch adapter is a spec (struct mc_svc_batch_spec) and one or two callbacks: mc_svc_batch
 * decodes the request, bounds the batch, gathers the keys, checks the client, allocates the
 * per-item arrays (one block), runs the spec's core call, encodes the per-item statuses (and
 * whatever the spec's encode adds) and frees it all. No policy lives in the callbacks either:
 * they only map fields to the core's arguments.
 */
#ifndef MC_MASTER_SERVICE_INTERNAL_H
#define MC_MASTER_SERVICE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "common/rpc_server.h"
#include "master/master.h"
#include "master/service.h"
#include "proto/master.pb-c.h"

struct mc_ha;

struct mc_master_service {
    struct mc_master *m;
    uint64_t start_ms;
    _Atomic uint32_t http_port; /* the daemon's HTTP port, reported by GetStats (0 = none yet) */
    struct mc_ha *ha;           /* NULL without HA (mc_master_service_set_ha) */
    mc_rpc_handler_fn fns[MC_METHOD_TABLE_SIZE]; /* with HA: the handlers behind the gate */
    uint32_t max_segments_per_client; /* 0 = no cap (mc_master_service_set_segment_cap) */
};

#define UNPACK(type, lower, var)                                                                   \
    Mc__##type *var = (Mc__##type *)mc_rpc_call_unpack(call, &mc__##lower##__descriptor);          \
    if (!var)                                                                                      \
        return;

#define FREE_REQ(var) protobuf_c_message_free_unpacked(&(var)->base, NULL)

/* ---- service_convert.c: protobuf <-> core ------------------------------------------------- */

struct mc_id mc_svc_id_from_pb(const Mc__Uuid *u);
void mc_svc_id_to_pb(struct mc_id id, Mc__Uuid *u);
Mc__Protocol mc_svc_protocol_to_pb(const char *protocol);
/* A request's ReplicateConfig (NULL: defaults); c points into p (service_objects.c). */
int mc_svc_config_from_pb(const Mc__ReplicateConfig *p, struct mc_master_replicate_config *c);

/* Protobuf view of one replica descriptor; strings point into the source descriptor. */
struct mc_svc_pb_replica {
    Mc__ReplicaDescriptor d;
    Mc__MemoryLocation mem;
    Mc__LocalDiskLocation disk;
    Mc__Uuid uuid;
};
void mc_svc_replica_to_pb(const struct mc_replica_desc *r, struct mc_svc_pb_replica *p);
/* Views of the first min(n, MC_MAX_REPLICAS) replicas of src in reps, pointed to by ptrs;
 * returns how many. */
uint32_t mc_svc_replicas_to_pb(const struct mc_replica_desc *src, uint32_t n,
                               struct mc_svc_pb_replica *reps, Mc__ReplicaDescriptor **ptrs);

/* Number of a message's field, from its descriptor (0, matching nothing, if absent). */
uint32_t mc_svc_field_num(const ProtobufCMessageDescriptor *d, const char *name);
#define KEY(lower) mc_svc_field_num(&mc__##lower##__descriptor, "key")
/* The key of a single-key request (field num): len 0 when it holds a NUL. */
struct mc_key_ref mc_svc_key_from_pb(struct mc_rpc_call *call, uint32_t num, const char *key);
/* Gives len 0 to keys[i] when the i-th occurrence of the request's field num (a string, or
 * with sub != 0 a message whose string field sub is the key) holds a NUL (service_wire.h). */
void mc_svc_mark_nul_keys(struct mc_rpc_call *call, uint32_t num, uint32_t sub, bool single,
                          struct mc_key_ref *keys, size_t n);

/* ---- service_encode.c: GetReplicaListResponse by hand --------------------------------------- */

/* One reply's sizes, computed once (mc_svc_get_reply_plan), then written (..._put): the bytes
 * protobuf-c packs from the view mc_svc_get_fill makes, without building it. */
struct mc_svc_rep_plan {
    size_t uuid, loc, desc;  /* bodies: the Uuid, the location, the ReplicaDescriptor */
    size_t name_len, ep_len; /* segment_name (memory only), endpoint */
    uint64_t type, prot;     /* enum values as written */
};
struct mc_svc_get_plan {
    int status;
    const struct mc_get_result *g; /* not read when status != 0 */
    uint32_t n;                    /* replicas written */
    size_t size;                   /* bytes of the GetReplicaListResponse */
    struct mc_svc_rep_plan reps[MC_MAX_REPLICAS];
};
void mc_svc_get_reply_plan(int status, const struct mc_get_result *g, struct mc_svc_get_plan *pl);
/* Writes pl->size bytes at p; returns p + pl->size. */
uint8_t *mc_svc_get_reply_put(uint8_t *p, const struct mc_svc_get_plan *pl);
/* The same as one element of BatchGetReplicaListResponse.results (tag and length first). */
size_t mc_svc_batch_item_size(const struct mc_svc_get_plan *pl);
uint8_t *mc_svc_batch_item_put(uint8_t *p, const struct mc_svc_get_plan *pl);
/* PutStartResponse the same way: the bytes protobuf-c packs from mc_svc_put_start_fill's view. */
struct mc_svc_put_start_plan {
    const struct mc_put_start_result *ps;
    uint32_t n;  /* replicas written */
    size_t size; /* bytes of the PutStartResponse */
    struct mc_svc_rep_plan reps[MC_MAX_REPLICAS];
};
void mc_svc_put_start_reply_plan(const struct mc_put_start_result *ps,
                                 struct mc_svc_put_start_plan *pl);
uint8_t *mc_svc_put_start_reply_put(uint8_t *p, const struct mc_svc_put_start_plan *pl);
/* The protobuf-c view of a PutStart result (service_objects.c), replicas in reps/ptrs (room for
 * MC_MAX_REPLICAS): what the encoder above must match. */
void mc_svc_put_start_fill(const struct mc_put_start_result *ps, Mc__PutStartResponse *r,
                           struct mc_svc_pb_replica *reps, Mc__ReplicaDescriptor **ptrs);
/* The protobuf-c view of one result (service_objects.c), replicas in reps/ptrs (room for
 * MC_MAX_REPLICAS, or for g->nreplicas when fewer): what the encoder above must match. */
void mc_svc_get_fill(int status, const struct mc_get_result *g, Mc__GetReplicaListResponse *r,
                     struct mc_svc_pb_replica *reps, Mc__ReplicaDescriptor **ptrs);

/* ---- service_segments.c: the connection's client binding (service.h) ---------------------- */

/* ILLEGAL_CLIENT when the connection is bound to another client, or (with a token) when it is
 * unbound and may not act for id: it proved another id, or presented no credential while id is
 * a live registered client. Binds it else. */
int mc_svc_check_client(struct mc_master *m, struct mc_rpc_call *call, struct mc_id id);

/* The client the connection acts for: the one it is bound to, else the one its credential
 * proved; false for neither. */
bool mc_svc_conn_client(struct mc_rpc_call *call, struct mc_id *out);

/* ---- service_batch.c: the generic batch adapter ------------------------------------------- */

/* One batch call in flight; what the spec's callbacks read and fill. Every array has n items
 * (NULL for n 0) and lives until the reply is encoded. */
struct mc_svc_batch {
    struct mc_master *m;
    struct mc_rpc_call *call;
    const ProtobufCMessage *req; /* the decoded request (cast to its Mc__*Request type) */
    struct mc_id client;         /* its client_id (zero without one) */
    size_t n;                    /* items in the spec's items field */
    struct mc_key_ref *keys;     /* their keys; len 0 where one held a NUL (INVALID_KEY) */
    int *rcs;                    /* per-item statuses, for core to fill */
    void *res;                   /* n * spec->res_size bytes: the core's per-item results */
    void *views;                 /* n * spec->view_size bytes: per-item reply messages ... */
    void **ptrs;                 /* ... and n pointers for the reply's repeated field */
    void *ctx;                   /* the handler's own state (mc_svc_batch's argument) */
};

#define MC_SVC_DEFERRED 1
struct mc_svc_batch_spec {
    const ProtobufCMessageDescriptor *req, *resp;
    /* The request's repeated field holding the items: the keys themselves (strings), or
     * messages whose string field item_key is the key (NULL: items without a key). */
    const char *items, *item_key;
    bool no_client; /* the method names no client: no client check (nor binding) */
    size_t res_size, view_size;
    /* Optional, before the client check: a non-zero status fails the whole call. */
    int (*check)(struct mc_svc_batch *b);
    /* The core call: fills rcs (and res); a non-zero status fails the whole call, but
     * MC_SVC_DEFERRED: the core took the call and answered it, or answers it later (it copied what
     * it needs: b's arrays are freed when mc_svc_batch returns). */
    int (*core)(struct mc_svc_batch *b);
    /* Optional: sets what the reply carries besides its "statuses" field (set to rcs when
     * resp has one). */
    void (*encode)(struct mc_svc_batch *b, ProtobufCMessage *resp);
};

/* Runs one batch call per spec (decode -> core -> encode -> free) and answers it. Whole-call
 * errors: INVALID_PARAMS above MC_SERVICE_MAX_BATCH items, INTERNAL_ERROR out of memory,
 * ILLEGAL_CLIENT, or what check or core returned. ctx: b->ctx. */
void mc_svc_batch(struct mc_master_service *svc, struct mc_rpc_call *call,
                  const struct mc_svc_batch_spec *spec, void *ctx);

/* Points msg's repeated field name at arr[0..n). */
void mc_svc_set_repeated(ProtobufCMessage *msg, const char *name, size_t n, void *arr);

/* Answers a heartbeat with its tasks (a mailbox reply: no master lock held): resp's repeated
 * "items" field gets one item message per task, filled by fill, which may use scratch_bytes of
 * zeroed, aligned memory of the item's own (for sub-messages; freed with the reply). Frees
 * tasks. Out of memory: INTERNAL_ERROR (the tasks stay in flight in the mailbox and expire
 * there). */
typedef void (*mc_svc_task_fill_fn)(ProtobufCMessage *item, const struct mc_task *t, void *scratch);
void mc_svc_reply_tasks(struct mc_rpc_call *call, const ProtobufCMessageDescriptor *resp,
                        const ProtobufCMessageDescriptor *item, mc_svc_task_fill_fn fill,
                        size_t scratch_bytes, struct mc_task_list *tasks);

/* ---- the handlers (mc_rpc_handler_fn; arg = the service) ----------------------------------- */

#define MC_SVC_HANDLER(name) void name(void *arg, struct mc_rpc_call *call)

/* Parked heartbeats and closed connections (service_promotion.c): the mailbox table learns to
 * tell a poll whose connection closed; on_close drops such polls. */
void mc_svc_watch_polls(struct mc_master *m);
void mc_svc_drop_dead_polls(struct mc_master *m);

/* one per master method of MC_METHODS (common/wire.h): mc_svc_<handler> */
#define MC_SVC_DECL_MASTER_(id, num, name, handler) MC_SVC_HANDLER(mc_svc_##handler);
#define MC_SVC_DECL_OTHER_(id, num, name)
MC_METHODS(MC_SVC_DECL_MASTER_, MC_SVC_DECL_OTHER_)
#undef MC_SVC_DECL_MASTER_
#undef MC_SVC_DECL_OTHER_

/* service_ha.c: whether a method passes the HA gate, and the gate (answers NOT_LEADER, or runs
 * svc->fns[method]). */
bool mc_svc_ha_gated(uint16_t method);
MC_SVC_HANDLER(mc_svc_ha_gate);

#endif
