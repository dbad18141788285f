/*
 * service_wire.c - finds strings holding a NUL in a request body (see service_wire.h).
 *
 * protobuf-c ends a decoded string at its first NUL, so the wire key "a\0b" would reach the core
 * as the key "a" (another object). Keys never hold a NUL (DESIGN.md), so the raw body is
 * scanned for the key field's occurrences and one holding a NUL is given length 0, which the
 * core answers with INVALID_KEY (a batch: that item only). The body has been decoded already,
 * so it is well-formed; the scan stops quietly on anything it does not expect.
 */
#include "master/service_wire.h"

#include <string.h>

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* Next field of [*p, end): its number, and for a length-delimited one its bytes. */
static bool wire_field(const uint8_t **p, const uint8_t *end, uint32_t *num, const uint8_t **data,
                       size_t *len)
{
    uint64_t tag, v;
    if (!wire_varint(p, end, &tag))
        return false;
    *num = (uint32_t)(tag >> 3);
    *data = NULL;
    *len = 0;
    switch (tag & 7) {
    case 0:
        return wire_varint(p, end, &v);
    case 1:
    case 5: {
        size_t w = (tag & 7) == 1 ? 8 : 4;
        if ((size_t)(end - *p) < w)
            return false;
        *p += w;
        return true;
    }
    case 2:
        if (!wire_varint(p, end, &v) || v > (uint64_t)(end - *p))
            return false;
        *data = *p;
        *len = (size_t)v;
        *p += v;
        return true;
    default:
        return false;
    }
}

/* Whether the last occurrence of string field num in [p, p + len) holds a NUL. */
static bool wire_str_has_nul(const uint8_t *p, size_t len, uint32_t num)
{
    const uint8_t *end = p + len, *d;
    uint32_t f;
    size_t n;
    bool nul = false;
    while (p < end && wire_field(&p, end, &f, &d, &n))
        if (f == num && d)
            nul = memchr(d, 0, n) != NULL;
    return nul;
}

void mc_svc_mark_nul_strings(const uint8_t *p, size_t blen, uint32_t num, uint32_t sub, bool single,
                             struct mc_key_ref *keys, size_t n)
{
    if (!p || blen == 0)
        return;
    const uint8_t *d, *end = p + blen;
    uint32_t f;
    size_t len, i = 0;
    bool nul = false;
    while (p < end && i < n && wire_field(&p, end, &f, &d, &len)) {
        if (f != num || !d)
            continue;
        bool this_nul = sub ? wire_str_has_nul(d, len, sub) : memchr(d, 0, len) != NULL;
        /* a singular string: its last occurrence counts; a singular message merges them all */
        nul = single && sub ? nul || this_nul : this_nul;
        if (!single) {
            if (nul)
                keys[i].len = 0;
            i++;
        }
    }
    if (single && nul)
        keys[0].len = 0;
}
