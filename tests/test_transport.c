/*
 * test_transport.c - the peer server and the local/tcp transports, without a master.
 *
 * A peer server serves a malloc'd "segment"; the tcp transport (small slices, so large
 * transfers are pipelined over many frames) and the local transport move bytes in and out.
 * Bad requests: out-of-bounds and overflowing offsets, unknown, zero and unmounted segment ids,
 * payloads shorter or longer than announced, undecodable control, batch calls with mixed
 * slices, a peer that disconnects mid-frame or sends garbage (cut off, others unaffected), a
 * peer that dies mid-reply or never answers (the transfer fails, never hangs), an unreachable
 * endpoint, and a pooled connection whose server restarted (replaced transparently).
 * Mount epochs: once the owner set its segment's epoch, requests (tcp, local, raw single and
 * batch forms) carrying another epoch, or none, are refused with REPLICA_IS_GONE and move no
 * byte; a re-mount's new epoch retires the old one.
 * Batches (mc_transport_batch over tcp): items grouped by endpoint, one request per endpoint
 * (counted on both sides), per-item failures, large items on the single path, big groups cut
 * into pipelined requests, a stale pooled connection replaced, an unreachable endpoint.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/peer_server.h"
#include "client/transport.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/peer.pb-c.h"
#include "test_listen.h"

#define SEG_SIZE (8u << 20)
#define SLICE (64u << 10)

struct fx {
    struct mc_peer_server *ps;
    uint8_t *seg;
    struct mc_id seg_id;
    uint16_t port;
    char ep[64];
    struct mc_transport *tcp, *local;
    struct mc_rpc_client *raw;
};

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

static struct mc_peer_server *start_server(uint16_t port, struct mc_id id, uint8_t *seg)
{
    struct mc_peer_server_config pc = {.bind_addr = "127.0.0.1", .port = port};
    struct mc_peer_server *ps = NULL;
    assert_int_equal(mc_peer_server_new(&pc, &ps), 0);
    assert_int_equal(mc_peer_server_add_segment(ps, id, seg, SEG_SIZE), 0);
    assert_int_equal(mc_peer_server_start(ps), 0);
    return ps;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->seg = calloc(1, SEG_SIZE);
    f->seg_id = mc_id_random();
    f->ps = start_server(0, f->seg_id, f->seg);
    f->port = mc_peer_server_port(f->ps);
    snprintf(f->ep, sizeof(f->ep), "127.0.0.1:%u", f->port);
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    tc.slice_bytes = SLICE;
    tc.window = 4;
    tc.io_timeout_ms = 2000;
    assert_int_equal(mc_transport_tcp_new(&tc, &f->tcp), 0);
    assert_int_equal(mc_transport_local_new(f->ps, &f->local), 0);
    struct mc_rpc_client_config rc;
    mc_rpc_client_config_init(&rc);
    rc.host = "127.0.0.1";
    rc.port = f->port;
    rc.call_timeout_ms = 3000;
    assert_int_equal(mc_rpc_client_new(&rc, &f->raw), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    mc_rpc_client_free(f->raw);
    mc_transport_free(f->tcp);
    mc_transport_free(f->local);
    mc_peer_server_free(f->ps);
    free(f->seg);
    free(f);
    return 0;
}

static struct mc_xfer_loc loc(struct fx *f, uint64_t off)
{
    struct mc_xfer_loc l = {.segment_id = f->seg_id,
                            .offset = off,
                            .endpoint = f->ep}; /* epoch unset on the server: any */
    return l;
}

/* ---- round trips --------------------------------------------------------------------------- */

static void test_tcp_round_trips(void **state)
{
    struct fx *f = *state;
    static const size_t sizes[] = {1, 100, SLICE - 1, SLICE, SLICE + 1, (1u << 20) + 3, SEG_SIZE};
    uint8_t *src = malloc(SEG_SIZE), *dst = malloc(SEG_SIZE);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        uint64_t off = n == SEG_SIZE ? 0 : (k * 4099u) % (SEG_SIZE - n);
        fill(src, n, (uint32_t)k + 1);
        struct mc_xfer_loc l = loc(f, off);
        assert_int_equal(mc_transport_write(f->tcp, &l, src, n), 0);
        assert_memory_equal(f->seg + off, src, n); /* landed where asked */
        memset(dst, 0, n);
        assert_int_equal(mc_transport_read(f->tcp, &l, dst, n), 0);
        assert_memory_equal(dst, src, n);
        /* the read that checksums what it receives: the same bytes, and their CRC32C */
        memset(dst, 0, n);
        uint32_t crc = 7;
        assert_int_equal(mc_transport_tcp_read_crc(f->tcp, &l, dst, n, &crc), 0);
        assert_memory_equal(dst, src, n);
        assert_int_equal(crc, mc_crc32c_extend_sw(0, src, n));
    }
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(f->tcp, &st);
    assert_int_equal(st.connects, 1);                 /* one pooled connection did everything */
    assert_true(st.slices >= 2 * (SEG_SIZE / SLICE)); /* the 8 MiB transfers were sliced */
    assert_int_equal(st.idle, 1);
    struct mc_peer_server_stats ps;
    mc_peer_server_get_stats(f->ps, &ps);
    assert_int_equal(ps.rejected, 0);
    free(src);
    free(dst);
}

static void test_local_round_trip_and_checks(void **state)
{
    struct fx *f = *state;
    uint8_t src[5000], dst[5000];
    fill(src, sizeof(src), 7);
    struct mc_xfer_loc l = loc(f, 12345);
    assert_int_equal(mc_transport_write(f->local, &l, src, sizeof(src)), 0);
    assert_memory_equal(f->seg + 12345, src, sizeof(src));
    assert_int_equal(mc_transport_read(f->local, &l, dst, sizeof(dst)), 0);
    assert_memory_equal(dst, src, sizeof(src));
    l.offset = SEG_SIZE - 10;
    assert_int_equal(mc_transport_write(f->local, &l, src, 11), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_transport_read(f->local, &l, dst, 10), 0);
    l.segment_id = mc_id_random();
    assert_int_equal(mc_transport_read(f->local, &l, dst, 10), MC_ERR_SEGMENT_NOT_FOUND);
}

/* The local read that also checksums: the segment's bytes, and their CRC32C taken over the
 * copy, across the 32 KiB chunks of the fused copy; a byte changed in the segment changes the
 * CRC; a bad range or segment is refused like a plain read, with no CRC. */
static void test_local_read_crc(void **state)
{
    struct fx *f = *state;
    const size_t n = 3 * 32768 + 777;
    uint8_t *src = malloc(n), *dst = malloc(n + 1);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, n, 11);
    struct mc_xfer_loc l = loc(f, 4097);
    assert_int_equal(mc_transport_write(f->local, &l, src, n), 0);
    uint32_t crc = 0;
    assert_int_equal(mc_transport_local_read_crc(f->local, &l, dst + 1, n, &crc), 0);
    assert_memory_equal(dst + 1, src, n);
    assert_int_equal(crc, mc_crc32c_extend_sw(0, src, n));
    f->seg[4097 + 40000] ^= 0x01;
    assert_int_equal(mc_transport_local_read_crc(f->local, &l, dst + 1, n, &crc), 0);
    assert_int_not_equal(crc, mc_crc32c_extend_sw(0, src, n));
    assert_int_equal(crc, mc_crc32c_extend_sw(0, dst + 1, n));
    l.offset = SEG_SIZE - 10;
    assert_int_equal(mc_transport_local_read_crc(f->local, &l, dst, 11, &crc),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(crc, 0);
    l = loc(f, 0);
    l.segment_id = mc_id_random();
    assert_int_equal(mc_transport_local_read_crc(f->local, &l, dst, 10, &crc),
                     MC_ERR_SEGMENT_NOT_FOUND);
    free(src);
    free(dst);
}

/* The tcp read that also checksums (mc_transport_tcp_read_crc; its sizes below, at and across
 * slices are in test_tcp_round_trips): a byte changed in the segment shows in the CRC of an
 * 8 MiB read over many pipelined slices; a refused read fails and leaves *crc 0. */
static void test_tcp_read_crc(void **state)
{
    struct fx *f = *state;
    uint8_t *src = malloc(SEG_SIZE), *dst = malloc(SEG_SIZE);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, SEG_SIZE, 31);
    memcpy(f->seg, src, SEG_SIZE);
    struct mc_xfer_loc l = loc(f, 0);
    f->seg[SEG_SIZE / 2 + 5] ^= 0x10;
    uint32_t crc = 0;
    assert_int_equal(mc_transport_tcp_read_crc(f->tcp, &l, dst, SEG_SIZE, &crc), 0);
    assert_int_not_equal(crc, mc_crc32c_extend_sw(0, src, SEG_SIZE));
    assert_int_equal(crc, mc_crc32c_extend_sw(0, dst, SEG_SIZE));
    l.offset = SEG_SIZE - 10;
    crc = 7;
    assert_int_equal(mc_transport_tcp_read_crc(f->tcp, &l, dst, 11, &crc), MC_ERR_INVALID_PARAMS);
    assert_int_equal(crc, 0);
    free(src);
    free(dst);
}

/* A peer that answers a read's pipelined slices in reverse order, a window at a time, from
 * its own bytes (the protocol allows any order; the real server answers in order). */
struct reverse_peer {
    int lfd;
    const uint8_t *bytes;
    size_t window;
    size_t slices; /* requests the one read sends */
};

static int read_full(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void *reverse_peer_main(void *arg)
{
    struct reverse_peer *rp = arg;
    int fd = accept(rp->lfd, NULL, NULL);
    struct {
        uint64_t id, off, len;
    } q[16];
    size_t nq = 0, seen = 0;
    bool closed = fd < 0;
    while (!closed) {
        uint8_t hb[MC_WIRE_HEADER_SIZE], body[256];
        struct mc_wire_header h;
        closed = read_full(fd, hb, sizeof(hb)) != 0;
        if (!closed) {
            mc_wire_decode_header(hb, &h);
            closed = h.body_length > sizeof(body) || read_full(fd, body, h.body_length) != 0;
        }
        if (!closed) {
            Mc__PeerReadRequest *r = mc__peer_read_request__unpack(NULL, mc_wire_get_u32(body),
                                                                   body + MC_WIRE_PEER_PREFIX);
            assert_non_null(r);
            q[nq].id = h.request_id;
            q[nq].off = r->offset;
            q[nq].len = r->length;
            nq++;
            seen++;
            mc__peer_read_request__free_unpacked(r, NULL);
        }
        /* a full window, or the read's last request: answer what is queued, last first */
        if (nq == rp->window || (nq && seen == rp->slices)) {
            while (nq) {
                nq--;
                Mc__PeerReadResponse resp = MC__PEER_READ_RESPONSE__INIT;
                resp.length = q[nq].len;
                uint8_t fr[MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + 32];
                size_t clen = mc__peer_read_response__pack(&resp, fr + 36);
                mc_wire_header_init(&h, MC_WIRE_RESPONSE, MC_METHOD_PEER_READ, q[nq].id, 0,
                                    (uint32_t)(MC_WIRE_PEER_PREFIX + clen + q[nq].len));
                mc_wire_encode_header(&h, fr);
                mc_wire_put_u32(fr + MC_WIRE_HEADER_SIZE, (uint32_t)clen);
                if (send(fd, fr, 36 + clen, MSG_NOSIGNAL) != (ssize_t)(36 + clen) ||
                    send(fd, rp->bytes + q[nq].off, q[nq].len, MSG_NOSIGNAL) != (ssize_t)q[nq].len)
                    closed = true;
            }
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Replies out of order: the CRC is still over the bytes in order. With a window of 4 and
 * 4 KiB slices, the 10 slices come back as 4,3,2,1 / 8,7,6,5 / 10,9. */
static void test_tcp_read_crc_out_of_order(void **state)
{
    (void)state;
    const size_t slice = 4096, n = 9 * 4096 + 123;
    uint8_t *bytes = malloc(n), *dst = malloc(n);
    assert_non_null(bytes);
    assert_non_null(dst);
    fill(bytes, n, 77);
    struct reverse_peer rp = {.bytes = bytes, .window = 4, .slices = 10};
    uint16_t port;
    rp.lfd = tl_listen(4, &port);
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%u", port);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, reverse_peer_main, &rp), 0);
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    tc.slice_bytes = (uint32_t)slice;
    tc.window = 4;
    tc.io_timeout_ms = 2000;
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_tcp_new(&tc, &t), 0);
    struct mc_xfer_loc l = {.segment_id = mc_id_random(), .offset = 0, .endpoint = ep};
    uint32_t crc = 0;
    assert_int_equal(mc_transport_tcp_read_crc(t, &l, dst, n, &crc), 0);
    assert_memory_equal(dst, bytes, n);
    assert_int_equal(crc, mc_crc32c_extend_sw(0, bytes, n));
    mc_transport_free(t); /* closes the pooled connection: the peer thread ends */
    pthread_join(th, NULL);
    close(rp.lfd);
    free(bytes);
    free(dst);
}

/* ---- bad requests through the transport ----------------------------------------------------- */

static void test_bad_ranges_and_segments(void **state)
{
    struct fx *f = *state;
    uint8_t buf[4096];
    memset(buf, 0xAB, sizeof(buf));
    memset(f->seg, 0, SEG_SIZE);
    struct mc_xfer_loc l = loc(f, SEG_SIZE);
    assert_int_equal(mc_transport_write(f->tcp, &l, buf, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_transport_read(f->tcp, &l, buf, 1), MC_ERR_INVALID_PARAMS);
    l.offset = SEG_SIZE - 100; /* straddles the end */
    assert_int_equal(mc_transport_write(f->tcp, &l, buf, 101), MC_ERR_INVALID_PARAMS);
    l.offset = UINT64_MAX - 10; /* offset + length overflows */
    assert_int_equal(mc_transport_write(f->tcp, &l, buf, 64), MC_ERR_INVALID_PARAMS);
    l = loc(f, 0);
    l.segment_id = mc_id_random();
    assert_int_equal(mc_transport_write(f->tcp, &l, buf, 64), MC_ERR_SEGMENT_NOT_FOUND);
    l.segment_id = (struct mc_id){0, 0};
    assert_int_equal(mc_transport_read(f->tcp, &l, buf, 64), MC_ERR_SEGMENT_NOT_FOUND);
    for (size_t i = 0; i < SEG_SIZE; i++)
        if (f->seg[i] != 0)
            fail_msg("refused write changed byte %zu", i);

    /* a second segment: served while mounted, refused once unmounted */
    uint8_t *seg2 = calloc(1, 65536);
    struct mc_id id2 = mc_id_random();
    assert_int_equal(mc_peer_server_add_segment(f->ps, id2, seg2, 65536), 0);
    assert_int_equal(mc_peer_server_add_segment(f->ps, id2, seg2, 65536),
                     MC_ERR_SEGMENT_ALREADY_EXISTS);
    struct mc_xfer_loc l2 = {.segment_id = id2, .offset = 100, .endpoint = f->ep};
    assert_int_equal(mc_transport_write(f->tcp, &l2, buf, 200), 0);
    assert_memory_equal(seg2 + 100, buf, 200);
    assert_int_equal(mc_peer_server_remove_segment(f->ps, id2), 0);
    assert_int_equal(mc_transport_read(f->tcp, &l2, buf, 200), MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc_peer_server_remove_segment(f->ps, id2), MC_ERR_SEGMENT_NOT_FOUND);
    free(seg2);

    /* the server still serves good requests */
    l = loc(f, 0);
    assert_int_equal(mc_transport_write(f->tcp, &l, buf, 64), 0);
    struct mc_peer_server_stats ps;
    mc_peer_server_get_stats(f->ps, &ps);
    assert_true(ps.rejected >= 7);
}

/* ---- raw peer calls ------------------------------------------------------------------------- */

static int raw_write_e(struct fx *f, struct mc_id id, uint64_t epoch, uint64_t off, uint64_t len,
                       const void *payload, size_t plen)
{
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = id.hi;
    u.lo = id.lo;
    Mc__PeerWriteRequest req = MC__PEER_WRITE_REQUEST__INIT;
    req.segment_id = &u;
    req.offset = off;
    req.length = len;
    req.mount_epoch = epoch;
    struct iovec iov = {(void *)payload, plen};
    struct mc_rpc_peer_call pc = {.method = MC_METHOD_PEER_WRITE,
                                  .ctl = &req.base,
                                  .payload = &iov,
                                  .npayload = plen ? 1 : 0};
    int rc = mc_rpc_client_call_peer(f->raw, &pc);
    if (pc.resp)
        protobuf_c_message_free_unpacked(pc.resp, NULL);
    return rc;
}

static int raw_write(struct fx *f, struct mc_id id, uint64_t off, uint64_t len, const void *payload,
                     size_t plen)
{
    return raw_write_e(f, id, 0, off, len, payload, plen);
}

static int raw_read_e(struct fx *f, struct mc_id id, uint64_t epoch, uint64_t off, uint64_t len,
                      void *out, size_t cap, size_t *got)
{
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = id.hi;
    u.lo = id.lo;
    Mc__PeerReadRequest req = MC__PEER_READ_REQUEST__INIT;
    req.segment_id = &u;
    req.offset = off;
    req.length = len;
    req.mount_epoch = epoch;
    struct mc_rpc_peer_call pc = {.method = MC_METHOD_PEER_READ,
                                  .ctl = &req.base,
                                  .resp_desc = &mc__peer_read_response__descriptor,
                                  .recv_buf = out,
                                  .recv_cap = cap};
    int rc = mc_rpc_client_call_peer(f->raw, &pc);
    *got = pc.recv_len;
    if (pc.resp)
        protobuf_c_message_free_unpacked(pc.resp, NULL);
    return rc;
}

static void test_truncated_and_padded_payloads(void **state)
{
    struct fx *f = *state;
    uint8_t buf[256];
    fill(buf, sizeof(buf), 3);
    memset(f->seg, 0, 4096);
    assert_int_equal(raw_write(f, f->seg_id, 0, 100, buf, 50), MC_ERR_INVALID_PARAMS);
    assert_int_equal(raw_write(f, f->seg_id, 0, 100, buf, 150), MC_ERR_INVALID_PARAMS);
    assert_int_equal(raw_write(f, f->seg_id, 0, 100, NULL, 0), MC_ERR_INVALID_PARAMS);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(f->seg[i], 0);
    assert_int_equal(raw_write(f, f->seg_id, 0, 100, buf, 100), 0);
    assert_memory_equal(f->seg, buf, 100);

    /* an undecodable control message */
    uint8_t body[16] = {8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(mc_rpc_client_call(f->raw, MC_METHOD_PEER_READ, body, 12, 0, NULL, NULL),
                     MC_ERR_DESERIALIZE_FAIL);
    /* a control length past the body */
    uint8_t body2[8] = {200, 0, 0, 0, 1, 2, 3, 4};
    assert_int_equal(mc_rpc_client_call(f->raw, MC_METHOD_PEER_WRITE, body2, 8, 0, NULL, NULL),
                     MC_ERR_DESERIALIZE_FAIL);
    /* not served yet */
    uint8_t body3[4] = {0, 0, 0, 0};
    assert_int_equal(mc_rpc_client_call(f->raw, MC_METHOD_PEER_DISK_READ, body3, 4, 0, NULL, NULL),
                     MC_ERR_NOT_SUPPORTED);
}

static void test_batch_calls(void **state)
{
    struct fx *f = *state;
    Mc__Uuid good = MC__UUID__INIT, bad = MC__UUID__INIT;
    good.hi = f->seg_id.hi;
    good.lo = f->seg_id.lo;
    bad.hi = 1;
    bad.lo = 2;
    Mc__PeerSlice s[3];
    Mc__PeerSlice *sp[3] = {&s[0], &s[1], &s[2]};
    for (int i = 0; i < 3; i++)
        mc__peer_slice__init(&s[i]);
    s[0].segment_id = &good, s[0].offset = 1000, s[0].length = 10;
    s[1].segment_id = &bad, s[1].offset = 0, s[1].length = 5;
    s[2].segment_id = &good, s[2].offset = SEG_SIZE - 4, s[2].length = 7; /* out of bounds */
    uint8_t payload[22];
    fill(payload, sizeof(payload), 9);
    memset(f->seg, 0, SEG_SIZE);

    Mc__PeerBatchWriteRequest wr = MC__PEER_BATCH_WRITE_REQUEST__INIT;
    wr.n_slices = 3;
    wr.slices = sp;
    struct iovec iov = {payload, sizeof(payload)};
    struct mc_rpc_peer_call pc = {.method = MC_METHOD_PEER_BATCH_WRITE,
                                  .ctl = &wr.base,
                                  .payload = &iov,
                                  .npayload = 1,
                                  .resp_desc = &mc__peer_batch_write_response__descriptor};
    assert_int_equal(mc_rpc_client_call_peer(f->raw, &pc), 0);
    Mc__PeerBatchWriteResponse *wres = (Mc__PeerBatchWriteResponse *)pc.resp;
    assert_int_equal(wres->n_statuses, 3);
    assert_int_equal(wres->statuses[0], 0);
    assert_int_equal(wres->statuses[1], MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(wres->statuses[2], MC_ERR_INVALID_PARAMS);
    protobuf_c_message_free_unpacked(pc.resp, NULL);
    assert_memory_equal(f->seg + 1000, payload, 10);
    assert_int_equal(f->seg[SEG_SIZE - 4], 0);

    /* payload shorter than the slices claim: the whole call is refused */
    iov.iov_len = 15;
    pc.resp = NULL;
    assert_int_equal(mc_rpc_client_call_peer(f->raw, &pc), MC_ERR_INVALID_PARAMS);

    /* batch read: bytes of the good slices only, with per-slice statuses and lengths */
    Mc__PeerBatchReadRequest rr = MC__PEER_BATCH_READ_REQUEST__INIT;
    rr.n_slices = 3;
    rr.slices = sp;
    uint8_t out[64];
    struct mc_rpc_peer_call rc = {.method = MC_METHOD_PEER_BATCH_READ,
                                  .ctl = &rr.base,
                                  .resp_desc = &mc__peer_batch_read_response__descriptor,
                                  .recv_buf = out,
                                  .recv_cap = sizeof(out)};
    assert_int_equal(mc_rpc_client_call_peer(f->raw, &rc), 0);
    Mc__PeerBatchReadResponse *rres = (Mc__PeerBatchReadResponse *)rc.resp;
    assert_int_equal(rres->n_statuses, 3);
    assert_int_equal(rres->statuses[0], 0);
    assert_int_equal(rres->statuses[1], MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(rres->statuses[2], MC_ERR_INVALID_PARAMS);
    assert_int_equal(rres->lengths[0], 10);
    assert_int_equal(rres->lengths[1], 0);
    assert_int_equal(rc.recv_len, 10);
    assert_memory_equal(out, payload, 10);
    protobuf_c_message_free_unpacked(rc.resp, NULL);
}

/* ---- mount epochs ---------------------------------------------------------------------------- */

#define E_OLD 0x1234000000000abcull /* an earlier mount (before a master restart) */
#define E_CUR 0x5678000000000defull /* the current mount */
#define E_NEW 0x9abc000000000123ull /* the mount after the next re-mount */

static void test_mount_epoch_single(void **state)
{
    struct fx *f = *state;
    uint8_t v[3000], out[3000];
    fill(v, sizeof(v), 21);
    memset(f->seg, 0, SEG_SIZE);
    struct mc_transport *ts[2] = {f->tcp, f->local};

    /* never mounted (no epoch learnt yet): any epoch is served */
    struct mc_xfer_loc l = loc(f, 4096);
    l.mount_epoch = E_OLD;
    assert_int_equal(mc_transport_write(f->tcp, &l, v, 100), 0);
    assert_int_equal(mc_peer_server_set_segment_epoch(f->ps, mc_id_random(), E_CUR),
                     MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc_peer_server_set_segment_epoch(f->ps, f->seg_id, E_CUR), 0);
    memset(f->seg, 0, SEG_SIZE);

    for (int k = 0; k < 2; k++) {
        struct mc_transport *t = ts[k];
        /* stale and absent (0) epochs: refused both ways, nothing moves */
        static const uint64_t stale[] = {E_OLD, 0, E_CUR + 1};
        for (size_t i = 0; i < sizeof(stale) / sizeof(stale[0]); i++) {
            l.mount_epoch = stale[i];
            assert_int_equal(mc_transport_write(t, &l, v, sizeof(v)), MC_ERR_REPLICA_IS_GONE);
            memset(out, 0x5a, sizeof(out));
            assert_int_equal(mc_transport_read(t, &l, out, sizeof(out)), MC_ERR_REPLICA_IS_GONE);
            for (size_t j = 0; j < sizeof(out); j++)
                if (out[j] != 0x5a)
                    fail_msg("refused read (transport %d) wrote byte %zu", k, j);
        }
        for (size_t j = 0; j < SEG_SIZE; j++)
            if (f->seg[j] != 0)
                fail_msg("refused write (transport %d) changed byte %zu", k, j);
        /* the current epoch: served */
        l.mount_epoch = E_CUR;
        assert_int_equal(mc_transport_write(t, &l, v, sizeof(v)), 0);
        assert_memory_equal(f->seg + 4096, v, sizeof(v));
        memset(out, 0, sizeof(out));
        assert_int_equal(mc_transport_read(t, &l, out, sizeof(out)), 0);
        assert_memory_equal(out, v, sizeof(v));
        memset(f->seg + 4096, 0, sizeof(v));
        /* the epoch is checked before bounds: a stale out-of-range request is IS_GONE too */
        l.offset = SEG_SIZE;
        l.mount_epoch = E_OLD;
        assert_int_equal(mc_transport_read(t, &l, out, 1), MC_ERR_REPLICA_IS_GONE);
        l.mount_epoch = E_CUR;
        assert_int_equal(mc_transport_read(t, &l, out, 1), MC_ERR_INVALID_PARAMS);
        l.offset = 4096;
    }

    /* raw single requests: epoch absent (an older peer) and stale are refused */
    size_t got = 0;
    assert_int_equal(raw_write_e(f, f->seg_id, 0, 0, 10, v, 10), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(raw_write_e(f, f->seg_id, E_OLD, 0, 10, v, 10), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(f->seg[0], 0);
    assert_int_equal(raw_read_e(f, f->seg_id, E_OLD, 0, 10, out, sizeof(out), &got),
                     MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(got, 0);
    assert_int_equal(raw_write_e(f, f->seg_id, E_CUR, 0, 10, v, 10), 0);
    assert_int_equal(raw_read_e(f, f->seg_id, E_CUR, 0, 10, out, sizeof(out), &got), 0);
    assert_int_equal(got, 10);
    assert_memory_equal(out, v, 10);

    /* a re-mount: the new epoch is served, the previous one is now stale */
    assert_int_equal(mc_peer_server_set_segment_epoch(f->ps, f->seg_id, E_NEW), 0);
    l.mount_epoch = E_CUR;
    assert_int_equal(mc_transport_read(f->tcp, &l, out, 10), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(mc_transport_read(f->local, &l, out, 10), MC_ERR_REPLICA_IS_GONE);
    l.mount_epoch = E_NEW;
    assert_int_equal(mc_transport_read(f->tcp, &l, out, 10), 0);

    /* epoch 0: no current mount (the owner is re-mounting), nothing is served, 0 included */
    assert_int_equal(mc_peer_server_set_segment_epoch(f->ps, f->seg_id, 0), 0);
    assert_int_equal(raw_write_e(f, f->seg_id, 0, 0, 10, v, 10), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(raw_write_e(f, f->seg_id, E_NEW, 0, 10, v, 10), MC_ERR_REPLICA_IS_GONE);
    l.mount_epoch = E_NEW;
    assert_int_equal(mc_transport_read(f->local, &l, out, 10), MC_ERR_REPLICA_IS_GONE);

    struct mc_peer_server_stats ps;
    mc_peer_server_get_stats(f->ps, &ps);
    assert_int_equal(ps.stale_epoch, 2 * (3 * 2 + 1) + 3 + 2 + 3);
    assert_true(ps.rejected >= 7 + 3 + 1 + 2); /* the refusals that went over the wire */
}

static void test_mount_epoch_batch(void **state)
{
    struct fx *f = *state;
    assert_int_equal(mc_peer_server_set_segment_epoch(f->ps, f->seg_id, E_CUR), 0);
    Mc__Uuid id = MC__UUID__INIT;
    id.hi = f->seg_id.hi;
    id.lo = f->seg_id.lo;
    enum { N = 4 };
    Mc__PeerSlice s[N];
    Mc__PeerSlice *sp[N];
    static const uint64_t epochs[N] = {E_CUR, E_OLD, 0, E_CUR};
    for (int i = 0; i < N; i++) {
        mc__peer_slice__init(&s[i]);
        s[i].segment_id = &id;
        s[i].offset = 1000u * (uint64_t)(i + 1);
        s[i].length = 8;
        s[i].mount_epoch = epochs[i];
        sp[i] = &s[i];
    }
    uint8_t payload[8 * N];
    fill(payload, sizeof(payload), 31);
    memset(f->seg, 0, SEG_SIZE);

    Mc__PeerBatchWriteRequest wr = MC__PEER_BATCH_WRITE_REQUEST__INIT;
    wr.n_slices = N;
    wr.slices = sp;
    struct iovec iov = {payload, sizeof(payload)};
    struct mc_rpc_peer_call pc = {.method = MC_METHOD_PEER_BATCH_WRITE,
                                  .ctl = &wr.base,
                                  .payload = &iov,
                                  .npayload = 1,
                                  .resp_desc = &mc__peer_batch_write_response__descriptor};
    assert_int_equal(mc_rpc_client_call_peer(f->raw, &pc), 0);
    Mc__PeerBatchWriteResponse *wres = (Mc__PeerBatchWriteResponse *)pc.resp;
    assert_int_equal(wres->n_statuses, N);
    assert_int_equal(wres->statuses[0], 0);
    assert_int_equal(wres->statuses[1], MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(wres->statuses[2], MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(wres->statuses[3], 0);
    protobuf_c_message_free_unpacked(pc.resp, NULL);
    assert_memory_equal(f->seg + 1000, payload, 8);
    assert_memory_equal(f->seg + 4000, payload + 24, 8);
    static const uint8_t zero[8];
    assert_memory_equal(f->seg + 2000, zero, 8); /* stale slices wrote nothing */
    assert_memory_equal(f->seg + 3000, zero, 8);

    /* the refused slices' bytes are not in the reply; the others are, in order */
    memcpy(f->seg + 2000, payload + 8, 8); /* bytes a stale reader must never see */
    Mc__PeerBatchReadRequest rr = MC__PEER_BATCH_READ_REQUEST__INIT;
    rr.n_slices = N;
    rr.slices = sp;
    uint8_t out[8 * N];
    memset(out, 0, sizeof(out));
    struct mc_rpc_peer_call rc = {.method = MC_METHOD_PEER_BATCH_READ,
                                  .ctl = &rr.base,
                                  .resp_desc = &mc__peer_batch_read_response__descriptor,
                                  .recv_buf = out,
                                  .recv_cap = sizeof(out)};
    assert_int_equal(mc_rpc_client_call_peer(f->raw, &rc), 0);
    Mc__PeerBatchReadResponse *rres = (Mc__PeerBatchReadResponse *)rc.resp;
    assert_int_equal(rres->n_statuses, N);
    assert_int_equal(rres->statuses[0], 0);
    assert_int_equal(rres->statuses[1], MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(rres->statuses[2], MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(rres->statuses[3], 0);
    assert_int_equal(rres->lengths[1], 0);
    assert_int_equal(rres->lengths[2], 0);
    assert_int_equal(rc.recv_len, 16);
    assert_memory_equal(out, payload, 8);
    assert_memory_equal(out + 8, payload + 24, 8);
    protobuf_c_message_free_unpacked(rc.resp, NULL);

    struct mc_peer_server_stats ps;
    mc_peer_server_get_stats(f->ps, &ps);
    assert_int_equal(ps.stale_epoch, 4);
}

/* ---- misbehaving peers ---------------------------------------------------------------------- */

static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void test_disconnect_mid_frame_and_garbage(void **state)
{
    struct fx *f = *state;
    memset(f->seg, 0, SEG_SIZE);
    /* keep a good connection busy around the bad ones */
    uint8_t good[3000];
    fill(good, sizeof(good), 11);
    struct mc_xfer_loc l = loc(f, 5000);
    assert_int_equal(mc_transport_write(f->tcp, &l, good, sizeof(good)), 0);

    /* 1: a write frame announcing 1 MiB, cut after a few hundred bytes */
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = f->seg_id.hi;
    u.lo = f->seg_id.lo;
    Mc__PeerWriteRequest req = MC__PEER_WRITE_REQUEST__INIT;
    req.segment_id = &u;
    req.offset = 0;
    req.length = 1u << 20;
    uint8_t frame[1024];
    size_t clen = mc__peer_write_request__pack(&req, frame + 36);
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_PEER_WRITE, 1, 0,
                        (uint32_t)(4 + clen + (1u << 20)));
    mc_wire_encode_header(&h, frame);
    mc_wire_put_u32(frame + 32, (uint32_t)clen);
    memset(frame + 36 + clen, 0x77, sizeof(frame) - 36 - clen);
    int fd = raw_connect(f->port);
    assert_int_equal(send(fd, frame, sizeof(frame), MSG_NOSIGNAL), (ssize_t)sizeof(frame));
    close(fd);

    /* 2: garbage: the server closes the connection */
    fd = raw_connect(f->port);
    uint8_t junk[64];
    memset(junk, 0x42, sizeof(junk));
    assert_int_equal(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
    uint8_t rb[64];
    ssize_t n;
    do {
        n = recv(fd, rb, sizeof(rb), 0);
    } while (n > 0);
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    close(fd);

    /* 3: a frame above max_frame_bytes: cut off too */
    fd = raw_connect(f->port);
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_PEER_WRITE, 1, 0, 0xF0000000u);
    mc_wire_encode_header(&h, frame);
    assert_int_equal(send(fd, frame, 32, MSG_NOSIGNAL), 32);
    do {
        n = recv(fd, rb, sizeof(rb), 0);
    } while (n > 0);
    assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    close(fd);

    /* nothing of the cut frame landed; the good peer carries on on its pooled connection */
    for (int i = 0; i < 1024; i++)
        assert_int_equal(f->seg[i], 0);
    uint8_t back[3000];
    assert_int_equal(mc_transport_read(f->tcp, &l, back, sizeof(back)), 0);
    assert_memory_equal(back, good, sizeof(good));
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(f->tcp, &st);
    assert_int_equal(st.connects, 1);
}

/* A fake peer: accepts one connection, reads a request, then misbehaves. */
struct fake {
    int lfd;
    uint16_t port;
    int mode; /* 0: reply header announcing 1 MiB, send 100 bytes, close; 1: never answer;
                 2: answer a request id that was never sent */
    pthread_t th;
    int stop_fd[2];
};

static void *fake_main(void *arg)
{
    struct fake *fk = arg;
    int fd = accept(fk->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    uint8_t hb[32];
    if (recv(fd, hb, 32, MSG_WAITALL) != 32)
        goto out;
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    uint8_t body[4096];
    if (h.body_length <= sizeof(body))
        recv(fd, body, h.body_length, MSG_WAITALL);
    if (fk->mode == 0) {
        struct mc_wire_header r;
        mc_wire_header_init(&r, MC_WIRE_RESPONSE, h.method, h.request_id, 0, 4 + (1u << 20));
        uint8_t out[32 + 104];
        mc_wire_encode_header(&r, out);
        memset(out + 32, 0, 104);
        send(fd, out, sizeof(out), MSG_NOSIGNAL);
    } else if (fk->mode == 2) {
        struct mc_wire_header r;
        mc_wire_header_init(&r, MC_WIRE_RESPONSE, h.method, h.request_id + 7, 0, 4);
        uint8_t out[36];
        mc_wire_encode_header(&r, out);
        memset(out + 32, 0, 4);
        send(fd, out, sizeof(out), MSG_NOSIGNAL);
    }
    if (fk->mode != 0) {
        char c;
        read(fk->stop_fd[0], &c, 1); /* hold the connection until told */
    }
out:
    close(fd);
    return NULL;
}

static void fake_start(struct fake *fk, int mode)
{
    memset(fk, 0, sizeof(*fk));
    fk->mode = mode;
    assert_int_equal(pipe(fk->stop_fd), 0);
    fk->lfd = tl_listen(4, &fk->port);
    assert_int_equal(pthread_create(&fk->th, NULL, fake_main, fk), 0);
}

static void fake_stop(struct fake *fk)
{
    assert_int_equal(write(fk->stop_fd[1], "x", 1), 1);
    pthread_join(fk->th, NULL);
    close(fk->lfd);
    close(fk->stop_fd[0]);
    close(fk->stop_fd[1]);
}

static void test_peer_dies_or_stalls(void **state)
{
    (void)state;
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    tc.io_timeout_ms = 300;
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_tcp_new(&tc, &t), 0);
    uint8_t *buf = malloc(1u << 20);
    char ep[64];
    for (int mode = 0; mode < 3; mode++) {
        struct fake fk;
        fake_start(&fk, mode);
        snprintf(ep, sizeof(ep), "127.0.0.1:%u", fk.port);
        struct mc_xfer_loc l = {.segment_id = mc_id_random(), .endpoint = ep};
        uint64_t t0 = mc_now_ms();
        assert_int_equal(mc_transport_read(t, &l, buf, 1u << 20), MC_ERR_TRANSFER_FAIL);
        assert_true(mc_now_ms() - t0 < 3000);
        fake_stop(&fk);
    }
    /* nothing listens there any more */
    struct mc_xfer_loc l = {.segment_id = mc_id_random(), .endpoint = ep};
    assert_int_equal(mc_transport_write(t, &l, buf, 10), MC_ERR_TRANSFER_FAIL);
    l.endpoint = "no-port";
    assert_int_equal(mc_transport_write(t, &l, buf, 10), MC_ERR_INVALID_PARAMS);
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(t, &st);
    assert_int_equal(st.idle, 0); /* broken connections are never pooled */
    mc_transport_free(t);
    free(buf);
}

static void test_pooled_connection_after_server_restart(void **state)
{
    struct fx *f = *state;
    uint8_t buf[1000], back[1000];
    fill(buf, sizeof(buf), 21);
    struct mc_xfer_loc l = loc(f, 777);
    assert_int_equal(mc_transport_write(f->tcp, &l, buf, sizeof(buf)), 0);
    mc_rpc_client_free(f->raw);
    f->raw = NULL;
    mc_peer_server_free(f->ps);
    f->ps = start_server(f->port, f->seg_id, f->seg);
    uint32_t crc = 0; /* the checked read starts over on a new connection, and so does its CRC */
    assert_int_equal(mc_transport_tcp_read_crc(f->tcp, &l, back, sizeof(back), &crc), 0);
    assert_memory_equal(back, buf, sizeof(buf));
    assert_int_equal(crc, mc_crc32c_extend_sw(0, buf, sizeof(buf)));
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(f->tcp, &st);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.connects, 2);
    /* rebuild what teardown frees */
    mc_transport_free(f->local);
    assert_int_equal(mc_transport_local_new(f->ps, &f->local), 0);
    struct mc_rpc_client_config rc;
    mc_rpc_client_config_init(&rc);
    rc.host = "127.0.0.1";
    rc.port = f->port;
    assert_int_equal(mc_rpc_client_new(&rc, &f->raw), 0);
}

/* ---- the pool forgets --------------------------------------------------------------------- */

static uint64_t fake_now(void *arg)
{
    return *(uint64_t *)arg;
}

static struct mc_tcp_transport_stats tcp_stats(struct mc_transport *t)
{
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(t, &st);
    return st;
}

/* Idle connections close after the idle time, old ones instead of going back to the pool, and
 * the entry of an endpoint goes when unused (idle time) or when the peer is gone. */
static void test_pool_idle_age_and_gone_peers(void **state)
{
    struct fx *f = *state;
    uint64_t clock = 1000000;
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    tc.io_timeout_ms = 2000;
    tc.idle_timeout_ms = 1000;
    tc.max_conn_age_ms = 5000;
    tc.now_ms = fake_now;
    tc.now_arg = &clock;
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_tcp_new(&tc, &t), 0);
    uint8_t buf[4096], back[4096];
    fill(buf, sizeof(buf), 41);
    struct mc_xfer_loc l = loc(f, 0);

    /* idle time: a connection unused for idle_timeout_ms is closed, and its entry goes */
    assert_int_equal(mc_transport_write(t, &l, buf, sizeof(buf)), 0);
    struct mc_tcp_transport_stats st = tcp_stats(t);
    assert_int_equal(st.idle, 1);
    assert_int_equal(st.peers, 1);
    clock += 999;
    mc_transport_tcp_prune(t);
    assert_int_equal(tcp_stats(t).idle, 1); /* not yet */
    assert_int_equal(mc_transport_read(t, &l, back, sizeof(back)), 0);
    assert_memory_equal(back, buf, sizeof(buf));
    st = tcp_stats(t);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.reuses, 1);
    clock += 1000;
    mc_transport_tcp_prune(t);
    st = tcp_stats(t);
    assert_int_equal(st.idle, 0);
    assert_int_equal(st.peers, 0);
    assert_int_equal(st.expired, 1);
    /* an expired connection is also never taken between two prune passes */
    assert_int_equal(mc_transport_read(t, &l, back, sizeof(back)), 0);
    clock += 1500;
    assert_int_equal(mc_transport_read(t, &l, back, sizeof(back)), 0);
    st = tcp_stats(t);
    assert_int_equal(st.connects, 3);
    assert_int_equal(st.expired, 2);

    /* age: a connection in steady use is replaced once max_conn_age_ms old */
    uint64_t born = clock;
    uint64_t connects = st.connects;
    while (clock + 900 - born < 5000) {
        clock += 900; /* never idle for long */
        assert_int_equal(mc_transport_read(t, &l, back, sizeof(back)), 0);
        assert_int_equal(tcp_stats(t).connects, connects); /* the same connection */
    }
    clock += 900;
    assert_int_equal(mc_transport_read(t, &l, back, sizeof(back)), 0);
    st = tcp_stats(t);
    assert_int_equal(st.connects, connects + 1); /* too old: replaced */
    assert_int_equal(st.expired, 3);
    assert_int_equal(st.idle, 1);
    assert_memory_equal(back, buf, sizeof(buf));

    /* a peer that is gone: its entry and pooled connections go with the first failure */
    uint8_t *seg2 = calloc(1, SEG_SIZE);
    struct mc_id id2 = mc_id_random();
    struct mc_peer_server *ps2 = start_server(0, id2, seg2);
    char ep2[64];
    snprintf(ep2, sizeof(ep2), "127.0.0.1:%u", mc_peer_server_port(ps2));
    struct mc_xfer_loc l2 = {.segment_id = id2, .endpoint = ep2};
    assert_int_equal(mc_transport_write(t, &l2, buf, sizeof(buf)), 0);
    st = tcp_stats(t);
    assert_int_equal(st.peers, 2);
    assert_int_equal(st.idle, 2);
    mc_peer_server_free(ps2);
    free(seg2);
    assert_int_equal(mc_transport_read(t, &l2, back, sizeof(back)), MC_ERR_TRANSFER_FAIL);
    st = tcp_stats(t);
    assert_int_equal(st.peers, 1);
    assert_int_equal(st.idle, 1);
    /* endpoints that never answer leave nothing behind */
    for (int i = 0; i < 10; i++)
        assert_int_equal(mc_transport_read(t, &l2, back, sizeof(back)), MC_ERR_TRANSFER_FAIL);
    assert_int_equal(tcp_stats(t).peers, 1);
    mc_transport_free(t);
}

/* ---- tcp batches: one round trip per endpoint ------------------------------------------------ */

static uint64_t requests_of(struct mc_peer_server *ps)
{
    struct mc_peer_server_stats st;
    mc_peer_server_get_stats(ps, &st);
    return st.requests;
}

static uint64_t sent_of(struct mc_transport *t)
{
    struct mc_tcp_transport_stats st;
    mc_transport_tcp_get_stats(t, &st);
    return st.slices;
}

/* N small items over two endpoints: one PeerBatchWrite and one PeerBatchRead per endpoint; a
 * bad item fails alone; an item above one slice takes the pipelined single path. */
static void test_tcp_batch_groups_by_endpoint(void **state)
{
    struct fx *f = *state;
    enum { N = 12 };
    uint8_t *seg2 = calloc(1, SEG_SIZE);
    struct mc_id id2 = mc_id_random();
    struct mc_peer_server *ps2 = start_server(0, id2, seg2);
    char ep2[64];
    snprintf(ep2, sizeof(ep2), "127.0.0.1:%u", mc_peer_server_port(ps2));
    struct mc_xfer_item it[N + 3];
    uint8_t *src[N + 3], *dst[N + 3];
    uint32_t crcs[N];
    for (int i = 0; i < N; i++) {
        size_t len = 1000 + (size_t)i * 1500;
        src[i] = malloc(len);
        dst[i] = calloc(1, len);
        fill(src[i], len, (uint32_t)(40 + i));
        struct mc_xfer_loc l = {.segment_id = (i & 1) ? id2 : f->seg_id,
                                .offset = (uint64_t)i * 20000,
                                .endpoint = (i & 1) ? ep2 : f->ep};
        it[i] = (struct mc_xfer_item){l, src[i], len, 99, &crcs[i]};
    }
    uint64_t s0 = sent_of(f->tcp), r1 = requests_of(f->ps), r2 = requests_of(ps2);
    assert_int_equal(mc_transport_batch(f->tcp, true, it, N), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(it[i].status, 0);
        assert_int_equal(crcs[i], mc_crc32c(src[i], it[i].len)); /* computed on the way */
        const uint8_t *seg = (i & 1) ? seg2 : f->seg;
        assert_memory_equal(seg + (size_t)i * 20000, src[i], it[i].len);
    }
    assert_int_equal(sent_of(f->tcp) - s0, 2);
    assert_int_equal(requests_of(f->ps) - r1, 1);
    assert_int_equal(requests_of(ps2) - r2, 1);
    /* read them back, plus an unknown segment, an out-of-bounds range and a 3-slice item; the
     * reads take each item's CRC32C as its bytes arrive (the batched ones and the big one) */
    for (int i = 0; i < N; i++) {
        it[i].buf = dst[i];
        it[i].status = 99;
        crcs[i] = 0xdeadbeef;
    }
    uint32_t big_crc = 0xdeadbeef;
    uint8_t small[16];
    it[N] = (struct mc_xfer_item){
        {.segment_id = {7, 7}, .endpoint = f->ep}, small, sizeof(small), 99, NULL};
    it[N + 1] = (struct mc_xfer_item){{.segment_id = id2, .offset = SEG_SIZE - 4, .endpoint = ep2},
                                      small,
                                      sizeof(small),
                                      99,
                                      NULL};
    size_t big = 3 * SLICE + 5;
    src[N + 2] = malloc(big);
    dst[N + 2] = calloc(1, big);
    fill(src[N + 2], big, 77);
    memcpy(seg2 + (1u << 20), src[N + 2], big);
    it[N + 2] = (struct mc_xfer_item){
        {.segment_id = id2, .offset = 1u << 20, .endpoint = ep2}, dst[N + 2], big, 99, &big_crc};
    s0 = sent_of(f->tcp);
    r1 = requests_of(f->ps);
    r2 = requests_of(ps2);
    assert_int_equal(mc_transport_batch(f->tcp, false, it, N + 3), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(it[i].status, 0);
        assert_memory_equal(dst[i], src[i], it[i].len);
        assert_int_equal(crcs[i], mc_crc32c_extend_sw(0, src[i], it[i].len));
    }
    assert_int_equal(it[N].status, MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(it[N + 1].status, MC_ERR_INVALID_PARAMS);
    assert_int_equal(it[N + 2].status, 0);
    assert_memory_equal(dst[N + 2], src[N + 2], big);
    assert_int_equal(big_crc, mc_crc32c_extend_sw(0, src[N + 2], big));
    /* one batch request per endpoint + 4 slices of the big item */
    assert_int_equal(sent_of(f->tcp) - s0, 2 + 4);
    assert_int_equal(requests_of(f->ps) - r1, 1);
    assert_int_equal(requests_of(ps2) - r2, 1 + 4);
    for (int i = 0; i < N; i++) {
        free(src[i]);
        free(dst[i]);
    }
    free(src[N + 2]);
    free(dst[N + 2]);
    mc_peer_server_free(ps2);
    free(seg2);
}

/* A group larger than one request's bytes is cut into several, pipelined on one connection;
 * a pooled connection the peer closed while idle is replaced and the batch sent again. */
static void test_tcp_batch_chunks_and_stale_pool(void **state)
{
    struct fx *f = *state;
    enum { N = 20, LEN = 60000 }; /* 4 items per request (4 slices of 64 KiB) */
    struct mc_xfer_item it[N];
    uint8_t *src = malloc((size_t)N * LEN), *dst = calloc(1, (size_t)N * LEN);
    fill(src, (size_t)N * LEN, 5);
    for (int i = 0; i < N; i++)
        it[i] =
            (struct mc_xfer_item){loc(f, (uint64_t)i * 65536), src + (size_t)i * LEN, LEN, 9, NULL};
    uint64_t s0 = sent_of(f->tcp);
    assert_int_equal(mc_transport_batch(f->tcp, true, it, N), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(it[i].status, 0);
        assert_memory_equal(f->seg + (size_t)i * 65536, src + (size_t)i * LEN, LEN);
    }
    assert_int_equal(sent_of(f->tcp) - s0, 5);
    /* the server restarts: the pooled connection is dead */
    mc_rpc_client_free(f->raw);
    f->raw = NULL;
    mc_peer_server_free(f->ps);
    f->ps = start_server(f->port, f->seg_id, f->seg);
    for (int i = 0; i < N; i++)
        it[i] =
            (struct mc_xfer_item){loc(f, (uint64_t)i * 65536), dst + (size_t)i * LEN, LEN, 9, NULL};
    struct mc_tcp_transport_stats st0, st1;
    mc_transport_tcp_get_stats(f->tcp, &st0);
    assert_int_equal(mc_transport_batch(f->tcp, false, it, N), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(it[i].status, 0);
    assert_memory_equal(dst, src, (size_t)N * LEN);
    mc_transport_tcp_get_stats(f->tcp, &st1);
    assert_int_equal(st1.retries - st0.retries, 1);
    assert_int_equal(st1.connects - st0.connects, 1);
    /* an endpoint nobody listens on fails its items only */
    struct mc_xfer_item two[2] = {{loc(f, 0), dst, 100, 9, NULL},
                                  {loc(f, 0), dst + 100, 100, 9, NULL}};
    two[1].loc.endpoint = "127.0.0.1:1";
    assert_int_equal(mc_transport_batch(f->tcp, false, two, 2), 0);
    assert_int_equal(two[0].status, 0);
    assert_int_equal(two[1].status, MC_ERR_TRANSFER_FAIL);
    free(src);
    free(dst);
    mc_transport_free(f->local);
    assert_int_equal(mc_transport_local_new(f->ps, &f->local), 0);
    struct mc_rpc_client_config rc;
    mc_rpc_client_config_init(&rc);
    rc.host = "127.0.0.1";
    rc.port = f->port;
    assert_int_equal(mc_rpc_client_new(&rc, &f->raw), 0);
}

/* ---- many peers at once --------------------------------------------------------------------- */

struct worker {
    struct fx *f;
    struct mc_transport *t;
    int idx;
    int errors;
};

#define NWORKERS 8
#define REGION (256u << 10)

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint8_t *src = malloc(REGION), *dst = malloc(REGION);
    for (int it = 0; it < 10; it++) {
        fill(src, REGION, (uint32_t)(w->idx * 100 + it));
        struct mc_xfer_loc l = loc(w->f, (uint64_t)w->idx * REGION);
        if (mc_transport_write(w->t, &l, src, REGION) != 0 ||
            mc_transport_read(w->t, &l, dst, REGION) != 0 || memcmp(src, dst, REGION) != 0)
            w->errors++;
    }
    free(src);
    free(dst);
    return NULL;
}

static void test_many_peers_at_once(void **state)
{
    struct fx *f = *state;
    struct worker w[NWORKERS];
    pthread_t th[NWORKERS];
    struct mc_transport *own[NWORKERS / 2];
    for (int i = 0; i < NWORKERS; i++) {
        w[i] = (struct worker){f, f->tcp, i, 0};
        if (i < NWORKERS / 2) { /* half as separate peers, half sharing one pool */
            struct mc_tcp_transport_config tc;
            mc_tcp_transport_config_init(&tc);
            tc.slice_bytes = 32u << 10;
            assert_int_equal(mc_transport_tcp_new(&tc, &own[i]), 0);
            w[i].t = own[i];
        }
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NWORKERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].errors, 0);
    }
    for (int i = 0; i < NWORKERS / 2; i++)
        mc_transport_free(own[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tcp_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_round_trip_and_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_read_crc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tcp_read_crc, setup, teardown),
        cmocka_unit_test(test_tcp_read_crc_out_of_order),
        cmocka_unit_test_setup_teardown(test_bad_ranges_and_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_and_padded_payloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mount_epoch_single, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mount_epoch_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disconnect_mid_frame_and_garbage, setup, teardown),
        cmocka_unit_test(test_peer_dies_or_stalls),
        cmocka_unit_test_setup_teardown(test_pooled_connection_after_server_restart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_many_peers_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tcp_batch_groups_by_endpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tcp_batch_chunks_and_stale_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_idle_age_and_gone_peers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
