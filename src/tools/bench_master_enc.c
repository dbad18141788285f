/*
 * bench_master_enc.c - hand encoders of `mooncake_bench master`'s request bodies
 * (bench_master_enc.h): the generated packer's bytes, written without its descriptor walk.
 */
#include "tools/bench_master_enc.h"

#include <string.h>

#include "common/pb_varint.h"

size_t mc_bm_enc_u64_dec(uint8_t *p, uint64_t v, int width)
{
    uint8_t tmp[20];
    int n = 0;
    do {
        tmp[n++] = (uint8_t)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n < width && n < (int)sizeof(tmp))
        tmp[n++] = '0';
    for (int i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return (size_t)n;
}

/* field `fno` as a length-delimited field: tag, length, bytes */
static size_t put_bytes_field(uint8_t *p, unsigned fno, const void *b, size_t len)
{
    size_t n = 0;
    p[n++] = (uint8_t)(fno << 3 | 2);
    n += mc_varint_put(p + n, len);
    memcpy(p + n, b, len);
    return n + len;
}

size_t mc_bm_enc_keys(uint8_t *out, const char *const *keys, const size_t *lens, size_t n)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += put_bytes_field(out + off, 1, keys[i], lens[i]);
    return off;
}

size_t mc_bm_enc_put(uint8_t *out, int end, uint64_t hi, uint64_t lo, const char *key, size_t klen,
                     uint64_t value_length)
{
    size_t off = 0;
    /* client_id (field 1, a Uuid): its proto3 fields hi = 1, lo = 2 when not zero. The field
     * itself is written even when empty: the generated packer writes a set message pointer. */
    size_t ulen = (hi ? 1 + mc_varint_size(hi) : 0) + (lo ? 1 + mc_varint_size(lo) : 0);
    out[off++] = 1 << 3 | 2;
    off += mc_varint_put(out + off, ulen);
    if (hi) {
        out[off++] = 1 << 3 | 0;
        off += mc_varint_put(out + off, hi);
    }
    if (lo) {
        out[off++] = 2 << 3 | 0;
        off += mc_varint_put(out + off, lo);
    }
    if (klen)
        off += put_bytes_field(out + off, 2, key, klen);
    if (!end && value_length) {
        out[off++] = 3 << 3 | 0;
        off += mc_varint_put(out + off, value_length);
    }
    return off;
}
