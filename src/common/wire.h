/*
 * wire.h - the frozen wire contract: frame header, method numbers, peer body layout.
 *
 * Every message on every TCP connection (client <-> master, client <-> client) is one frame:
 *
 *   offset size field
 *        0    4 magic        MC_WIRE_MAGIC, the bytes "MCRP"
 *        4    2 version      MC_WIRE_VERSION (frame layout version)
 *        6    1 kind         MC_WIRE_REQUEST (1) or MC_WIRE_RESPONSE (2)
 *        7    1 flags        0 today (receivers ignore unknown bits)
 *        8    2 method       enum mc_method (a response echoes its request's method)
 *       10    2 reserved     0
 *       12    4 status       i32, errors.h code; requests send 0. A non-zero status in a
 *                            response means the whole call failed and the body is empty
 *       16    8 request_id   chosen by the caller, echoed by the response; responses are
 *                            matched by id, so several requests may be outstanding and answered
 *                            in any order
 *       24    4 body_length  bytes following the header; <= max_frame_bytes (64 MiB default)
 *       28    4 reserved     0
 *   then body_length bytes of body. All integers are little-endian.
 *
 * Bodies:
 *  - Master methods (1..0xFF): one protobuf message (proto/master.proto, <Method>Request /
 *    <Method>Response); an empty body is the empty message.
 *  - MC_METHOD_ECHO: opaque bytes, echoed back unchanged (tests and mooncake_bench rpc).
 *  - MC_METHOD_AUTH_CHALLENGE / AUTH_PROVE: opaque fixed-size bodies (common/auth.h): a 32-byte
 *    nonce, answered by a 32-byte nonce and a 32-byte MAC; a 32-byte MAC, answered empty.
 *  - Peer methods (0x100..0x1FF), the "peer body":
 *        u32 control_length (LE) | control (protobuf, proto/peer.proto) | raw payload
 *    with 4 + control_length <= body_length; the payload is the rest. Bulk bytes thus travel
 *    without protobuf copies, and a receiver can land them straight in the destination buffer.
 *    A response with non-zero status has an empty body (no prefix).
 *  - 0x300..0x3FF: reserved for tests; never used by production code.
 *
 * Receivers treat everything as untrusted: a bad magic, unknown version, unknown kind or a
 * body above max_frame_bytes is a protocol error and the connection is closed; an unknown method
 * gets MC_ERR_NOT_SUPPORTED; an undecodable body gets MC_ERR_DESERIALIZE_FAIL (or
 * INVALID_PARAMS for well-formed but invalid content).
 *
 * Versions: MC_SERVICE_VERSION ("mooncake-c/<semver> proto=<n>") is what ServiceReady returns;
 * <n> = MC_PROTO_VERSION (set once in the top CMakeLists.txt) numbers the message schema, and a
 * client that sees another number fails with MC_ERR_INVALID_VERSION (mc_service_ready_check,
 * service_ready.h).
 */
#ifndef MC_COMMON_WIRE_H
#define MC_COMMON_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef MC_VERSION_STRING
#define MC_VERSION_STRING "0.0.0"
#endif
#ifndef MC_PROTO_VERSION
#define MC_PROTO_VERSION 1
#endif
#define MC_WIRE_STR2_(x) #x
#define MC_WIRE_STR_(x) MC_WIRE_STR2_(x)
/* "mooncake-c/0.1.0 proto=2": the one place semver and schema number meet. */
#define MC_SERVICE_VERSION "mooncake-c/" MC_VERSION_STRING " proto=" MC_WIRE_STR_(MC_PROTO_VERSION)

#define MC_WIRE_MAGIC 0x5052434Du /* "MCRP" in memory order on a little-endian wire */
#define MC_WIRE_VERSION 1u
#define MC_WIRE_HEADER_SIZE 32u
#define MC_WIRE_PEER_PREFIX 4u                      /* u32 control_length of a peer body */
#define MC_WIRE_DEFAULT_MAX_FRAME_BYTES (64u << 20) /* --max_frame_bytes default: 64 MiB */
#define MC_WIRE_MIN_MAX_FRAME_BYTES 4096u           /* smallest accepted configuration */
/*
 * max_frame_bytes bounds a whole body, so on the peer protocol it must exceed the largest
 * payload moved in one frame by the control overhead: peer servers and peer clients configure
 * (largest payload per frame) + MC_WIRE_PEER_CTL_RESERVE, e.g. 64 MiB slices -> 65 MiB frames.
 */
#define MC_WIRE_PEER_CTL_RESERVE (1u << 20)

enum mc_wire_kind {
    MC_WIRE_REQUEST = 1,
    MC_WIRE_RESPONSE = 2,
};

/*
 * Every method, numbered once and forever, in one table: MC_METHODS(MASTER, OTHER) calls
 * MASTER(ID, number, "Name", handler) for each method of the master's service (handler: the
 * adapter mc_svc_<handler> in src/master/service_*.c) and OTHER(ID, number, "Name") for the
 * methods every server or the peer data plane serves. The enum, mc_method_name() and the
 * master's dispatch table are all made from it. Master methods are grouped by area in 1..0xFF,
 * peer (client <-> client data plane) methods in 0x100..0x1FF, test-only methods in
 * 0x300..0x3FF. Never renumber; append.
 */
#define MC_METHODS(MASTER, OTHER)                                                                  \
    MASTER(SERVICE_READY, 1, "ServiceReady", service_ready)                                        \
    MASTER(PING, 2, "Ping", ping)                                                                  \
    MASTER(MOUNT_SEGMENT, 3, "MountSegment", mount_segment)                                        \
    MASTER(REMOUNT_SEGMENT, 4, "ReMountSegment", remount_segment)                                  \
    MASTER(UNMOUNT_SEGMENT, 5, "UnmountSegment", unmount_segment)                                  \
    OTHER(AUTH_CHALLENGE, 6, "AuthChallenge")                                                      \
    OTHER(AUTH_PROVE, 7, "AuthProve")                                                              \
    MASTER(GET_LEADER, 8, "GetLeader", get_leader)                                                 \
    MASTER(REGISTER_CLIENT, 9, "RegisterClient", register_client)                                  \
    MASTER(PUT_START, 16, "PutStart", put_start)                                                   \
    MASTER(PUT_END, 17, "PutEnd", put_end)                                                         \
    MASTER(PUT_REVOKE, 18, "PutRevoke", put_revoke)                                                \
    MASTER(BATCH_PUT_START, 19, "BatchPutStart", batch_put_start)                                  \
    MASTER(BATCH_PUT_END, 20, "BatchPutEnd", batch_put_end)                                        \
    MASTER(BATCH_PUT_REVOKE, 21, "BatchPutRevoke", batch_put_revoke)                               \
    MASTER(UPSERT_START, 22, "UpsertStart", upsert_start)                                          \
    MASTER(UPSERT_END, 23, "UpsertEnd", upsert_end)                                                \
    MASTER(BATCH_UPSERT_START, 24, "BatchUpsertStart", batch_upsert_start)                         \
    MASTER(BATCH_UPSERT_END, 25, "BatchUpsertEnd", batch_upsert_end)                               \
    MASTER(GET_REPLICA_LIST, 32, "GetReplicaList", get_replica_list)                               \
    MASTER(BATCH_GET_REPLICA_LIST, 33, "BatchGetReplicaList", batch_get_replica_list)              \
    MASTER(EXIST_KEY, 34, "ExistKey", exist_key)                                                   \
    MASTER(BATCH_EXIST_KEY, 35, "BatchExistKey", batch_exist_key)                                  \
    MASTER(REMOVE, 48, "Remove", remove)                                                           \
    MASTER(BATCH_REMOVE, 49, "BatchRemove", batch_remove)                                          \
    MASTER(REMOVE_ALL, 50, "RemoveAll", remove_all)                                                \
    MASTER(REMOVE_BY_REGEX, 51, "RemoveByRegex", remove_by_regex)                                  \
    MASTER(MOUNT_LOCAL_DISK_SEGMENT, 64, "MountLocalDiskSegment", mount_local_disk)                \
    MASTER(UNMOUNT_LOCAL_DISK_SEGMENT, 65, "UnmountLocalDiskSegment", unmount_local_disk)          \
    MASTER(OFFLOAD_OBJECT_HEARTBEAT, 66, "OffloadObjectHeartbeat", offload_heartbeat)              \
    MASTER(NOTIFY_OFFLOAD_SUCCESS, 67, "NotifyOffloadSuccess", notify_offload_success)             \
    MASTER(EVICT_DISK_REPLICA, 68, "EvictDiskReplica", evict_disk_replica)                         \
    MASTER(BATCH_EVICT_DISK_REPLICA, 69, "BatchEvictDiskReplica", batch_evict_disk_replica)        \
    MASTER(HOLDER_INDEX_HEARTBEAT, 72, "HolderIndexHeartbeat", holder_index_heartbeat)             \
    MASTER(HOLDER_REREGISTER, 73, "HolderReregister", holder_reregister)                           \
    MASTER(PROMOTION_OBJECT_HEARTBEAT, 80, "PromotionObjectHeartbeat", promotion_heartbeat)        \
    MASTER(PROMOTION_ALLOC_START, 81, "PromotionAllocStart", promotion_alloc_start)                \
    MASTER(NOTIFY_PROMOTION_SUCCESS, 82, "NotifyPromotionSuccess", notify_promotion_success)       \
    MASTER(NOTIFY_PROMOTION_FAILURE, 83, "NotifyPromotionFailure", notify_promotion_failure)       \
    MASTER(QUERY_KEY, 96, "QueryKey", query_key)                                                   \
    MASTER(LIST_SEGMENTS, 97, "ListSegments", list_segments)                                       \
    MASTER(GET_STATS, 98, "GetStats", get_stats)                                                   \
    OTHER(ECHO, 0xF0, "Echo")                                                                      \
    OTHER(PEER_WRITE, 0x100, "PeerWrite")                                                          \
    OTHER(PEER_READ, 0x101, "PeerRead")                                                            \
    OTHER(PEER_BATCH_WRITE, 0x102, "PeerBatchWrite")                                               \
    OTHER(PEER_BATCH_READ, 0x103, "PeerBatchRead")                                                 \
    OTHER(PEER_DISK_READ, 0x104, "PeerDiskRead")                                                   \
    OTHER(PEER_RDMA_CONNECT, 0x105, "PeerRdmaConnect")

#define MC_METHOD_ENUM_MASTER_(id, num, name, handler) MC_METHOD_##id = num,
#define MC_METHOD_ENUM_OTHER_(id, num, name) MC_METHOD_##id = num,
enum mc_method {
    MC_METHOD_INVALID = 0,
    MC_METHODS(MC_METHOD_ENUM_MASTER_, MC_METHOD_ENUM_OTHER_)

    /* the peer data plane's range: bodies use the peer layout (see above) */
    MC_METHOD_PEER_FIRST = 0x100,
    MC_METHOD_PEER_LAST = 0x1FF,

    /* test-only range */
    MC_METHOD_TEST_FIRST = 0x300,
    MC_METHOD_TEST_LAST = 0x3FF,

    /* dispatch tables are indexed by method; anything at or above this is unknown */
    MC_METHOD_TABLE_SIZE = 0x400,
};
#undef MC_METHOD_ENUM_MASTER_
#undef MC_METHOD_ENUM_OTHER_

/* "PutStart", "PeerRead", ...; "Test" for the test range; NULL for an unassigned number. */
const char *mc_method_name(uint16_t method);
static inline bool mc_method_is_peer(uint16_t method)
{
    return method >= MC_METHOD_PEER_FIRST && method <= MC_METHOD_PEER_LAST;
}

/* A decoded frame header (host byte order). */
struct mc_wire_header {
    uint32_t magic;
    uint16_t version;
    uint8_t kind;
    uint8_t flags;
    uint16_t method;
    uint16_t reserved0;
    int32_t status;
    uint64_t request_id;
    uint32_t body_length;
    uint32_t reserved1;
};

/* A response with request id 0 and an error status answers no request: the server refused the
 * whole connection (at accept, e.g. protected mode). Its status, or 0 for any other frame. */
static inline int32_t mc_wire_conn_refusal(const struct mc_wire_header *h)
{
    return h->kind == MC_WIRE_RESPONSE && h->request_id == 0 ? h->status : 0;
}

/* Fills a header with magic/version and the given fields (reserved = 0). */
void mc_wire_header_init(struct mc_wire_header *h, uint8_t kind, uint16_t method,
                         uint64_t request_id, int32_t status, uint32_t body_length);
/* Writes h as 32 little-endian bytes. */
void mc_wire_encode_header(const struct mc_wire_header *h, uint8_t out[MC_WIRE_HEADER_SIZE]);
/* Reads 32 bytes into h; no validation. */
void mc_wire_decode_header(const uint8_t in[MC_WIRE_HEADER_SIZE], struct mc_wire_header *h);

enum mc_wire_check {
    MC_WIRE_OK = 0,
    MC_WIRE_BAD_MAGIC,
    MC_WIRE_BAD_VERSION,
    MC_WIRE_BAD_KIND,
    MC_WIRE_TOO_LARGE,
};
/* Validates magic, version, kind and body_length <= max_frame_bytes. */
enum mc_wire_check mc_wire_validate(const struct mc_wire_header *h, uint32_t max_frame_bytes);
const char *mc_wire_check_name(enum mc_wire_check c);

/* The u32 control-length prefix of a peer body. */
static inline void mc_wire_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t mc_wire_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * Splits a peer body into control and payload. Returns 0, or MC_ERR_DESERIALIZE_FAIL when the
 * body is shorter than the prefix or the control length overruns it.
 */
int mc_wire_peer_split(const uint8_t *body, size_t body_len, const uint8_t **ctl, size_t *ctl_len,
                       const uint8_t **payload, size_t *payload_len);

/* Parses "<anything> proto=<n>" from a ServiceReady string. Returns 0, or -1 if absent. */
int mc_wire_parse_proto_version(const char *version, uint32_t *out);

#endif
