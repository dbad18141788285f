/*
 * service_internal.h - what the master's RPC adapter files share (service.c: the DRAM tier and
 * admin methods; service_disk.c: the LOCAL_DISK tier): the service struct, request helpers and
 * the per-connection client check. Private to those files.
 */
#ifndef MC_MASTER_SERVICE_INTERNAL_H
#define MC_MASTER_SERVICE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "common/rpc_server.h"
#include "master/master.h"
#include "proto/master.pb-c.h"

struct mc_master_service {
    struct mc_master *m;
    uint64_t start_ms;
};

#define UNPACK(type, lower, var)                                                                   \
    Mc__##type *var = (Mc__##type *)mc_rpc_call_unpack(call, &mc__##lower##__descriptor);          \
    if (!var)                                                                                      \
        return;

#define FREE_REQ(var) protobuf_c_message_free_unpacked(&(var)->base, NULL)

struct mc_id mc_svc_id_from_pb(const Mc__Uuid *u);
void mc_svc_id_to_pb(struct mc_id id, Mc__Uuid *u);
/* Number of a request's field, from its descriptor (0, matching nothing, if absent). */
uint32_t mc_svc_field_num(const ProtobufCMessageDescriptor *d, const char *name);
#define KEY(lower) mc_svc_field_num(&mc__##lower##__descriptor, "key")
#define KEYS(lower) mc_svc_field_num(&mc__##lower##__descriptor, "keys")
/* The key of a single-key request (field num): len 0 when it holds a NUL. */
struct mc_key_ref mc_svc_key_from_pb(struct mc_rpc_call *call, uint32_t num, const char *key);
/* The key list of a batch request (field num; malloc'ed, NULL for n 0); INVALID_PARAMS above
 * MC_SERVICE_MAX_BATCH. */
int mc_svc_keys_from_pb(struct mc_rpc_call *call, uint32_t num, char **keys, size_t n,
                        struct mc_key_ref **out);
/* ILLEGAL_CLIENT when the connection is bound to another client (service.h); binds it else. */
int mc_svc_check_client(struct mc_rpc_call *call, struct mc_id id);
/* Answers msg with its repeated sint32 statuses field set to rcs[0..n). */
void mc_svc_reply_statuses(struct mc_rpc_call *call, ProtobufCMessage *msg, size_t *n_field,
                           int32_t **field, int *rcs, size_t n);

/* service_disk.c: the LOCAL_DISK tier's handlers. */
void mc_svc_mount_local_disk(void *arg, struct mc_rpc_call *call);
void mc_svc_unmount_local_disk(void *arg, struct mc_rpc_call *call);
void mc_svc_offload_heartbeat(void *arg, struct mc_rpc_call *call);
void mc_svc_notify_offload_success(void *arg, struct mc_rpc_call *call);
void mc_svc_evict_disk_replica(void *arg, struct mc_rpc_call *call);
void mc_svc_batch_evict_disk_replica(void *arg, struct mc_rpc_call *call);

#endif
