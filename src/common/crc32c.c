/* crc32c.c - see crc32c.h. */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t g_table[8][256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_hw;

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
