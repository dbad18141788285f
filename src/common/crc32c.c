/* crc32c.c - see crc32c.h. */
#include "common/crc32c.h"

#include <immintrin.h>
#include <isa-l/crc.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u           /* reflected Castagnoli polynomial */
#define POLY_NORMAL 0x11edc6f41ull /* the same polynomial, x^32 included, highest degree left */

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

uint32_t mc_crc32c_copy_chunked(uint32_t crc, void *dst, const void *src, size_t len)
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

/* ---- one-pass copy and CRC: carry-less multiply folding ----------------------------------------
 *
 * Each 64-byte block is loaded once, stored to the destination and folded into one of four
 * 512-bit accumulators (four 128-bit lanes each). Folding a 16-byte lane X = H:L (H its first 8
 * bytes) forward by D bytes replaces it with H*(x^(8D+64) mod P) + L*(x^(8D) mod P), which is
 * congruent to X*x^(8D) and fits in 128 bits; XORed into the 16 bytes D further on, the message
 * keeps its CRC. In the reflected bit order of the loads a carry-less product comes out one bit
 * short of the 128-bit register, so the constants are taken one degree lower: x^(8D+63) and
 * x^(8D-1). They are computed here, not tabled. The last 16 bytes left after folding every lane
 * onto them have the CRC register of everything folded, taken with crc32_iscsi from 0. */

#define FOLD_BLOCK 256 /* four 64-byte accumulators */
/* Shorter values take the chunked copy: at 256 bytes it was about 10% faster, from 512 the fold
 * is (mooncake_bench crc). */
#define FOLD_MIN (2 * FOLD_BLOCK)

/* x^n mod P, highest degree left (bit k = coefficient of x^k) */
static uint64_t xpow_mod(unsigned n)
{
    uint64_t r = 1;
    while (n--) {
        r <<= 1;
        if (r & (1ull << 32))
            r ^= POLY_NORMAL;
    }
    return r;
}

/* a polynomial of degree < 64 in the loads' reflected order (bit i = coefficient of x^(63-i)) */
static uint64_t reflect64(uint64_t p)
{
    uint64_t r = 0;
    for (int k = 0; k < 64; k++)
        if (p >> k & 1)
            r |= 1ull << (63 - k);
    return r;
}

/* the (H, L) constants folding a 16-byte lane D bytes forward: lane 0 multiplies H, lane 1 L */
struct fold_k {
    uint64_t h, l;
};
static struct fold_k g_k256, g_k64, g_k48, g_k32, g_k16;
static bool g_fold_ok;
static pthread_once_t g_fold_once = PTHREAD_ONCE_INIT;

static struct fold_k fold_k(unsigned d)
{
    return (struct fold_k){reflect64(xpow_mod(8 * d + 63)), reflect64(xpow_mod(8 * d - 1))};
}

static void fold_init(void)
{
    g_k256 = fold_k(256);
    g_k64 = fold_k(64);
    g_k48 = fold_k(48);
    g_k32 = fold_k(32);
    g_k16 = fold_k(16);
    __builtin_cpu_init();
    g_fold_ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
}

#define FOLD_TARGET __attribute__((target("avx512f,vpclmulqdq")))

FOLD_TARGET static inline __m512i kvec(struct fold_k k)
{
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)k.l, (long long)k.h));
}

/* x folded forward by k's distance and XORed onto y */
FOLD_TARGET static inline __m512i fold_onto(__m512i x, __m512i k, __m512i y)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}

/* Copies n bytes (a non-zero multiple of FOLD_BLOCK) and returns the CRC register (not inverted)
 * after them, starting from reg. */
FOLD_TARGET static uint32_t fold_copy(uint32_t reg, uint8_t *d, const uint8_t *s, size_t n)
{
    const __m512i k256 = kvec(g_k256), k64 = kvec(g_k64);
    __m512i x0 = _mm512_loadu_si512(s), x1 = _mm512_loadu_si512(s + 64);
    __m512i x2 = _mm512_loadu_si512(s + 128), x3 = _mm512_loadu_si512(s + 192);
    _mm512_storeu_si512(d, x0);
    _mm512_storeu_si512(d + 64, x1);
    _mm512_storeu_si512(d + 128, x2);
    _mm512_storeu_si512(d + 192, x3);
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)reg)));
    for (size_t off = FOLD_BLOCK; off < n; off += FOLD_BLOCK) {
        __m512i y0 = _mm512_loadu_si512(s + off), y1 = _mm512_loadu_si512(s + off + 64);
        __m512i y2 = _mm512_loadu_si512(s + off + 128), y3 = _mm512_loadu_si512(s + off + 192);
        _mm512_storeu_si512(d + off, y0);
        _mm512_storeu_si512(d + off + 64, y1);
        _mm512_storeu_si512(d + off + 128, y2);
        _mm512_storeu_si512(d + off + 192, y3);
        x0 = fold_onto(x0, k256, y0);
        x1 = fold_onto(x1, k256, y1);
        x2 = fold_onto(x2, k256, y2);
        x3 = fold_onto(x3, k256, y3);
    }
    x1 = fold_onto(x0, k64, x1);
    x2 = fold_onto(x1, k64, x2);
    x3 = fold_onto(x2, k64, x3);
    /* x3's lanes 0..2 fold 48, 32 and 16 bytes forward onto lane 3 */
    const __m512i kl = _mm512_inserti32x4(
        _mm512_inserti32x4(
            _mm512_inserti32x4(_mm512_setzero_si512(),
                               _mm_set_epi64x((long long)g_k48.l, (long long)g_k48.h), 0),
            _mm_set_epi64x((long long)g_k32.l, (long long)g_k32.h), 1),
        _mm_set_epi64x((long long)g_k16.l, (long long)g_k16.h), 2);
    __m512i t = fold_onto(x3, kl, _mm512_setzero_si512());
    __m128i v = _mm_xor_si128(_mm512_extracti32x4_epi32(x3, 3), _mm512_extracti32x4_epi32(t, 0));
    v = _mm_xor_si128(
        v, _mm_xor_si128(_mm512_extracti32x4_epi32(t, 1), _mm512_extracti32x4_epi32(t, 2)));
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)(void *)last, v);
    return crc32_iscsi(last, sizeof(last), 0);
}

uint32_t mc_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
    pthread_once(&g_fold_once, fold_init);
    if (!g_fold_ok || len < FOLD_MIN)
        return mc_crc32c_copy_chunked(crc, dst, src, len);
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t n = len - len % FOLD_BLOCK;
    uint32_t reg = fold_copy(~crc, d, s, n);
    d += n;
    s += n;
    len -= n;
    memcpy(d, s, len); /* under FOLD_BLOCK bytes */
    if (len)
        reg = crc32_iscsi(d, (int)len, reg);
    return ~reg;
}

bool mc_crc32c_copy_folds(void)
{
    pthread_once(&g_fold_once, fold_init);
    return g_fold_ok;
}
