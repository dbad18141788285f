/*
 * test_master_daemon.c - the real mooncake_master process, driven over its real ports.
 *
 * Each scenario starts $MC_BIN_DIR/mooncake_master on loopback with --rpc_port=0
 * --metrics_port=0 (stderr to a file in a private mkdtemp directory) through the shared process
 * harness (tools/proc_harness.h), reads its READY line with a deadline, talks to it with rpc_client
 * + protobuf (and raw sockets / HTTP for the bad-input and /metrics cases), and ends by stopping it
 * with SIGTERM and checking exit status 0. The teardown SIGKILLs a child still running (a failed
 * assertion), so nothing outlives the test. Flag handling (--help, unknown flag, not-implemented
 * flags) runs short-lived children.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/metrics_scrape.h"
#include "tools/proc_harness.h"

#define SEG_BASE 0x7f0000000000ull
#define SEG_SIZE (64ull << 20)

struct daemon {
    struct mc_proc p; /* the master (tools/proc_harness.h) */
    uint16_t rpc_port, metrics_port;
    char dir[256];
    char err_path[300];
    struct mc_rpc_client *c; /* first connection */
    char *body;              /* last HTTP body (freed by teardown on a failed assertion) */
};

static char g_bin[4096];

/* ---- process plumbing ------------------------------------------------------------------------ */

static void print_log(const struct daemon *d)
{
    mc_proc_dump_log(&d->p, "master stderr", 1u << 20);
}

static void daemon_start(struct daemon *d, const char *extra, ...)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = g_bin;
    argv[n++] = "--rpc_port=0";
    argv[n++] = "--metrics_port=0";
    argv[n++] = "--rpc_address=127.0.0.1";
    argv[n++] = "--metrics_host=127.0.0.1";
    argv[n++] = "--rpc_thread_num=2";
    va_list ap;
    va_start(ap, extra);
    for (const char *a = extra; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;

    const struct mc_proc_io io = {.err_path = d->err_path};
    assert_int_equal(mc_proc_spawn(&d->p, argv, &io), 0);
    struct mc_proc_ready r;
    int rc = mc_proc_await_ready(&d->p, &r, 20000);
    if (rc == -1) {
        print_log(d);
        fail_msg("the master did not print READY within 20 s");
    }
    if (rc != 0 || r.kind != MC_PROC_READY_MASTER)
        fail_msg("unexpected first line: '%s'", r.line);
    assert_string_equal(r.rpc_host, "127.0.0.1");
    assert_string_equal(r.metrics_host, "127.0.0.1");
    d->rpc_port = r.rpc_port;
    d->metrics_port = r.metrics_port;
    /* exactly one line: nothing else may follow on stdout */
    struct pollfd p = {.fd = d->p.out_fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
}

static struct mc_rpc_client *connect_client(const struct daemon *d)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = d->rpc_port;
    cc.call_timeout_ms = 5000;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    assert_int_equal(mc_rpc_client_connect(c), 0);
    return c;
}

/* SIGTERM, then exit status 0 within 10 s. */
static void daemon_stop_ok(struct daemon *d)
{
    mc_rpc_client_free(d->c);
    d->c = NULL;
    assert_int_equal(kill(d->p.pid, SIGTERM), 0);
    int st = mc_proc_wait(&d->p, 10000);
    if (st != 0)
        print_log(d);
    assert_int_equal(st, 0);
    /* stdout carried nothing after READY */
    char buf[64];
    assert_int_equal(read(d->p.out_fd, buf, sizeof(buf)), 0);
    mc_proc_stop(&d->p, SIGKILL, 0); /* closes the pipe */
}

static int setup(void **state)
{
    struct daemon *d = calloc(1, sizeof(*d));
    if (!d || mc_proc_mkdtemp(d->dir, sizeof(d->dir), NULL, "mc_master_daemon") != 0) {
        free(d);
        return -1;
    }
    snprintf(d->err_path, sizeof(d->err_path), "%s/stderr", d->dir);
    d->p.out_fd = -1;
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    struct daemon *d = *state;
    mc_rpc_client_free(d->c);
    free(d->body);
    mc_proc_stop(&d->p, SIGKILL, 10000);
    mc_proc_rm_rf(d->dir);
    free(d);
    return 0;
}

/* ---- RPC helpers ----------------------------------------------------------------------------- */

static int call(struct mc_rpc_client *c, uint16_t method, const void *req,
                const ProtobufCMessageDescriptor *desc, void *resp_out)
{
    ProtobufCMessage *resp = NULL;
    int rc = mc_rpc_client_call_msg(c, method, (const ProtobufCMessage *)req, desc, 0, &resp);
    if (resp_out)
        *(ProtobufCMessage **)resp_out = resp;
    else if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

#define FREE_MSG(m) protobuf_c_message_free_unpacked(&(m)->base, NULL)

static Mc__Uuid uuid(uint64_t hi, uint64_t lo)
{
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = hi;
    u.lo = lo;
    return u;
}

static int ping(struct mc_rpc_client *c, Mc__Uuid *client, Mc__PingResponse **out)
{
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = client;
    return call(c, MC_METHOD_PING, &req, &mc__ping_response__descriptor, out);
}

static int mount(struct mc_rpc_client *c, Mc__Uuid *client, Mc__Uuid *seg_id, const char *name)
{
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = seg_id;
    seg.name = (char *)name;
    seg.base_addr = SEG_BASE;
    seg.size = SEG_SIZE;
    seg.endpoint = "127.0.0.1:1";
    seg.protocol = MC__PROTOCOL__PROTOCOL_TCP;
    Mc__MountSegmentRequest req = MC__MOUNT_SEGMENT_REQUEST__INIT;
    req.segment = &seg;
    req.client_id = client;
    return call(c, MC_METHOD_MOUNT_SEGMENT, &req, &mc__mount_segment_response__descriptor, NULL);
}

static int put_start(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint64_t size,
                     Mc__PutStartResponse **out)
{
    Mc__PutStartRequest req = MC__PUT_START_REQUEST__INIT;
    req.client_id = client;
    req.key = (char *)key;
    req.value_length = size;
    return call(c, MC_METHOD_PUT_START, &req, &mc__put_start_response__descriptor, out);
}

static int put_end(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint32_t crc)
{
    Mc__PutEndRequest req = MC__PUT_END_REQUEST__INIT;
    req.client_id = client;
    req.key = (char *)key;
    req.crc32c = crc;
    req.crc_valid = 1;
    return call(c, MC_METHOD_PUT_END, &req, &mc__put_end_response__descriptor, NULL);
}

static int get(struct mc_rpc_client *c, const char *key, Mc__GetReplicaListResponse **out)
{
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = (char *)key;
    return call(c, MC_METHOD_GET_REPLICA_LIST, &req, &mc__get_replica_list_response__descriptor,
                out);
}

static Mc__GetStatsResponse *stats(struct mc_rpc_client *c)
{
    Mc__GetStatsResponse *st = NULL;
    assert_int_equal(call(c, MC_METHOD_GET_STATS, NULL, &mc__get_stats_response__descriptor, &st),
                     0);
    return st;
}

static void check_replica_in_segment(const Mc__ReplicaDescriptor *r, uint64_t size)
{
    assert_int_equal(r->type, MC__REPLICA_TYPE__RT_MEMORY);
    assert_non_null(r->memory);
    assert_string_equal(r->memory->segment_name, "seg0");
    assert_string_equal(r->memory->endpoint, "127.0.0.1:1");
    assert_int_equal(r->memory->size, size);
    assert_true(r->memory->offset + size <= SEG_SIZE);
    assert_int_equal(r->memory->remote_addr, SEG_BASE + r->memory->offset);
    assert_int_equal(r->memory->segment_id->hi, 7);
    assert_int_equal(r->memory->segment_id->lo, 8);
}

/* ---- scenarios ---------------------------------------------------------------------------------
 */

static void test_version_ping_segments(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, "--client_ttl=3s", NULL);
    d->c = connect_client(d);
    char ver[128];
    assert_int_equal(mc_rpc_check_version(d->c, ver, sizeof(ver)), 0);
    assert_string_equal(ver, MC_SERVICE_VERSION);
    Mc__ServiceReadyResponse *sr = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_SERVICE_READY, NULL, &mc__service_ready_response__descriptor, &sr), 0);
    assert_int_equal(sr->proto_version, MC_PROTO_VERSION);
    FREE_MSG(sr);

    Mc__Uuid a = uuid(1, 2), seg_id = uuid(7, 8);
    Mc__PingResponse *pr = NULL;
    assert_int_equal(ping(d->c, &a, &pr), 0);
    assert_int_equal(pr->client_status, MC__CLIENT_STATUS__CS_NEED_REMOUNT);
    assert_int_equal(pr->client_ttl_ms, 3000);
    FREE_MSG(pr);
    /* a zero client id is refused by the core */
    Mc__Uuid zero = uuid(0, 0);
    assert_int_equal(ping(d->c, &zero, NULL), MC_ERR_INVALID_PARAMS);

    /* ReMount with no segment marks the client OK */
    Mc__ReMountSegmentRequest rm = MC__RE_MOUNT_SEGMENT_REQUEST__INIT;
    rm.client_id = &a;
    assert_int_equal(call(d->c, MC_METHOD_REMOUNT_SEGMENT, &rm,
                          &mc__re_mount_segment_response__descriptor, NULL),
                     0);
    assert_int_equal(ping(d->c, &a, &pr), 0);
    assert_int_equal(pr->client_status, MC__CLIENT_STATUS__CS_OK);
    FREE_MSG(pr);

    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0); /* idempotent */
    /* a segment with no size is bad input, not a crash */
    Mc__Segment bad = MC__SEGMENT__INIT;
    Mc__Uuid bad_id = uuid(9, 9);
    bad.id = &bad_id;
    bad.name = "bad";
    bad.base_addr = SEG_BASE;
    Mc__MountSegmentRequest mreq = MC__MOUNT_SEGMENT_REQUEST__INIT;
    mreq.segment = &bad;
    mreq.client_id = &a;
    assert_int_equal(
        call(d->c, MC_METHOD_MOUNT_SEGMENT, &mreq, &mc__mount_segment_response__descriptor, NULL),
        MC_ERR_INVALID_PARAMS);

    Mc__ListSegmentsResponse *ls = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_LIST_SEGMENTS, NULL, &mc__list_segments_response__descriptor, &ls), 0);
    assert_int_equal(ls->n_segments, 1);
    assert_string_equal(ls->segments[0]->name, "seg0");
    assert_int_equal(ls->segments[0]->size, SEG_SIZE);
    assert_int_equal(ls->segments[0]->used, 0);
    assert_int_equal(ls->segments[0]->owner->lo, 2);
    FREE_MSG(ls);

    Mc__GetStatsResponse *st = stats(d->c);
    assert_string_equal(st->version, MC_SERVICE_VERSION);
    assert_int_equal(st->segment_count, 1);
    assert_int_equal(st->capacity_bytes, SEG_SIZE);
    assert_int_equal(st->key_count, 0);
    assert_true(st->n_extra > 0);
    FREE_MSG(st);

    Mc__UnmountSegmentRequest um = MC__UNMOUNT_SEGMENT_REQUEST__INIT;
    um.segment_id = &seg_id;
    um.client_id = &a;
    assert_int_equal(
        call(d->c, MC_METHOD_UNMOUNT_SEGMENT, &um, &mc__unmount_segment_response__descriptor, NULL),
        0);
    st = stats(d->c);
    assert_int_equal(st->segment_count, 0);
    FREE_MSG(st);
    daemon_stop_ok(d);
}

static void test_objects(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, NULL);
    d->c = connect_client(d);
    Mc__Uuid a = uuid(1, 2), seg_id = uuid(7, 8);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);

    /* PutStart -> not readable -> PutEnd -> readable */
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(put_start(d->c, &a, "k1", 4096, &ps), 0);
    assert_int_equal(ps->n_replicas, 1);
    assert_int_equal(ps->replicas[0]->status, MC__REPLICA_STATUS__RS_PROCESSING);
    check_replica_in_segment(ps->replicas[0], 4096);
    uint64_t version = ps->version;
    assert_true(version != 0);
    FREE_MSG(ps);
    assert_int_equal(get(d->c, "k1", NULL), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(put_start(d->c, &a, "k1", 4096, NULL), MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(put_end(d->c, &a, "k1", 0xabcdef01u), 0);
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(get(d->c, "k1", &g), 0);
    assert_int_equal(g->status, 0);
    assert_int_equal(g->n_replicas, 1);
    assert_int_equal(g->replicas[0]->status, MC__REPLICA_STATUS__RS_COMPLETE);
    check_replica_in_segment(g->replicas[0], 4096);
    assert_int_equal(g->size, 4096);
    assert_int_equal(g->version, version);
    assert_int_equal(g->crc32c, 0xabcdef01u);
    assert_true(g->crc_valid);
    assert_int_equal(g->lease_ttl_ms, 10000);
    FREE_MSG(g);
    assert_int_equal(get(d->c, "nope", NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get(d->c, "", NULL), MC_ERR_INVALID_KEY);

    Mc__ExistKeyRequest ek = MC__EXIST_KEY_REQUEST__INIT;
    Mc__ExistKeyResponse *er = NULL;
    ek.key = "k1";
    assert_int_equal(call(d->c, MC_METHOD_EXIST_KEY, &ek, &mc__exist_key_response__descriptor, &er),
                     0);
    assert_true(er->exists);
    FREE_MSG(er);
    ek.key = "nope";
    assert_int_equal(call(d->c, MC_METHOD_EXIST_KEY, &ek, &mc__exist_key_response__descriptor, &er),
                     0);
    assert_false(er->exists);
    FREE_MSG(er);

    /* batch forms: b1, b2 put; "k1" already exists */
    char *bkeys[3] = {"b1", "b2", "k1"};
    uint64_t blens[3] = {1000, 2000, 3000};
    Mc__BatchPutStartRequest bps = MC__BATCH_PUT_START_REQUEST__INIT;
    bps.client_id = &a;
    bps.n_keys = 3;
    bps.keys = bkeys;
    bps.n_value_lengths = 3;
    bps.value_lengths = blens;
    Mc__BatchPutStartResponse *bpr = NULL;
    assert_int_equal(call(d->c, MC_METHOD_BATCH_PUT_START, &bps,
                          &mc__batch_put_start_response__descriptor, &bpr),
                     0);
    assert_int_equal(bpr->n_results, 3);
    assert_int_equal(bpr->results[0]->status, 0);
    assert_int_equal(bpr->results[0]->n_replicas, 1);
    check_replica_in_segment(bpr->results[0]->replicas[0], 1000);
    assert_int_equal(bpr->results[1]->status, 0);
    assert_int_equal(bpr->results[2]->status, MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(bpr->results[2]->n_replicas, 0);
    FREE_MSG(bpr);
    /* mismatched lengths: every item INVALID_PARAMS */
    bps.n_value_lengths = 2;
    assert_int_equal(call(d->c, MC_METHOD_BATCH_PUT_START, &bps,
                          &mc__batch_put_start_response__descriptor, &bpr),
                     0);
    assert_int_equal(bpr->n_results, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(bpr->results[i]->status, MC_ERR_INVALID_PARAMS);
    FREE_MSG(bpr);

    Mc__PutEndItem it[3] = {MC__PUT_END_ITEM__INIT, MC__PUT_END_ITEM__INIT, MC__PUT_END_ITEM__INIT};
    Mc__PutEndItem *itp[3] = {&it[0], &it[1], &it[2]};
    it[0].key = "b1";
    it[1].key = "b2";
    it[2].key = "never";
    Mc__BatchPutEndRequest bpe = MC__BATCH_PUT_END_REQUEST__INIT;
    bpe.client_id = &a;
    bpe.n_items = 3;
    bpe.items = itp;
    Mc__BatchPutEndResponse *bper = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_BATCH_PUT_END, &bpe, &mc__batch_put_end_response__descriptor, &bper),
        0);
    assert_int_equal(bper->n_statuses, 3);
    assert_int_equal(bper->statuses[0], 0);
    assert_int_equal(bper->statuses[1], 0);
    assert_int_equal(bper->statuses[2], MC_ERR_OBJECT_NOT_FOUND);
    FREE_MSG(bper);

    char *gkeys[3] = {"b1", "missing", "k1"};
    Mc__BatchGetReplicaListRequest bg = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    bg.n_keys = 3;
    bg.keys = gkeys;
    Mc__BatchGetReplicaListResponse *bgr = NULL;
    assert_int_equal(call(d->c, MC_METHOD_BATCH_GET_REPLICA_LIST, &bg,
                          &mc__batch_get_replica_list_response__descriptor, &bgr),
                     0);
    assert_int_equal(bgr->n_results, 3);
    assert_int_equal(bgr->results[0]->status, 0);
    assert_int_equal(bgr->results[0]->size, 1000);
    check_replica_in_segment(bgr->results[0]->replicas[0], 1000);
    assert_int_equal(bgr->results[1]->status, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(bgr->results[1]->n_replicas, 0);
    assert_int_equal(bgr->results[2]->status, 0);
    assert_int_equal(bgr->results[2]->version, version);
    FREE_MSG(bgr);

    Mc__BatchExistKeyRequest be = MC__BATCH_EXIST_KEY_REQUEST__INIT;
    be.n_keys = 3;
    be.keys = gkeys;
    Mc__BatchExistKeyResponse *ber = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_BATCH_EXIST_KEY, &be, &mc__batch_exist_key_response__descriptor, &ber),
        0);
    assert_int_equal(ber->n_exists, 3);
    assert_int_equal(ber->n_statuses, 3);
    assert_true(ber->exists[0]);
    assert_false(ber->exists[1]);
    assert_true(ber->exists[2]);
    FREE_MSG(ber);

    /* QueryKey: lease visible (Get granted one), no side effects */
    Mc__QueryKeyRequest qk = MC__QUERY_KEY_REQUEST__INIT;
    qk.key = "k1";
    Mc__QueryKeyResponse *qr = NULL;
    assert_int_equal(call(d->c, MC_METHOD_QUERY_KEY, &qk, &mc__query_key_response__descriptor, &qr),
                     0);
    assert_string_equal(qr->key, "k1");
    assert_int_equal(qr->size, 4096);
    assert_int_equal(qr->version, version);
    assert_true(qr->lease_ms_left > 0);
    assert_false(qr->put_in_progress);
    assert_int_equal(qr->n_replicas, 1);
    assert_int_equal(qr->replicas[0]->replica->status, MC__REPLICA_STATUS__RS_COMPLETE);
    FREE_MSG(qr);
    qk.key = "missing";
    assert_int_equal(call(d->c, MC_METHOD_QUERY_KEY, &qk, &mc__query_key_response__descriptor, &qr),
                     MC_ERR_OBJECT_NOT_FOUND);

    Mc__GetStatsResponse *st = stats(d->c);
    assert_int_equal(st->key_count, 3);
    assert_true(st->allocated_bytes >= 4096 + 1000 + 2000);
    FREE_MSG(st);

    /* PutRevoke */
    assert_int_equal(put_start(d->c, &a, "r1", 100, NULL), 0);
    Mc__PutRevokeRequest pr = MC__PUT_REVOKE_REQUEST__INIT;
    pr.client_id = &a;
    pr.key = "r1";
    assert_int_equal(
        call(d->c, MC_METHOD_PUT_REVOKE, &pr, &mc__put_revoke_response__descriptor, NULL), 0);
    assert_int_equal(get(d->c, "r1", NULL), MC_ERR_OBJECT_NOT_FOUND);
    char *rkeys[2] = {"r2", "r3"};
    uint64_t rlens[2] = {10, 10};
    bps.n_keys = 2;
    bps.keys = rkeys;
    bps.n_value_lengths = 2;
    bps.value_lengths = rlens;
    assert_int_equal(call(d->c, MC_METHOD_BATCH_PUT_START, &bps,
                          &mc__batch_put_start_response__descriptor, NULL),
                     0);
    Mc__BatchPutRevokeRequest bpv = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
    bpv.client_id = &a;
    bpv.n_keys = 2;
    bpv.keys = rkeys;
    Mc__BatchPutRevokeResponse *bpvr = NULL;
    assert_int_equal(call(d->c, MC_METHOD_BATCH_PUT_REVOKE, &bpv,
                          &mc__batch_put_revoke_response__descriptor, &bpvr),
                     0);
    assert_int_equal(bpvr->n_statuses, 2);
    assert_int_equal(bpvr->statuses[0], 0);
    assert_int_equal(bpvr->statuses[1], 0);
    FREE_MSG(bpvr);

    /* Remove: leased -> OBJECT_HAS_LEASE unless forced */
    Mc__RemoveRequest rr = MC__REMOVE_REQUEST__INIT;
    rr.key = "k1";
    assert_int_equal(call(d->c, MC_METHOD_REMOVE, &rr, &mc__remove_response__descriptor, NULL),
                     MC_ERR_OBJECT_HAS_LEASE);
    rr.force = 1;
    assert_int_equal(call(d->c, MC_METHOD_REMOVE, &rr, &mc__remove_response__descriptor, NULL), 0);
    assert_int_equal(call(d->c, MC_METHOD_REMOVE, &rr, &mc__remove_response__descriptor, NULL),
                     MC_ERR_OBJECT_NOT_FOUND);
    char *rmkeys[2] = {"b1", "zz"};
    Mc__BatchRemoveRequest br = MC__BATCH_REMOVE_REQUEST__INIT;
    br.n_keys = 2;
    br.keys = rmkeys;
    br.force = 1;
    Mc__BatchRemoveResponse *brr = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_BATCH_REMOVE, &br, &mc__batch_remove_response__descriptor, &brr), 0);
    assert_int_equal(brr->n_statuses, 2);
    assert_int_equal(brr->statuses[0], 0);
    assert_int_equal(brr->statuses[1], MC_ERR_OBJECT_NOT_FOUND);
    FREE_MSG(brr);
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.force = 1;
    Mc__RemoveAllResponse *rar = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_REMOVE_ALL, &ra, &mc__remove_all_response__descriptor, &rar), 0);
    assert_int_equal(rar->removed, 1); /* b2 */
    FREE_MSG(rar);
    st = stats(d->c);
    assert_int_equal(st->key_count, 0);
    FREE_MSG(st);
    daemon_stop_ok(d);
}

static void test_illegal_client_and_unknown_methods(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, NULL);
    d->c = connect_client(d);
    struct mc_rpc_client *c2 = connect_client(d);
    Mc__Uuid a = uuid(1, 2), b = uuid(3, 4), seg_id = uuid(7, 8);
    assert_int_equal(ping(d->c, &a, NULL), 0); /* binds d->c to a */
    assert_int_equal(ping(d->c, &b, NULL), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mount(d->c, &b, &seg_id, "seg0"), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(put_start(d->c, &b, "x", 10, NULL), MC_ERR_ILLEGAL_CLIENT);
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.client_id = &b;
    assert_int_equal(
        call(d->c, MC_METHOD_REMOVE_ALL, &ra, &mc__remove_all_response__descriptor, NULL),
        MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_start(d->c, &a, "x", 10, NULL), 0);
    /* another connection bound to b: the Put is a's (owner check in the core) */
    assert_int_equal(ping(c2, &b, NULL), 0);
    assert_int_equal(put_end(c2, &b, "x", 0), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_end(c2, &a, "x", 0), MC_ERR_ILLEGAL_CLIENT); /* c2 is bound to b */
    /* b cannot mount over a's segment id */
    assert_int_equal(mount(c2, &b, &seg_id, "seg0"), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_end(d->c, &a, "x", 0), 0);

    /* an unassigned method number: NOT_SUPPORTED */
    assert_int_equal(mc_rpc_client_call(c2, 200, NULL, 0, 0, NULL, NULL), MC_ERR_NOT_SUPPORTED);
    /* the LOCAL_DISK tier's methods, on a master started without --enable_offload */
    static const uint16_t tier[] = {
        MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT,
        MC_METHOD_NOTIFY_OFFLOAD_SUCCESS,   MC_METHOD_EVICT_DISK_REPLICA,
        MC_METHOD_BATCH_EVICT_DISK_REPLICA, MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT};
    for (size_t i = 0; i < sizeof(tier) / sizeof(tier[0]); i++)
        assert_int_equal(mc_rpc_client_call(c2, tier[i], NULL, 0, 0, NULL, NULL),
                         MC_ERR_UNABLE_OFFLOAD);
    /* an undecodable body */
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(mc_rpc_client_call(c2, MC_METHOD_PUT_START, junk, sizeof(junk), 0, NULL, NULL),
                     MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(ping(c2, &b, NULL), 0);

    /* A connection that never pinged or mounted is bound by the first id it names: it cannot
     * act for a and then for b. */
    struct mc_rpc_client *c3 = connect_client(d);
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(put_start(c3, &a, "y", 10, &ps), 0);
    uint64_t v = ps->version;
    protobuf_c_message_free_unpacked(&ps->base, NULL);
    assert_int_equal(put_start(c3, &b, "z", 10, NULL), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_end(c3, &b, "y", 0), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(ping(c3, &b, NULL), MC_ERR_ILLEGAL_CLIENT);
    /* the service hands PutEnd's version to the core: a wrong one changes nothing */
    Mc__PutEndRequest pe = MC__PUT_END_REQUEST__INIT;
    pe.client_id = &a;
    pe.key = "y";
    pe.version = v + 1;
    assert_int_equal(call(c3, MC_METHOD_PUT_END, &pe, &mc__put_end_response__descriptor, NULL),
                     MC_ERR_INVALID_VERSION);
    pe.version = v;
    assert_int_equal(call(c3, MC_METHOD_PUT_END, &pe, &mc__put_end_response__descriptor, NULL), 0);
    mc_rpc_client_free(c3);
    mc_rpc_client_free(c2);
    daemon_stop_ok(d);
}

/* The takeover the Put versions exist for, through the real RPC service: a Put of "t" stalls
 * past --put_start_discard_timeout_sec, its owner PutStarts "t" again (v2), then the first
 * incarnation's PutEnd / PutRevoke (v1) arrive late, single and batched. Each is INVALID_VERSION
 * and v2 stays PROCESSING; only v2's own PutEnd completes it. A service that dropped a request's
 * version would hand the core 0 ("do not check") and the late call would succeed. */
static void test_late_put_end_through_service(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, "--put_start_discard_timeout_sec=200ms", NULL);
    d->c = connect_client(d);
    Mc__Uuid a = uuid(11, 12), seg_id = uuid(13, 14);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg-late"), 0);
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(put_start(d->c, &a, "t", 100, &ps), 0);
    uint64_t v1 = ps->version;
    FREE_MSG(ps);
    /* the same owner starts "t" again once the first Put is past its discard timeout */
    uint64_t v2 = 0, deadline = mc_now_ms() + 10000;
    for (;;) {
        ps = NULL;
        int rc = put_start(d->c, &a, "t", 100, &ps);
        if (rc == 0) {
            v2 = ps->version;
            FREE_MSG(ps);
            break;
        }
        assert_int_equal(rc, MC_ERR_OBJECT_ALREADY_EXISTS);
        assert_true(mc_now_ms() < deadline);
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(v2 > v1);

    Mc__PutEndRequest pe = MC__PUT_END_REQUEST__INIT;
    pe.client_id = &a;
    pe.key = "t";
    pe.version = v1;
    pe.crc32c = 1;
    pe.crc_valid = 1;
    assert_int_equal(call(d->c, MC_METHOD_PUT_END, &pe, &mc__put_end_response__descriptor, NULL),
                     MC_ERR_INVALID_VERSION);
    Mc__PutRevokeRequest pr = MC__PUT_REVOKE_REQUEST__INIT;
    pr.client_id = &a;
    pr.key = "t";
    pr.version = v1;
    assert_int_equal(
        call(d->c, MC_METHOD_PUT_REVOKE, &pr, &mc__put_revoke_response__descriptor, NULL),
        MC_ERR_INVALID_VERSION);

    /* the batch forms: each item's version is checked */
    Mc__PutEndItem item = MC__PUT_END_ITEM__INIT, *items[1] = {&item};
    item.key = "t";
    item.version = v1;
    item.crc32c = 1;
    item.crc_valid = 1;
    Mc__BatchPutEndRequest be = MC__BATCH_PUT_END_REQUEST__INIT;
    be.client_id = &a;
    be.n_items = 1;
    be.items = items;
    Mc__BatchPutEndResponse *ber = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_BATCH_PUT_END, &be, &mc__batch_put_end_response__descriptor, &ber), 0);
    assert_int_equal(ber->n_statuses, 1);
    assert_int_equal(ber->statuses[0], MC_ERR_INVALID_VERSION);
    FREE_MSG(ber);
    char *bkeys[1] = {"t"};
    uint64_t bvers[1] = {v1};
    Mc__BatchPutRevokeRequest br = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
    br.client_id = &a;
    br.n_keys = 1;
    br.keys = bkeys;
    br.n_versions = 1;
    br.versions = bvers;
    Mc__BatchPutRevokeResponse *brr = NULL;
    assert_int_equal(call(d->c, MC_METHOD_BATCH_PUT_REVOKE, &br,
                          &mc__batch_put_revoke_response__descriptor, &brr),
                     0);
    assert_int_equal(brr->n_statuses, 1);
    assert_int_equal(brr->statuses[0], MC_ERR_INVALID_VERSION);
    FREE_MSG(brr);

    /* v2 is untouched: still PROCESSING, invisible to readers */
    assert_int_equal(get(d->c, "t", NULL), MC_ERR_REPLICA_IS_NOT_READY);
    /* its own PutEnd completes it, and a reader sees v2 with v2's CRC */
    pe.version = v2;
    pe.crc32c = 2;
    assert_int_equal(call(d->c, MC_METHOD_PUT_END, &pe, &mc__put_end_response__descriptor, NULL),
                     0);
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(get(d->c, "t", &g), 0);
    assert_int_equal(g->version, v2);
    assert_int_equal(g->crc32c, 2);
    FREE_MSG(g);
    /* a late v1 on the completed object is still refused */
    pe.version = v1;
    pe.crc32c = 1;
    assert_int_equal(call(d->c, MC_METHOD_PUT_END, &pe, &mc__put_end_response__descriptor, NULL),
                     MC_ERR_INVALID_VERSION);
    daemon_stop_ok(d);
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

static int tcp_connect(uint16_t port)
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

/* GET path; returns the status and the body (malloc'ed). */
static int http_get(uint16_t port, const char *path, char **body)
{
    struct mc_http_reply r;
    assert_int_equal(mc_http_fetch("127.0.0.1", port, "GET", path, 5000, &r), 0);
    *body = r.body; /* handed over */
    return r.status;
}

/* Finds an unlabelled sample "name value" in an exposition; checks every sample line parses. */
static double metric_value(const char *text, const char *name, int *found)
{
    double v = 0;
    assert_int_equal(mc_metrics_check(text), 0);
    *found = mc_metrics_find(text, name, &v) == 0;
    return v;
}

static void test_metrics(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, NULL);
    d->c = connect_client(d);
    Mc__Uuid a = uuid(1, 2), seg_id = uuid(7, 8);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(put_start(d->c, &a, "m1", 100, NULL), 0);
    assert_int_equal(put_end(d->c, &a, "m1", 0), 0);
    assert_int_equal(put_start(d->c, &a, "m2", 100, NULL), 0);
    assert_int_equal(put_end(d->c, &a, "m2", 0), 0);

    assert_int_equal(http_get(d->metrics_port, "/health", &d->body), 200);
    free(d->body);
    d->body = NULL;
    assert_int_equal(http_get(d->metrics_port, "/metrics", &d->body), 200);
    int found = 0;
    assert_true(metric_value(d->body, "master_key_count", &found) == 2.0);
    assert_true(found);
    assert_true(metric_value(d->body, "master_total_capacity_bytes", &found) == (double)SEG_SIZE);
    assert_true(found);
    assert_true(metric_value(d->body, "master_allocated_bytes", &found) >= 200.0);
    assert_true(found);
    assert_true(metric_value(d->body, "master_put_start_requests_total", &found) >= 2.0);
    assert_true(found);
    free(d->body);
    d->body = NULL;
    assert_int_equal(http_get(d->metrics_port, "/nope", &d->body), 404);
    free(d->body);
    d->body = NULL;
    daemon_stop_ok(d);
}

struct promo_hb {
    struct mc_rpc_client *c;
    Mc__Uuid *client;
    uint32_t wait_ms;
    int rc;
    uint64_t ms;
    Mc__PromotionObjectHeartbeatResponse *resp;
};

static void *promo_hb_thread(void *arg)
{
    struct promo_hb *h = arg;
    Mc__PromotionObjectHeartbeatRequest req = MC__PROMOTION_OBJECT_HEARTBEAT_REQUEST__INIT;
    req.client_id = h->client;
    req.wait_ms = h->wait_ms;
    uint64_t t0 = mc_now_ms();
    ProtobufCMessage *resp = NULL;
    h->rc = mc_rpc_client_call_msg(h->c, MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, &req.base,
                                   &mc__promotion_object_heartbeat_response__descriptor,
                                   h->wait_ms + 5000, &resp);
    h->ms = mc_now_ms() - t0;
    h->resp = (Mc__PromotionObjectHeartbeatResponse *)resp;
    return NULL;
}

/* MEMORY replicas of key as QueryKey lists them (-1: no such key); *processing those staged. */
static int query_memory(struct mc_rpc_client *c, const char *key, int *processing)
{
    Mc__QueryKeyRequest qk = MC__QUERY_KEY_REQUEST__INIT;
    qk.key = (char *)key;
    Mc__QueryKeyResponse *qr = NULL;
    if (call(c, MC_METHOD_QUERY_KEY, &qk, &mc__query_key_response__descriptor, &qr) != 0)
        return -1;
    int n = 0, p = 0;
    for (size_t i = 0; i < qr->n_replicas; i++) {
        const Mc__ReplicaDescriptor *r = qr->replicas[i]->replica;
        if (r->type != MC__REPLICA_TYPE__RT_MEMORY)
            continue;
        if (r->status == MC__REPLICA_STATUS__RS_COMPLETE)
            n++;
        else
            p++;
    }
    FREE_MSG(qr);
    if (processing)
        *processing = p;
    return n;
}

static bool get_lists_memory(struct mc_rpc_client *c, const char *key)
{
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(get(c, key, &g), 0);
    bool mem = false;
    for (size_t i = 0; i < g->n_replicas; i++)
        mem |= g->replicas[i]->type == MC__REPLICA_TYPE__RT_MEMORY;
    FREE_MSG(g);
    return mem;
}

/* Promotion through the RPCs of a real daemon: without offload the flag stays off (a warning) and
 * an out-of-range threshold is clamped (a warning); with it, a LOCAL_DISK-only key read twice is
 * handed to its holder's parked heartbeat at once, staged (holder only, size checked, invisible to
 * Get), committed, and the next Get lists DRAM; the funnel is in /metrics and GetStats. */
static void test_promotion_rpcs(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, "--promotion_on_hit", "--promotion_admission_threshold=300", NULL);
    d->c = connect_client(d);
    Mc__Uuid a = uuid(1, 2), b = uuid(3, 4), seg_id = uuid(7, 8);
    Mc__PromotionObjectHeartbeatRequest hb = MC__PROMOTION_OBJECT_HEARTBEAT_REQUEST__INIT;
    hb.client_id = &a;
    assert_int_equal(call(d->c, MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, &hb,
                          &mc__promotion_object_heartbeat_response__descriptor, NULL),
                     MC_ERR_UNABLE_OFFLOAD);
    daemon_stop_ok(d);
    char log[16384] = {0};
    int fd = open(d->err_path, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(read(fd, log, sizeof(log) - 1) >= 0);
    close(fd);
    assert_non_null(strstr(log, "promotion_on_hit needs --enable_offload"));
    assert_non_null(strstr(log, "promotion_admission_threshold outside 1..255: clamped"));

    daemon_start(d, "--enable_offload", "--promotion_on_hit", "--promotion_max_per_heartbeat=4",
                 NULL);
    d->c = connect_client(d);
    struct mc_rpc_client *c2 = connect_client(d), *c3 = connect_client(d);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(ping(c3, &b, NULL), 0); /* c3 is b's */
    Mc__MountLocalDiskSegmentRequest ml = MC__MOUNT_LOCAL_DISK_SEGMENT_REQUEST__INIT;
    ml.client_id = &a;
    ml.enable_offloading = 0; /* this test attaches its disk copy itself */
    ml.endpoint = "127.0.0.1:2";
    ml.capacity_bytes = 1ull << 30;
    assert_int_equal(call(d->c, MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, &ml,
                          &mc__mount_local_disk_segment_response__descriptor, NULL),
                     0);
    hb.client_id = &b; /* no LOCAL_DISK registration */
    assert_int_equal(call(c3, MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, &hb,
                          &mc__promotion_object_heartbeat_response__descriptor, NULL),
                     MC_ERR_SEGMENT_NOT_FOUND);

    /* m1 with a disk copy (what the holder's scan re-registers), then evicted from DRAM by the
     * Puts after it */
    const uint64_t MIB_ = 1ull << 20;
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(put_start(d->c, &a, "m1", MIB_, &ps), 0);
    uint64_t version = ps->version;
    FREE_MSG(ps);
    assert_int_equal(put_end(d->c, &a, "m1", 42), 0);
    Mc__OffloadResult res = MC__OFFLOAD_RESULT__INIT;
    res.key = "m1";
    res.size = MIB_;
    res.version = version;
    res.crc32c = 42;
    res.crc_valid = 1;
    Mc__OffloadResult *items[1] = {&res};
    Mc__NotifyOffloadSuccessRequest ns = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
    ns.client_id = &a;
    ns.n_items = 1;
    ns.items = items;
    ns.reregister = 1;
    Mc__NotifyOffloadSuccessResponse *nr = NULL;
    assert_int_equal(call(d->c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &ns,
                          &mc__notify_offload_success_response__descriptor, &nr),
                     0);
    assert_int_equal(nr->statuses[0], 0);
    FREE_MSG(nr);
    for (int i = 0; i < 60; i++) {
        char k[32];
        snprintf(k, sizeof(k), "fill-%d", i);
        if (put_start(d->c, &a, k, MIB_, NULL) == 0)
            assert_int_equal(put_end(d->c, &a, k, 1), 0);
    }
    uint64_t deadline = mc_now_ms() + 10000;
    while (query_memory(d->c, "m1", NULL) != 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(query_memory(d->c, "m1", NULL), 0);

    /* a heartbeat parked before the admission is answered by it */
    struct promo_hb h = {.c = c2, .client = &a, .wait_ms = 20000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, promo_hb_thread, &h), 0);
    struct timespec park = {0, 100 * 1000000L};
    nanosleep(&park, NULL);
    assert_false(get_lists_memory(d->c, "m1")); /* below the threshold */
    assert_false(get_lists_memory(d->c, "m1")); /* admitted: the Get itself is unchanged */
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms < 15000);
    assert_non_null(h.resp);
    assert_int_equal(h.resp->n_items, 1);
    assert_string_equal(h.resp->items[0]->key, "m1");
    assert_int_equal(h.resp->items[0]->size, MIB_);
    assert_int_equal(h.resp->items[0]->version, version);
    assert_int_equal(h.resp->items[0]->crc32c, 42);
    uint64_t task_id = h.resp->items[0]->task_id;
    FREE_MSG(h.resp);

    Mc__PromotionAllocStartRequest as = MC__PROMOTION_ALLOC_START_REQUEST__INIT;
    as.client_id = &b;
    as.task_id = task_id;
    as.key = "m1";
    as.size = MIB_;
    assert_int_equal(call(c3, MC_METHOD_PROMOTION_ALLOC_START, &as,
                          &mc__promotion_alloc_start_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS); /* not the holder */
    as.client_id = &a;
    as.size = MIB_ + 1;
    assert_int_equal(call(d->c, MC_METHOD_PROMOTION_ALLOC_START, &as,
                          &mc__promotion_alloc_start_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS); /* wrong size */
    as.size = MIB_;
    Mc__PromotionAllocStartResponse *ar = NULL;
    assert_int_equal(call(d->c, MC_METHOD_PROMOTION_ALLOC_START, &as,
                          &mc__promotion_alloc_start_response__descriptor, &ar),
                     0);
    assert_non_null(ar->replica);
    assert_int_equal(ar->replica->type, MC__REPLICA_TYPE__RT_MEMORY);
    assert_int_equal(ar->replica->status, MC__REPLICA_STATUS__RS_PROCESSING);
    assert_string_equal(ar->replica->memory->segment_name, "seg0");
    assert_true(ar->replica->memory->mount_epoch != 0);
    FREE_MSG(ar);
    int staged = 0;
    assert_int_equal(query_memory(d->c, "m1", &staged), 0);
    assert_int_equal(staged, 1);
    assert_false(get_lists_memory(d->c, "m1")); /* invisible to readers */

    Mc__NotifyPromotionSuccessRequest ok = MC__NOTIFY_PROMOTION_SUCCESS_REQUEST__INIT;
    ok.client_id = &b;
    ok.task_id = task_id;
    ok.key = "m1";
    assert_int_equal(call(c3, MC_METHOD_NOTIFY_PROMOTION_SUCCESS, &ok,
                          &mc__notify_promotion_success_response__descriptor, NULL),
                     MC_ERR_INVALID_PARAMS);
    ok.client_id = &a;
    assert_int_equal(call(d->c, MC_METHOD_NOTIFY_PROMOTION_SUCCESS, &ok,
                          &mc__notify_promotion_success_response__descriptor, NULL),
                     0);
    assert_int_equal(call(d->c, MC_METHOD_NOTIFY_PROMOTION_SUCCESS, &ok,
                          &mc__notify_promotion_success_response__descriptor, NULL),
                     MC_ERR_REPLICA_IS_NOT_READY); /* stale now */
    Mc__NotifyPromotionFailureRequest ko = MC__NOTIFY_PROMOTION_FAILURE_REQUEST__INIT;
    ko.client_id = &a;
    ko.task_id = task_id;
    ko.key = "m1";
    assert_int_equal(call(d->c, MC_METHOD_NOTIFY_PROMOTION_FAILURE, &ko,
                          &mc__notify_promotion_failure_response__descriptor, NULL),
                     0); /* idempotent */
    ko.key = "";
    assert_int_equal(call(d->c, MC_METHOD_NOTIFY_PROMOTION_FAILURE, &ko,
                          &mc__notify_promotion_failure_response__descriptor, NULL),
                     MC_ERR_INVALID_KEY);
    assert_true(get_lists_memory(d->c, "m1"));
    assert_int_equal(query_memory(d->c, "m1", &staged), 1);
    assert_int_equal(staged, 0);

    /* nothing queued: a heartbeat is answered empty once its wait passed */
    h = (struct promo_hb){.c = c2, .client = &a, .wait_ms = 300};
    promo_hb_thread(&h);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms >= 250);
    assert_int_equal(h.resp->n_items, 0);
    FREE_MSG(h.resp);

    assert_int_equal(http_get(d->metrics_port, "/metrics", &d->body), 200);
    int found = 0;
    assert_true(metric_value(d->body, "master_promotion_admitted_total", &found) == 1.0);
    assert_true(found);
    assert_true(metric_value(d->body, "master_promotion_completed_total", &found) == 1.0);
    assert_true(found);
    assert_true(metric_value(d->body, "master_promotion_completed_bytes_total", &found) ==
                (double)MIB_);
    assert_true(found);
    assert_true(metric_value(d->body, "master_promotion_in_flight", &found) == 0.0);
    assert_true(found);
    assert_non_null(strstr(d->body, "master_promotion_lag_seconds_count 1"));
    free(d->body);
    d->body = NULL;
    Mc__GetStatsResponse *st = stats(d->c);
    bool seen = false;
    for (size_t i = 0; i < st->n_extra; i++)
        if (!strcmp(st->extra[i]->name, "master_promotion_completed_total"))
            seen = st->extra[i]->value == 1.0;
    assert_true(seen);
    FREE_MSG(st);
    mc_rpc_client_free(c2);
    mc_rpc_client_free(c3);
    daemon_stop_ok(d);
}

static void test_bad_input(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, NULL);
    d->c = connect_client(d);
    Mc__Uuid a = uuid(1, 2), seg_id = uuid(7, 8);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);
    assert_int_equal(put_start(d->c, &a, "m1", 100, NULL), 0);
    assert_int_equal(put_end(d->c, &a, "m1", 0), 0);

    /* garbage bytes: the connection is closed, the server keeps serving */
    int fd = tcp_connect(d->rpc_port);
    uint8_t junk[64];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    assert_int_equal(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
    uint8_t rb[128];
    assert_true(recv(fd, rb, sizeof(rb), 0) <= 0);
    close(fd);
    assert_int_equal(mc_rpc_check_version(d->c, NULL, 0), 0);

    /* oversized length: refused, connection closed */
    struct mc_wire_header h;
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_PUT_START, 1, 0, 0xF0000000u);
    mc_wire_encode_header(&h, hb);
    fd = tcp_connect(d->rpc_port);
    assert_int_equal(send(fd, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
    assert_true(recv(fd, rb, sizeof(rb), 0) <= 0);
    close(fd);
    assert_int_equal(mc_rpc_check_version(d->c, NULL, 0), 0);

    /* truncated frame: header announces 100 bytes, 10 arrive, then the peer goes away */
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_GET_REPLICA_LIST, 2, 0, 100);
    mc_wire_encode_header(&h, hb);
    fd = tcp_connect(d->rpc_port);
    assert_int_equal(send(fd, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
    assert_int_equal(send(fd, junk, 10, MSG_NOSIGNAL), 10);
    close(fd);
    /* truncated header */
    fd = tcp_connect(d->rpc_port);
    assert_int_equal(send(fd, hb, 7, MSG_NOSIGNAL), 7);
    close(fd);
    assert_int_equal(mc_rpc_check_version(d->c, NULL, 0), 0);
    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(get(d->c, "m1", &g), 0);
    assert_int_equal(g->size, 100);
    FREE_MSG(g);

    /* A protobuf string may hold a NUL, a key may not: "m1\0x" is refused (INVALID_KEY), never
     * cut at the NUL into the key "m1". Raw bodies, since protobuf-c cannot encode one. */
    static const uint8_t get_nul[] = {0x0a, 4, 'm', '1', 0, 'x'}; /* key = 1 */
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_GET_REPLICA_LIST, get_nul, sizeof(get_nul),
                                        0, NULL, NULL),
                     MC_ERR_INVALID_KEY);
    /* the same key twice: the last occurrence is the one decoded, and it is clean */
    static const uint8_t get_twice[] = {0x0a, 4, 'm', '1', 0, 'x', 0x0a, 2, 'm', '1'};
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_GET_REPLICA_LIST, get_twice,
                                        sizeof(get_twice), 0, NULL, NULL),
                     0);
    /* batch: only the bad key fails */
    static const uint8_t exist_nul[] = {0x0a, 2, 'm', '1', 0x0a, 4, 'm', '1', 0, 'x'};
    void *resp = NULL;
    size_t resp_len = 0;
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_BATCH_EXIST_KEY, exist_nul,
                                        sizeof(exist_nul), 0, &resp, &resp_len),
                     0);
    Mc__BatchExistKeyResponse *ex = mc__batch_exist_key_response__unpack(NULL, resp_len, resp);
    free(resp);
    assert_non_null(ex);
    assert_int_equal(ex->n_statuses, 2);
    assert_int_equal(ex->statuses[0], 0);
    assert_true(ex->exists[0]);
    assert_int_equal(ex->statuses[1], MC_ERR_INVALID_KEY);
    assert_false(ex->exists[1]);
    FREE_MSG(ex);
    /* nested: BatchPutEnd item {key = 1}, client_id = {1, 2} */
    static const uint8_t end_nul[] = {0x0a, 4, 0x08, 1,   0x10, 2,   0x12, 6,
                                      0x0a, 4, 'm',  '1', 0,    'x', 0x18, 1};
    resp = NULL;
    assert_int_equal(mc_rpc_client_call(d->c, MC_METHOD_BATCH_PUT_END, end_nul, sizeof(end_nul), 0,
                                        &resp, &resp_len),
                     0);
    Mc__BatchPutEndResponse *pe = mc__batch_put_end_response__unpack(NULL, resp_len, resp);
    free(resp);
    assert_non_null(pe);
    assert_int_equal(pe->n_statuses, 1);
    assert_int_equal(pe->statuses[0], MC_ERR_INVALID_KEY);
    FREE_MSG(pe);
    /* a group id holding a NUL would join the group "g": PutStart {client {1, 2}, key "g1",
     * value_length 100, config {group_id "g\0x"}} is refused and creates nothing */
    static const uint8_t group_nul[] = {0x0a, 4,   0x08, 1, 0x10, 2, 0x12, 2,    'g', '1',
                                        0x18, 100, 0x22, 5, 0x32, 3, 'g',  0x00, 'x'};
    assert_int_equal(
        mc_rpc_client_call(d->c, MC_METHOD_PUT_START, group_nul, sizeof(group_nul), 0, NULL, NULL),
        MC_ERR_INVALID_PARAMS);
    assert_int_equal(get(d->c, "g1", NULL), MC_ERR_OBJECT_NOT_FOUND);
    daemon_stop_ok(d);
}

/* The client monitor thread runs: a client that stops pinging loses its segment. */
static void test_client_expiry(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, "--client_ttl=300ms", NULL);
    d->c = connect_client(d);
    Mc__Uuid a = uuid(1, 2), seg_id = uuid(7, 8);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);
    uint64_t deadline = mc_now_ms() + 10000;
    uint64_t segs = 1;
    while (segs != 0 && mc_now_ms() < deadline) {
        Mc__GetStatsResponse *st = stats(d->c);
        segs = st->segment_count;
        FREE_MSG(st);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(segs, 0);
    daemon_stop_ok(d);
}

/* ---- flags -------------------------------------------------------------------------------------
 */

struct run {
    int status;
    char out[65536];
    char err[4096];
};

/* Runs the master with args (NULL-terminated), output to files; 10 s deadline. */
static void run_master(struct daemon *d, struct run *r, const char *first, ...)
{
    const char *argv[16];
    int n = 0;
    argv[n++] = g_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 15; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char out_path[320];
    snprintf(out_path, sizeof(out_path), "%s/stdout", d->dir);
    const struct mc_proc_io io = {.out_path = out_path, .err_path = d->err_path};
    r->status = mc_proc_run(argv, &io, 10000);
    assert_true(r->status >= 0); /* neither overran nor failed to start */
    memset(r->out, 0, sizeof(r->out));
    memset(r->err, 0, sizeof(r->err));
    int fd = open(out_path, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(read(fd, r->out, sizeof(r->out) - 1) >= 0);
    close(fd);
    unlink(out_path);
    fd = open(d->err_path, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(read(fd, r->err, sizeof(r->err) - 1) >= 0);
    close(fd);
}

static void test_flags(void **state)
{
    struct daemon *d = *state;
    static struct run r;
    run_master(d, &r, "--help", NULL);
    assert_int_equal(r.status, 0);
    static const char *const names[] = {"rpc_address",
                                        "rpc_port",
                                        "rpc_thread_num",
                                        "metrics_host",
                                        "metrics_port",
                                        "default_kv_lease_ttl",
                                        "default_kv_soft_pin_ttl",
                                        "max_kv_soft_pin_ttl",
                                        "allow_evict_soft_pinned_objects",
                                        "eviction_ratio",
                                        "eviction_high_watermark_ratio",
                                        "eviction_threads",
                                        "client_ttl",
                                        "put_start_discard_timeout_sec",
                                        "put_start_release_timeout_sec",
                                        "allocation_strategy",
                                        "max_key_len",
                                        "max_frame_bytes",
                                        "log_level",
                                        "enable_offload",
                                        "offload_on_evict",
                                        "offload_force_evict",
                                        "offloading_queue_limit",
                                        "offload_cap_ratio",
                                        "promotion_on_hit",
                                        "promotion_admission_threshold",
                                        "promotion_queue_limit",
                                        "promotion_max_per_heartbeat",
                                        "promotion_task_timeout_sec"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strstr(r.out, names[i]))
            fail_msg("--help does not list %s", names[i]);

    run_master(d, &r, "--no_such_flag=1", NULL);
    assert_int_equal(r.status, 2);
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--offload_on_evict", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--offload_on_evict needs --enable_offload"));
    assert_int_equal(strlen(r.out), 0);
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--enable_offload",
               "--offloading_queue_limit=0", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "offloading_queue_limit"));
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--enable_offload",
               "--offload_cap_ratio=1.5", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "offload_cap_ratio"));
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--promotion_queue_limit=0", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "promotion_queue_limit must be at least 1"));
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--promotion_task_timeout_sec=0", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "promotion_task_timeout_sec must be positive"));
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--promotion_max_per_heartbeat=0", NULL);
    assert_int_equal(r.status, 2);
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--allocation_strategy=best", NULL);
    assert_int_equal(r.status, 2);
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--eviction_ratio=2", NULL);
    assert_int_equal(r.status, 2);
    assert_int_equal(strlen(r.out), 0); /* never READY */
    run_master(d, &r, "--rpc_port=0", "--metrics_port=0", "--eviction_threads=65", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "eviction_threads"));
    assert_int_equal(strlen(r.out), 0);
}

/* A segment mounted with protocol RDMA: every MEMORY descriptor the master hands out for it
 * (PutStart, GetReplicaList) carries protocol RDMA, the segment's rkey and remote_addr = the
 * segment's base + the replica's offset, which is all a peer needs for one-sided verbs; a TCP
 * segment's descriptors carry no key. */
static void test_rdma_segment_descriptors(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, NULL);
    d->c = connect_client(d);
    Mc__Uuid a = uuid(1, 2), seg_id = uuid(7, 8), tcp_id = uuid(9, 10);
    Mc__RdmaInfo ri = MC__RDMA_INFO__INIT;
    ri.rkey = 0x5eed1234u;
    ri.addr = SEG_BASE;
    ri.device = "mlx5_7";
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = &seg_id;
    seg.name = "rdma0";
    seg.base_addr = SEG_BASE;
    seg.size = SEG_SIZE;
    seg.endpoint = "127.0.0.1:2";
    seg.protocol = MC__PROTOCOL__PROTOCOL_RDMA;
    seg.rdma = &ri;
    Mc__MountSegmentRequest req = MC__MOUNT_SEGMENT_REQUEST__INIT;
    req.segment = &seg;
    req.client_id = &a;
    assert_int_equal(
        call(d->c, MC_METHOD_MOUNT_SEGMENT, &req, &mc__mount_segment_response__descriptor, NULL),
        0);

    const uint64_t sizes[] = {4096, 100000, 1u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char key[16];
        snprintf(key, sizeof(key), "rk%zu", i);
        Mc__PutStartResponse *ps = NULL;
        assert_int_equal(put_start(d->c, &a, key, sizes[i], &ps), 0);
        assert_int_equal(ps->n_replicas, 1);
        const Mc__MemoryLocation *m = ps->replicas[0]->memory;
        assert_non_null(m);
        assert_int_equal(m->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
        assert_int_equal(m->rkey, 0x5eed1234u);
        assert_int_equal(m->remote_addr, SEG_BASE + m->offset);
        assert_true(m->offset + sizes[i] <= SEG_SIZE);
        uint64_t off = m->offset;
        FREE_MSG(ps);
        assert_int_equal(put_end(d->c, &a, key, 0x1234u), 0);
        Mc__GetReplicaListResponse *g = NULL;
        assert_int_equal(get(d->c, key, &g), 0);
        assert_int_equal(g->n_replicas, 1);
        m = g->replicas[0]->memory;
        assert_non_null(m);
        assert_int_equal(m->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
        assert_int_equal(m->rkey, 0x5eed1234u);
        assert_int_equal(m->offset, off);
        assert_int_equal(m->remote_addr, SEG_BASE + off);
        assert_string_equal(m->endpoint, "127.0.0.1:2");
        FREE_MSG(g);
    }
    /* the segment list says how to reach it */
    Mc__ListSegmentsResponse *ls = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_LIST_SEGMENTS, NULL, &mc__list_segments_response__descriptor, &ls), 0);
    assert_int_equal(ls->n_segments, 1);
    assert_int_equal(ls->segments[0]->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
    FREE_MSG(ls);

    /* once the RDMA segment is gone, a TCP segment's replicas carry no key */
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.client_id = &a;
    ra.force = 1;
    assert_int_equal(
        call(d->c, MC_METHOD_REMOVE_ALL, &ra, &mc__remove_all_response__descriptor, NULL), 0);
    Mc__UnmountSegmentRequest um = MC__UNMOUNT_SEGMENT_REQUEST__INIT;
    um.segment_id = &seg_id;
    um.client_id = &a;
    assert_int_equal(
        call(d->c, MC_METHOD_UNMOUNT_SEGMENT, &um, &mc__unmount_segment_response__descriptor, NULL),
        0);
    assert_int_equal(mount(d->c, &a, &tcp_id, "tcp0"), 0);
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(put_start(d->c, &a, "tk", 4096, &ps), 0);
    assert_int_equal(ps->n_replicas, 1);
    assert_int_equal(ps->replicas[0]->memory->protocol, MC__PROTOCOL__PROTOCOL_TCP);
    assert_int_equal(ps->replicas[0]->memory->rkey, 0);
    FREE_MSG(ps);
    daemon_stop_ok(d);
}

/* ---- the LOCAL_DISK tier through the daemon ----------------------------------------------------
 */

struct hb_call {
    struct mc_rpc_client *c;
    Mc__Uuid *client;
    uint32_t wait_ms;
    int rc;
    uint64_t ms;
    Mc__OffloadObjectHeartbeatResponse *resp;
};

static void *hb_thread(void *arg)
{
    struct hb_call *h = arg;
    Mc__OffloadObjectHeartbeatRequest req = MC__OFFLOAD_OBJECT_HEARTBEAT_REQUEST__INIT;
    req.client_id = h->client;
    req.enable_offloading = 1;
    req.wait_ms = h->wait_ms;
    req.max_items = 16;
    uint64_t t0 = mc_now_ms();
    ProtobufCMessage *resp = NULL;
    h->rc = mc_rpc_client_call_msg(h->c, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, &req.base,
                                   &mc__offload_object_heartbeat_response__descriptor,
                                   h->wait_ms + 5000, &resp);
    h->ms = mc_now_ms() - t0;
    h->resp = (Mc__OffloadObjectHeartbeatResponse *)resp;
    return NULL;
}

/* A Remove on its own connection (it waits for the holder's ack). */
struct rm_call {
    struct mc_rpc_client *c;
    Mc__Uuid *client;
    const char *key;
    int rc;
    uint64_t ms;
};

static void *rm_thread(void *arg)
{
    struct rm_call *r = arg;
    Mc__RemoveRequest rm = MC__REMOVE_REQUEST__INIT;
    rm.client_id = r->client;
    rm.key = (char *)r->key;
    rm.force = 1;
    uint64_t t0 = mc_now_ms();
    r->rc = call(r->c, MC_METHOD_REMOVE, &rm, &mc__remove_response__descriptor, NULL);
    r->ms = mc_now_ms() - t0;
    return NULL;
}

/* --enable_offload: a holder mounts its disk, long-polls for the task of a Put (answered when the
 * task arrives, or empty at its wait), reports it stored; Get lists the LOCAL_DISK replica with
 * the holder's endpoint; ListSegments and /metrics show the disk; a Remove sends the holder a
 * delete and answers once the holder acknowledges it; SIGTERM with a heartbeat parked exits
 * cleanly. */
static void test_offload_rpcs(void **state)
{
    struct daemon *d = *state;
    daemon_start(d, "--enable_offload", NULL);
    d->c = connect_client(d);
    struct mc_rpc_client *c2 = connect_client(d);
    Mc__Uuid a = uuid(1, 2), seg_id = uuid(7, 8);
    assert_int_equal(mount(d->c, &a, &seg_id, "seg0"), 0);
    Mc__MountLocalDiskSegmentRequest ml = MC__MOUNT_LOCAL_DISK_SEGMENT_REQUEST__INIT;
    ml.client_id = &a;
    ml.enable_offloading = 1;
    ml.endpoint = "127.0.0.1:2";
    ml.capacity_bytes = 1ull << 30;
    assert_int_equal(call(d->c, MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, &ml,
                          &mc__mount_local_disk_segment_response__descriptor, NULL),
                     0);

    /* a heartbeat parked on c2 is answered by the Put's task */
    struct hb_call h = {.c = c2, .client = &a, .wait_ms = 20000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hb_thread, &h), 0);
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(put_start(d->c, &a, "k", 100, &ps), 0);
    uint64_t version = ps->version;
    FREE_MSG(ps);
    assert_int_equal(put_end(d->c, &a, "k", 42), 0);
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms < 15000); /* not the 20 s wait */
    assert_non_null(h.resp);
    assert_int_equal(h.resp->n_items, 1);
    Mc__OffloadTaskItem *it = h.resp->items[0];
    assert_string_equal(it->key, "k");
    assert_int_equal(it->version, version);
    assert_int_equal(it->size, 100);
    assert_int_equal(it->crc32c, 42);
    assert_false(it->drop);
    uint64_t task_id = it->task_id;
    FREE_MSG(h.resp);

    /* nothing queued: answered empty once its wait passed */
    h = (struct hb_call){.c = c2, .client = &a, .wait_ms = 300};
    hb_thread(&h);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms >= 250);
    assert_int_equal(h.resp->n_items, 0);
    FREE_MSG(h.resp);

    Mc__OffloadResult res = MC__OFFLOAD_RESULT__INIT;
    res.task_id = task_id;
    res.key = "k";
    res.size = 100;
    res.version = version;
    res.crc32c = 42;
    res.crc_valid = 1;
    Mc__OffloadResult *resp_items[1] = {&res};
    Mc__NotifyOffloadSuccessRequest ns = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
    ns.client_id = &a;
    ns.n_items = 1;
    ns.items = resp_items;
    Mc__NotifyOffloadSuccessResponse *nr = NULL;
    assert_int_equal(call(d->c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &ns,
                          &mc__notify_offload_success_response__descriptor, &nr),
                     0);
    assert_int_equal(nr->n_statuses, 1);
    assert_int_equal(nr->statuses[0], 0);
    FREE_MSG(nr);
    /* the same report again: the task is gone, the holder is told so */
    assert_int_equal(call(d->c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &ns,
                          &mc__notify_offload_success_response__descriptor, &nr),
                     0);
    assert_int_equal(nr->statuses[0], MC_ERR_TASK_NOT_FOUND);
    FREE_MSG(nr);

    Mc__GetReplicaListResponse *g = NULL;
    assert_int_equal(get(d->c, "k", &g), 0);
    assert_int_equal(g->n_replicas, 2);
    assert_int_equal(g->replicas[1]->type, MC__REPLICA_TYPE__RT_LOCAL_DISK);
    assert_non_null(g->replicas[1]->local_disk);
    assert_string_equal(g->replicas[1]->local_disk->endpoint, "127.0.0.1:2");
    assert_int_equal(g->replicas[1]->local_disk->holder->lo, 2);
    assert_int_equal(g->replicas[1]->local_disk->size, 100);
    FREE_MSG(g);

    Mc__ListSegmentsResponse *ls = NULL;
    assert_int_equal(
        call(d->c, MC_METHOD_LIST_SEGMENTS, NULL, &mc__list_segments_response__descriptor, &ls), 0);
    assert_int_equal(ls->n_local_disks, 1);
    assert_string_equal(ls->local_disks[0]->endpoint, "127.0.0.1:2");
    assert_int_equal(ls->local_disks[0]->replica_count, 1);
    assert_int_equal(ls->local_disks[0]->used_bytes, 100);
    assert_int_equal(ls->local_disks[0]->capacity_bytes, 1ull << 30);
    assert_true(ls->local_disks[0]->enable_offloading);
    FREE_MSG(ls);
    Mc__GetStatsResponse *st = stats(d->c);
    assert_int_equal(st->local_disk_replica_count, 1);
    assert_int_equal(st->offload_in_flight, 0);
    FREE_MSG(st);
    assert_int_equal(http_get(d->metrics_port, "/metrics", &d->body), 200);
    int found = 0;
    assert_true(metric_value(d->body, "master_offload_completed_total", &found) == 1.0);
    assert_true(found);
    assert_true(metric_value(d->body, "master_allocated_file_size_bytes", &found) == 100.0);
    assert_true(found);
    assert_true(metric_value(d->body, "master_total_file_capacity_bytes", &found) ==
                (double)(1ull << 30));
    assert_true(found);
    free(d->body);
    d->body = NULL;

    /* Remove: the holder's parked heartbeat gets a delete of that version at once, and the
     * Remove answers when the holder acknowledges it (the delete rule), not at the timeout */
    h = (struct hb_call){.c = c2, .client = &a, .wait_ms = 5000};
    assert_int_equal(pthread_create(&th, NULL, hb_thread, &h), 0);
    struct rm_call rmc = {.c = d->c, .client = &a, .key = "k"};
    pthread_t rth;
    assert_int_equal(pthread_create(&rth, NULL, rm_thread, &rmc), 0);
    pthread_join(th, NULL);
    assert_int_equal(h.rc, 0);
    assert_true(h.ms < 4000); /* woken by the delete, not the 5 s wait */
    assert_int_equal(h.resp->n_items, 1);
    assert_true(h.resp->items[0]->drop);
    assert_int_equal(h.resp->items[0]->version, version);
    uint64_t del_id = h.resp->items[0]->task_id;
    assert_int_not_equal(del_id, 0);
    FREE_MSG(h.resp);
    Mc__OffloadObjectHeartbeatRequest ackr = MC__OFFLOAD_OBJECT_HEARTBEAT_REQUEST__INIT;
    ackr.client_id = &a;
    ackr.enable_offloading = 1;
    ackr.n_acked_delete_task_ids = 1;
    ackr.acked_delete_task_ids = &del_id;
    assert_int_equal(call(c2, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, &ackr,
                          &mc__offload_object_heartbeat_response__descriptor, NULL),
                     0);
    pthread_join(rth, NULL);
    assert_int_equal(rmc.rc, 0);
    assert_true(rmc.ms < 1500); /* the ack answered it, not the 2 s fence */

    /* a disk eviction of an absent key, and one of a non-holder */
    Mc__EvictDiskReplicaRequest ev = MC__EVICT_DISK_REPLICA_REQUEST__INIT;
    ev.client_id = &a;
    ev.key = "k";
    assert_int_equal(call(d->c, MC_METHOD_EVICT_DISK_REPLICA, &ev,
                          &mc__evict_disk_replica_response__descriptor, NULL),
                     MC_ERR_OBJECT_NOT_FOUND);

    /* SIGTERM while a heartbeat is parked: the daemon answers it and exits 0 */
    h = (struct hb_call){.c = c2, .client = &a, .wait_ms = 30000};
    assert_int_equal(pthread_create(&th, NULL, hb_thread, &h), 0);
    Mc__GetStatsResponse *st2 = stats(d->c); /* the heartbeat had time to reach the master */
    FREE_MSG(st2);
    daemon_stop_ok(d);
    pthread_join(th, NULL);
    assert_int_not_equal(h.rc, 0);
    assert_true(h.ms < 25000);
    if (h.resp)
        FREE_MSG(h.resp);
    mc_rpc_client_free(c2);
}

int main(void)
{
    const char *bin = getenv("MC_BIN_DIR");
    snprintf(g_bin, sizeof(g_bin), "%s/mooncake_master", bin ? bin : ".");
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_WARN); /* the client's "connection lost" at SIGTERM is expected */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version_ping_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_illegal_client_and_unknown_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_put_end_through_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offload_rpcs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_rpcs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rdma_segment_descriptors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
