/* crc32c.c - see crc32c.h. */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t g_table[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_hw;

/*
 * The hardware path runs three independent crc32 chains over three adjacent lanes of LANE bytes
 * (the instruction has a latency of three cycles and a throughput of one per cycle, so one
 * chain uses a third of it), then joins them: the CRC register is linear, so
 * reg(A || B) = shift(reg(A), |B|) ^ reg_from_zero(B), where shift appends |B| zero bytes.
 * g_shift[k][b] is that operator for LANE zero bytes applied to byte b at position k of the
 * register, so a shift is four lookups.
 */
#define LANE 8192u
static uint32_t g_shift[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (int i = 0; vec; vec >>= 1, i++)
        if (vec & 1)
            sum ^= mat[i];
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        sq[n] = gf2_times(mat, mat[n]);
}

static void shift_init(void)
{
    uint32_t a[32], b[32];
    a[0] = POLY; /* the operator for one zero bit */
    for (int n = 1; n < 32; n++)
        a[n] = 1u << (n - 1);
    gf2_square(b, a); /* 2 bits */
    gf2_square(a, b); /* 4 bits */
    gf2_square(b, a); /* 1 byte */
    for (uint32_t bytes = 1; bytes < LANE; bytes <<= 1) {
        gf2_square(a, b);
        memcpy(b, a, sizeof(a));
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++)
            g_shift[k][v] = gf2_times(b, v << (8 * k));
}

static inline uint32_t shift_lane(uint32_t crc)
{
    return g_shift[0][crc & 0xff] ^ g_shift[1][(crc >> 8) & 0xff] ^ g_shift[2][(crc >> 16) & 0xff] ^
           g_shift[3][crc >> 24];
}

static void crc32c_init(void)
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
    shift_init();
#if defined(__x86_64__)
    __builtin_cpu_init();
    g_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t mc_crc32c_extend_sw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    pthread_once(&g_once, crc32c_init);
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

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *data,
                                                            size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (len >= 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (const uint8_t *end = p + LANE; p < end; p += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p, 8);
            memcpy(&w1, p + LANE, 8);
            memcpy(&w2, p + 2 * LANE, 8);
            c = __builtin_ia32_crc32di(c, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        c = shift_lane((uint32_t)c) ^ (uint32_t)c1;
        c = shift_lane((uint32_t)c) ^ (uint32_t)c2;
        p += 2 * LANE;
        len -= 3 * LANE;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
/* The copy fused with the CRC: the same three chains, each 8-byte word stored to dst right
 * after it is loaded and folded in, so the bytes cross the memory bus once. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_copy_hw(uint32_t crc, uint8_t *d,
                                                                 const uint8_t *p, size_t len)
{
    uint64_t c = ~crc;
    while (len >= 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (const uint8_t *end = p + LANE; p < end; p += 8, d += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p, 8);
            memcpy(&w1, p + LANE, 8);
            memcpy(&w2, p + 2 * LANE, 8);
            c = __builtin_ia32_crc32di(c, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
            memcpy(d, &w0, 8);
            memcpy(d + LANE, &w1, 8);
            memcpy(d + 2 * LANE, &w2, 8);
        }
        c = shift_lane((uint32_t)c) ^ (uint32_t)c1;
        c = shift_lane((uint32_t)c) ^ (uint32_t)c2;
        p += 2 * LANE;
        d += 2 * LANE;
        len -= 3 * LANE;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        memcpy(d, &w, 8);
        p += 8;
        d += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) {
        c32 = __builtin_ia32_crc32qi(c32, *p);
        *d++ = *p++;
    }
    return ~c32;
}
#endif

int mc_crc32c_hw_available(void)
{
    pthread_once(&g_once, crc32c_init);
    return g_hw;
}

uint32_t mc_crc32c_extend(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&g_once, crc32c_init);
#if defined(__x86_64__)
    if (g_hw)
        return crc32c_hw(crc, data, len);
#endif
    return mc_crc32c_extend_sw(crc, data, len);
}

uint32_t mc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    pthread_once(&g_once, crc32c_init);
#if defined(__x86_64__)
    if (g_hw)
        return crc32c_copy_hw(crc, dst, src, len);
#endif
    if (len)
        memcpy(dst, src, len);
    return mc_crc32c_extend_sw(crc, dst, len);
}
