/* wire.c - frame header codec and method names; see wire.h. */
#include "common/wire.h"

#include <stdlib.h>
#include <string.h>

#include "mooncake/errors.h"

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void put_u64(uint8_t *p, uint64_t v)
{
    mc_wire_put_u32(p, (uint32_t)v);
    mc_wire_put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)mc_wire_get_u32(p) | (uint64_t)mc_wire_get_u32(p + 4) << 32;
}

void mc_wire_header_init(struct mc_wire_header *h, uint8_t kind, uint16_t method,
                         uint64_t request_id, int32_t status, uint32_t body_length)
{
    memset(h, 0, sizeof(*h));
    h->magic = MC_WIRE_MAGIC;
    h->version = MC_WIRE_VERSION;
    h->kind = kind;
    h->method = method;
    h->status = status;
    h->request_id = request_id;
    h->body_length = body_length;
}

void mc_wire_encode_header(const struct mc_wire_header *h, uint8_t out[MC_WIRE_HEADER_SIZE])
{
    mc_wire_put_u32(out + 0, h->magic);
    put_u16(out + 4, h->version);
    out[6] = h->kind;
    out[7] = h->flags;
    put_u16(out + 8, h->method);
    put_u16(out + 10, h->reserved0);
    mc_wire_put_u32(out + 12, (uint32_t)h->status);
    put_u64(out + 16, h->request_id);
    mc_wire_put_u32(out + 24, h->body_length);
    mc_wire_put_u32(out + 28, h->reserved1);
}

void mc_wire_decode_header(const uint8_t in[MC_WIRE_HEADER_SIZE], struct mc_wire_header *h)
{
    h->magic = mc_wire_get_u32(in + 0);
    h->version = get_u16(in + 4);
    h->kind = in[6];
    h->flags = in[7];
    h->method = get_u16(in + 8);
    h->reserved0 = get_u16(in + 10);
    h->status = (int32_t)mc_wire_get_u32(in + 12);
    h->request_id = get_u64(in + 16);
    h->body_length = mc_wire_get_u32(in + 24);
    h->reserved1 = mc_wire_get_u32(in + 28);
}

enum mc_wire_check mc_wire_validate(const struct mc_wire_header *h, uint32_t max_frame_bytes)
{
    if (h->magic != MC_WIRE_MAGIC)
        return MC_WIRE_BAD_MAGIC;
    if (h->version != MC_WIRE_VERSION)
        return MC_WIRE_BAD_VERSION;
    if (h->kind != MC_WIRE_REQUEST && h->kind != MC_WIRE_RESPONSE)
        return MC_WIRE_BAD_KIND;
    if (h->body_length > max_frame_bytes)
        return MC_WIRE_TOO_LARGE;
    return MC_WIRE_OK;
}

const char *mc_wire_check_name(enum mc_wire_check c)
{
    switch (c) {
    case MC_WIRE_OK:
        return "ok";
    case MC_WIRE_BAD_MAGIC:
        return "bad_magic";
    case MC_WIRE_BAD_VERSION:
        return "bad_version";
    case MC_WIRE_BAD_KIND:
        return "bad_kind";
    case MC_WIRE_TOO_LARGE:
        return "too_large";
    }
    return "unknown";
}

const char *mc_method_name(uint16_t method)
{
#define NAME_MASTER(id, num, name, handler)                                                        \
    case num:                                                                                      \
        return name;
#define NAME_OTHER(id, num, name)                                                                  \
    case num:                                                                                      \
        return name;
    switch (method) {
        MC_METHODS(NAME_MASTER, NAME_OTHER)
    default:
        break;
    }
#undef NAME_MASTER
#undef NAME_OTHER
    if (method >= MC_METHOD_TEST_FIRST && method <= MC_METHOD_TEST_LAST)
        return "Test";
    return NULL;
}

int mc_wire_peer_split(const uint8_t *body, size_t body_len, const uint8_t **ctl, size_t *ctl_len,
                       const uint8_t **payload, size_t *payload_len)
{
    if (body_len < MC_WIRE_PEER_PREFIX)
        return MC_ERR_DESERIALIZE_FAIL;
    uint32_t c = mc_wire_get_u32(body);
    if ((size_t)c > body_len - MC_WIRE_PEER_PREFIX)
        return MC_ERR_DESERIALIZE_FAIL;
    *ctl = body + MC_WIRE_PEER_PREFIX;
    *ctl_len = c;
    *payload = body + MC_WIRE_PEER_PREFIX + c;
    *payload_len = body_len - MC_WIRE_PEER_PREFIX - c;
    return 0;
}

int mc_wire_parse_proto_version(const char *version, uint32_t *out)
{
    if (!version)
        return -1;
    const char *p = strstr(version, "proto=");
    if (!p)
        return -1;
    p += 6;
    if (*p < '0' || *p > '9')
        return -1;
    char *end = NULL;
    unsigned long v = strtoul(p, &end, 10);
    if ((*end != '\0' && *end != ' ') || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}
