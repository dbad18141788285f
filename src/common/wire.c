/* wire.c - frame header codec and method names; see wire.h. */
#include "common/wire.h"

#include <stdlib.h>
#include <string.h>

#include "mooncake/errors.h"

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void put_u64(uint8_t *p, uint64_t v)
{
    mc_wire_put_u32(p, (uint32_t)v);
    mc_wire_put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)mc_wire_get_u32(p) | (uint64_t)mc_wire_get_u32(p + 4) << 32;
}

void mc_wire_header_init(struct mc_wire_header *h, uint8_t kind, uint16_t method,
                         uint64_t request_id, int32_t status, uint32_t body_length)
{
    memset(h, 0, sizeof(*h));
    h->magic = MC_WIRE_MAGIC;
    h->version = MC_WIRE_VERSION;
    h->kind = kind;
    h->method = method;
    h->status = status;
    h->request_id = request_id;
    h->body_length = body_length;
}

void mc_wire_encode_header(const struct mc_wire_header *h, uint8_t out[MC_WIRE_HEADER_SIZE])
{
    mc_wire_put_u32(out + 0, h->magic);
    put_u16(out + 4, h->version);
    out[6] = h->kind;
    out[7] = h->flags;
    put_u16(out + 8, h->method);
    put_u16(out + 10, h->reserved0);
    mc_wire_put_u32(out + 12, (uint32_t)h->status);
    put_u64(out + 16, h->request_id);
    mc_wire_put_u32(out + 24, h->body_length);
    mc_wire_put_u32(out + 28, h->reserved1);
}

void mc_wire_decode_header(const uint8_t in[MC_WIRE_HEADER_SIZE], struct mc_wire_header *h)
{
    h->magic = mc_wire_get_u32(in + 0);
    h->version = get_u16(in + 4);
    h->kind = in[6];
    h->flags = in[7];
    h->method = get_u16(in + 8);
    h->reserved0 = get_u16(in + 10);
    h->status = (int32_t)mc_wire_get_u32(in + 12);
    h->request_id = get_u64(in + 16);
    h->body_length = mc_wire_get_u32(in + 24);
    h->reserved1 = mc_wire_get_u32(in + 28);
}

enum mc_wire_check mc_wire_validate(const struct mc_wire_header *h, uint32_t max_frame_bytes)
{
    if (h->magic != MC_WIRE_MAGIC)
        return MC_WIRE_BAD_MAGIC;
    if (h->version != MC_WIRE_VERSION)
        return MC_WIRE_BAD_VERSION;
    if (h->kind != MC_WIRE_REQUEST && h->kind != MC_WIRE_RESPONSE)
        return MC_WIRE_BAD_KIND;
    if (h->body_length > max_frame_bytes)
        return MC_WIRE_TOO_LARGE;
    return MC_WIRE_OK;
}

const char *mc_wire_check_name(enum mc_wire_check c)
{
    switch (c) {
    case MC_WIRE_OK:
        return "ok";
    case MC_WIRE_BAD_MAGIC:
        return "bad_magic";
    case MC_WIRE_BAD_VERSION:
        return "bad_version";
    case MC_WIRE_BAD_KIND:
        return "bad_kind";
    case MC_WIRE_TOO_LARGE:
        return "too_large";
    }
    return "unknown";
}

const char *mc_method_name(uint16_t method)
{
    switch (method) {
    case MC_METHOD_SERVICE_READY:
        return "ServiceReady";
    case MC_METHOD_PING:
        return "Ping";
    case MC_METHOD_MOUNT_SEGMENT:
        return "MountSegment";
    case MC_METHOD_REMOUNT_SEGMENT:
        return "ReMountSegment";
    case MC_METHOD_UNMOUNT_SEGMENT:
        return "UnmountSegment";
    case MC_METHOD_AUTH_CHALLENGE:
        return "AuthChallenge";
    case MC_METHOD_AUTH_PROVE:
        return "AuthProve";
    case MC_METHOD_PUT_START:
        return "PutStart";
    case MC_METHOD_PUT_END:
        return "PutEnd";
    case MC_METHOD_PUT_REVOKE:
        return "PutRevoke";
    case MC_METHOD_BATCH_PUT_START:
        return "BatchPutStart";
    case MC_METHOD_BATCH_PUT_END:
        return "BatchPutEnd";
    case MC_METHOD_BATCH_PUT_REVOKE:
        return "BatchPutRevoke";
    case MC_METHOD_GET_REPLICA_LIST:
        return "GetReplicaList";
    case MC_METHOD_BATCH_GET_REPLICA_LIST:
        return "BatchGetReplicaList";
    case MC_METHOD_EXIST_KEY:
        return "ExistKey";
    case MC_METHOD_BATCH_EXIST_KEY:
        return "BatchExistKey";
    case MC_METHOD_REMOVE:
        return "Remove";
    case MC_METHOD_BATCH_REMOVE:
        return "BatchRemove";
    case MC_METHOD_REMOVE_ALL:
        return "RemoveAll";
    case MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT:
        return "MountLocalDiskSegment";
    case MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT:
        return "UnmountLocalDiskSegment";
    case MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT:
        return "OffloadObjectHeartbeat";
    case MC_METHOD_NOTIFY_OFFLOAD_SUCCESS:
        return "NotifyOffloadSuccess";
    case MC_METHOD_EVICT_DISK_REPLICA:
        return "EvictDiskReplica";
    case MC_METHOD_BATCH_EVICT_DISK_REPLICA:
        return "BatchEvictDiskReplica";
    case MC_METHOD_PROMOTION_OBJECT_HEARTBEAT:
        return "PromotionObjectHeartbeat";
    case MC_METHOD_PROMOTION_ALLOC_START:
        return "PromotionAllocStart";
    case MC_METHOD_NOTIFY_PROMOTION_SUCCESS:
        return "NotifyPromotionSuccess";
    case MC_METHOD_NOTIFY_PROMOTION_FAILURE:
        return "NotifyPromotionFailure";
    case MC_METHOD_QUERY_KEY:
        return "QueryKey";
    case MC_METHOD_LIST_SEGMENTS:
        return "ListSegments";
    case MC_METHOD_GET_STATS:
        return "GetStats";
    case MC_METHOD_ECHO:
        return "Echo";
    case MC_METHOD_PEER_WRITE:
        return "PeerWrite";
    case MC_METHOD_PEER_READ:
        return "PeerRead";
    case MC_METHOD_PEER_BATCH_WRITE:
        return "PeerBatchWrite";
    case MC_METHOD_PEER_BATCH_READ:
        return "PeerBatchRead";
    case MC_METHOD_PEER_DISK_READ:
        return "PeerDiskRead";
    case MC_METHOD_PEER_RDMA_CONNECT:
        return "PeerRdmaConnect";
    default:
        break;
    }
    if (method >= MC_METHOD_TEST_FIRST && method <= MC_METHOD_TEST_LAST)
        return "Test";
    return NULL;
}

int mc_wire_peer_split(const uint8_t *body, size_t body_len, const uint8_t **ctl, size_t *ctl_len,
                       const uint8_t **payload, size_t *payload_len)
{
    if (body_len < MC_WIRE_PEER_PREFIX)
        return MC_ERR_DESERIALIZE_FAIL;
    uint32_t c = mc_wire_get_u32(body);
    if ((size_t)c > body_len - MC_WIRE_PEER_PREFIX)
        return MC_ERR_DESERIALIZE_FAIL;
    *ctl = body + MC_WIRE_PEER_PREFIX;
    *ctl_len = c;
    *payload = body + MC_WIRE_PEER_PREFIX + c;
    *payload_len = body_len - MC_WIRE_PEER_PREFIX - c;
    return 0;
}

int mc_wire_parse_proto_version(const char *version, uint32_t *out)
{
    if (!version)
        return -1;
    const char *p = strstr(version, "proto=");
    if (!p)
        return -1;
    p += 6;
    if (*p < '0' || *p > '9')
        return -1;
    char *end = NULL;
    unsigned long v = strtoul(p, &end, 10);
    if ((*end != '\0' && *end != ' ') || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}
