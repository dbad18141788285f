/*
 * master_types.h - plain data types shared by the master core's public API (master.h) and its
 * modules: limits, enums, the segment description a client mounts, replica descriptors.
 *
 * Every string field is a fixed-size, NUL-terminated array so results can be returned into
 * caller-provided structs without allocation (a Get makes no malloc).
 */
#ifndef MC_MASTER_TYPES_H
#define MC_MASTER_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/id.h"

#define MC_SEGMENT_NAME_MAX 128   /* bytes including NUL */
#define MC_ENDPOINT_MAX 64        /* "host:port" including NUL */
#define MC_PROTOCOL_MAX 16        /* "tcp" | "rdma" */
#define MC_TRANSPORT_META_MAX 128 /* opaque transport fields (e.g. RDMA device/GID), NUL-term. */
#define MC_GROUP_ID_MAX 256       /* group id bytes including NUL */
#define MC_MAX_REPLICAS 8         /* replicas per object (all types together) */
#define MC_SEGMENT_MIN_SIZE 4096u
/* Limits of what the master's records can represent (objects.h ties its bitfield widths
 * to these with static asserts); a mount beyond them is refused with INVALID_PARAMS.
 *   - a replica's offset inside its segment is a 48-bit field: a segment is at most 2^48 bytes
 *     (256 TiB), so every offset in it fits;
 *   - the capacity of all mounted segments together is a 64-bit counter (and the allocated bytes
 *     never exceed it): the sum is capped at 2^56 bytes (64 PiB, 256 segments of the largest
 *     size), far from wrapping. */
#define MC_SEGMENT_OFFSET_BITS 48
#define MC_SEGMENT_MAX_SIZE (1ull << MC_SEGMENT_OFFSET_BITS)
#define MC_SEGMENTS_MAX_CAPACITY (1ull << 56)
#define MC_ALLOC_MAX_TRIES 100 /* segments one allocation walks at most */

enum mc_alloc_strategy {
    MC_ALLOC_RANDOM = 0,           /* preferred first, then round-robin from a random start */
    MC_ALLOC_FREE_RATIO_FIRST = 1, /* preferred first, then the emptiest of a random sample */
};

enum mc_master_replica_type {
    MC_REPLICA_TYPE_MEMORY = 0,
    MC_REPLICA_TYPE_DISK = 1, /* upstream's shared-FS type: not used, kept for numbering */
    MC_REPLICA_TYPE_LOCAL_DISK = 2,
};

enum mc_master_replica_status {
    MC_REPLICA_STATUS_UNDEFINED = 0,
    MC_REPLICA_STATUS_INITIALIZED = 1,
    MC_REPLICA_STATUS_PROCESSING = 2,
    MC_REPLICA_STATUS_COMPLETE = 3,
    MC_REPLICA_STATUS_REMOVED = 4,
    MC_REPLICA_STATUS_FAILED = 5,
};

enum mc_client_status {
    MC_CLIENT_UNDEFINED = 0,
    MC_CLIENT_OK = 1,
    MC_CLIENT_NEED_REMOUNT = 2,
};

/* What a client mounts: a DRAM region and how peers reach it. */
struct mc_segment_desc {
    struct mc_id id;
    char name[MC_SEGMENT_NAME_MAX];
    uint64_t base; /* the owner's virtual address of the region (peers use base + offset) */
    uint64_t size;
    char endpoint[MC_ENDPOINT_MAX];             /* host:port of the owner's peer server */
    char protocol[MC_PROTOCOL_MAX];             /* "tcp" or "rdma" */
    uint32_t rkey;                              /* RDMA remote key of the region (0 for tcp) */
    char transport_meta[MC_TRANSPORT_META_MAX]; /* opaque to the master, returned as given */
};

/* A mounted segment as listed by ListSegments / the admin view. */
struct mc_segment_info {
    struct mc_segment_desc desc;
    struct mc_id owner;
    uint64_t mount_epoch;  /* of the current mount */
    uint64_t capacity;     /* bytes */
    uint64_t allocated;    /* requested bytes of live buffers */
    double used_ratio;     /* allocated / capacity */
    uint64_t largest_free; /* largest single free block */
    uint64_t nallocs;      /* live buffers */
};

/* Everything a client needs for I/O on one replica (a Get is one RPC). */
struct mc_replica_desc {
    uint64_t id;
    uint8_t type;   /* enum mc_master_replica_type */
    uint8_t status; /* enum mc_master_replica_status */
    uint16_t refcnt;
    uint64_t size; /* object bytes */
    union {
        struct {
            struct mc_id segment_id;
            char segment_name[MC_SEGMENT_NAME_MAX];
            uint64_t offset;      /* inside the segment */
            uint64_t addr;        /* segment base + offset (the peer's address) */
            uint64_t mount_epoch; /* the segment's mount epoch (segments.h) */
            char endpoint[MC_ENDPOINT_MAX];
            char protocol[MC_PROTOCOL_MAX];
            uint32_t rkey;
            char transport_meta[MC_TRANSPORT_META_MAX];
        } mem;
        struct {
            struct mc_id holder; /* the client holding the SSD copy */
            char endpoint[MC_ENDPOINT_MAX];
        } disk;
    } u;
};

#endif
