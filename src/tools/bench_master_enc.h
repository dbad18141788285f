/*
 * bench_master_enc.h - hand encoders of the request bodies `mooncake_bench master` sends on its
 * event loops (GetReplicaList, ExistKey, BatchGetReplicaList, PutStart, PutEnd), the bytes the
 * generated protobuf-c packer writes for the same messages (proto3: fields at their default
 * value are left out; fields in field-number order), without the packer's per-field descriptor
 * walk. tests/test_bench_master_enc.c decodes them with protobuf-c and compares them with the
 * generated packer's bytes.
 */
#ifndef MC_TOOLS_BENCH_MASTER_ENC_H
#define MC_TOOLS_BENCH_MASTER_ENC_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes one varint-length-prefixed key field takes beyond the key. */
#define MC_BM_ENC_FIELD_OVERHEAD 11
/* The most bytes a PutStart / PutEnd body takes beyond the key. */
#define MC_BM_ENC_PUT_OVERHEAD (2 + 2 * 11 + MC_BM_ENC_FIELD_OVERHEAD + 11)

/* Writes the decimal digits of v zero-padded to `width` (v's own length if longer) at p;
 * returns the number of bytes written (at most 20). */
size_t mc_bm_enc_u64_dec(uint8_t *p, uint64_t v, int width);

/* A body whose only field is `keys` as field 1 (GetReplicaListRequest / ExistKeyRequest with one
 * key, BatchGetReplicaListRequest with n; client_id left out). The caller has room for
 * sum(len + MC_BM_ENC_FIELD_OVERHEAD). Returns the body's length. */
size_t mc_bm_enc_keys(uint8_t *out, const char *const *keys, const size_t *lens, size_t n);

/* PutStartRequest{client_id{hi,lo}, key, value_length} (end = 0) or
 * PutEndRequest{client_id{hi,lo}, key} (end = 1). The caller has room for
 * klen + MC_BM_ENC_PUT_OVERHEAD. Returns the body's length. */
size_t mc_bm_enc_put(uint8_t *out, int end, uint64_t hi, uint64_t lo, const char *key, size_t klen,
                     uint64_t value_length);

#endif
