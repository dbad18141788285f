/*
 * pb_budget.c - the pre-scan and the budgeted allocator of pb_budget.h.
 *
 * The pre-scan walks the protobuf wire format the way protobuf-c will: tag varint, then a
 * varint, 8 bytes, a length-delimited run or 4 bytes. A length-delimited field of a message type
 * is walked recursively with its own descriptor (its own per-field counts); a packed repeated
 * scalar counts each element. Nothing is allocated: per-field counts live on the stack.
 */
#include "common/pb_budget.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32
#define COUNTED_FIELDS 64  /* per-field counts kept for the first fields of a message */
#define CHUNK_OVERHEAD 16  /* malloc's bookkeeping per chunk, counted against the budget */
#define BUDGET_PER_TAG 128 /* scan record, pointer slot and sub-message per tag, roughly */
#define BUDGET_FLOOR (64u << 10)

struct scan {
    uint32_t max_repeated;
    uint64_t max_tags;
    uint64_t tags;
    const char *field;
    uint64_t count;
};

static bool read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && *pos < len; shift += 7) {
        uint8_t b = p[(*pos)++];
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Elements in a packed run of a repeated scalar field of this type. */
static uint64_t packed_count(ProtobufCType t, const uint8_t *p, size_t n)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return n / 4;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return n / 8;
    default: {
        uint64_t c = 0;
        for (size_t i = 0; i < n; i++)
            c += !(p[i] & 0x80);
        return c;
    }
    }
}

static bool is_scalar(ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES &&
           t != PROTOBUF_C_TYPE_MESSAGE;
}

static enum mc_pb_verdict scan_msg(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                                   size_t len, int depth, struct scan *s)
{
    if (depth > MAX_DEPTH)
        return MC_PB_MALFORMED;
    uint32_t counts[COUNTED_FIELDS];
    memset(counts, 0, sizeof(counts));
    size_t pos = 0;
    while (pos < len) {
        uint64_t tag, n = 0;
        if (!read_varint(p, len, &pos, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
            return MC_PB_MALFORMED;
        unsigned wt = (unsigned)(tag & 7);
        size_t start = pos, run = 0;
        switch (wt) {
        case 0:
            if (!read_varint(p, len, &pos, &n))
                return MC_PB_MALFORMED;
            break;
        case 1:
            if (len - pos < 8)
                return MC_PB_MALFORMED;
            pos += 8;
            break;
        case 5:
            if (len - pos < 4)
                return MC_PB_MALFORMED;
            pos += 4;
            break;
        case 2:
            if (!read_varint(p, len, &pos, &n) || n > len - pos)
                return MC_PB_MALFORMED;
            start = pos;
            run = (size_t)n;
            pos += run;
            break;
        default:
            return MC_PB_MALFORMED; /* groups: protobuf-c refuses them too */
        }
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        uint64_t elems = 1;
        if (f && f->label == PROTOBUF_C_LABEL_REPEATED && wt == 2 && is_scalar(f->type))
            elems = packed_count(f->type, p + start, run);
        s->tags += elems > 0 ? elems : 1;
        if (s->tags > s->max_tags) {
            s->field = NULL;
            s->count = s->tags;
            return MC_PB_TOO_MANY;
        }
        if (!f)
            continue; /* unknown field: counted, skipped */
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t idx = (size_t)(f - d->fields);
            if (idx < COUNTED_FIELDS) {
                uint64_t c = counts[idx] + elems;
                counts[idx] = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
                if (c > s->max_repeated) {
                    s->field = f->name;
                    s->count = c;
                    return MC_PB_TOO_MANY;
                }
            }
        }
        if (wt == 2 && f->type == PROTOBUF_C_TYPE_MESSAGE && f->descriptor) {
            enum mc_pb_verdict v = scan_msg(f->descriptor, p + start, run, depth + 1, s);
            if (v != MC_PB_OK)
                return v;
        }
    }
    return MC_PB_OK;
}

static void limits(const struct mc_pb_limits *lim, struct scan *s)
{
    memset(s, 0, sizeof(*s));
    s->max_repeated = lim && lim->max_repeated ? lim->max_repeated : MC_PB_DEFAULT_MAX_REPEATED;
    s->max_tags = lim && lim->max_tags ? lim->max_tags : 16ull * s->max_repeated + 4096;
}

enum mc_pb_verdict mc_pb_prescan(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                 size_t len, const struct mc_pb_limits *lim,
                                 struct mc_pb_report *rep)
{
    struct scan s;
    limits(lim, &s);
    enum mc_pb_verdict v = scan_msg(desc, data, len, 0, &s);
    if (rep) {
        memset(rep, 0, sizeof(*rep));
        rep->verdict = v;
        rep->field = s.field;
        rep->count = s.count;
        rep->tags = s.tags;
    }
    return v;
}

/* ---- the budgeted allocator ---------------------------------------------------------------- */

struct budget {
    size_t limit, used, peak;
    bool over;
};

static void *budget_alloc(void *data, size_t size)
{
    struct budget *b = data;
    if (size > b->limit || size + CHUNK_OVERHEAD > b->limit - b->used) {
        b->over = true;
        return NULL;
    }
    void *p = malloc(size);
    if (!p)
        return NULL;
    b->used += malloc_usable_size(p) + CHUNK_OVERHEAD;
    if (b->used > b->peak)
        b->peak = b->used;
    return p;
}

static void budget_free(void *data, void *p)
{
    struct budget *b = data;
    if (!p)
        return;
    size_t cost = malloc_usable_size(p) + CHUNK_OVERHEAD;
    b->used = cost > b->used ? 0 : b->used - cost;
    free(p);
}

ProtobufCMessage *mc_pb_unpack_bounded(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                       size_t len, const struct mc_pb_limits *lim,
                                       struct mc_pb_report *rep)
{
    struct mc_pb_report local;
    if (!rep)
        rep = &local;
    if (mc_pb_prescan(desc, data, len, lim, rep) != MC_PB_OK)
        return NULL;
    struct budget b = {0};
    size_t per_tag = lim && lim->tag_bytes ? lim->tag_bytes : BUDGET_PER_TAG;
    b.limit = 2 * len + per_tag * (size_t)rep->tags + BUDGET_FLOOR;
    ProtobufCAllocator a = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &a, len, data);
    rep->budget = b.limit;
    rep->peak = b.peak;
    if (!m)
        rep->verdict = b.over ? MC_PB_OVER_BUDGET : MC_PB_UNDECODABLE;
    return m;
}

const char *mc_pb_verdict_name(enum mc_pb_verdict v)
{
    switch (v) {
    case MC_PB_OK:
        return "ok";
    case MC_PB_MALFORMED:
        return "malformed";
    case MC_PB_TOO_MANY:
        return "too_many_elements";
    case MC_PB_OVER_BUDGET:
        return "over_decode_budget";
    case MC_PB_UNDECODABLE:
        return "undecodable";
    }
    return "?";
}
