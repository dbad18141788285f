/*
 * service_wire.c - finds strings holding a NUL in a request body (see service_wire.h).
 *
 * protobuf-c ends a decoded string at its first NUL, so the wire key "a\0b" would reach the core
 * as the key "a" (another object). Keys never hold a NUL (DESIGN.md), so the raw body is
 * scanned for the key field's occurrences and one holding a NUL is given length 0, which the
 * core answers with INVALID_KEY (a batch: that item only). The body has been decoded already,
 * so it is well-formed; the scan reads it with the decoders' field reader (pb_field) and stops
 * quietly on anything that reader refuses.
 */
#include "master/service_wire.h"

#include <string.h>

/* ---- the field reader (protobuf-c's limits): the NUL scan and the decoders ------------- */

/* protobuf-c's limits, which decide what it refuses: a tag of at most 5 bytes whose field
 * number is not 0, a varint of at most 10 bytes, a length prefix of at most 5 bytes and INT_MAX,
 * wire types 0, 1, 2 and 5 (groups are refused). */
static const char *pb_varint(const uint8_t **p, const uint8_t *end, unsigned max, uint64_t *v)
{
    *v = 0;
    for (unsigned i = 0; i < max; i++) {
        if (*p == end)
            return "truncated varint";
        uint8_t b = *(*p)++;
        if (i < 10)
            *v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80))
            return NULL;
    }
    return "varint too long";
}

/* The next field: its number and wire type, its bytes for a length-delimited one, its value
 * for a varint. */
static const char *pb_field(const uint8_t **p, const uint8_t *end, uint32_t *num, unsigned *wt,
                            const uint8_t **data, size_t *len, uint64_t *val)
{
    uint64_t tag;
    const char *why = pb_varint(p, end, 5, &tag);
    if (why)
        return why;
    if ((tag >> 3) == 0)
        return "field number 0";
    *num = (uint32_t)(tag >> 3);
    *wt = (unsigned)(tag & 7);
    *data = NULL;
    *len = 0;
    *val = 0;
    switch (*wt) {
    case 0:
        return pb_varint(p, end, 10, val);
    case 1:
    case 5: {
        size_t w = *wt == 1 ? 8 : 4;
        if ((size_t)(end - *p) < w)
            return "truncated fixed-width field";
        *p += w;
        return NULL;
    }
    case 2: {
        uint64_t n;
        if ((why = pb_varint(p, end, 5, &n)))
            return why;
        if (n > 0x7fffffff || n > (uint64_t)(end - *p))
            return "length past the body";
        *data = *p;
        *len = (size_t)n;
        *p += n;
        return NULL;
    }
    default:
        return "unsupported wire type";
    }
}

/* Whether the last occurrence of string field num in [p, p + len) holds a NUL. */
static bool wire_str_has_nul(const uint8_t *p, size_t len, uint32_t num)
{
    const uint8_t *end = p + len, *d;
    uint32_t f;
    unsigned wt;
    size_t n;
    uint64_t v;
    bool nul = false;
    while (p < end && !pb_field(&p, end, &f, &wt, &d, &n, &v))
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
    unsigned wt;
    size_t len, i = 0;
    uint64_t v;
    bool nul = false;
    while (p < end && i < n && !pb_field(&p, end, &f, &wt, &d, &len, &v)) {
        if (f != num || !d)
            continue;
        nul = sub ? wire_str_has_nul(d, len, sub) : memchr(d, 0, len) != NULL;
        /* a singular field: its last occurrence counts (protobuf-c replaces, even a message) */
        if (!single) {
            if (nul)
                keys[i].len = 0;
            i++;
        }
    }
    if (single && nul)
        keys[0].len = 0;
}

/* ---- single-key requests, decoded in place ---------------------------------------------- */

/* One Uuid (hi = 1, lo = 2, uint64 varints), the last of each field counting. */
static const char *pb_uuid(const uint8_t *p, size_t len, struct mc_id *id)
{
    const uint8_t *end = p + len;
    while (p < end) {
        uint32_t num;
        unsigned wt;
        const uint8_t *d;
        size_t n;
        uint64_t v;
        const char *why = pb_field(&p, end, &num, &wt, &d, &n, &v);
        if (why)
            return why;
        if (num != 1 && num != 2)
            continue; /* unknown: skipped */
        if (wt != 0)
            return "wrong wire type for a uuid field";
        if (num == 1)
            id->hi = v;
        else
            id->lo = v;
    }
    return NULL;
}

const char *mc_svc_decode_key_request(const uint8_t *body, size_t len, uint32_t key_num,
                                      uint32_t client_num, struct mc_key_ref *key,
                                      struct mc_id *client)
{
    key->data = "";
    key->len = 0;
    if (client)
        client->hi = client->lo = 0;
    if (len == 0)
        return NULL; /* an empty body (it may come as NULL): every field at its default */
    const uint8_t *p = body, *end = body + len;
    while (p < end) {
        uint32_t num;
        unsigned wt;
        const uint8_t *d;
        size_t n;
        uint64_t v;
        const char *why = pb_field(&p, end, &num, &wt, &d, &n, &v);
        if (why)
            return why;
        if (num == key_num) {
            if (wt != 2)
                return "wrong wire type for the key";
            /* the last occurrence counts; one holding a NUL is no key (INVALID_KEY) */
            key->data = n ? (const char *)d : "";
            key->len = memchr(d, 0, n) ? 0 : n;
        } else if (client_num && num == client_num) {
            if (wt != 2)
                return "wrong wire type for the client id";
            /* the last occurrence counts whole, as in protobuf-c 1.4 (it does not merge) */
            struct mc_id id = {0, 0};
            if ((why = pb_uuid(d, n, &id)))
                return why;
            if (client)
                *client = id;
        }
    }
    return NULL;
}

/* ---- PutEndRequest / PutRevokeRequest, decoded in place --------------------------------- */

const char *mc_svc_decode_put_end(const uint8_t *body, size_t len, bool end,
                                  struct mc_svc_put_end_req *r)
{
    memset(r, 0, sizeof(*r));
    r->key.data = "";
    if (len == 0)
        return NULL; /* an empty body (it may come as NULL): every field at its default */
    const uint8_t *p = body, *end_p = body + len;
    while (p < end_p) {
        uint32_t num;
        unsigned wt;
        const uint8_t *d, *start = p;
        size_t n;
        uint64_t v;
        const char *why = pb_field(&p, end_p, &num, &wt, &d, &n, &v);
        if (why)
            return why;
        if (num == MC_SVC_PUT_END_KEY_FIELD) {
            if (wt != 2)
                return "wrong wire type for the key";
            r->key.data = n ? (const char *)d : ""; /* the last occurrence counts */
            r->key.len = memchr(d, 0, n) ? 0 : n;
        } else if (num == MC_SVC_PUT_END_CLIENT_FIELD) {
            if (wt != 2)
                return "wrong wire type for the client id";
            struct mc_id id = {0, 0}; /* the last occurrence counts whole (protobuf-c 1.4) */
            if ((why = pb_uuid(d, n, &id)))
                return why;
            r->client = id;
        } else if (end && num == MC_SVC_PUT_END_CRC_VALID_FIELD) {
            /* protobuf-c's bool takes any wire type and is true when any byte after the tag
             * (a length prefix too) has one of its seven payload bits set */
            uint64_t tag;
            pb_varint(&start, end_p, 5, &tag); /* start: now the first byte after the tag */
            bool b = false;
            for (; start < p; start++)
                b = b || (*start & 0x7f);
            r->crc_valid = b;
        } else if (num == MC_SVC_PUT_END_TYPE_FIELD || num == MC_SVC_PUT_END_VERSION_FIELD ||
                   (end && num == MC_SVC_PUT_END_CRC_FIELD)) {
            if (wt != 0)
                return "wrong wire type for a varint field";
            if (num == MC_SVC_PUT_END_TYPE_FIELD)
                r->replica_type = (int32_t)(uint32_t)v; /* an enum is an int32: no range check */
            else if (num == MC_SVC_PUT_END_VERSION_FIELD)
                r->version = v;
            else
                r->crc32c = (uint32_t)v;
        }
    }
    return NULL;
}
