/*
 * service_wire.h - a scan of a raw protobuf request body for strings holding a NUL.
 *
 * protobuf-c ends a decoded string at its first NUL, so a key "a\0b" on the wire would be
 * decoded as "a". Keys and group ids never hold a NUL; the RPC adapters (service_convert.c) use
 * this to find the ones that do in the body they have just decoded, and refuse them.
 *
 * The single-key requests of the read path (GetReplicaList, ExistKey) are not decoded by
 * protobuf-c at all: mc_svc_decode_key_request reads their two fields in place.
 */
#ifndef MC_MASTER_SERVICE_WIRE_H
#define MC_MASTER_SERVICE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

/* Sets len = 0 in keys[i] when the i-th occurrence of field num of the body (a string; or, with
 * sub != 0, a message whose string field sub is the one looked at) holds a NUL. single (n = 1):
 * a singular field: its last occurrence counts, the one protobuf-c 1.4 decodes (it replaces an
 * earlier one whole, a message too: it does not merge them). */
void mc_svc_mark_nul_strings(const uint8_t *body, size_t len, uint32_t num, uint32_t sub,
                             bool single, struct mc_key_ref *keys, size_t n);

/* A single-key request (GetReplicaListRequest, ExistKeyRequest: the key a string field, the
 * client an optional Uuid field; client_num 0: none) read straight from its body, with no
 * allocation: what protobuf-c accepts is accepted with the same values (the last occurrence
 * of each field counts), and what it refuses is refused (a truncated
 * or over-long varint, a length past the body, a group or unknown wire type, a known field of
 * the wrong wire type); unknown fields are skipped. The key points into the body; its len is 0
 * when it holds a NUL, as mc_svc_mark_nul_strings would make it. Returns NULL, or why the body
 * is refused. The field numbers below are proto/master.proto's (test_master_service_encode
 * checks them against the generated descriptors). */
#define MC_SVC_GET_KEY_FIELD 1    /* GetReplicaListRequest.key */
#define MC_SVC_GET_CLIENT_FIELD 2 /* GetReplicaListRequest.client_id */
#define MC_SVC_EXIST_KEY_FIELD 1  /* ExistKeyRequest.key */
const char *mc_svc_decode_key_request(const uint8_t *body, size_t len, uint32_t key_num,
                                      uint32_t client_num, struct mc_key_ref *key,
                                      struct mc_id *client);

/* PutEndRequest (end = true) and PutRevokeRequest (end = false: fields 5 and 6 are unknown
 * there) read in place, with the same rules as mc_svc_decode_key_request; replica_type as the
 * int32 protobuf-c stores (no check of the value), crc_valid as protobuf-c's bool: of any wire
 * type, true when any byte after its tag has a payload bit set (bits past 63 of a varint, a
 * length prefix). */
#define MC_SVC_PUT_END_CLIENT_FIELD 1    /* PutEndRequest.client_id, PutRevokeRequest.client_id */
#define MC_SVC_PUT_END_KEY_FIELD 2       /* .key */
#define MC_SVC_PUT_END_TYPE_FIELD 3      /* .replica_type */
#define MC_SVC_PUT_END_VERSION_FIELD 4   /* .version */
#define MC_SVC_PUT_END_CRC_FIELD 5       /* PutEndRequest.crc32c */
#define MC_SVC_PUT_END_CRC_VALID_FIELD 6 /* PutEndRequest.crc_valid */
struct mc_svc_put_end_req {
    struct mc_key_ref key;
    struct mc_id client;
    int32_t replica_type;
    uint64_t version;
    uint32_t crc32c;
    bool crc_valid;
};
const char *mc_svc_decode_put_end(const uint8_t *body, size_t len, bool end,
                                  struct mc_svc_put_end_req *r);

#endif
