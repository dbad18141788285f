/*
 * rdma_plan.c - slice planning and the connection message of the RDMA transport (rdma_plan.h).
 */
#include <string.h>

#include "client/rdma_plan.h"
#include "common/wire.h"
#include "mooncake/errors.h"

static void put_u64(uint8_t *p, uint64_t v)
{
    mc_wire_put_u32(p, (uint32_t)v);
    mc_wire_put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)mc_wire_get_u32(p) | (uint64_t)mc_wire_get_u32(p + 4) << 32;
}

size_t mc_rdma_slice_count(uint64_t len, uint32_t slice)
{
    if (len == 0 || slice == 0)
        return 0;
    uint64_t full = len / slice, tail = len % slice;
    if (tail && (full == 0 || tail >= slice / 4))
        full++;
    return (size_t)full;
}

void mc_rdma_slice_at(uint64_t len, uint32_t slice, size_t i, uint64_t *off, uint32_t *n)
{
    size_t count = mc_rdma_slice_count(len, slice);
    *off = (uint64_t)i * slice;
    *n = i + 1 < count ? slice : (uint32_t)(len - *off); /* the last takes whatever is left */
}

size_t mc_rdma_conn_msg_len(uint8_t kind)
{
    switch (kind) {
    case MC_RDMA_CONN_REQUEST:
    case MC_RDMA_CONN_ACCEPT:
        return MC_RDMA_CONN_MSG_LEN;
    case MC_RDMA_CONN_HELLO:
        return MC_RDMA_CONN_MSG_LEN + MC_RDMA_CONN_NONCE;
    case MC_RDMA_CONN_CHALLENGE:
        return MC_RDMA_CONN_MSG_LEN + MC_RDMA_CONN_NONCE + MC_RDMA_CONN_MAC;
    case MC_RDMA_CONN_PROVE:
        return MC_RDMA_CONN_MSG_LEN + MC_RDMA_CONN_MAC;
    default:
        return 0;
    }
}

size_t mc_rdma_conn_msg_encode(const struct mc_rdma_conn_msg *m, uint8_t *out)
{
    size_t len = mc_rdma_conn_msg_len(m->kind);
    mc_wire_put_u32(out, MC_RDMA_CONN_MAGIC);
    out[4] = MC_RDMA_CONN_VERSION;
    out[5] = m->kind;
    out[6] = out[7] = 0;
    put_u64(out + 8, m->client_id.hi);
    put_u64(out + 16, m->client_id.lo);
    uint8_t *p = out + MC_RDMA_CONN_MSG_LEN;
    if (m->kind == MC_RDMA_CONN_HELLO || m->kind == MC_RDMA_CONN_CHALLENGE) {
        memcpy(p, m->nonce, MC_RDMA_CONN_NONCE);
        p += MC_RDMA_CONN_NONCE;
    }
    if (m->kind == MC_RDMA_CONN_CHALLENGE || m->kind == MC_RDMA_CONN_PROVE)
        memcpy(p, m->mac, MC_RDMA_CONN_MAC);
    return len;
}

int mc_rdma_conn_msg_decode(const void *buf, size_t len, struct mc_rdma_conn_msg *m)
{
    const uint8_t *p = buf;
    memset(m, 0, sizeof(*m));
    if (!p || len < MC_RDMA_CONN_MSG_LEN)
        return MC_ERR_INVALID_PARAMS;
    size_t need = mc_rdma_conn_msg_len(p[5]);
    if (mc_wire_get_u32(p) != MC_RDMA_CONN_MAGIC || p[4] != MC_RDMA_CONN_VERSION)
        return MC_ERR_INVALID_PARAMS;
    if (!need || len < need || p[6] || p[7])
        return MC_ERR_INVALID_PARAMS;
    m->kind = p[5];
    m->client_id.hi = get_u64(p + 8);
    m->client_id.lo = get_u64(p + 16);
    if (mc_id_is_zero(m->client_id)) {
        memset(m, 0, sizeof(*m));
        return MC_ERR_INVALID_PARAMS;
    }
    const uint8_t *q = p + MC_RDMA_CONN_MSG_LEN;
    if (m->kind == MC_RDMA_CONN_HELLO || m->kind == MC_RDMA_CONN_CHALLENGE) {
        memcpy(m->nonce, q, MC_RDMA_CONN_NONCE);
        q += MC_RDMA_CONN_NONCE;
    }
    if (m->kind == MC_RDMA_CONN_CHALLENGE || m->kind == MC_RDMA_CONN_PROVE)
        memcpy(m->mac, q, MC_RDMA_CONN_MAC);
    return 0;
}
