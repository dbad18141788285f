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
 * client that sees another number fails with MC_ERR_INVALID_VERSION (mc_rpc_check_version).
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
 * Every method, numbered once and forever. Master methods are grouped by area in 1..0xFF, peer
 * (client <-> client data plane) methods in 0x100..0x1FF, test-only methods in 0x300..0x3FF.
 * Never renumber; append.
 */
enum mc_method {
    MC_METHOD_INVALID = 0,
    /* handshake, liveness, DRAM segments */
    MC_METHOD_SERVICE_READY = 1,
    MC_METHOD_PING = 2,
    MC_METHOD_MOUNT_SEGMENT = 3,
    MC_METHOD_REMOUNT_SEGMENT = 4,
    MC_METHOD_UNMOUNT_SEGMENT = 5,
    /* connection set-up: the shared-secret handshake (common/auth.h), served by every server */
    MC_METHOD_AUTH_CHALLENGE = 6,
    MC_METHOD_AUTH_PROVE = 7,
    /* Put */
    MC_METHOD_PUT_START = 16,
    MC_METHOD_PUT_END = 17,
    MC_METHOD_PUT_REVOKE = 18,
    MC_METHOD_BATCH_PUT_START = 19,
    MC_METHOD_BATCH_PUT_END = 20,
    MC_METHOD_BATCH_PUT_REVOKE = 21,
    /* Get / Exist */
    MC_METHOD_GET_REPLICA_LIST = 32,
    MC_METHOD_BATCH_GET_REPLICA_LIST = 33,
    MC_METHOD_EXIST_KEY = 34,
    MC_METHOD_BATCH_EXIST_KEY = 35,
    /* Remove */
    MC_METHOD_REMOVE = 48,
    MC_METHOD_BATCH_REMOVE = 49,
    MC_METHOD_REMOVE_ALL = 50,
    /* LOCAL_DISK tier, offload */
    MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT = 64,
    MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT = 65,
    MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT = 66,
    MC_METHOD_NOTIFY_OFFLOAD_SUCCESS = 67,
    MC_METHOD_EVICT_DISK_REPLICA = 68,
    MC_METHOD_BATCH_EVICT_DISK_REPLICA = 69,
    /* promotion on hit */
    MC_METHOD_PROMOTION_OBJECT_HEARTBEAT = 80,
    MC_METHOD_PROMOTION_ALLOC_START = 81,
    MC_METHOD_NOTIFY_PROMOTION_SUCCESS = 82,
    MC_METHOD_NOTIFY_PROMOTION_FAILURE = 83,
    /* admin queries (mooncake_cli) */
    MC_METHOD_QUERY_KEY = 96,
    MC_METHOD_LIST_SEGMENTS = 97,
    MC_METHOD_GET_STATS = 98,
    /* opaque echo, served by every server (tests, mooncake_bench rpc) */
    MC_METHOD_ECHO = 0xF0,

    /* peer data plane: bodies use the peer layout (see above) */
    MC_METHOD_PEER_FIRST = 0x100,
    MC_METHOD_PEER_WRITE = 0x100,
    MC_METHOD_PEER_READ = 0x101,
    MC_METHOD_PEER_BATCH_WRITE = 0x102,
    MC_METHOD_PEER_BATCH_READ = 0x103,
    MC_METHOD_PEER_DISK_READ = 0x104,
    MC_METHOD_PEER_RDMA_CONNECT = 0x105,
    MC_METHOD_PEER_LAST = 0x1FF,

    /* test-only range */
    MC_METHOD_TEST_FIRST = 0x300,
    MC_METHOD_TEST_LAST = 0x3FF,

    /* dispatch tables are indexed by method; anything at or above this is unknown */
    MC_METHOD_TABLE_SIZE = 0x400,
};

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
