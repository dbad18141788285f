/*
 * test_rdma.c - the RDMA transport without hardware: slice planning and the connection message
 * (pure functions), and the transport's state logic (connection set-up, completion matching,
 * error teardown, queue pair rebuild, the listener, the disk push) through the loopback test
 * provider (rdma_fake.h). The production ops table is checked against the real libraries.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_skip.h"

#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/peer_server.h"
#include "client/rdma_disk.h"
#include "client/rdma_internal.h"
#include "client/rdma_plan.h"
#include "client/transport.h"
#include "common/auth.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"
#include "rdma_fake.h"

/* ---- slice planning ----------------------------------------------------------------------- */

static void test_slices_examples(void **state)
{
    uint64_t off;
    uint32_t n;
    assert_int_equal(mc_rdma_slice_count(0, 4096), 0);
    assert_int_equal(mc_rdma_slice_count(1, 4096), 1);
    mc_rdma_slice_at(1, 4096, 0, &off, &n);
    assert_int_equal(off, 0);
    assert_int_equal(n, 1);
    assert_int_equal(mc_rdma_slice_count(8192, 4096), 2);
    /* a tail of a quarter slice or more gets its own slice */
    assert_int_equal(mc_rdma_slice_count(8192 + 1024, 4096), 3);
    mc_rdma_slice_at(8192 + 1024, 4096, 2, &off, &n);
    assert_int_equal(off, 8192);
    assert_int_equal(n, 1024);
    /* a shorter tail merges into the last slice */
    assert_int_equal(mc_rdma_slice_count(8192 + 1023, 4096), 2);
    mc_rdma_slice_at(8192 + 1023, 4096, 1, &off, &n);
    assert_int_equal(off, 4096);
    assert_int_equal(n, 4096 + 1023);
    /* no full slice: the whole transfer is one */
    assert_int_equal(mc_rdma_slice_count(100, 65536), 1);
}

static void test_slices_cover_exactly(void **state)
{
    const uint32_t slices[] = {4096, 65536, 1u << 20};
    for (size_t s = 0; s < sizeof(slices) / sizeof(slices[0]); s++) {
        uint32_t sl = slices[s];
        const uint64_t lens[] = {1,
                                 sl - 1,
                                 sl,
                                 sl + 1,
                                 sl + sl / 4 - 1,
                                 sl + sl / 4,
                                 5ull * sl + 7,
                                 100ull * sl + sl / 2,
                                 (1ull << 32) + 3};
        for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
            uint64_t len = lens[l], next = 0;
            size_t cnt = mc_rdma_slice_count(len, sl);
            assert_true(cnt >= 1);
            for (size_t i = 0; i < cnt; i++) {
                uint64_t off;
                uint32_t n;
                mc_rdma_slice_at(len, sl, i, &off, &n);
                assert_int_equal(off, next); /* contiguous */
                assert_true(n > 0);
                if (i + 1 < cnt)
                    assert_int_equal(n, sl);
                else
                    assert_true(n <= sl + sl / 4); /* a merged tail stays small */
                next = off + n;
            }
            assert_int_equal(next, len); /* nothing missing, nothing extra */
        }
    }
}

/* ---- connection message ------------------------------------------------------------------- */

static void test_conn_msg_roundtrip(void **state)
{
    uint8_t buf[56] = {0};
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_REQUEST, .client_id = {0x1122, 0x3344}}, d;
    mc_rdma_conn_msg_encode(&m, buf);
    assert_int_equal(mc_rdma_conn_msg_decode(buf, MC_RDMA_CONN_MSG_LEN, &d), 0);
    assert_int_equal(d.kind, MC_RDMA_CONN_REQUEST);
    assert_int_equal(d.client_id.hi, 0x1122);
    assert_int_equal(d.client_id.lo, 0x3344);
    /* zero padding after the message, as the CM delivers it, is accepted */
    assert_int_equal(mc_rdma_conn_msg_decode(buf, sizeof(buf), &d), 0);
    m.kind = MC_RDMA_CONN_ACCEPT;
    mc_rdma_conn_msg_encode(&m, buf);
    assert_int_equal(mc_rdma_conn_msg_decode(buf, MC_RDMA_CONN_MSG_LEN, &d), 0);
    assert_int_equal(d.kind, MC_RDMA_CONN_ACCEPT);
}

static void test_conn_msg_malformed(void **state)
{
    uint8_t good[MC_RDMA_CONN_MSG_LEN], b[MC_RDMA_CONN_MSG_LEN];
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_REQUEST, .client_id = {1, 2}}, d;
    mc_rdma_conn_msg_encode(&m, good);
    assert_int_equal(mc_rdma_conn_msg_decode(NULL, 24, &d), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_rdma_conn_msg_decode(good, MC_RDMA_CONN_MSG_LEN - 1, &d),
                     MC_ERR_INVALID_PARAMS); /* short */
    assert_int_equal(mc_rdma_conn_msg_decode(good, 0, &d), MC_ERR_INVALID_PARAMS);
    const size_t at[] = {0, 3, 4, 5, 5, 6, 7};
    const uint8_t val[] = {0x00, 0x00, 2, 0, 6, 1, 0x80};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        memcpy(b, good, sizeof(b));
        b[at[i]] = val[i]; /* magic, version, kind 0 / 6, reserved bits */
        assert_int_equal(mc_rdma_conn_msg_decode(b, sizeof(b), &d), MC_ERR_INVALID_PARAMS);
        assert_int_equal(d.kind, 0);
    }
    memcpy(b, good, sizeof(b));
    memset(b + 8, 0, 16); /* zero client id */
    assert_int_equal(mc_rdma_conn_msg_decode(b, sizeof(b), &d), MC_ERR_INVALID_PARAMS);
    /* the handshake kinds need their tails: a header alone is short */
    for (uint8_t k = MC_RDMA_CONN_HELLO; k <= MC_RDMA_CONN_PROVE; k++) {
        memcpy(b, good, sizeof(b));
        b[5] = k;
        assert_int_equal(mc_rdma_conn_msg_decode(b, sizeof(b), &d), MC_ERR_INVALID_PARAMS);
    }
}

/* The handshake messages round-trip with their nonces and proofs, each within rdma_cm's private
 * data limit for where it travels (connect 56, reject 148). */
static void test_conn_msg_handshake_kinds(void **state)
{
    uint8_t buf[MC_RDMA_CONN_MSG_MAX];
    struct mc_rdma_conn_msg m = {.client_id = {3, 4}}, d;
    for (size_t i = 0; i < sizeof(m.nonce); i++) {
        m.nonce[i] = (uint8_t)i;
        m.mac[i] = (uint8_t)(200 - i);
    }
    const uint8_t kinds[] = {MC_RDMA_CONN_HELLO, MC_RDMA_CONN_CHALLENGE, MC_RDMA_CONN_PROVE};
    const size_t lens[] = {56, 88, 56};
    for (size_t i = 0; i < 3; i++) {
        m.kind = kinds[i];
        size_t n = mc_rdma_conn_msg_encode(&m, buf);
        assert_int_equal(n, lens[i]);
        assert_int_equal(mc_rdma_conn_msg_decode(buf, n, &d), 0);
        assert_int_equal(d.kind, kinds[i]);
        assert_true(mc_id_eq(d.client_id, m.client_id));
        if (kinds[i] != MC_RDMA_CONN_PROVE)
            assert_memory_equal(d.nonce, m.nonce, sizeof(m.nonce));
        if (kinds[i] != MC_RDMA_CONN_HELLO)
            assert_memory_equal(d.mac, m.mac, sizeof(m.mac));
        assert_int_equal(mc_rdma_conn_msg_decode(buf, n - 1, &d), MC_ERR_INVALID_PARAMS);
    }
}

/* ---- the transport over the fake device --------------------------------------------------- */

#define PEER "10.0.0.2:7000"

struct fx {
    struct fake f;
    struct mc_transport *t;
    uint8_t *remote; /* the peer's segment */
    size_t remote_len;
    uint32_t rkey;
};

static struct mc_transport *make_transport(uint32_t slice, uint32_t window)
{
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.slice_bytes = slice;
    cfg.window = window;
    cfg.io_timeout_ms = 1000;
    cfg.staging_bytes = 8192;
    cfg.client_id = (struct mc_id){0xabc, 0xdef};
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), 0);
    return t;
}

static int setup(void **state)
{
    struct fx *x = calloc(1, sizeof(*x));
    fake_init(&x->f);
    x->remote_len = 4u << 20;
    x->remote = calloc(1, x->remote_len);
    x->rkey = fake_expose(x->remote, x->remote_len);
    x->t = make_transport(4096, 4);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fx *x = *state;
    mc_transport_free(x->t);
    /* every verbs object the transport made is gone */
    assert_int_equal(x->f.pds, 0);
    assert_int_equal(x->f.mrs_live, 0);
    assert_int_equal(x->f.cqs, 0);
    assert_int_equal(x->f.chans, 0);
    assert_int_equal(x->f.echs, 0);
    assert_int_equal(x->f.qps_created, x->f.qps_destroyed);
    assert_int_equal(x->f.ids_created, x->f.ids_destroyed);
    assert_int_equal(x->f.outstanding, 0);
    free(x->remote);
    free(x);
    return 0;
}

static struct mc_xfer_loc at(struct fx *x, uint64_t off)
{
    struct mc_xfer_loc l = {.segment_id = {1, 1},
                            .offset = off,
                            .endpoint = PEER,
                            .mount_epoch = 1,
                            .remote_addr = (uint64_t)(uintptr_t)(x->remote + off),
                            .rkey = x->rkey};
    return l;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 31 + seed + (i >> 12));
}

static void test_roundtrip_sizes(void **state)
{
    struct fx *x = *state;
    const size_t sizes[] = {1, 4095, 4096, 4097, 5000, 65536, 100000, (1u << 20) + 12345};
    uint8_t *src = malloc(2u << 20), *dst = malloc(2u << 20);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        fill(src, n, (unsigned)i);
        memset(dst, 0, n);
        struct mc_xfer_loc l = at(x, 1000 + i);
        assert_int_equal(mc_transport_write(x->t, &l, src, n), 0);
        assert_memory_equal(x->remote + 1000 + i, src, n);
        assert_int_equal(mc_transport_read(x->t, &l, dst, n), 0);
        assert_memory_equal(dst, src, n);
    }
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.connects, 1); /* created lazily once, then pooled */
    assert_int_equal(st.reuses, 2 * 8 - 1);
    assert_int_equal(st.idle, 1);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.posted, st.completed);
    assert_int_equal(st.temp_regs, 16);     /* unregistered caller buffers */
    assert_true(x->f.max_outstanding <= 4); /* the window bounds the work requests in flight */
    assert_int_equal(x->f.max_outstanding, 4);
    assert_int_equal(x->f.bad_connect_msgs, 0);
    free(src);
    free(dst);
}

static void test_registered_buffer_used(void **state)
{
    struct fx *x = *state;
    size_t n = 3 * 4096;
    uint8_t *buf = malloc(4 * 4096);
    fill(buf, 4 * 4096, 9);
    uint32_t rkey = 0;
    assert_int_equal(mc_transport_rdma_register(x->t, buf, 4 * 4096, &rkey), 0);
    assert_true(rkey != 0);
    assert_int_equal(mc_transport_rdma_register(x->t, buf + 4096, 10, NULL),
                     MC_ERR_INVALID_PARAMS); /* overlap */
    struct mc_xfer_loc l = at(x, 0);
    assert_int_equal(mc_transport_write(x->t, &l, buf + 100, n), 0);
    assert_memory_equal(x->remote, buf + 100, n);
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.temp_regs, 0); /* the registered range's key was used */
    assert_int_equal(mc_transport_rdma_unregister(x->t, buf), 0);
    assert_int_equal(mc_transport_rdma_unregister(x->t, buf), MC_ERR_INVALID_PARAMS);
    free(buf);
}

/* An error completion mid-transfer: nothing more is posted, the rest come back flushed, the
 * call waits for all of them, fails, and the queue pair is torn down; the next transfer builds a
 * new one and succeeds. */
struct captured {
    char text[8192];
    size_t len;
};

static void capture(void *arg, enum mc_log_level level, const char *line, size_t len)
{
    struct captured *c = arg;
    if (c->len + len + 2 < sizeof(c->text)) {
        memcpy(c->text + c->len, line, len);
        c->len += len;
        c->text[c->len++] = '\n';
        c->text[c->len] = 0;
    }
}

static void test_error_midway_flush_then_rebuild(void **state)
{
    struct fx *x = *state;
    struct captured cap = {.len = 0};
    struct mc_logger lg = {.level = MC_LOG_WARN, .sink = capture, .arg = &cap};
    const struct mc_logger *prev = mc_log_set_current(&lg);
    size_t n = 10 * 4096;
    uint8_t *src = malloc(n);
    fill(src, n, 3);
    x->f.fail_at_wr = 3; /* the third request of the first window of 4 */
    x->f.fail_status = IBV_WC_REM_ACCESS_ERR;
    x->f.per_wait = 1; /* completions trickle in: the flushed one comes after the error */
    struct mc_xfer_loc l = at(x, 0);
    /* a remote access error is the peer refusing the key: the replica is gone */
    assert_int_equal(mc_transport_write(x->t, &l, src, n), MC_ERR_REPLICA_IS_GONE);
    mc_log_set_current(prev);
    /* the verbs status is in the log */
    assert_non_null(strstr(cap.text, "msg=\"work request failed\""));
    assert_non_null(strstr(cap.text, "verbs_status=\"remote access error\" status=10"));
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    /* 1 and 2 completed and each freed a window place (5 and 6 went out); 3 failed; nothing
     * was posted after that; 4, 5 and 6 came back flushed and were waited for */
    assert_int_equal(st.posted, 6);
    assert_int_equal(x->f.wrs, 6);
    assert_int_equal(st.completed, 2);
    assert_int_equal(st.errors, 1);
    assert_int_equal(st.flushed, 3);
    assert_int_equal(x->f.outstanding, 0); /* every posted request completed before the return */
    assert_int_equal(st.teardowns, 1);
    assert_int_equal(st.retries, 0); /* a fresh queue pair's failure is not retried */
    assert_int_equal(st.idle, 0);
    assert_int_equal(x->f.qps_destroyed, 1);
    assert_int_equal(x->f.disconnects, 1);

    x->f.fail_at_wr = 0;
    x->f.per_wait = 0;
    memset(x->remote, 0, n);
    assert_int_equal(mc_transport_write(x->t, &l, src, n), 0);
    assert_memory_equal(x->remote, src, n);
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.connects, 2); /* rebuilt */
    assert_int_equal(x->f.qps_created, 2);
    assert_int_equal(st.completed, 2 + 10);
    free(src);
}

/* A pooled queue pair whose peer disconnected is replaced before anything is posted on it. */
static void test_pooled_qp_disconnected_is_replaced(void **state)
{
    struct fx *x = *state;
    uint8_t buf[8192];
    fill(buf, sizeof(buf), 17);
    struct mc_xfer_loc l = at(x, 0);
    assert_int_equal(mc_transport_write(x->t, &l, buf, sizeof(buf)), 0);
    fake_inject_peer_gone();
    uint64_t wrs = x->f.wrs;
    assert_int_equal(mc_transport_write(x->t, &l, buf, sizeof(buf)), 0);
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.stale, 1);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.reuses, 0);
    assert_int_equal(st.errors, 0); /* nothing was posted on the dead one */
    assert_int_equal(x->f.wrs, wrs + 2);
    assert_int_equal(x->f.qps_destroyed, 1);
}

/* A pooled queue pair that fails before any slice completed (a peer gone without a word) is
 * retried once on a fresh one; a fresh one that fails is not retried. */
static void test_pooled_qp_failing_at_once_is_retried(void **state)
{
    struct fx *x = *state;
    size_t n = 5 * 4096;
    uint8_t *src = malloc(n);
    fill(src, n, 19);
    struct mc_xfer_loc l = at(x, 0);
    assert_int_equal(mc_transport_write(x->t, &l, src, n), 0);
    memset(x->remote, 0, n);
    x->f.fail_at_wr = x->f.wrs + 1;
    x->f.fail_status = IBV_WC_RETRY_EXC_ERR;
    assert_int_equal(mc_transport_write(x->t, &l, src, n), 0);
    assert_memory_equal(x->remote, src, n);
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.errors, 1);
    assert_int_equal(st.teardowns, 1);
    assert_int_equal(st.connects, 2);
    /* the retry fails too (window 4: the pooled attempt posted 4, the retry's first is the 5th
     * request from here): the call fails, no third attempt */
    x->f.fail_at_wr = x->f.wrs + 1;
    x->f.fail_at_wr2 = x->f.wrs + 4 + 1;
    assert_int_equal(mc_transport_write(x->t, &l, src, n), MC_ERR_TRANSFER_FAIL);
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.retries, 2);
    assert_int_equal(st.connects, 3);
    assert_int_equal(st.errors, 3);
    x->f.fail_at_wr2 = 0;
    /* a fresh transport's first queue pair failing at once is not retried */
    x->f.fail_at_wr = x->f.wrs + 1;
    struct mc_transport *fresh = make_transport(4096, 4);
    assert_int_equal(mc_transport_write(fresh, &l, src, n), MC_ERR_TRANSFER_FAIL);
    struct mc_rdma_transport_stats fs;
    mc_transport_rdma_get_stats(fresh, &fs);
    assert_int_equal(fs.retries, 0);
    assert_int_equal(fs.connects, 1);
    mc_transport_free(fresh);
    free(src);
}

static void test_out_of_order_completions(void **state)
{
    struct fx *x = *state;
    x->f.reorder = true;
    size_t n = 9 * 4096 + 3000;
    uint8_t *src = malloc(n), *dst = calloc(1, n);
    fill(src, n, 5);
    memcpy(x->remote + 4096, src, n);
    struct mc_xfer_loc l = at(x, 4096);
    assert_int_equal(mc_transport_read(x->t, &l, dst, n), 0);
    assert_memory_equal(dst, src, n);
    assert_true(x->f.reordered >= 2); /* completions really came back reversed */
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.completed, 10);
    assert_int_equal(st.stray, 0);
    free(src);
    free(dst);
}

/* Writes n bytes of pattern seed at the remote's start, which must arrive as they are; the
 * transport's stats afterwards. */
static struct mc_rdma_transport_stats write_ok(struct fx *x, size_t n, uint32_t seed)
{
    uint8_t *src = malloc(n);
    assert_non_null(src);
    fill(src, n, seed);
    struct mc_xfer_loc l = at(x, 0);
    assert_int_equal(mc_transport_write(x->t, &l, src, n), 0);
    assert_memory_equal(x->remote, src, n);
    free(src);
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    return st;
}

static void test_cq_event_with_nothing_to_poll(void **state)
{
    struct fx *x = *state;
    x->f.spurious = 2;
    struct mc_rdma_transport_stats st = write_ok(x, 6 * 4096, 7);
    assert_int_equal(st.empty_events, 2);
    assert_int_equal(x->f.spurious, 0);
    assert_int_equal(st.teardowns, 0);
}

static void test_stray_completion_ignored(void **state)
{
    struct fx *x = *state;
    x->f.stray = 1;
    struct mc_rdma_transport_stats st = write_ok(x, 2 * 4096, 11);
    assert_int_equal(st.stray, 1);
    assert_int_equal(st.completed, 2);
}

static void test_dead_device_times_out(void **state)
{
    struct fx *x = *state;
    x->f.stall = true;
    uint8_t buf[8192] = {1};
    struct mc_xfer_loc l = at(x, 0);
    assert_int_equal(mc_transport_write(x->t, &l, buf, sizeof(buf)), MC_ERR_TRANSFER_FAIL);
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.teardowns, 1); /* the QP (and its unfinished requests) went away */
    assert_int_equal(x->f.qps_destroyed, 1);
    x->f.stall = false;
    assert_int_equal(mc_transport_write(x->t, &l, buf, sizeof(buf)), 0);
}

static void test_bad_rkey_fails(void **state)
{
    struct fx *x = *state;
    uint8_t buf[4096] = {0};
    struct mc_xfer_loc l = at(x, 0);
    l.rkey = x->rkey + 1000; /* no such region on the peer: its device refuses the key */
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), MC_ERR_REPLICA_IS_GONE);
    l = at(x, 0);
    l.mount_epoch = 0; /* no mount has epoch 0: refused before anything is posted */
    uint64_t wrs = x->f.wrs;
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(x->f.wrs, wrs);
    /* any other error completion is a failed transfer */
    l = at(x, 0);
    x->f.fail_at_wr = x->f.wrs + 1;
    x->f.fail_status = IBV_WC_RETRY_EXC_ERR;
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), MC_ERR_TRANSFER_FAIL);
    x->f.fail_at_wr = 0;
    l = at(x, 0);
    l.rkey = 0; /* a descriptor without RDMA keys is not ours to move */
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), MC_ERR_INVALID_REPLICA);
    l = at(x, 0);
    l.endpoint = NULL;
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), MC_ERR_INVALID_PARAMS);
}

/* A re-mount registers the segment afresh: a descriptor with the old rkey never returns bytes
 * (REPLICA_IS_GONE), the new rkey reads the same memory. */
static void test_reregister_kills_old_rkey(void **state)
{
    struct fx *x = *state;
    uint8_t *seg = malloc(65536);
    fill(seg, 65536, 21);
    uint32_t k1 = 0, k2 = 0;
    int live = x->f.mrs_live;
    assert_int_equal(mc_transport_rdma_register(x->t, seg, 65536, &k1), 0);
    struct mc_xfer_loc l = {.segment_id = {1, 1},
                            .endpoint = PEER,
                            .mount_epoch = 5,
                            .remote_addr = (uint64_t)(uintptr_t)(seg + 4096),
                            .rkey = k1};
    uint8_t out[8192];
    assert_int_equal(mc_transport_read(x->t, &l, out, sizeof(out)), 0);
    assert_memory_equal(out, seg + 4096, sizeof(out));
    assert_int_equal(mc_transport_rdma_reregister(x->t, seg, &k2), 0);
    assert_true(k2 != 0 && k2 != k1);
    assert_int_equal(x->f.mrs_live, live + 1); /* replaced, not added */
    memset(out, 0x5a, sizeof(out));
    assert_int_equal(mc_transport_read(x->t, &l, out, sizeof(out)), MC_ERR_REPLICA_IS_GONE);
    for (size_t i = 0; i < sizeof(out); i++)
        assert_int_equal(out[i], 0x5a);
    assert_int_equal(mc_transport_write(x->t, &l, out, sizeof(out)), MC_ERR_REPLICA_IS_GONE);
    assert_int_not_equal(seg[4096], 0x5a); /* nor did a write land */
    l.rkey = k2;
    l.mount_epoch = 6;
    assert_int_equal(mc_transport_read(x->t, &l, out, sizeof(out)), 0);
    assert_memory_equal(out, seg + 4096, sizeof(out));
    uint32_t k = 0;
    assert_int_equal(mc_transport_rdma_rkey(x->t, seg + 10, 100, &k), 0);
    assert_int_equal(k, k2);
    assert_int_equal(mc_transport_rdma_reregister(x->t, seg + 1, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_transport_rdma_unregister(x->t, seg), 0);
    assert_int_equal(x->f.mrs_live, live);
    free(seg);
}

static void test_connect_rejected_or_malformed_accept(void **state)
{
    struct fx *x = *state;
    uint8_t buf[4096] = {0};
    struct mc_xfer_loc l = at(x, 0);
    x->f.reject_connect = true;
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), MC_ERR_TRANSFER_FAIL);
    x->f.reject_connect = false;
    x->f.accept_msg[0] ^= 0xff; /* the peer answers with something that is not our message */
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), MC_ERR_TRANSFER_FAIL);
    assert_int_equal(x->f.wrs, 0); /* nothing was posted on either */
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.connects, 0);
    assert_int_equal(x->f.qps_created, x->f.qps_destroyed);
    x->f.accept_msg[0] ^= 0xff;
    assert_int_equal(mc_transport_read(x->t, &l, buf, sizeof(buf)), 0);
}

static void test_no_device(void **state)
{
    struct fake f;
    fake_init(&f);
    f.no_device = true;
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.client_id = (struct mc_id){1, 2};
    struct mc_transport *t = (struct mc_transport *)0x1;
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), MC_ERR_NOT_SUPPORTED);
    assert_null(t);
    assert_int_equal(f.pds, 0);
    /* a bad config is refused before any device is touched */
    f.no_device = false;
    cfg.slice_bytes = 100;
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), MC_ERR_INVALID_PARAMS);
    mc_rdma_transport_config_init(&cfg);
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), MC_ERR_INVALID_PARAMS); /* id 0 */
}

static void test_listener_accepts_and_rejects(void **state)
{
    struct fx *x = *state;
    assert_int_equal(mc_transport_rdma_listen(x->t, "10.0.0.1", 7000, false), 0);
    uint8_t junk[10] = {1, 2, 3};
    fake_inject_connect(junk, sizeof(junk));
    assert_true(fake_wait_for(&x->f.rejected, 1));
    fake_inject_connect(NULL, 0);
    assert_true(fake_wait_for(&x->f.rejected, 2));
    uint8_t msg[MC_RDMA_CONN_MSG_LEN];
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_ACCEPT, .client_id = {5, 6}};
    mc_rdma_conn_msg_encode(&m, msg); /* an accept is not a request */
    fake_inject_connect(msg, sizeof(msg));
    assert_true(fake_wait_for(&x->f.rejected, 3));
    m.kind = MC_RDMA_CONN_REQUEST;
    mc_rdma_conn_msg_encode(&m, msg);
    fake_inject_connect(msg, sizeof(msg));
    assert_true(fake_wait_for(&x->f.accepted, 1));
    assert_int_equal(x->f.bad_connect_msgs, 0); /* our accept carried a valid message */
    fake_inject_disconnect_last();
    assert_true(fake_wait_for(&x->f.qps_destroyed, 1));
    assert_int_equal(x->f.rejected, 3);
    /* one more accepted connection stays up until the transport is freed (teardown checks) */
    fake_inject_connect(msg, sizeof(msg));
    assert_true(fake_wait_for(&x->f.accepted, 2));
}

/* Protected mode (no token): only loopback peers get a queue pair. */
static void test_listener_protected_mode(void **state)
{
    struct fx *x = *state;
    assert_int_equal(mc_transport_rdma_listen(x->t, NULL, 7000, true), 0);
    assert_int_equal(mc_transport_rdma_listen(x->t, NULL, 7001, true), MC_ERR_INVALID_PARAMS);
    uint8_t msg[MC_RDMA_CONN_MSG_LEN];
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_REQUEST, .client_id = {5, 6}};
    mc_rdma_conn_msg_encode(&m, msg);
    fake_inject_connect_from("10.1.2.3", msg, sizeof(msg));
    assert_true(fake_wait_for(&x->f.rejected, 1));
    assert_int_equal(x->f.accepted, 0);
    assert_int_equal(x->f.qps_created, 0); /* refused before any verbs object was made */
    fake_inject_connect_from("127.0.0.1", msg, sizeof(msg));
    assert_true(fake_wait_for(&x->f.accepted, 1));
    assert_int_equal(x->f.rejected, 1);
}

/* ---- the token handshake over rdma_cm private data (loopback fake: two transports) -------- */

#define TOKEN_A "rdma-shared-secret-0123456789abcdef"
#define TOKEN_B "another-secret-that-is-not-the-same!"

static struct mc_transport *make_auth_transport(const char *token, struct mc_id id,
                                                struct mc_auth_key *key)
{
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.io_timeout_ms = 1000;
    cfg.connect_timeout_ms = 1000;
    cfg.staging_bytes = 8192;
    cfg.client_id = id;
    memset(key, 0, sizeof(*key));
    if (token) {
        assert_int_equal(mc_auth_key_from_token(token, strlen(token), key), 0);
        cfg.auth = key;
    }
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), 0);
    return t;
}

/* A transport proving key (which may list an alternate token: rotation). */
static struct mc_transport *make_key_transport(const struct mc_auth_key *key, struct mc_id id)
{
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.io_timeout_ms = 1000;
    cfg.connect_timeout_ms = 1000;
    cfg.staging_bytes = 8192;
    cfg.client_id = id;
    cfg.auth = key;
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), 0);
    return t;
}

static bool wire_has(const struct fake *f, const void *needle, size_t n)
{
    return memmem(f->wire, f->wire_len, needle, n) != NULL;
}

/* The kinds of the messages on the wire, in order (one letter each: R A H C P). */
static void wire_kinds(const struct fake *f, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t off = 0; off + MC_RDMA_CONN_MSG_LEN <= f->wire_len && k + 1 < cap;) {
        struct mc_rdma_conn_msg m;
        assert_int_equal(mc_rdma_conn_msg_decode(f->wire + off, f->wire_len - off, &m), 0);
        out[k++] = "?RAHCP"[m.kind];
        off += mc_rdma_conn_msg_len(m.kind);
    }
    out[k] = 0;
}

static void auth_check_clean(struct fake *f)
{
    assert_int_equal(f->pds, 0);
    assert_int_equal(f->mrs_live, 0);
    assert_int_equal(f->cqs, 0);
    assert_int_equal(f->chans, 0);
    assert_int_equal(f->echs, 0);
    assert_int_equal(f->qps_created, f->qps_destroyed);
    assert_int_equal(f->ids_created, f->ids_destroyed);
}

/* Same token on both sides: hello, challenge (in the reject), prove, accept; the transfer moves
 * the bytes; neither the token nor the key derived from it ever crosses the wire. */
static void test_auth_right_token_connects(void **state)
{
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    struct mc_auth_key ka, kb;
    struct mc_transport *a = make_auth_transport(TOKEN_A, (struct mc_id){1, 1}, &ka);
    struct mc_transport *b = make_auth_transport(TOKEN_A, (struct mc_id){2, 2}, &kb);
    assert_int_equal(mc_transport_rdma_listen(b, "10.0.0.1", 7000, true), 0);
    uint8_t *seg = calloc(1, 65536);
    uint32_t rkey = 0;
    assert_int_equal(mc_transport_rdma_register(b, seg, 65536, &rkey), 0);
    struct mc_xfer_loc l = {.segment_id = {1, 1},
                            .endpoint = "10.0.0.1:7000",
                            .mount_epoch = 1,
                            .remote_addr = (uint64_t)(uintptr_t)(seg + 100),
                            .rkey = rkey};
    uint8_t src[10000], dst[10000];
    fill(src, sizeof(src), 5);
    assert_int_equal(mc_transport_write(a, &l, src, sizeof(src)), 0);
    assert_memory_equal(seg + 100, src, sizeof(src));
    assert_int_equal(mc_transport_read(a, &l, dst, sizeof(dst)), 0);
    assert_memory_equal(dst, src, sizeof(src));
    struct mc_rdma_transport_stats sa, sb;
    mc_transport_rdma_get_stats(a, &sa);
    mc_transport_rdma_get_stats(b, &sb);
    assert_int_equal(sa.connects, 1);
    assert_int_equal(sa.auth_failed, 0);
    assert_int_equal(sb.auth_refused, 0);
    assert_int_equal(f.accepted, 1);
    assert_int_equal(f.rejected, 1); /* the hello, answered with the challenge */
    char kinds[16];
    wire_kinds(&f, kinds, sizeof(kinds));
    assert_string_equal(kinds, "HCPA");
    /* the secret never crosses: not the token, not the key, not a token-sized piece of it */
    assert_false(wire_has(&f, TOKEN_A, strlen(TOKEN_A)));
    assert_false(wire_has(&f, TOKEN_A, 8));
    assert_false(wire_has(&f, ka.k, sizeof(ka.k)));
    assert_false(wire_has(&f, ka.k, 8));

    /* a recorded prove replayed (the challenge it answered is used up) gets no queue pair */
    uint8_t prove[MC_RDMA_CONN_MSG_MAX];
    size_t off = 56 + 88; /* hello, challenge */
    memcpy(prove, f.wire + off, 56);
    int acc = f.accepted;
    fake_inject_connect_from("127.0.0.1", prove, 56);
    assert_true(fake_wait_for(&f.rejected, 2));
    mc_transport_rdma_get_stats(b, &sb);
    assert_int_equal(sb.auth_refused, 1);
    assert_int_equal(f.accepted, acc);

    mc_transport_free(a);
    mc_transport_free(b);
    free(seg);
    auth_check_clean(&f);
}

/* Token rotation over rdma_cm, as over tcp: a side whose token file lists two tokens proves the
 * first and accepts a peer's proof made with either. Mid-rotation, one side proves the old
 * token and the other the new one, and they still connect both ways; a third token does not. */
static void test_auth_two_token_rotation(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    struct mc_auth_key kc, kold, knew;
    assert_int_equal(mc_auth_key_from_token(TOKEN_A, strlen(TOKEN_A), &kold), 0);
    assert_int_equal(mc_auth_key_from_token(TOKEN_B, strlen(TOKEN_B), &knew), 0);
    /* a: "new, old" (already proves the new one); b: "old, new" (still proves the old one) */
    struct mc_auth_key ka = knew, kb = kold;
    ka.has_alt = kb.has_alt = true;
    memcpy(ka.alt, kold.k, sizeof(ka.alt));
    memcpy(kb.alt, knew.k, sizeof(kb.alt));
    struct mc_transport *a = make_key_transport(&ka, (struct mc_id){1, 1});
    struct mc_transport *b = make_key_transport(&kb, (struct mc_id){2, 2});
    assert_int_equal(mc_transport_rdma_listen(b, "10.0.0.1", 7000, true), 0);
    uint8_t *seg = calloc(1, 65536);
    uint32_t rkey = 0;
    assert_int_equal(mc_transport_rdma_register(b, seg, 65536, &rkey), 0);
    struct mc_xfer_loc l = {.segment_id = {1, 1},
                            .endpoint = "10.0.0.1:7000",
                            .mount_epoch = 1,
                            .remote_addr = (uint64_t)(uintptr_t)(seg + 100),
                            .rkey = rkey};
    uint8_t src[4096], dst[4096];
    fill(src, sizeof(src), 11);
    assert_int_equal(mc_transport_write(a, &l, src, sizeof(src)), 0);
    assert_int_equal(mc_transport_read(a, &l, dst, sizeof(dst)), 0);
    assert_memory_equal(dst, src, sizeof(src));
    struct mc_rdma_transport_stats sa, sb;
    mc_transport_rdma_get_stats(a, &sa);
    mc_transport_rdma_get_stats(b, &sb);
    assert_int_equal(sa.auth_failed, 0);
    assert_int_equal(sb.auth_refused, 0);
    /* a peer with a token neither side lists is refused */
    struct mc_transport *c =
        make_auth_transport("a-third-token-nobody-else-has-0123456", (struct mc_id){3, 3}, &kc);
    assert_int_not_equal(mc_transport_read(c, &l, dst, sizeof(dst)), 0);
    mc_transport_rdma_get_stats(c, &sa);
    assert_int_equal(sa.auth_failed, 1);
    mc_transport_free(c);
    mc_transport_free(a);
    mc_transport_free(b);
    free(seg);
    auth_check_clean(&f);
}

/* A wrong token, no token, or a listener without one: no queue pair, each refusal counted on
 * the side that saw it, nothing transferred. */
static void test_auth_wrong_or_missing_token_refused(void **state)
{
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    struct mc_auth_key kb, kw, kn, kt;
    struct mc_transport *b = make_auth_transport(TOKEN_A, (struct mc_id){2, 2}, &kb);
    assert_int_equal(mc_transport_rdma_listen(b, NULL, 7000, false), 0);
    uint8_t *seg = calloc(1, 8192);
    uint32_t rkey = 0;
    assert_int_equal(mc_transport_rdma_register(b, seg, 8192, &rkey), 0);
    struct mc_xfer_loc l = {.segment_id = {1, 1},
                            .endpoint = "10.0.0.1:7000",
                            .mount_epoch = 1,
                            .remote_addr = (uint64_t)(uintptr_t)seg,
                            .rkey = rkey};
    uint8_t buf[4096];
    fill(buf, sizeof(buf), 1);

    /* wrong token: the dialler finds the listener's proof wrong and never sends its own */
    struct mc_transport *w = make_auth_transport(TOKEN_B, (struct mc_id){3, 3}, &kw);
    assert_int_equal(mc_transport_write(w, &l, buf, sizeof(buf)), MC_ERR_TRANSFER_FAIL);
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(w, &st);
    assert_int_equal(st.auth_failed, 1);
    assert_int_equal(st.connects, 0);

    /* no token: a plain request is refused by the listener and counted there */
    struct mc_transport *n = make_auth_transport(NULL, (struct mc_id){4, 4}, &kn);
    assert_int_equal(mc_transport_write(n, &l, buf, sizeof(buf)), MC_ERR_TRANSFER_FAIL);
    mc_transport_rdma_get_stats(b, &st);
    assert_int_equal(st.auth_refused, 1);

    /* a peer that ignores the listener's proof and guesses its own: refused, counted */
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_HELLO, .client_id = {9, 9}};
    memset(m.nonce, 0x42, sizeof(m.nonce));
    uint8_t msg[MC_RDMA_CONN_MSG_MAX];
    int rej = f.rejected;
    fake_inject_connect_from("127.0.0.1", msg, (uint8_t)mc_rdma_conn_msg_encode(&m, msg));
    assert_true(fake_wait_for(&f.rejected, rej + 1)); /* the challenge */
    m.kind = MC_RDMA_CONN_PROVE;
    memset(m.mac, 0x17, sizeof(m.mac));
    fake_inject_connect_from("127.0.0.1", msg, (uint8_t)mc_rdma_conn_msg_encode(&m, msg));
    assert_true(fake_wait_for(&f.rejected, rej + 2));
    mc_transport_rdma_get_stats(b, &st);
    assert_int_equal(st.auth_refused, 2);
    /* a prove with no challenge behind it (another client id) likewise */
    m.client_id = (struct mc_id){10, 10};
    fake_inject_connect_from("127.0.0.1", msg, (uint8_t)mc_rdma_conn_msg_encode(&m, msg));
    assert_true(fake_wait_for(&f.rejected, rej + 3));
    mc_transport_rdma_get_stats(b, &st);
    assert_int_equal(st.auth_refused, 3);

    assert_int_equal(f.accepted, 0); /* the listener made no queue pair for any of them */
    for (size_t i = 0; i < sizeof(buf); i++)
        assert_int_equal(seg[i], 0);
    mc_transport_free(w);
    mc_transport_free(n);
    mc_transport_free(b);

    /* a dialler with a token and a listener without one: the hello is rejected bare */
    struct mc_transport *t = make_auth_transport(TOKEN_A, (struct mc_id){5, 5}, &kt);
    struct mc_transport *open = make_auth_transport(NULL, (struct mc_id){6, 6}, &kn);
    assert_int_equal(mc_transport_rdma_listen(open, NULL, 7000, false), 0);
    assert_int_equal(mc_transport_write(t, &l, buf, sizeof(buf)), MC_ERR_TRANSFER_FAIL);
    mc_transport_rdma_get_stats(t, &st);
    assert_int_equal(st.auth_failed, 1);
    assert_int_equal(f.accepted, 0);
    mc_transport_free(t);
    mc_transport_free(open);
    free(seg);
    auth_check_clean(&f);
}

/* ---- several devices ---------------------------------------------------------------------- */

/* Two devices, the holder's advertised address on the second: a peer's connection lands there,
 * so the rkey in the holder's descriptors must be the second device's (memory regions are per
 * protection domain). The first device's key for the same memory is refused. */
static void test_two_devices_rkey_of_serving_device(void **state)
{
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    f.ndev = 2;
    snprintf(f.dev_addr[0], sizeof(f.dev_addr[0]), "10.0.0.1");
    snprintf(f.dev_addr[1], sizeof(f.dev_addr[1]), "10.0.0.2");
    struct mc_auth_key ka, kb;
    struct mc_transport *a = make_auth_transport(NULL, (struct mc_id){1, 1}, &ka);
    struct mc_transport *b = make_auth_transport(NULL, (struct mc_id){2, 2}, &kb);
    assert_int_equal(f.pds, 4); /* one protection domain per device per transport */
    assert_int_equal(mc_transport_rdma_serve_on(b, "10.0.0.2"), 1);
    assert_string_equal(mc_transport_rdma_device(b), "fake1");
    assert_int_equal(mc_transport_rdma_listen(b, NULL, 7000, false), 0);
    uint8_t *seg = calloc(1, 65536);
    uint32_t rkey = 0, k0 = 0;
    assert_int_equal(mc_transport_rdma_register(b, seg, 65536, &rkey), 0);
    assert_int_equal(mc_transport_rdma_rkey(b, seg, 100, &k0), 0);
    assert_int_equal(k0, rkey);
    uint8_t src[6000], dst[6000];
    fill(src, sizeof(src), 8);
    struct mc_xfer_loc l = {.segment_id = {1, 1},
                            .endpoint = "10.0.0.2:7000",
                            .mount_epoch = 1,
                            .remote_addr = (uint64_t)(uintptr_t)(seg + 512),
                            .rkey = rkey};
    assert_int_equal(mc_transport_write(a, &l, src, sizeof(src)), 0);
    assert_memory_equal(seg + 512, src, sizeof(src));
    assert_int_equal(mc_transport_read(a, &l, dst, sizeof(dst)), 0);
    assert_memory_equal(dst, src, sizeof(src));
    /* the segment is registered on the serving device only (the locked-memory limit is charged
     * once): no region of it on the other device */
    int regions = 0;
    for (int i = 0; i < f.nmrs; i++)
        if (f.mrs[i].mr && f.mrs[i].addr == seg) {
            regions++;
            assert_ptr_equal(f.mrs[i].mr->context, &f.ctx[1]);
        }
    assert_int_equal(regions, 1);
    /* a key of the dialler's own device (its staging buffer's) is refused by the serving one */
    uint32_t other = 0;
    for (int i = 0; i < f.nmrs; i++)
        if (f.mrs[i].mr && f.mrs[i].mr->context == &f.ctx[0])
            other = f.mrs[i].key;
    assert_true(other != 0);
    l.rkey = other;
    memset(dst, 0x5a, sizeof(dst));
    assert_int_equal(mc_transport_read(a, &l, dst, sizeof(dst)), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(dst[0], 0x5a);
    /* an address no device owns keeps the first device, and a re-registration keeps serving
     * the chosen device's key */
    assert_int_equal(mc_transport_rdma_serve_on(a, "192.168.9.9"), 0);
    assert_string_equal(mc_transport_rdma_device(a), "fake0");
    uint32_t k2 = 0;
    assert_int_equal(mc_transport_rdma_reregister(b, seg, &k2), 0);
    l.rkey = k2;
    assert_int_equal(mc_transport_read(a, &l, dst, sizeof(dst)), 0);
    assert_memory_equal(dst, src, sizeof(src));
    assert_int_equal(mc_transport_rdma_unregister(b, seg), 0);
    mc_transport_free(a);
    mc_transport_free(b);
    free(seg);
    auth_check_clean(&f);
}

/* ---- LOCAL_DISK over RDMA: the holder pushes through its staging buffer ------------------- */

struct disk {
    const uint8_t *bytes;
    size_t len;
    int calls;
    uint64_t next;
    int fail_at_call;
};

static int disk_fill(void *arg, uint64_t off, void *buf, size_t n)
{
    struct disk *d = arg;
    d->calls++;
    if (d->fail_at_call && d->calls == d->fail_at_call)
        return MC_ERR_FILE_READ_FAIL;
    assert_int_equal(off, d->next); /* chunks in order, none skipped */
    assert_true(off + n <= d->len);
    memcpy(buf, d->bytes + off, n);
    d->next = off + n;
    return 0;
}

static void test_disk_push(void **state)
{
    struct fx *x = *state;
    size_t n = 50000;
    uint8_t *val = malloc(n);
    fill(val, n, 13);
    struct disk d = {.bytes = val, .len = n};
    /* the reader's registered buffer is x->remote (its address and rkey came in the request) */
    assert_int_equal(mc_transport_rdma_push(x->t, PEER, (uint64_t)(uintptr_t)(x->remote + 64),
                                            x->rkey, n, disk_fill, &d),
                     0);
    assert_memory_equal(x->remote + 64, val, n);
    assert_int_equal(d.calls, (int)((n + 8191) / 8192)); /* staging buffer of 8 KiB */
    struct mc_rdma_transport_stats st;
    mc_transport_rdma_get_stats(x->t, &st);
    assert_int_equal(st.temp_regs, 0); /* the staging buffer is registered once */
    /* a disk error stops the push with its code */
    struct disk e = {.bytes = val, .len = n, .fail_at_call = 2};
    assert_int_equal(mc_transport_rdma_push(x->t, PEER, (uint64_t)(uintptr_t)x->remote, x->rkey, n,
                                            disk_fill, &e),
                     MC_ERR_FILE_READ_FAIL);
    assert_int_equal(mc_transport_rdma_push(x->t, PEER, 0, x->rkey, n, disk_fill, &e),
                     MC_ERR_INVALID_PARAMS);
    free(val);
}

/* A holder's disk as a table of values. */
struct kv {
    const char *key;
    const uint8_t *val;
    uint64_t len, version;
};
struct kvs {
    struct kv e[4];
    int n, reads;
};

static int kv_read(void *arg, const char *key, uint64_t version, void *buf, uint64_t cap,
                   uint64_t *len, uint32_t *crc)
{
    struct kvs *d = arg;
    d->reads++;
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->e[i].key, key) == 0) {
            if (version && version != d->e[i].version)
                return MC_ERR_REPLICA_NOT_FOUND;
            if (d->e[i].len > cap)
                return MC_ERR_BUFFER_OVERFLOW;
            memcpy(buf, d->e[i].val, d->e[i].len);
            *len = d->e[i].len;
            *crc = 0x1234 + (uint32_t)i;
            return 0;
        }
    return MC_ERR_OBJECT_NOT_FOUND;
}

/* The reader's request goes through the protobuf wire format; the holder serves it into the
 * reader's registered buffer with RDMA writes from its staging buffer. */
static void test_disk_read_request_served_over_rdma(void **state)
{
    struct fx *x = *state;
    uint8_t *v1 = malloc(5000), *v2 = malloc(3000), *big = calloc(1, 9000);
    fill(v1, 5000, 21);
    fill(v2, 3000, 22);
    struct kvs d = {.e = {{"k1", v1, 5000, 3}, {"k2", v2, 3000, 1}, {"big", big, 9000, 1}}, .n = 3};
    size_t rlen = 64 * 1024;
    uint8_t *rbuf = calloc(1, rlen), *unreg = calloc(1, 4096);
    uint32_t rk = 0; /* the reader's buffer: the holder writes it, so it has a remote key */
    assert_int_equal(mc_transport_rdma_register(x->t, rbuf, rlen, &rk), 0);

    Mc__DiskReadItem it[7], *itp[7];
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[0], "k1", 5000, 3, rbuf), 0);
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[1], "k2", 3000, 0, rbuf + 8192), 0);
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[2], "nope", 100, 0, rbuf + 16384), 0);
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[3], "k1", 5000, 9, rbuf + 20480), 0);
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[4], "k2", 2999, 0, rbuf + 28672), 0);
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[5], "big", 9000, 0, rbuf + 32768), 0);
    /* a streaming item (no rdma keys) is not this path's */
    mc__disk_read_item__init(&it[6]);
    it[6].key = "k1";
    it[6].size = 5000;
    /* the reader's buffer must be registered */
    Mc__DiskReadItem bad;
    assert_int_equal(mc_rdma_disk_item_init(x->t, &bad, "k1", 5000, 0, unreg),
                     MC_ERR_INVALID_PARAMS);
    for (int i = 0; i < 7; i++)
        itp[i] = &it[i];
    Mc__PeerDiskReadRequest req = MC__PEER_DISK_READ_REQUEST__INIT;
    req.n_items = 7;
    req.items = itp;
    req.rdma_endpoint = PEER;
    uint8_t wire[2048];
    size_t wl = mc__peer_disk_read_request__pack(&req, wire);
    Mc__PeerDiskReadRequest *got = mc__peer_disk_read_request__unpack(NULL, wl, wire);
    assert_non_null(got);
    assert_int_equal(got->items[0]->rdma_addr, (uint64_t)(uintptr_t)rbuf);
    assert_int_equal(got->items[0]->rdma_rkey, it[0].rdma_rkey);
    assert_string_equal(got->rdma_endpoint, PEER);

    int32_t st[7];
    uint64_t lens[7];
    uint32_t crcs[7];
    protobuf_c_boolean cv[7];
    assert_int_equal(mc_rdma_disk_serve(x->t, got, kv_read, &d, st, lens, crcs, cv), 2);
    assert_int_equal(st[0], 0);
    assert_int_equal(lens[0], 5000);
    assert_int_equal(crcs[0], 0x1234);
    assert_true(cv[0]);
    assert_memory_equal(rbuf, v1, 5000);
    assert_int_equal(st[1], 0);
    assert_memory_equal(rbuf + 8192, v2, 3000);
    assert_int_equal(st[2], MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(st[3], MC_ERR_REPLICA_NOT_FOUND); /* another version: never served */
    assert_int_equal(st[4], MC_ERR_INVALID_PARAMS);    /* size differs from the stored one */
    assert_int_equal(st[5], MC_ERR_INVALID_PARAMS);    /* larger than the 8 KiB staging */
    assert_int_equal(st[6], MC_ERR_INVALID_PARAMS);
    for (int i = 2; i < 7; i++) {
        assert_int_equal(lens[i], 0);
        assert_false(cv[i]);
    }
    for (size_t i = 20480; i < 20480 + 5000; i++)
        assert_int_equal(rbuf[i], 0); /* a refused item wrote nothing */
    assert_int_equal(d.reads, 5);     /* items 5 and 6 were refused before any read */

    /* without the reader's endpoint nothing can be served */
    char *ep = got->rdma_endpoint;
    got->rdma_endpoint = "";
    assert_int_equal(mc_rdma_disk_serve(x->t, got, kv_read, &d, st, lens, crcs, cv), 0);
    assert_int_equal(st[0], MC_ERR_INVALID_PARAMS);
    got->rdma_endpoint = ep; /* owned by the unpacked message */
    mc__peer_disk_read_request__free_unpacked(got, NULL);
    assert_int_equal(mc_transport_rdma_unregister(x->t, rbuf), 0);
    free(rbuf);
    free(unreg);
    free(v1);
    free(v2);
    free(big);
}

static void rm_rf(const char *dir)
{
    DIR *dd = opendir(dir);
    if (!dd)
        return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(dd))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(dd);
    rmdir(dir);
}

/* The holder side over a real disk store: value read from the SSD records, version checked. */
static void test_disk_store_served_over_rdma(void **state)
{
    struct fx *x = *state;
    char dir[] = "/tmp/mc_rdma_disk_XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct mc_disk_store_config c = {
        .path = dir, .capacity = 8u << 20, .extent_size = 1u << 20, .queue_depth = 4};
    struct mc_disk_store *s = NULL;
    char err[256] = "";
    int rc = mc_disk_store_open(&c, &s, err, sizeof(err));
    if (rc) {
        rm_rf(dir);
        MC_SKIP("disk store unavailable here (%s)", err);
    }
    uint8_t val[6000];
    fill(val, sizeof(val), 33);
    uint32_t crc = mc_crc32c(val, sizeof(val));
    struct mc_disk_put p = {
        .key = "obj", .key_len = 3, .version = 7, .crc = crc, .data = val, .len = sizeof(val)};
    assert_int_equal(mc_disk_store_append(s, &p, 1, NULL), 0);
    uint8_t *rbuf = calloc(1, 16384);
    uint32_t rk = 0; /* the reader's buffer: the holder writes it, so it has a remote key */
    assert_int_equal(mc_transport_rdma_register(x->t, rbuf, 16384, &rk), 0);
    Mc__DiskReadItem it[2], *itp[2] = {&it[0], &it[1]};
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[0], "obj", sizeof(val), 7, rbuf), 0);
    assert_int_equal(mc_rdma_disk_item_init(x->t, &it[1], "obj", sizeof(val), 8, rbuf + 8192), 0);
    Mc__PeerDiskReadRequest req = MC__PEER_DISK_READ_REQUEST__INIT;
    req.n_items = 2;
    req.items = itp;
    req.rdma_endpoint = PEER;
    int32_t st[2];
    uint64_t lens[2];
    uint32_t crcs[2];
    protobuf_c_boolean cv[2];
    assert_int_equal(mc_rdma_disk_serve(x->t, &req, mc_rdma_disk_store_read, s, st, lens, crcs, cv),
                     1);
    assert_int_equal(st[0], 0);
    assert_int_equal(crcs[0], crc);
    assert_memory_equal(rbuf, val, sizeof(val));
    assert_int_equal(st[1], MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(mc_transport_rdma_unregister(x->t, rbuf), 0);
    free(rbuf);
    mc_disk_store_close(s);
    rm_rf(dir);
}

/* A peer server on 127.0.0.1 that serves tier's disk reads (its endpoint into ep) and a TCP
 * transport to call it with (*tcp). */
static struct mc_peer_server *disk_peer(struct mc_disk_tier *tier, char *ep, size_t cap,
                                        struct mc_transport **tcp)
{
    struct mc_peer_server_config pc = {
        .bind_addr = "127.0.0.1", .on_disk_read = mc_disk_tier_on_peer_read, .disk_arg = tier};
    struct mc_peer_server *ps = NULL;
    assert_int_equal(mc_peer_server_new(&pc, &ps), 0);
    assert_int_equal(mc_peer_server_start(ps), 0);
    snprintf(ep, cap, "127.0.0.1:%u", mc_peer_server_port(ps));
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    assert_int_equal(mc_transport_tcp_new(&tc, tcp), 0);
    return ps;
}

/* A LOCAL_DISK read in RDMA mode end to end, short of the client: the reader (tcp transport and
 * rdma transport R, listening at RDR) sends PeerDiskRead to the holder's peer server; the
 * holder's disk tier reads its store into its rdma transport's staging buffer and RDMA-writes
 * each value into the reader's registered buffer, then answers statuses, lengths and CRCs. */
#define RDR "10.0.0.1:7100"

static void test_disk_read_rdma_mode(void **state)
{
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    char dir[] = "/tmp/mc_rdma_tier_XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct mc_auth_key kh, kr;
    struct mc_transport *hr = make_auth_transport(NULL, (struct mc_id){7, 1}, &kh);
    struct mc_transport *rr = make_auth_transport(NULL, (struct mc_id){7, 2}, &kr);
    assert_int_equal(mc_transport_rdma_listen(rr, "10.0.0.1", 7100, true), 0);
    struct mc_disk_tier_config dc = {.path = dir,
                                     .capacity = 64ull << 20,
                                     .endpoint = "127.0.0.1:0",
                                     .max_payload = 8u << 20,
                                     .rdma = hr};
    struct mc_disk_tier *tier = NULL;
    if (mc_disk_tier_open(&dc, &tier) != 0) {
        mc_transport_free(hr);
        mc_transport_free(rr);
        rm_rf(dir);
        MC_SKIP("disk store unavailable here");
    }
    char hep[64];
    struct mc_transport *tcp = NULL;
    struct mc_peer_server *ps = disk_peer(tier, hep, sizeof(hep), &tcp);

    enum { N = 4 };
    const size_t sizes[N] = {1, 5000, 8192, 3000};
    uint8_t *want[N];
    uint8_t *rbuf = calloc(1, 65536);
    uint32_t rkey = 0;
    assert_int_equal(mc_transport_rdma_register(rr, rbuf, 65536, &rkey), 0);
    struct mc_disk_read_item it[N];
    uint32_t rkeys[N];
    char keys[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "d%d", i);
        want[i] = malloc(sizes[i]);
        fill(want[i], sizes[i], 40 + (unsigned)i);
        struct mc_disk_put p = {.key = keys[i],
                                .key_len = (uint32_t)strlen(keys[i]),
                                .version = 3,
                                .crc = mc_crc32c(want[i], sizes[i]),
                                .data = want[i],
                                .len = sizes[i]};
        assert_int_equal(mc_disk_store_append(mc_disk_tier_store(tier), &p, 1, NULL), 0);
        it[i] = (struct mc_disk_read_item){
            .key = keys[i], .size = sizes[i], .version = 3, .buf = rbuf + 16384 * (size_t)i};
        rkeys[i] = rkey;
    }
    memset(rbuf, 0x5a, 65536);
    it[3].version = 4; /* another version than stored: never served */
    uint64_t wrs = f.wrs;
    assert_int_equal(mc_transport_tcp_disk_read_rdma(tcp, hep, RDR, rkeys, it, N), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(it[i].status, 0);
        assert_true(it[i].crc_valid);
        assert_int_equal(it[i].crc, mc_crc32c(want[i], sizes[i]));
        assert_memory_equal(rbuf + 16384 * (size_t)i, want[i], sizes[i]);
    }
    assert_int_equal(it[3].status, MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(rbuf[16384 * 3], 0x5a); /* nothing landed for it */
    assert_true(f.wrs >= wrs + 3);           /* the values moved as RDMA WRITEs */
    struct mc_rdma_transport_stats hs;
    mc_transport_rdma_get_stats(hr, &hs);
    assert_int_equal(hs.connects, 1); /* the holder dialled the reader */
    struct mc_disk_tier_stats ts;
    mc_disk_tier_get_stats(tier, &ts);
    assert_int_equal(ts.peer_reads, 3);

    /* a value larger than the holder's staging buffer (8 KiB here) is refused for rdma */
    uint8_t *big = malloc(20000);
    fill(big, 20000, 9);
    struct mc_disk_put p = {.key = "big",
                            .key_len = 3,
                            .version = 1,
                            .crc = mc_crc32c(big, 20000),
                            .data = big,
                            .len = 20000};
    assert_int_equal(mc_disk_store_append(mc_disk_tier_store(tier), &p, 1, NULL), 0);
    struct mc_disk_read_item b = {.key = "big", .size = 20000, .version = 1, .buf = rbuf};
    assert_int_equal(mc_transport_tcp_disk_read_rdma(tcp, hep, RDR, &rkey, &b, 1), 0);
    assert_int_equal(b.status, MC_ERR_INVALID_PARAMS);
    /* the same reader over plain tcp gets it */
    b.status = 0;
    assert_int_equal(mc_transport_tcp_disk_read(tcp, hep, &b, 1), 0);
    assert_int_equal(b.status, 0);
    assert_memory_equal(rbuf, big, 20000);

    mc_transport_free(tcp);
    mc_peer_server_stop(ps);
    mc_disk_tier_close(tier);
    mc_peer_server_free(ps);
    assert_int_equal(mc_transport_rdma_unregister(rr, rbuf), 0);
    mc_transport_free(hr);
    mc_transport_free(rr);
    for (int i = 0; i < N; i++)
        free(want[i]);
    free(big);
    free(rbuf);
    rm_rf(dir);
    auth_check_clean(&f);
}

/* A holder without an rdma transport refuses the RDMA mode as a whole (NOT_SUPPORTED). */
static void test_disk_read_rdma_mode_unsupported(void **state)
{
    char dir[] = "/tmp/mc_rdma_tier_XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct mc_disk_tier_config dc = {
        .path = dir, .capacity = 64ull << 20, .endpoint = "127.0.0.1:0", .max_payload = 8u << 20};
    struct mc_disk_tier *tier = NULL;
    if (mc_disk_tier_open(&dc, &tier) != 0) {
        rm_rf(dir);
        MC_SKIP("disk store unavailable here");
    }
    char hep[64];
    struct mc_transport *tcp = NULL;
    struct mc_peer_server *ps = disk_peer(tier, hep, sizeof(hep), &tcp);
    uint8_t buf[100];
    uint32_t rkey = 77;
    struct mc_disk_read_item it = {.key = "k", .size = 100, .version = 1, .buf = buf};
    assert_int_equal(mc_transport_tcp_disk_read_rdma(tcp, hep, RDR, &rkey, &it, 1), 0);
    assert_int_equal(it.status, MC_ERR_NOT_SUPPORTED);
    rkey = 0; /* an item without a key is refused before anything is sent */
    assert_int_equal(mc_transport_tcp_disk_read_rdma(tcp, hep, RDR, &rkey, &it, 1), 0);
    assert_int_equal(it.status, MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_transport_tcp_disk_read_rdma(tcp, hep, NULL, &rkey, &it, 1),
                     MC_ERR_INVALID_PARAMS);
    mc_transport_free(tcp);
    mc_peer_server_stop(ps);
    mc_disk_tier_close(tier);
    mc_peer_server_free(ps);
    rm_rf(dir);
}

/* ---- the production table ----------------------------------------------------------------- */

static void test_production_table_is_the_libraries(void **state)
{
    const struct mc_rdma_ops *v = mc_rdma_ops_verbs();
    assert_string_equal(v->name, "verbs");
    /* every entry is set (a missing one would crash the first real transfer) */
    const void *const *p = (const void *const *)&v->get_devices;
    size_t n = (sizeof(*v) - offsetof(struct mc_rdma_ops, get_devices)) / sizeof(void *);
    for (size_t i = 0; i < n; i++)
        assert_non_null(p[i]);
    /* same answers as the libraries called directly */
    int n1 = -1, n2 = -2;
    struct ibv_context **a = v->get_devices(&n1);
    struct ibv_context **b = rdma_get_devices(&n2);
    assert_int_equal(n1, n2);
    assert_int_equal(a == NULL, b == NULL);
    if (a)
        v->free_devices(a);
    if (b)
        rdma_free_devices(b);
    errno = 0;
    struct rdma_event_channel *c1 = v->create_event_channel();
    int e1 = errno;
    errno = 0;
    struct rdma_event_channel *c2 = rdma_create_event_channel();
    int e2 = errno;
    assert_int_equal(c1 == NULL, c2 == NULL);
    if (!c1)
        assert_int_equal(e1, e2);
    if (c1)
        v->destroy_event_channel(c1);
    if (c2)
        rdma_destroy_event_channel(c2);
    /* on this host: no device means the transport refuses to start, naming the problem */
    if (n2 <= 0) {
        struct mc_rdma_transport_config cfg;
        mc_rdma_transport_config_init(&cfg);
        cfg.client_id = (struct mc_id){1, 2};
        struct mc_transport *t = NULL;
        assert_int_equal(mc_transport_rdma_new(&cfg, NULL, &t), MC_ERR_NOT_SUPPORTED);
        assert_null(t);
    }
}

int main(void)
{
    mc_log_set_level(MC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices_examples),
        cmocka_unit_test(test_slices_cover_exactly),
        cmocka_unit_test(test_conn_msg_roundtrip),
        cmocka_unit_test(test_conn_msg_malformed),
        cmocka_unit_test(test_conn_msg_handshake_kinds),
        cmocka_unit_test_setup_teardown(test_roundtrip_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registered_buffer_used, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_midway_flush_then_rebuild, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pooled_qp_disconnected_is_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pooled_qp_failing_at_once_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_order_completions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cq_event_with_nothing_to_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stray_completion_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_device_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_rkey_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reregister_kills_old_rkey, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_rejected_or_malformed_accept, setup, teardown),
        cmocka_unit_test(test_no_device),
        cmocka_unit_test_setup_teardown(test_listener_accepts_and_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_protected_mode, setup, teardown),
        cmocka_unit_test(test_auth_right_token_connects),
        cmocka_unit_test(test_auth_two_token_rotation),
        cmocka_unit_test(test_auth_wrong_or_missing_token_refused),
        cmocka_unit_test(test_two_devices_rkey_of_serving_device),
        cmocka_unit_test_setup_teardown(test_disk_push, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_read_request_served_over_rdma, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_store_served_over_rdma, setup, teardown),
        cmocka_unit_test(test_disk_read_rdma_mode),
        cmocka_unit_test(test_disk_read_rdma_mode_unsupported),
        cmocka_unit_test(test_production_table_is_the_libraries),
    };
    return MC_RUN_TESTS(tests, NULL, NULL);
}
