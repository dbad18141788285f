/*
 * test_security_decode.c - a request body costs about its own size to decode, never a multiple
 * of it (README "Security": memory amplification while decoding).
 *
 * The bodies are fed through real servers that never listen (mc_rpc_server_test_feed): the
 * master's RPC server with its service registered, and a client's peer server. The process's
 * allocations are counted (alloc_meter.c replaces malloc), and each case asserts the peak over
 * one request: a body of N empty keys is 2 bytes per key in the frame but 50-80 bytes per key
 * decoded, so a decoder that does not count the elements first peaks at many times the body.
 * The RPC client decodes a server's replies under the same rules (client_reply_of_empty_messages).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc_meter.h"
#include "client/peer_server.h"
#include "common/clock.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/pb_budget.h"
#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master_service_fixture.h"
#include "master/master.h"
#include "master/service.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "proto/peer.pb-c.h"
#include "test_listen.h"
#include "test_skip.h"
#include "tools/proc_harness.h"

#define MIB (1u << 20)
#define ATTACK_BODY (4u * MIB) /* 2 Mi empty elements: ~150 MiB decoded without the guards */

/* One request frame: header, then (peer) the control-length prefix, then body. */
static uint8_t *frame(uint16_t method, const uint8_t *body, size_t len, bool peer, size_t *out_len)
{
    size_t pre = peer ? MC_WIRE_PEER_PREFIX : 0;
    uint8_t *f = malloc(MC_WIRE_HEADER_SIZE + pre + len);
    assert_non_null(f);
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, 1, 0, (uint32_t)(pre + len));
    mc_wire_encode_header(&h, f);
    if (peer)
        mc_wire_put_u32(f + MC_WIRE_HEADER_SIZE, (uint32_t)len);
    memcpy(f + MC_WIRE_HEADER_SIZE + pre, body, len);
    *out_len = MC_WIRE_HEADER_SIZE + pre + len;
    return f;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        p[n++] = (uint8_t)(v | 0x80);
    p[n++] = (uint8_t)v;
    return n;
}

/* n copies of field 1 as an empty length-delimited value (an empty key, or an empty slice). */
static uint8_t *empty_elements(size_t n, size_t *len)
{
    uint8_t *b = malloc(2 * n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        b[2 * i] = 0x0a; /* field 1, length-delimited */
        b[2 * i + 1] = 0;
    }
    *len = 2 * n;
    return b;
}

/* Feeds one frame to srv; returns the peak bytes allocated above what was live before. */
static size_t feed_peak(struct mc_rpc_server *srv, const uint8_t *f, size_t len)
{
    size_t base = mc_alloc_meter_live();
    mc_alloc_meter_reset_peak();
    assert_int_equal(mc_rpc_server_test_feed(srv, f, len), 0);
    return mc_alloc_meter_peak() - base;
}

/* The master: one BatchExistKey of 2 Mi empty keys (4 MiB) peaks at the body's copy plus a
 * little, not at tens of bytes per key; the request is refused before decoding. */
static void test_master_batch_of_empty_keys(void **state)
{
    (void)state;
    struct mc_fake_clock clk;
    mc_fake_clock_init(&clk, 1000000000ull);
    struct mc_master_config mc = msf_master_config();
    mc.clock = &clk.clock;
    mc.manual_ticks = true;
    struct mc_rpc_server_config rc = msf_server_config(NULL);
    rc.name = "master";
    struct msf x;
    msf_open(&x, &mc, rc);
    struct mc_rpc_server *srv = x.srv;

    size_t blen, flen;
    uint8_t *body = empty_elements(ATTACK_BODY / 2, &blen);
    uint8_t *f = frame(MC_METHOD_BATCH_EXIST_KEY, body, blen, false, &flen);
    free(body);
    size_t peak = feed_peak(srv, f, flen);
    print_message("BatchExistKey of %zu empty keys (%zu bytes): peak %zu bytes\n", blen / 2, blen,
                  peak);
    assert_true(peak <= 2 * (size_t)ATTACK_BODY + 4 * MIB);
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(srv, &st);
    assert_int_equal(st.decode_refusals, 1);

    /* a batch at the cap still decodes: 8,192 keys, the server answers them (no refusal) */
    body = malloc(3 * MC_PB_DEFAULT_MAX_REPEATED); /* one-byte keys "a" */
    assert_non_null(body);
    for (size_t i = 0; i < MC_PB_DEFAULT_MAX_REPEATED; i++) {
        body[3 * i] = 0x0a;
        body[3 * i + 1] = 1;
        body[3 * i + 2] = 'a';
    }
    free(f);
    f = frame(MC_METHOD_BATCH_EXIST_KEY, body, 3 * MC_PB_DEFAULT_MAX_REPEATED, false, &flen);
    free(body);
    uint64_t before = st.requests;
    feed_peak(srv, f, flen);
    mc_rpc_server_get_stats(srv, &st);
    assert_int_equal(st.decode_refusals, 1);
    assert_int_equal(st.requests, before + 1);
    free(f);
    msf_close(&x);
}

static struct mc_peer_server *peer_new(void)
{
    struct mc_peer_server_config pc = {.bind_addr = "127.0.0.1", .io_threads = 1};
    struct mc_peer_server *ps;
    assert_int_equal(mc_peer_server_new(&pc, &ps), 0);
    return ps;
}

/* A peer server: one PeerBatchRead of 2 Mi empty slices peaks near the body, not at the
 * ~80 bytes a decoded slice costs. */
static void test_peer_batch_of_empty_slices(void **state)
{
    (void)state;
    struct mc_peer_server *ps = peer_new();
    size_t blen, flen;
    uint8_t *body = empty_elements(ATTACK_BODY / 2, &blen);
    uint8_t *f = frame(MC_METHOD_PEER_BATCH_READ, body, blen, true, &flen);
    free(body);
    size_t peak = feed_peak(mc_peer_server_test_rpc(ps), f, flen);
    print_message("PeerBatchRead of %zu empty slices: peak %zu bytes\n", blen / 2, peak);
    assert_true(peak <= 2 * (size_t)ATTACK_BODY + 4 * MIB);
    free(f);
    mc_peer_server_free(ps);
}

/* A peer control message is bounded by its own batch (items x key length), not by the frame
 * limit: one PeerBatchRead whose control message carries a 24 MiB field (unknown fields are
 * copied by the decoder) is refused without being decoded. */
static void test_peer_control_bounded_by_batch(void **state)
{
    (void)state;
    struct mc_peer_server *ps = peer_new();
    struct mc_rpc_server *srv = mc_peer_server_test_rpc(ps);
    size_t klen = 24u * MIB;
    uint8_t *body = malloc(klen + 16);
    assert_non_null(body);
    size_t n = 0;
    body[n++] = (15 << 3) | 2; /* field 15 (not in PeerBatchReadRequest), length-delimited */
    n += put_varint(body + n, klen);
    memset(body + n, 'k', klen);
    n += klen;
    struct mc_pb_limits lim = {.max_repeated = 8, .max_tags = 64};
    assert_int_equal(mc_pb_prescan(&mc__peer_batch_read_request__descriptor, body, n, &lim, NULL),
                     MC_PB_OK); /* well-formed: only its size is wrong */
    size_t flen;
    uint8_t *f = frame(MC_METHOD_PEER_BATCH_READ, body, n, true, &flen);
    free(body);
    feed_peak(srv, f, flen);
    struct mc_rpc_server_stats st;
    mc_rpc_server_get_stats(srv, &st);
    assert_int_equal(st.decode_refusals, 1);
    free(f);
    mc_peer_server_free(ps);
}

/* A legitimate large batch passes: BatchPutStart of 8,192 keys of 4 KiB (32 MiB) decodes
 * within its budget, and the decoded message costs about the body. */
static void test_large_legitimate_batch_decodes(void **state)
{
    (void)state;
    enum { N = MC_PB_DEFAULT_MAX_REPEATED, KEY = 4096 };
    char *keys = malloc((size_t)N * (KEY + 1));
    char **kp = malloc(N * sizeof(*kp));
    uint64_t *lens = malloc(N * sizeof(*lens));
    assert_true(keys && kp && lens);
    for (size_t i = 0; i < N; i++) {
        kp[i] = keys + i * (KEY + 1);
        memset(kp[i], 'a' + (int)(i % 26), KEY);
        snprintf(kp[i], 16, "k%zu-", i);
        kp[i][strlen(kp[i])] = 'x';
        kp[i][KEY] = 0;
        lens[i] = 1 << 20;
    }
    Mc__BatchPutStartRequest r = MC__BATCH_PUT_START_REQUEST__INIT;
    r.n_keys = N;
    r.keys = kp;
    r.n_value_lengths = N;
    r.value_lengths = lens;
    size_t len = mc__batch_put_start_request__get_packed_size(&r);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    mc__batch_put_start_request__pack(&r, buf);
    assert_true(len >= (size_t)N * KEY);
    struct mc_pb_report rep;
    size_t base = mc_alloc_meter_live();
    mc_alloc_meter_reset_peak();
    Mc__BatchPutStartRequest *d = (Mc__BatchPutStartRequest *)mc_pb_unpack_bounded(
        &mc__batch_put_start_request__descriptor, buf, len, NULL, &rep);
    size_t peak = mc_alloc_meter_peak() - base;
    print_message("BatchPutStart %zu bytes: peak %zu, budget %zu\n", len, peak, rep.budget);
    assert_non_null(d);
    assert_int_equal(rep.verdict, MC_PB_OK);
    assert_int_equal(d->n_keys, N);
    assert_int_equal(d->n_value_lengths, N);
    assert_string_equal(d->keys[N - 1], kp[N - 1]);
    assert_true(peak <= rep.budget);
    assert_true(peak <= len + len / 4);
    protobuf_c_message_free_unpacked(&d->base, NULL);
    free(buf);
    free(keys);
    free(kp);
    free(lens);
}

/* The pre-scan: counts per field and per message instance, packed elements one by one,
 * unknown fields in the tag total, and refuses malformed wire format without allocating. */
static void test_prescan_counts(void **state)
{
    (void)state;
    struct mc_pb_limits lim = {.max_repeated = 4, .max_tags = 40};
    struct mc_pb_report rep;
    const ProtobufCMessageDescriptor *bps = &mc__batch_put_start_request__descriptor;
    /* 4 keys + 4 packed lengths: at the cap */
    uint8_t ok[] = {0x12, 1, 'a', 0x12, 1, 'b', 0x12, 1, 'c', 0x12, 1, 'd', 0x1a, 4, 1, 2, 3, 4};
    assert_int_equal(mc_pb_prescan(bps, ok, sizeof(ok), &lim, &rep), MC_PB_OK);
    assert_int_equal(rep.tags, 8);
    /* 5 packed lengths (one run, one tag): over the cap, named */
    uint8_t packed[] = {0x1a, 6, 1, 0x81, 0x01, 3, 4, 5};
    assert_int_equal(mc_pb_prescan(bps, packed, sizeof(packed), &lim, &rep), MC_PB_TOO_MANY);
    assert_string_equal(rep.field, "value_lengths");
    assert_int_equal(rep.count, 5);
    /* unknown fields count in the total */
    uint8_t unknown[64];
    for (int i = 0; i < 32; i++) {
        unknown[2 * i] = 15 << 3; /* field 15, varint */
        unknown[2 * i + 1] = 0;
    }
    lim.max_tags = 31;
    assert_int_equal(mc_pb_prescan(bps, unknown, sizeof(unknown), &lim, &rep), MC_PB_TOO_MANY);
    assert_null(rep.field);
    /* nested: the items of PeerDiskRead are counted in their own message too */
    uint8_t item[] = {0x0a, 2, 0x10, 1};
    lim.max_tags = 40;
    assert_int_equal(
        mc_pb_prescan(&mc__peer_disk_read_request__descriptor, item, sizeof(item), &lim, &rep),
        MC_PB_OK);
    assert_int_equal(rep.tags, 2);
    /* malformed: a truncated length, a length past the end, a group */
    uint8_t trunc[] = {0x12, 0x80};
    uint8_t past[] = {0x12, 5, 'a'};
    uint8_t group[] = {0x13};
    assert_int_equal(mc_pb_prescan(bps, trunc, sizeof(trunc), &lim, NULL), MC_PB_MALFORMED);
    assert_int_equal(mc_pb_prescan(bps, past, sizeof(past), &lim, NULL), MC_PB_MALFORMED);
    assert_int_equal(mc_pb_prescan(bps, group, sizeof(group), &lim, NULL), MC_PB_MALFORMED);
    assert_null(mc_pb_unpack_bounded(bps, past, sizeof(past), &lim, &rep));
    assert_int_equal(rep.verdict, MC_PB_MALFORMED);
}

/* Captured log lines (the master's, on this thread). */
static char g_lines[16][1024];
static int g_nlines;

static void capture(void *arg, enum mc_log_level level, const char *line, size_t len)
{
    (void)arg;
    (void)level;
    if (g_nlines < 16)
        snprintf(g_lines[g_nlines++], sizeof(g_lines[0]), "%.*s", (int)len, line);
}

/* A segment name or endpoint with a newline cannot forge a log line: both are logged quoted. */
static void test_segment_names_logged_quoted(void **state)
{
    (void)state;
    struct mc_logger lg = {.level = MC_LOG_INFO, .sink = capture};
    const struct mc_logger *prev = mc_log_set_current(&lg);
    struct mc_fake_clock clk;
    mc_fake_clock_init(&clk, 1000000000ull);
    struct mc_master_config mc;
    mc_master_config_init(&mc);
    mc.clock = &clk.clock;
    mc.manual_ticks = true;
    mc.eviction_threads = 1;
    struct mc_master *m;
    assert_int_equal(mc_master_new(&mc, &m), 0);
    struct mc_segment_desc d;
    memset(&d, 0, sizeof(d));
    d.id = (struct mc_id){7, 7};
    snprintf(d.name, sizeof(d.name), "seg\nts=0 level=error msg=\"forged\"");
    snprintf(d.endpoint, sizeof(d.endpoint), "10.0.0.1:1\nlevel=error");
    snprintf(d.protocol, sizeof(d.protocol), "tcp");
    d.base = 1 << 20;
    d.size = 1 << 20;
    g_nlines = 0;
    assert_int_equal(mc_master_mount_segment(m, (struct mc_id){1, 1}, &d, NULL), 0);
    mc_log_set_current(prev);
    bool seen = false;
    for (int i = 0; i < g_nlines; i++) {
        assert_null(strchr(g_lines[i], '\n'));
        if (strstr(g_lines[i], "msg=\"mounted\"") || strstr(g_lines[i], "msg=mounted")) {
            seen = true;
            assert_non_null(strstr(g_lines[i], "name=\"seg\\nts=0"));
            assert_non_null(strstr(g_lines[i], "endpoint=\"10.0.0.1:1\\nlevel=error\""));
        }
    }
    assert_true(seen);
    mc_master_free(m);
}

static int mount_seg(struct mc_rpc_client *c, uint64_t client, uint64_t seg_no,
                     const char *endpoint);

static int mount_via(struct mc_rpc_client *c, uint64_t client, const char *endpoint)
{
    return mount_seg(c, client, 100, endpoint);
}

static int mount_seg(struct mc_rpc_client *c, uint64_t client, uint64_t seg_no,
                     const char *endpoint)
{
    Mc__Uuid cid = MC__UUID__INIT, sid = MC__UUID__INIT;
    cid.hi = client;
    cid.lo = client;
    sid.hi = client;
    sid.lo = client * 1000 + seg_no;
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = &sid;
    seg.name = "seg";
    seg.base_addr = 1 << 20;
    seg.size = 1 << 20;
    seg.endpoint = (char *)endpoint;
    seg.protocol = MC__PROTOCOL__PROTOCOL_TCP;
    Mc__MountSegmentRequest req = MC__MOUNT_SEGMENT_REQUEST__INIT;
    req.segment = &seg;
    req.client_id = &cid;
    uint8_t buf[256];
    size_t n = mc__mount_segment_request__pack(&req, buf);
    void *resp = NULL;
    size_t rl = 0;
    int rc = mc_rpc_client_call(c, MC_METHOD_MOUNT_SEGMENT, buf, n, 0, &resp, &rl);
    free(resp);
    return rc;
}

/* A client on another address may only mount a segment whose endpoint is its own address
 * (7 of 20 PutStarts went to a rogue segment that pointed elsewhere); loopback is exempt. */
static void test_segment_endpoint_must_be_callers(void **state)
{
    (void)state;
    char ip[INET_ADDRSTRLEN];
    if (!mc_proc_local_ipv4(ip, sizeof(ip))) {
        MC_SKIP("no non-loopback IPv4 address here");
    }
    struct mc_master_config mc = msf_master_config();
    struct mc_rpc_server_config rc = msf_server_config("0.0.0.0");
    rc.protected_mode = false;
    struct msf x;
    msf_open(&x, &mc, rc);
    msf_start(&x);
    /* from this host's own address: a non-loopback peer */
    struct mc_rpc_client *remote = msf_client(&x, ip, NULL);
    struct mc_rpc_client *local = msf_client(&x, "127.0.0.1", NULL);
    char mine[64];
    snprintf(mine, sizeof(mine), "%s:4000", ip);
    assert_int_equal(mount_via(remote, 1, "10.99.99.99:4000"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mount_via(remote, 1, "victim.example:4000"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mount_via(remote, 1, mine), 0);
    assert_int_equal(mount_via(local, 2, "10.99.99.99:4000"), 0); /* same host: exempt */
    mc_rpc_client_free(remote);
    mc_rpc_client_free(local);
    msf_close(&x);
}

/* At most --max_segments_per_client segments per client (1,999 fake 1 TiB segments were
 * accepted): the third new one of a client is refused, a remount of one it has is not, and
 * another client is not affected. */
static void test_segments_per_client_capped(void **state)
{
    (void)state;
    struct mc_master_config mc = msf_master_config();
    struct msf x;
    msf_open(&x, &mc, msf_server_config("127.0.0.1"));
    mc_master_service_set_segment_cap(x.svc, 2);
    msf_start(&x);
    struct mc_rpc_client *a = msf_client(&x, "127.0.0.1", NULL);
    struct mc_rpc_client *b = msf_client(&x, "127.0.0.1", NULL);
    assert_int_equal(mount_seg(a, 1, 1, "127.0.0.1:4000"), 0);
    assert_int_equal(mount_seg(a, 1, 2, "127.0.0.1:4000"), 0);
    assert_int_equal(mount_seg(a, 1, 3, "127.0.0.1:4000"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mount_seg(a, 1, 2, "127.0.0.1:4000"), 0); /* already mounted */
    assert_int_equal(mount_seg(b, 2, 1, "127.0.0.1:4001"), 0);
    /* nor through ReMountSegment: three at once is over the cap of 2 */
    Mc__Uuid cid = MC__UUID__INIT, sids[3];
    Mc__Segment segs[3], *sp[3];
    cid.hi = cid.lo = 3;
    for (int i = 0; i < 3; i++) {
        mc__uuid__init(&sids[i]);
        sids[i].hi = 3;
        sids[i].lo = 3000 + (uint64_t)i;
        mc__segment__init(&segs[i]);
        segs[i].id = &sids[i];
        segs[i].name = "seg";
        segs[i].base_addr = 1 << 20;
        segs[i].size = 1 << 20;
        segs[i].endpoint = "127.0.0.1:4002";
        segs[i].protocol = MC__PROTOCOL__PROTOCOL_TCP;
        sp[i] = &segs[i];
    }
    Mc__ReMountSegmentRequest rr = MC__RE_MOUNT_SEGMENT_REQUEST__INIT;
    rr.n_segments = 3;
    rr.segments = sp;
    rr.client_id = &cid;
    uint8_t rbuf[1024];
    size_t rn = mc__re_mount_segment_request__pack(&rr, rbuf);
    void *resp = NULL;
    size_t rl = 0;
    /* a fresh connection, bound to no client yet */
    struct mc_rpc_client *c3 = msf_client(&x, "127.0.0.1", NULL);
    assert_int_equal(mc_rpc_client_call(c3, MC_METHOD_REMOUNT_SEGMENT, rbuf, rn, 0, &resp, &rl),
                     MC_ERR_INVALID_PARAMS);
    free(resp);
    rr.n_segments = 2; /* two is fine */
    rn = mc__re_mount_segment_request__pack(&rr, rbuf);
    resp = NULL;
    assert_int_equal(mc_rpc_client_call(c3, MC_METHOD_REMOUNT_SEGMENT, rbuf, rn, 0, &resp, &rl), 0);
    free(resp);
    mc_rpc_client_free(c3);
    mc_rpc_client_free(a);
    mc_rpc_client_free(b);
    msf_close(&x);
}

/* One call of method with req on a fresh connection with key: its status. */
static int call_as(struct msf *x, const struct mc_auth_key *key, uint16_t method,
                   const ProtobufCMessage *req)
{
    struct mc_rpc_client *c = msf_client(x, "127.0.0.1", key);
    uint8_t buf[64];
    assert_true(protobuf_c_message_get_packed_size(req) <= sizeof(buf));
    size_t n = protobuf_c_message_pack(req, buf);
    void *resp = NULL;
    size_t rl = 0;
    int rc = mc_rpc_client_call(c, method, buf, n, 0, &resp, &rl);
    free(resp);
    mc_rpc_client_free(c);
    return rc;
}

/* RemoveByRegex(".*", force) on a fresh connection with key. */
static int remove_regex_as(struct msf *x, const struct mc_auth_key *key)
{
    Mc__RemoveByRegexRequest req = MC__REMOVE_BY_REGEX_REQUEST__INIT;
    req.pattern = ".*";
    req.force = 1;
    return call_as(x, key, MC_METHOD_REMOVE_BY_REGEX, &req.base);
}

static int remove_all_as(struct msf *x, const struct mc_auth_key *key)
{
    Mc__RemoveAllRequest req = MC__REMOVE_ALL_REQUEST__INIT;
    return call_as(x, key, MC_METHOD_REMOVE_ALL, &req.base);
}

/* Roles: with an admin key, the mass deletes (RemoveAll, RemoveByRegex) need a connection that
 * proved it (an admin tool holds the admin token first and the data token second); the data
 * token alone is refused. Without an admin key the one token does everything. */
static void test_remove_all_needs_admin_token(void **state)
{
    (void)state;
    static const char data_tok[] = "data-token-0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    static const char admin_tok[] = "admin-token-a9b8c7d6e5f40312f0e1d2c3b4a59687";
    struct mc_auth_key data, admin, tool;
    assert_int_equal(mc_auth_key_from_token(data_tok, strlen(data_tok), &data), 0);
    assert_int_equal(mc_auth_key_from_token(admin_tok, strlen(admin_tok), &admin), 0);
    tool = admin; /* proves the admin token, accepts the server's data-token proof */
    tool.has_alt = true;
    memcpy(tool.alt, data.k, sizeof(tool.alt));
    for (int with_admin = 1; with_admin >= 0; with_admin--) {
        struct mc_master_config mc = msf_master_config();
        struct mc_rpc_server_config rc = msf_server_config("127.0.0.1");
        rc.auth = &data;
        rc.admin_auth = with_admin ? &admin : NULL;
        struct msf x;
        msf_open(&x, &mc, rc);
        msf_start(&x);
        if (with_admin) {
            assert_int_equal(remove_all_as(&x, &data), MC_ERR_UNAUTHENTICATED);
            assert_int_equal(remove_all_as(&x, &tool), 0);
            assert_int_equal(remove_regex_as(&x, &data), MC_ERR_UNAUTHENTICATED);
            assert_int_equal(remove_regex_as(&x, &tool), 0);
        } else {
            assert_int_equal(remove_all_as(&x, &data), 0);
            assert_int_equal(remove_regex_as(&x, &data), 0);
        }
        msf_close(&x);
    }
}

/* ---- the client side: a master's reply is untrusted too -------------------------------------- */

static uint8_t *g_reply;
static size_t g_reply_len;

static void hostile_reply(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    mc_rpc_reply(call, 0, g_reply, g_reply_len);
}

/* A "master" answers ListSegments with 2 Mi empty SegmentInfo messages (4 MiB): decoded
 * without a budget, each is a ~100-byte struct plus a pointer (about 250 MiB). The client
 * refuses it (DESERIALIZE_FAIL) at about the body's size; a reply at the client's element cap
 * (65,536 segments) still decodes. */
static void test_client_reply_of_empty_messages(void **state)
{
    (void)state;
    struct mc_rpc_server_config rc;
    mc_rpc_server_config_init(&rc);
    rc.io_threads = 1;
    rc.name = "hostile";
    rc.bind_addr = "127.0.0.1";
    struct mc_rpc_server *srv;
    assert_int_equal(mc_rpc_server_new(&rc, &srv), 0);
    assert_int_equal(mc_rpc_server_register(srv, MC_METHOD_LIST_SEGMENTS, hostile_reply, NULL), 0);
    assert_int_equal(mc_rpc_server_start(srv), 0);
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = mc_rpc_server_port(srv);
    struct mc_rpc_client *c;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    Mc__ListSegmentsRequest req = MC__LIST_SEGMENTS_REQUEST__INIT;
    ProtobufCMessage *m = NULL;

    g_reply = empty_elements(ATTACK_BODY / 2, &g_reply_len);
    size_t base = mc_alloc_meter_live();
    mc_alloc_meter_reset_peak();
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &req.base,
                                            &mc__list_segments_response__descriptor, 0, &m),
                     MC_ERR_DESERIALIZE_FAIL);
    size_t peak = mc_alloc_meter_peak() - base;
    print_message("ListSegments reply of %zu empty segments (%zu bytes): peak %zu bytes\n",
                  g_reply_len / 2, g_reply_len, peak);
    assert_null(m);
    /* the server's reply frame and the client's copy of it, plus a little */
    assert_true(peak <= 3 * (size_t)ATTACK_BODY + 4 * MIB);
    free(g_reply);

    /* at the cap it decodes: 65,536 segments */
    g_reply = empty_elements(65536, &g_reply_len);
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &req.base,
                                            &mc__list_segments_response__descriptor, 0, &m),
                     0);
    assert_int_equal(((Mc__ListSegmentsResponse *)m)->n_segments, 65536);
    protobuf_c_message_free_unpacked(m, NULL);
    free(g_reply);
    g_reply = NULL;
    mc_rpc_client_free(c);
    mc_rpc_server_stop(srv);
    mc_rpc_server_free(srv);
}

/* A "server" that answers the first request with a header claiming `claim` body bytes, sends
 * 4 KiB of them and then nothing until the test lets it close. */
struct liar {
    int lfd;
    uint32_t claim;
    int done[2]; /* the test writes a byte: close */
};

static bool read_full(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r <= 0)
            return false;
        b += r;
        n -= (size_t)r;
    }
    return true;
}

static void *liar_main(void *arg)
{
    struct liar *l = arg;
    int fd = accept(l->lfd, NULL, NULL);
    uint8_t hb[MC_WIRE_HEADER_SIZE], junk[4096];
    struct mc_wire_header h;
    if (fd >= 0 && read_full(fd, hb, sizeof(hb))) {
        mc_wire_decode_header(hb, &h);
        for (uint32_t left = h.body_length; left > 0;) {
            uint32_t n = left < sizeof(junk) ? left : (uint32_t)sizeof(junk);
            if (!read_full(fd, junk, n))
                break;
            left -= n;
        }
        struct mc_wire_header r;
        mc_wire_header_init(&r, MC_WIRE_RESPONSE, h.method, h.request_id, 0, l->claim);
        mc_wire_encode_header(&r, hb);
        memset(junk, 0x5a, sizeof(junk));
        ssize_t w = write(fd, hb, sizeof(hb));
        w = write(fd, junk, sizeof(junk));
        (void)w;
        char c;
        ssize_t rd = read(l->done[0], &c, 1); /* hold the connection open */
        (void)rd;
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* A reply header claims 60 MiB (under the 64 MiB frame limit) and 4 KiB follow: the client
 * sizes the body's buffer by the bytes that arrived, not by the claim, and the call times out
 * cleanly (before: 60 MiB allocated at the header). */
static void test_client_reply_claims_large_body(void **state)
{
    (void)state;
    struct liar l = {.claim = 60u * MIB};
    uint16_t port;
    l.lfd = tl_listen(1, &port);
    assert_int_equal(pipe(l.done), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, liar_main, &l), 0);

    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = port;
    cc.call_timeout_ms = 500;
    struct mc_rpc_client *c;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    size_t base = mc_alloc_meter_live();
    mc_alloc_meter_reset_peak();
    void *resp = NULL;
    size_t rl = 0;
    assert_int_equal(mc_rpc_client_call(c, MC_METHOD_LIST_SEGMENTS, NULL, 0, 0, &resp, &rl),
                     MC_ERR_RPC_TIMEOUT);
    size_t peak = mc_alloc_meter_peak() - base;
    print_message("reply claiming %u bytes, 4096 sent: client peak %zu bytes\n", l.claim, peak);
    assert_null(resp);
    assert_true(peak < 1 * MIB);
    char one = 1;
    assert_int_equal(write(l.done[1], &one, 1), 1);
    pthread_join(t, NULL);
    mc_rpc_client_free(c);
    close(l.done[0]);
    close(l.done[1]);
    close(l.lfd);
}

int main(void)
{
    mc_log_set_level(MC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_batch_of_empty_keys),
        cmocka_unit_test(test_peer_batch_of_empty_slices),
        cmocka_unit_test(test_peer_control_bounded_by_batch),
        cmocka_unit_test(test_large_legitimate_batch_decodes),
        cmocka_unit_test(test_prescan_counts),
        cmocka_unit_test(test_segment_names_logged_quoted),
        cmocka_unit_test(test_segment_endpoint_must_be_callers),
        cmocka_unit_test(test_segments_per_client_capped),
        cmocka_unit_test(test_remove_all_needs_admin_token),
        cmocka_unit_test(test_client_reply_of_empty_messages),
        cmocka_unit_test(test_client_reply_claims_large_body),
    };
    return MC_RUN_TESTS(tests, NULL, NULL);
}
