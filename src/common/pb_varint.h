/*
 * pb_varint.h - protobuf's base-128 varint, written by hand: the master's hand-written replies
 * (master/service_encode.c), the bench's request bodies (tools/bench_master_enc.c) and the
 * tests that build bodies byte by byte share these two.
 */
#ifndef MC_COMMON_PB_VARINT_H
#define MC_COMMON_PB_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes v takes as a varint (1..10). */
static inline size_t mc_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writes v at p as a varint; returns the bytes written. */
static inline size_t mc_varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

#endif
