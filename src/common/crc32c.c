/* crc32c.c - see crc32c.h. */
#include "common/crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

/* mc_crc32c_copy's step: a chunk is copied, then its CRC is taken while it is still in L1. */
#define COPY_CHUNK (32u << 10)
/* crc32_iscsi takes an int length. */
#define ISAL_MAX ((size_t)1 << 30)

static uint32_t g_table[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        g_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
}

uint32_t mc_crc32c_extend_sw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    pthread_once(&g_once, table_init);
    crc = ~crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = g_table[7][w & 0xff] ^ g_table[6][(w >> 8) & 0xff] ^ g_table[5][(w >> 16) & 0xff] ^
              g_table[4][(w >> 24) & 0xff] ^ g_table[3][(w >> 32) & 0xff] ^
              g_table[2][(w >> 40) & 0xff] ^ g_table[1][(w >> 48) & 0xff] ^ g_table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ g_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

/* crc32_iscsi neither inverts the register on entry nor on exit; the CRC-32C value does both. */
uint32_t mc_crc32c_extend(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t reg = ~crc;
    while (len) {
        size_t k = len < ISAL_MAX ? len : ISAL_MAX;
        reg = crc32_iscsi((unsigned char *)(uintptr_t)p, (int)k, reg);
        p += k;
        len -= k;
    }
    return ~reg;
}

uint32_t mc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    while (len) {
        size_t k = len < COPY_CHUNK ? len : COPY_CHUNK;
        memcpy(d, s, k);
        crc = mc_crc32c_extend(crc, d, k);
        d += k;
        s += k;
        len -= k;
    }
    return crc;
}
