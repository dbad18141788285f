/*
 * transport_tcp_batch.c - batch transfers over the tcp transport: one round trip per endpoint.
 *
 * A batch (mc_transport_batch) names many items, each a {segment, offset, endpoint, epoch} and
 * a buffer. Sent one by one, N small objects cost N round trips, each a wake-up on both sides.
 * Here the items are grouped by endpoint and each group travels as PeerBatchWrite /
 * PeerBatchRead requests (proto/peer.proto): a request carries up to MC_PEER_MAX_BATCH items
 * and up to CHUNK_SLICES slices' worth of bytes, so a group of small items is one request and
 * one reply. Every endpoint's requests go out (on its own pooled connection, up to `window`
 * outstanding) before any reply is read, so the peers serve their parts of a batch at the same
 * time; replies are then read endpoint by endpoint, each landing straight in the callers'
 * buffers (read) or giving one status per item (write).
 *
 * A write item may ask for the CRC32C of its bytes (a Put needs it for PutEnd): it is computed
 * right after the request carrying the item went out, while the peer receives and copies it,
 * so it costs no serial pass before the send. A read item may ask for the CRC32C of the bytes
 * it received (a Get checks it): it is taken piece by piece as they arrive, while they are in
 * cache, instead of in a pass over the value afterwards.
 *
 * An item larger than one slice gains nothing from grouping (its own transfer is already
 * pipelined slice by slice); it goes through the single transfer after the groups.
 *
 * Failures are per item: the peer's status for that slice (SEGMENT_NOT_FOUND, REPLICA_IS_GONE,
 * INVALID_PARAMS, ...), or the status of a refused request for all its items. A broken
 * connection or a malformed reply fails the items of that endpoint not yet answered with
 * TRANSFER_FAIL and closes the connection; a pooled connection found dead before any reply
 * (the peer closed it while idle) is replaced once and the endpoint's requests are sent again
 * (reads and writes of a range are idempotent). Other endpoints are not affected.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "client/peer_server.h"
#include "client/transport.h"
#include "client/transport_tcp_internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/net.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/peer.pb-c.h"

#define CHUNK_SLICES 4u          /* bytes per request: up to this many slices */
#define FRAME_SLACK (256u << 10) /* room for headers and control in a frame */

struct chunk {
    size_t first, count; /* a range of the group's items */
    uint64_t bytes;
    bool done;
};

/* One endpoint's share of the batch. */
struct group {
    const char *endpoint;
    size_t *idx; /* indices into items, in order */
    size_t n;
    struct chunk *chunks;
    size_t nchunks;
    struct mc_tcp_conn *conn;
    bool reused, any; /* connection from the pool; a reply arrived on it */
    bool refused;     /* a request was refused (stream in sync, but do not pool it) */
    bool retried;     /* a stale pooled connection was replaced already */
    uint64_t base_id; /* chunk k has request id base_id + k */
    size_t sent, got;
};

/* ---- requests ------------------------------------------------------------------------------ */

static int send_chunk(struct mc_transport *t, struct group *g, struct mc_xfer_item *items,
                      bool is_write, size_t k)
{
    const struct chunk *ch = &g->chunks[k];
    int rc = MC_ERR_INTERNAL_ERROR;
    Mc__PeerSlice *sl = calloc(ch->count, sizeof(*sl));
    Mc__PeerSlice **slp = calloc(ch->count, sizeof(*slp));
    Mc__Uuid *ids = calloc(ch->count, sizeof(*ids));
    struct iovec *iov = calloc(ch->count + 1, sizeof(*iov));
    uint8_t *head = NULL;
    if (!sl || !slp || !ids || !iov)
        goto out;
    uint64_t payload = 0;
    int niov = 1;
    for (size_t j = 0; j < ch->count; j++) {
        const struct mc_xfer_item *it = &items[g->idx[ch->first + j]];
        mc__uuid__init(&ids[j]);
        ids[j].hi = it->loc.segment_id.hi;
        ids[j].lo = it->loc.segment_id.lo;
        mc__peer_slice__init(&sl[j]);
        sl[j].segment_id = &ids[j];
        sl[j].offset = it->loc.offset;
        sl[j].length = it->len;
        sl[j].mount_epoch = it->loc.mount_epoch;
        slp[j] = &sl[j];
        if (is_write && it->len) {
            iov[niov++] = (struct iovec){it->buf, it->len};
            payload += it->len;
        }
    }
    size_t clen;
    if (is_write) {
        Mc__PeerBatchWriteRequest r = MC__PEER_BATCH_WRITE_REQUEST__INIT;
        r.n_slices = ch->count;
        r.slices = slp;
        clen = mc__peer_batch_write_request__get_packed_size(&r);
        head = malloc(MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen);
        if (!head)
            goto out;
        mc__peer_batch_write_request__pack(&r, head + MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX);
    } else {
        Mc__PeerBatchReadRequest r = MC__PEER_BATCH_READ_REQUEST__INIT;
        r.n_slices = ch->count;
        r.slices = slp;
        clen = mc__peer_batch_read_request__get_packed_size(&r);
        head = malloc(MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen);
        if (!head)
            goto out;
        mc__peer_batch_read_request__pack(&r, head + MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX);
    }
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST,
                        is_write ? MC_METHOD_PEER_BATCH_WRITE : MC_METHOD_PEER_BATCH_READ,
                        g->base_id + k, 0, (uint32_t)(MC_WIRE_PEER_PREFIX + clen + payload));
    mc_wire_encode_header(&h, head);
    mc_wire_put_u32(head + MC_WIRE_HEADER_SIZE, (uint32_t)clen);
    iov[0] = (struct iovec){head, MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen};
    mc_tcp_count_request(t);
    rc = SEND_IOV(mc_tcp_conn_fd(g->conn), h.method, iov, niov) ? MC_ERR_TRANSFER_FAIL : 0;
    /* the peer copies what it received while the checksums are computed here */
    for (size_t j = 0; rc == 0 && is_write && j < ch->count; j++) {
        const struct mc_xfer_item *it = &items[g->idx[ch->first + j]];
        if (it->crc)
            *it->crc = mc_crc32c(it->buf, it->len);
    }
out:
    free(sl);
    free(slp);
    free(ids);
    free(iov);
    free(head);
    return rc;
}

/* Sends the group's next requests while fewer than window are outstanding. */
static int fill_window(struct mc_transport *t, struct group *g, struct mc_xfer_item *items,
                       bool is_write)
{
    uint32_t window = mc_tcp_config(t)->window;
    while (g->sent < g->nchunks && g->sent - g->got < window) {
        int rc = send_chunk(t, g, items, is_write, g->sent);
        if (rc)
            return rc;
        g->sent++;
    }
    return 0;
}

/* ---- replies ------------------------------------------------------------------------------- */

static void chunk_status(struct group *g, struct mc_xfer_item *items, const struct chunk *ch,
                         int st)
{
    for (size_t j = 0; j < ch->count; j++)
        items[g->idx[ch->first + j]].status = st;
}

/* The control message of a reply body (after the u32 prefix): unpacked, or NULL. */
static ProtobufCMessage *recv_control(int fd, uint32_t body, const ProtobufCMessageDescriptor *d,
                                      uint32_t *rest)
{
    uint8_t pre[MC_WIRE_PEER_PREFIX];
    if (body < MC_WIRE_PEER_PREFIX || mc_tcp_recv_all(fd, pre, sizeof(pre)))
        return NULL;
    uint32_t clen = mc_wire_get_u32(pre);
    if (clen > body - MC_WIRE_PEER_PREFIX)
        return NULL;
    uint8_t *cbuf = malloc(clen ? clen : 1);
    if (!cbuf || mc_tcp_recv_all(fd, cbuf, clen)) {
        free(cbuf);
        return NULL;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, clen, cbuf);
    free(cbuf);
    *rest = body - MC_WIRE_PEER_PREFIX - clen;
    return m;
}

/* Reads one reply of g; 0, or TRANSFER_FAIL (the connection is unusable). */
static int recv_chunk(struct mc_transport *t, struct group *g, struct mc_xfer_item *items,
                      bool is_write)
{
    int fd = mc_tcp_conn_fd(g->conn);
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    if (mc_tcp_recv_all(fd, hb, sizeof(hb)))
        return MC_ERR_TRANSFER_FAIL;
    g->any = true;
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    if (mc_wire_conn_refusal(&h))
        return mc_wire_conn_refusal(&h); /* refused at accept (protected mode) */
    uint16_t want = is_write ? MC_METHOD_PEER_BATCH_WRITE : MC_METHOD_PEER_BATCH_READ;
    if (mc_wire_validate(&h, mc_tcp_config(t)->max_frame_bytes) != MC_WIRE_OK ||
        h.kind != MC_WIRE_RESPONSE || h.method != want || h.request_id < g->base_id ||
        h.request_id - g->base_id >= g->sent || g->chunks[h.request_id - g->base_id].done) {
        mc_warn("tcp", "bad batch reply from peer", "endpoint=%s method=%u id=%llu len=%u",
                g->endpoint, h.method, (unsigned long long)h.request_id, h.body_length);
        return MC_ERR_TRANSFER_FAIL;
    }
    struct chunk *ch = &g->chunks[h.request_id - g->base_id];
    if (h.status != 0) { /* the whole request refused: every item of it gets the status */
        if (mc_tcp_discard(fd, h.body_length))
            return MC_ERR_TRANSFER_FAIL;
        g->refused = true;
        chunk_status(g, items, ch, h.status < 0 ? h.status : MC_ERR_TRANSFER_FAIL);
        ch->done = true;
        g->got++;
        return 0;
    }
    uint32_t rest = 0;
    int rc = MC_ERR_TRANSFER_FAIL;
    if (is_write) {
        Mc__PeerBatchWriteResponse *r = (Mc__PeerBatchWriteResponse *)recv_control(
            fd, h.body_length, &mc__peer_batch_write_response__descriptor, &rest);
        if (r && rest == 0 && r->n_statuses == ch->count) {
            for (size_t j = 0; j < ch->count; j++) {
                int st = r->statuses[j];
                items[g->idx[ch->first + j]].status = st <= 0 ? st : MC_ERR_TRANSFER_FAIL;
            }
            ch->done = true;
            g->got++;
            rc = 0;
        }
        if (r)
            protobuf_c_message_free_unpacked(&r->base, NULL);
        return rc;
    }
    Mc__PeerBatchReadResponse *r = (Mc__PeerBatchReadResponse *)recv_control(
        fd, h.body_length, &mc__peer_batch_read_response__descriptor, &rest);
    if (!r || r->n_statuses != ch->count || r->n_lengths != ch->count)
        goto out;
    uint64_t total = 0;
    for (size_t j = 0; j < ch->count; j++) {
        const struct mc_xfer_item *it = &items[g->idx[ch->first + j]];
        if (r->statuses[j] == 0 && r->lengths[j] != it->len)
            goto out; /* the bytes could not be placed */
        if (r->statuses[j] == 0)
            total += it->len;
    }
    if (total != rest)
        goto out;
    for (size_t j = 0; j < ch->count; j++) {
        struct mc_xfer_item *it = &items[g->idx[ch->first + j]];
        int st = r->statuses[j];
        if (st == 0 && it->len &&
            (it->crc ? mc_tcp_recv_crc(fd, it->buf, it->len, it->crc)
                     : mc_tcp_recv_all(fd, it->buf, it->len)))
            goto out;
        it->status = st <= 0 ? st : MC_ERR_TRANSFER_FAIL;
    }
    ch->done = true;
    g->got++;
    rc = 0;
out:
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    if (rc)
        mc_warn("tcp", "malformed batch reply from peer", "endpoint=%s", g->endpoint);
    return rc;
}

/* ---- one batch ----------------------------------------------------------------------------- */

/* Groups the items that batch (0 < len <= slice) by endpoint and cuts each group in chunks. */
static int plan(struct mc_transport *t, struct mc_xfer_item *items, size_t n, bool *single,
                struct group **out, size_t *ngroups)
{
    const struct mc_tcp_transport_config *cfg = mc_tcp_config(t);
    uint64_t cap = (uint64_t)cfg->slice_bytes * CHUNK_SLICES;
    if (cap > cfg->max_frame_bytes - FRAME_SLACK)
        cap = cfg->max_frame_bytes - FRAME_SLACK;
    struct group *gs = calloc(n, sizeof(*gs));
    if (!gs)
        return MC_ERR_INTERNAL_ERROR;
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        if (single[i] || items[i].status != 1)
            continue;
        size_t k = 0;
        while (k < ng && strcmp(gs[k].endpoint, items[i].loc.endpoint) != 0)
            k++;
        if (k == ng) {
            gs[ng].endpoint = items[i].loc.endpoint;
            gs[ng].idx = malloc(n * sizeof(size_t));
            gs[ng].chunks = malloc(n * sizeof(struct chunk));
            if (!gs[ng].idx || !gs[ng].chunks) {
                free(gs[ng].idx);
                free(gs[ng].chunks);
                goto oom;
            }
            ng++;
        }
        struct group *g = &gs[k];
        struct chunk *last = g->nchunks ? &g->chunks[g->nchunks - 1] : NULL;
        if (!last || last->count >= MC_PEER_MAX_BATCH || last->bytes + items[i].len > cap) {
            g->chunks[g->nchunks++] = (struct chunk){g->n, 0, 0, false};
            last = &g->chunks[g->nchunks - 1];
        }
        g->idx[g->n++] = i;
        last->count++;
        last->bytes += items[i].len;
    }
    *out = gs;
    *ngroups = ng;
    return 0;
oom:
    for (size_t k = 0; k < ng; k++) {
        free(gs[k].idx);
        free(gs[k].chunks);
    }
    free(gs);
    return MC_ERR_INTERNAL_ERROR;
}

/* Fails the group's unanswered items and drops its connection. */
static void group_fail(struct mc_transport *t, struct group *g, struct mc_xfer_item *items, int rc)
{
    for (size_t k = 0; k < g->nchunks; k++)
        if (!g->chunks[k].done)
            chunk_status(g, items, &g->chunks[k], rc);
    if (g->conn)
        mc_tcp_conn_put(t, g->endpoint, g->conn, false);
    g->conn = NULL;
    if (rc == MC_ERR_TRANSFER_FAIL) {
        mc_tcp_peer_forget(t, g->endpoint);
        mc_warn("tcp", "batch transfer failed", "endpoint=%s items=%zu", g->endpoint, g->n);
    }
}

/* Connects g and sends its first requests (again, after a stale pooled connection: none of
 * its chunks is done then). Non-zero: g has failed. */
static int group_start(struct mc_transport *t, struct group *g, struct mc_xfer_item *items,
                       bool is_write, bool pooled)
{
    if (g->conn)
        mc_tcp_conn_put(t, g->endpoint, g->conn, false);
    g->conn = NULL;
    int rc = mc_tcp_conn_get(t, g->endpoint, pooled, &g->conn, &g->reused);
    if (rc) {
        g->conn = NULL;
        return rc;
    }
    g->any = false;
    g->sent = g->got = 0;
    g->base_id = mc_tcp_conn_ids(g->conn, g->nchunks);
    return fill_window(t, g, items, is_write);
}

/* After a failure on g: true when it was a pooled connection the peer had closed while idle
 * (nothing answered on it) and a fresh one took over. */
static bool group_restart(struct mc_transport *t, struct group *g, struct mc_xfer_item *items,
                          bool is_write)
{
    if (!g->reused || g->any || g->retried)
        return false;
    g->retried = true;
    mc_tcp_count_retry(t);
    return group_start(t, g, items, is_write, false) == 0;
}

int mc_tcp_batch(struct mc_transport *t, bool is_write, struct mc_xfer_item *items, size_t n)
{
    if (n == 0)
        return 0;
    if (!items)
        return MC_ERR_INVALID_PARAMS;
    const struct mc_tcp_transport_config *cfg = mc_tcp_config(t);
    bool *single = calloc(n, sizeof(*single));
    if (!single)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++) {
        struct mc_xfer_item *it = &items[i];
        it->status = 1; /* not done yet */
        if (!it->loc.endpoint || !*it->loc.endpoint || (it->len && !it->buf))
            it->status = MC_ERR_INVALID_PARAMS;
        else if (it->len == 0)
            it->status = 0;
        if (it->crc && it->len == 0)
            *it->crc = mc_crc32c(it->buf, 0);
        else if (it->len > cfg->slice_bytes)
            single[i] = true;
    }
    struct group *gs = NULL;
    size_t ng = 0;
    int rc = plan(t, items, n, single, &gs, &ng);
    if (rc) {
        free(single);
        return rc;
    }
    /* every endpoint's first requests go out before any reply is read */
    for (size_t k = 0; k < ng; k++) {
        int x = group_start(t, &gs[k], items, is_write, true);
        if (x && !group_restart(t, &gs[k], items, is_write))
            group_fail(t, &gs[k], items, x);
    }
    for (size_t k = 0; k < ng; k++) {
        struct group *g = &gs[k];
        while (g->conn && g->got < g->nchunks) {
            int x = recv_chunk(t, g, items, is_write);
            if (x == 0)
                x = fill_window(t, g, items, is_write);
            if (x && !group_restart(t, g, items, is_write))
                group_fail(t, g, items, x);
        }
        if (g->conn)
            mc_tcp_conn_put(t, g->endpoint, g->conn, !g->refused);
        free(g->idx);
        free(g->chunks);
    }
    free(gs);
    for (size_t i = 0; i < n; i++) {
        if (single[i]) {
            uint32_t *crc = items[i].crc; /* a read sets it from what it receives */
            if (crc)
                *crc = 0;
            items[i].status =
                mc_tcp_transfer(t, is_write, &items[i].loc, items[i].buf, items[i].len, crc);
        } else if (items[i].status == 1)
            items[i].status = MC_ERR_TRANSFER_FAIL; /* not reached: every item is answered */
    }
    free(single);
    return 0;
}
