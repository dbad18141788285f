/*
 * rdma_plan.h - the pure parts of the RDMA transport: slice planning and the connection message.
 * No verbs types, no I/O; the unit tests call them directly.
 *
 * Slices. A transfer of len bytes is cut into work requests of slice_bytes each; a tail shorter
 * than a quarter slice is merged into the slice before it (so no tiny last request; the last one
 * is then at most 1.25 slices). Slice i starts at i * slice_bytes.
 *
 * Connection message. The active side of an rdma_cm connection sends it as the private data of
 * its connect request; the passive side answers with its own in the accept (or, for a challenge,
 * in the reject). Layout (little-endian; rdma_cm may pad private data with zeros, so longer
 * input is accepted and the extra bytes ignored):
 *     u32 magic 'MCRD' | u8 version (1) | u8 kind | u16 reserved (0) |
 *     u64 client id hi | u64 client id lo | kind-specific tail
 * Kinds and their tails (the sizes fit rdma_cm's private data limits: 56 bytes in a connect
 * request, 148 in a reject, 196 in an accept):
 *     1 request    (24 bytes)  no token configured: plain connect
 *     2 accept     (24 bytes)  the passive side's answer
 *     3 hello      (56 bytes)  cnonce (32): the first connect when a token is configured
 *     4 challenge  (88 bytes)  snonce (32) | server proof (32), sent in the reject of a hello
 *     5 prove      (56 bytes)  client proof (32): the second connect, on a fresh cm id
 * The proofs are auth.h's (HMAC-SHA-256 over label | cnonce | snonce, different labels per
 * direction), so the token never crosses the wire. Anything else (short for its kind, other
 * magic or version, unknown kind, reserved bits set, zero client id) is refused by decode; the
 * passive side then rejects the connection.
 */
#ifndef MC_CLIENT_RDMA_PLAN_H
#define MC_CLIENT_RDMA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/id.h"

#define MC_RDMA_MIN_SLICE 4096u
#define MC_RDMA_MAX_SLICE (64u << 20)

/* Number of slices for len bytes (0 for len 0); slice_bytes in [MIN_SLICE, MAX_SLICE]. */
size_t mc_rdma_slice_count(uint64_t len, uint32_t slice_bytes);
/* Offset and length of slice i (< mc_rdma_slice_count). */
void mc_rdma_slice_at(uint64_t len, uint32_t slice_bytes, size_t i, uint64_t *off, uint32_t *n);

#define MC_RDMA_CONN_MSG_LEN 24 /* the header; requests and accepts are this long */
#define MC_RDMA_CONN_MSG_MAX 88 /* the longest kind (challenge) */
#define MC_RDMA_CONN_NONCE 32
#define MC_RDMA_CONN_MAC 32
#define MC_RDMA_CONN_MAGIC 0x4452434du /* "MCRD" little-endian */
#define MC_RDMA_CONN_VERSION 1

enum mc_rdma_conn_kind {
    MC_RDMA_CONN_REQUEST = 1,
    MC_RDMA_CONN_ACCEPT = 2,
    MC_RDMA_CONN_HELLO = 3,
    MC_RDMA_CONN_CHALLENGE = 4,
    MC_RDMA_CONN_PROVE = 5,
};

struct mc_rdma_conn_msg {
    uint8_t kind; /* enum mc_rdma_conn_kind */
    struct mc_id client_id;
    uint8_t nonce[MC_RDMA_CONN_NONCE]; /* hello: cnonce; challenge: snonce */
    uint8_t mac[MC_RDMA_CONN_MAC];     /* challenge: server proof; prove: client proof */
};

/* The encoded length of a message of kind (0 for an unknown kind). */
size_t mc_rdma_conn_msg_len(uint8_t kind);
/* Writes mc_rdma_conn_msg_len(m->kind) bytes to out (room for MC_RDMA_CONN_MSG_MAX) and
 * returns that length. */
size_t mc_rdma_conn_msg_encode(const struct mc_rdma_conn_msg *m, uint8_t *out);
/* 0, or MC_ERR_INVALID_PARAMS for a malformed message (see above). */
int mc_rdma_conn_msg_decode(const void *buf, size_t len, struct mc_rdma_conn_msg *m);

#endif
