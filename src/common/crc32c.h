/*
 * crc32c.h - CRC-32C (Castagnoli), as used for object values and disk records.
 *
 * Computed by ISA-L's crc32_iscsi (libisal), which picks the CPU's fastest path at run time
 * (carry-less multiply folding where the CPU has it); `mooncake_bench crc` measured it at about
 * twice the hand-written three-chain crc32 code it replaced. mc_crc32c_extend() continues a running
 * CRC, so mc_crc32c(a||b) == mc_crc32c_extend(mc_crc32c(a), b).
 */
#ifndef MC_COMMON_CRC32C_H
#define MC_COMMON_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t mc_crc32c_extend(uint32_t crc, const void *data, size_t len);
static inline uint32_t mc_crc32c(const void *data, size_t len)
{
    return mc_crc32c_extend(0, data, len);
}
/* Copies len bytes from src to dst (which must not overlap) and returns crc extended over
 * them, with one pass over memory: mc_crc32c_copy(c, d, s, n) == (memcpy(d, s, n),
 * mc_crc32c_extend(c, s, n)). Where the CPU has AVX-512 and VPCLMULQDQ each 64-byte block is
 * loaded once, stored and folded into the CRC (mc_crc32c_copy_folds() says so); elsewhere, and
 * for values under 512 bytes, it is mc_crc32c_copy_chunked. */
uint32_t mc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);
/* The same result, 32 KiB at a time: copied, then checksummed while in L1. */
uint32_t mc_crc32c_copy_chunked(uint32_t crc, void *dst, const void *src, size_t len);
/* Whether mc_crc32c_copy folds (the CPU has AVX-512 and VPCLMULQDQ), for the tests and bench. */
bool mc_crc32c_copy_folds(void);
/* A slicing-by-8 table implementation, independent of ISA-L: the tests' and bench's reference. */
uint32_t mc_crc32c_extend_sw(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
