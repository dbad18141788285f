/*
 * crc32c.h - CRC-32C (Castagnoli), as used for object values and disk records.
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time) and a
 * slicing-by-8 table otherwise. mc_crc32c_extend() continues a running CRC, so
 * mc_crc32c(a||b) == mc_crc32c_extend(mc_crc32c(a), b).
 */
#ifndef MC_COMMON_CRC32C_H
#define MC_COMMON_CRC32C_H

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
 * them, in one pass over the bytes: mc_crc32c_copy(c, d, s, n) == (memcpy(d, s, n),
 * mc_crc32c_extend(c, s, n)). */
uint32_t mc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);
/* The portable implementation, exposed so tests can compare it with the hardware one. */
uint32_t mc_crc32c_extend_sw(uint32_t crc, const void *data, size_t len);
/* 1 when the hardware path is in use. */
int mc_crc32c_hw_available(void);

#ifdef __cplusplus
}
#endif
#endif
