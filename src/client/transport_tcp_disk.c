/*
 * transport_tcp_disk.c - the reader's side of a LOCAL_DISK read over tcp (PeerDiskRead,
 * proto/peer.proto; DESIGN.md §6): one round trip per holder for a batch.
 *
 * The items are cut into requests of at most MC_PEER_MAX_BATCH items whose values fit one
 * reply frame (max_frame_bytes less room for the header and control message); a batch of a
 * few hundred KV blocks is one request. Each request goes out on a pooled connection to the
 * holder and its reply is read before the next is sent: the holder reads its SSD for the
 * whole request at once (io_uring), so pipelining requests would only queue them there. The
 * reply's payload is the values of the items whose status is 0, in order; each lands straight
 * in its caller's buffer. A reply that does not match the request (counts, a length other than
 * the size asked for, payload bytes that do not add up) fails the request's items with
 * TRANSFER_FAIL and closes the connection. A pooled connection found dead before any reply
 * byte (the holder closed it while idle) is replaced once; reads are idempotent.
 *
 * RDMA mode (mc_transport_tcp_disk_read_rdma): the request also names the reader's rdma
 * endpoint and, per item, the address and rkey of its buffer; the holder RDMA-writes each value
 * there before it answers, so the reply carries statuses, lengths and CRCs but no payload.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "client/peer_server.h"
#include "client/transport.h"
#include "client/transport_tcp_internal.h"
#include "common/log.h"
#include "common/net.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/peer.pb-c.h"

#define FRAME_SLACK (256u << 10) /* room for headers and control in a frame */

static void fail_items(struct mc_disk_read_item *items, size_t n, int rc)
{
    for (size_t i = 0; i < n; i++)
        items[i].status = rc;
}

/* RDMA mode of one call: the reader's endpoint and one rkey per item (NULL: streaming). */
struct rdma_mode {
    const char *endpoint;
    const uint32_t *rkeys;
};

static int send_request(struct mc_transport *t, struct mc_tcp_conn *conn, uint64_t id,
                        const struct mc_disk_read_item *items, size_t n, const struct rdma_mode *rm)
{
    int rc = MC_ERR_INTERNAL_ERROR;
    Mc__DiskReadItem *it = calloc(n, sizeof(*it));
    Mc__DiskReadItem **itp = calloc(n, sizeof(*itp));
    uint8_t *head = NULL;
    if (!it || !itp)
        goto out;
    for (size_t i = 0; i < n; i++) {
        mc__disk_read_item__init(&it[i]);
        it[i].key = (char *)items[i].key;
        it[i].size = items[i].size;
        it[i].version = items[i].version;
        if (rm) {
            it[i].rdma_addr = (uint64_t)(uintptr_t)items[i].buf;
            it[i].rdma_rkey = rm->rkeys[i];
        }
        itp[i] = &it[i];
    }
    Mc__PeerDiskReadRequest r = MC__PEER_DISK_READ_REQUEST__INIT;
    r.n_items = n;
    r.items = itp;
    if (rm)
        r.rdma_endpoint = (char *)rm->endpoint;
    size_t clen = mc__peer_disk_read_request__get_packed_size(&r);
    head = malloc(MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen);
    if (!head)
        goto out;
    mc__peer_disk_read_request__pack(&r, head + MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX);
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_PEER_DISK_READ, id, 0,
                        (uint32_t)(MC_WIRE_PEER_PREFIX + clen));
    mc_wire_encode_header(&h, head);
    mc_wire_put_u32(head + MC_WIRE_HEADER_SIZE, (uint32_t)clen);
    struct iovec iov = {head, MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen};
    mc_tcp_count_request(t);
    rc = SEND_IOV(mc_tcp_conn_fd(conn), MC_METHOD_PEER_DISK_READ, &iov, 1) ? MC_ERR_TRANSFER_FAIL
                                                                           : 0;
out:
    free(it);
    free(itp);
    free(head);
    return rc;
}

/* Reads the reply to request id. 0 (statuses set), a refusal of the whole request (its code,
 * the stream still in sync: *clean stays true), or TRANSFER_FAIL; *any says a reply byte
 * arrived. */
static int recv_reply(struct mc_transport *t, struct mc_tcp_conn *conn, const char *endpoint,
                      uint64_t id, struct mc_disk_read_item *items, size_t n, bool rdma, bool *any,
                      bool *clean)
{
    int fd = mc_tcp_conn_fd(conn);
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    *clean = false;
    if (mc_tcp_recv_all(fd, hb, sizeof(hb)))
        return MC_ERR_TRANSFER_FAIL;
    *any = true;
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    if (mc_wire_conn_refusal(&h))
        return mc_wire_conn_refusal(&h); /* refused at accept (protected mode) */
    if (mc_wire_validate(&h, mc_tcp_config(t)->max_frame_bytes) != MC_WIRE_OK ||
        h.kind != MC_WIRE_RESPONSE || h.method != MC_METHOD_PEER_DISK_READ || h.request_id != id) {
        mc_warn("tcp", "bad disk read reply from peer", "endpoint=%s method=%u len=%u", endpoint,
                h.method, h.body_length);
        return MC_ERR_TRANSFER_FAIL;
    }
    if (h.status != 0) {
        if (mc_tcp_discard(fd, h.body_length))
            return MC_ERR_TRANSFER_FAIL;
        *clean = true;
        return h.status < 0 ? h.status : MC_ERR_TRANSFER_FAIL;
    }
    uint8_t pre[MC_WIRE_PEER_PREFIX];
    if (h.body_length < MC_WIRE_PEER_PREFIX || mc_tcp_recv_all(fd, pre, sizeof(pre)))
        return MC_ERR_TRANSFER_FAIL;
    uint32_t clen = mc_wire_get_u32(pre);
    if (clen > h.body_length - MC_WIRE_PEER_PREFIX)
        return MC_ERR_TRANSFER_FAIL;
    uint8_t *cbuf = malloc(clen ? clen : 1);
    if (!cbuf || mc_tcp_recv_all(fd, cbuf, clen)) {
        free(cbuf);
        return MC_ERR_TRANSFER_FAIL;
    }
    Mc__PeerDiskReadResponse *r = (Mc__PeerDiskReadResponse *)protobuf_c_message_unpack(
        &mc__peer_disk_read_response__descriptor, NULL, clen, cbuf);
    free(cbuf);
    uint64_t rest = h.body_length - MC_WIRE_PEER_PREFIX - clen, total = 0;
    int rc = MC_ERR_TRANSFER_FAIL;
    if (!r || r->n_statuses != n || r->n_lengths != n || (r->n_crc32c && r->n_crc32c != n) ||
        (r->n_crc_valid && r->n_crc_valid != n))
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (r->statuses[i] == 0 && r->lengths[i] != items[i].size)
            goto out; /* the bytes could not be placed */
        if (r->statuses[i] == 0 && !rdma)
            total += items[i].size; /* in rdma mode the bytes already landed */
    }
    if (total != rest)
        goto out;
    for (size_t i = 0; i < n; i++) {
        struct mc_disk_read_item *it = &items[i];
        int st = r->statuses[i];
        if (st == 0 && !rdma && it->size && mc_tcp_recv_all(fd, it->buf, it->size))
            goto out;
        it->status = st <= 0 ? st : MC_ERR_TRANSFER_FAIL;
        it->crc = r->n_crc32c ? r->crc32c[i] : 0;
        it->crc_valid = r->n_crc_valid ? r->crc_valid[i] : false;
    }
    rc = 0;
    *clean = true;
out:
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    if (rc)
        mc_warn("tcp", "malformed disk read reply from peer", "endpoint=%s", endpoint);
    return rc;
}

/* One request (items[0..n)) and its reply, retried once on a fresh connection when a pooled
 * one turns out dead before answering. */
static void one_request(struct mc_transport *t, const char *endpoint,
                        struct mc_disk_read_item *items, size_t n, const struct rdma_mode *rm)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        struct mc_tcp_conn *conn = NULL;
        bool reused = false, any = false, clean = false;
        int rc = mc_tcp_conn_get(t, endpoint, attempt == 0, &conn, &reused);
        if (rc) {
            fail_items(items, n, rc);
            return;
        }
        uint64_t id = mc_tcp_conn_ids(conn, 1);
        rc = send_request(t, conn, id, items, n, rm);
        if (rc == 0)
            rc = recv_reply(t, conn, endpoint, id, items, n, rm != NULL, &any, &clean);
        mc_tcp_conn_put(t, endpoint, conn, rc == 0 && clean);
        if (rc == 0)
            return;
        if (clean) { /* the holder refused the whole request */
            fail_items(items, n, rc);
            return;
        }
        if (reused && !any && attempt == 0) {
            mc_tcp_count_retry(t);
            continue;
        }
        mc_tcp_peer_forget(t, endpoint);
        mc_warn("tcp", "disk read from holder failed", "endpoint=%s items=%zu", endpoint, n);
        fail_items(items, n, MC_ERR_TRANSFER_FAIL);
        return;
    }
}

static int disk_read(struct mc_transport *t, const char *endpoint, struct mc_disk_read_item *items,
                     size_t n, const char *rdma_endpoint, const uint32_t *rkeys)
{
    if (n == 0)
        return 0;
    if (!items || !endpoint || !*endpoint)
        return MC_ERR_INVALID_PARAMS;
    bool rdma = rdma_endpoint != NULL;
    uint64_t cap = mc_tcp_config(t)->max_frame_bytes;
    cap = cap > FRAME_SLACK * 2 ? cap - FRAME_SLACK : cap / 2;
    for (size_t i = 0; i < n; i++) {
        items[i].status = 1;
        items[i].crc_valid = false;
        if (!items[i].key || !*items[i].key || (items[i].size && !items[i].buf) ||
            (rdma && (!rkeys[i] || !items[i].size)))
            items[i].status = MC_ERR_INVALID_PARAMS;
        else if (!rdma && items[i].size > cap)
            items[i].status = MC_ERR_BUFFER_OVERFLOW; /* one frame carries one value at most */
    }
    /* the pending items side by side, so the ones refused above do not split a request */
    struct mc_disk_read_item *tmp = malloc(n * sizeof(*tmp));
    size_t *idx = malloc(n * sizeof(*idx));
    uint32_t *tkeys = rdma ? malloc(n * sizeof(*tkeys)) : NULL;
    if (!tmp || !idx || (rdma && !tkeys)) {
        free(tmp);
        free(idx);
        free(tkeys);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].status == 1) {
            idx[m] = i;
            if (rdma)
                tkeys[m] = rkeys[i];
            tmp[m++] = items[i];
        }
    size_t i = 0;
    while (i < m) {
        size_t j = i;
        uint64_t bytes = 0;
        /* in rdma mode the values never enter the frame: only the item count bounds it */
        while (j < m && j - i < MC_PEER_MAX_BATCH &&
               (j == i || rdma || bytes + tmp[j].size <= cap)) {
            bytes += tmp[j].size;
            j++;
        }
        struct rdma_mode rm = {.endpoint = rdma_endpoint, .rkeys = rdma ? tkeys + i : NULL};
        one_request(t, endpoint, tmp + i, j - i, rdma ? &rm : NULL);
        i = j;
    }
    for (size_t k = 0; k < m; k++)
        items[idx[k]] = tmp[k];
    free(tmp);
    free(idx);
    free(tkeys);
    return 0;
}

int mc_transport_tcp_disk_read(struct mc_transport *t, const char *endpoint,
                               struct mc_disk_read_item *items, size_t n)
{
    return disk_read(t, endpoint, items, n, NULL, NULL);
}

int mc_transport_tcp_disk_read_rdma(struct mc_transport *t, const char *endpoint,
                                    const char *rdma_endpoint, const uint32_t *rkeys,
                                    struct mc_disk_read_item *items, size_t n)
{
    if (!rdma_endpoint || !*rdma_endpoint || (n && !rkeys))
        return MC_ERR_INVALID_PARAMS;
    return disk_read(t, endpoint, items, n, rdma_endpoint, rkeys);
}
