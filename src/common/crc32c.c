/* crc32c.c - see crc32c.h. */
#include "common/crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

/* mc_crc32c_copy's step: a chunk is copied, then its CRC is taken while it is still in L1, in
 * pieces, each piece followed by prefetches of its share of the next chunk's source. */
#define COPY_CHUNK (16u << 10)
#define CRC_PIECE (4u << 10)
#define LINE 64u
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

/* Without the prefetches a chunk's CRC leaves the memory bus idle: the source of a served
 * value is cold (out of every cache), so the copy of each chunk would wait on DRAM with nothing
 * in flight while the previous chunk's CRC ran. Prefetching the next chunk during this one's
 * CRC overlaps the two (the hardware prefetcher sees only a stream that stops and starts). */
uint32_t mc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    while (len) {
        size_t k = len < COPY_CHUNK ? len : COPY_CHUNK;
        memcpy(d, s, k);
        const uint8_t *next = s + k;
        size_t nlen = len - k < COPY_CHUNK ? len - k : COPY_CHUNK;
        size_t pieces = (k + CRC_PIECE - 1) / CRC_PIECE;
        size_t share = (nlen + pieces - 1) / pieces, pf = 0;
        for (size_t off = 0; off < k; off += CRC_PIECE) {
            size_t end = pf + share < nlen ? pf + share : nlen;
            for (; pf < end; pf += LINE)
                __builtin_prefetch(next + pf, 0, 3);
            crc = mc_crc32c_extend(crc, d + off, k - off < CRC_PIECE ? k - off : CRC_PIECE);
        }
        d += k;
        s += k;
        len -= k;
    }
    return crc;
}
