/*
 * test_security.c - who may connect, with real processes on loopback: a mooncake_master and a
 * mooncake_client daemon that share --auth_token_file, mooncake_cli runs, and in-test peers.
 *
 *   right_token        cli put/get with the token round-trips the bytes; an in-test client with
 *                      the token (no DRAM of its own) reads them from the daemon's segment
 *   master_no_token    without a token, or with another one, cli data and admin commands fail
 *                      with UNAUTHENTICATED; a raw connection that sends a Ping or ListSegments
 *                      (the review's attack: an invented client id) gets UNAUTHENTICATED and is
 *                      disconnected, and a header claiming a 64 MiB body is refused before the
 *                      body is read
 *   peer_no_token      with a real replica descriptor (segment id, offset, mount epoch, taken
 *                      from the master by an authenticated connection), a peer without the
 *                      token or with another one can neither read nor write the daemon's
 *                      segment; the bytes are unchanged; the same descriptor works with the token
 *   forged_client_id   a connection with the token, bound to the id the master minted for it
 *                      (RegisterClient), names the daemon's id in Ping, UnmountSegment,
 *                      PutStart and RemoveAll: each is ILLEGAL_CLIENT and nothing changes
 *   metrics            the refusals are counted on the master's and the daemon's /metrics
 *
 * Every process dies with the test; the temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "client/transport.h"
#include "cluster_util.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "security_fixture.h"

#define CLI_MS 30000
#define VALUE_LEN (256u << 10)

static struct {
    struct sec_env e;
    char tok[128], bad_tok[128];
    char tok_flag[160], bad_tok_flag[160];
    struct cu_proc master, d;
    char rpc[64], metrics[64], ep[256];
    int d_metrics;
    struct mc_auth_key key, bad_key;
} g;

static int start_master(void)
{
    const char *flags[] = {"--rpc_port=0", g.tok_flag, NULL};
    struct mc_proc_ready r;
    if (sec_start_master(&g.e, &g.master, flags, &r) != 0)
        return -1;
    snprintf(g.rpc, sizeof(g.rpc), "127.0.0.1:%u", r.rpc_port);
    snprintf(g.metrics, sizeof(g.metrics), "127.0.0.1:%u", r.metrics_port);
    return 0;
}

static int start_daemon(void)
{
    char mport[64];
    g.d_metrics = cu_free_port();
    snprintf(mport, sizeof(mport), "--metrics_port=%d", g.d_metrics);
    const char *flags[] = {"--segment_size=64MiB", mport, g.tok_flag, NULL};
    struct mc_proc_ready r;
    if (sec_start_daemon(&g.e, &g.d, "daemon", g.rpc, flags, &r) != 0)
        return -1;
    snprintf(g.ep, sizeof(g.ep), "%s", r.endpoint);
    return 0;
}

/* mooncake_cli --master=<rpc> [token flag] ARGS... (NULL-terminated). */
static void cli(struct cu_run *r, const char *tok_flag, const char *in_path, ...)
{
    const char *argv[32];
    char master[128];
    int n = 0;
    snprintf(master, sizeof(master), "--master=%s", g.rpc);
    argv[n++] = g.e.cli_bin;
    argv[n++] = master;
    if (tok_flag)
        argv[n++] = tok_flag;
    va_list ap;
    va_start(ap, in_path);
    for (const char *a = va_arg(ap, const char *); a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cu_run(r, g.e.dir, argv, in_path, CLI_MS);
}

/* An rpc client to the master with `key` (NULL = none). */
static struct mc_rpc_client *master_rpc(const struct mc_auth_key *key)
{
    struct mc_rpc_client *c = sec_master_rpc(g.rpc, key);
    assert_non_null(c);
    return c;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* The token file: trailing newline and blanks are not part of the token; too short, missing
 * and another token give other keys or errors. */
static void test_token_file(void **state)
{
    (void)state;
    char p[128], err[160];
    struct mc_auth_key k;
    snprintf(p, sizeof(p), "%s/t2", g.e.dir);
    const char same[] = "s3cret-shared-by-the-cluster-0123456789 \r\n\n";
    assert_int_equal(cu_write_file(p, same, strlen(same)), 0);
    chmod(p, 0600);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), 0);
    assert_true(k.set);
    assert_memory_equal(k.k, g.key.k, sizeof(k.k));
    assert_memory_not_equal(g.bad_key.k, g.key.k, sizeof(k.k));
    assert_int_equal(cu_write_file(p, "short\n", 6), 0);
    chmod(p, 0600);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    assert_false(k.set);
    assert_non_null(strstr(err, "32"));
    unlink(p);
    assert_int_equal(mc_auth_key_load(p, &k, err, sizeof(err)), MC_ERR_FILE_OPEN_FAIL);
    /* proofs: the two directions differ, and a nonce change changes them */
    uint8_t cn[MC_AUTH_NONCE_BYTES] = {1}, sn[MC_AUTH_NONCE_BYTES] = {2};
    uint8_t a[MC_AUTH_MAC_BYTES], b[MC_AUTH_MAC_BYTES];
    mc_auth_server_proof(&g.key, cn, sn, a);
    mc_auth_client_proof(&g.key, cn, sn, b);
    assert_false(mc_auth_mac_equal(a, b));
    mc_auth_server_proof(&g.key, cn, sn, b);
    assert_true(mc_auth_mac_equal(a, b));
    sn[0] = 3;
    mc_auth_server_proof(&g.key, cn, sn, b);
    assert_false(mc_auth_mac_equal(a, b));
    /* a master given a bad token file refuses to start (exit 2) */
    char flag[200];
    snprintf(flag, sizeof(flag), "--auth_token_file=%s", p);
    const char *argv[] = {g.e.master_bin, "--rpc_port=0", "--metrics_port=0", flag, NULL};
    struct cu_run r;
    cu_run(&r, g.e.dir, argv, NULL, CLI_MS);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "auth token"));
    cu_run_free(&r);
}

static void test_right_token(void **state)
{
    (void)state;
    char in[128], out[128];
    uint8_t *buf = malloc(VALUE_LEN), *back = malloc(VALUE_LEN);
    assert_non_null(buf);
    assert_non_null(back);
    sec_fill(buf, VALUE_LEN, 7);
    snprintf(in, sizeof(in), "%s/in.bin", g.e.dir);
    snprintf(out, sizeof(out), "%s/out.bin", g.e.dir);
    assert_int_equal(cu_write_file(in, buf, VALUE_LEN), 0);
    struct cu_run r;
    cli(&r, g.tok_flag, NULL, "put", "sec/a", in, NULL);
    if (r.status != 0)
        fprintf(stderr, "put: %s\n", r.err);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    cli(&r, g.tok_flag, NULL, "get", "sec/a", "-o", out, NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    size_t len = 0;
    char *got = cu_slurp(out, &len);
    assert_non_null(got);
    assert_int_equal(len, VALUE_LEN);
    assert_memory_equal(got, buf, VALUE_LEN);
    free(got);

    /* the library with the token, reading from the daemon's segment over its peer port */
    struct mc_client *c = NULL;
    assert_int_equal(sec_data_client(g.rpc, g.tok, &c), 0);
    assert_int_equal(mc_get(c, "sec/a", back, VALUE_LEN), VALUE_LEN);
    assert_memory_equal(back, buf, VALUE_LEN);
    assert_int_equal(mc_put(c, "sec/b", buf, 4096, NULL), 0);
    mc_client_close(c);

    /* the library without a token cannot even open */
    assert_int_equal(sec_data_client(g.rpc, NULL, &c), MC_ERR_UNAUTHENTICATED);
    assert_null(c);
    assert_int_equal(sec_data_client(g.rpc, g.bad_tok, &c), MC_ERR_UNAUTHENTICATED);
    assert_null(c);
    free(buf);
    free(back);
}

/* Sends one request frame on a raw socket and reads the answer's status; *closed: the server
 * closed the connection after it. */
static int raw_call(uint16_t method, const void *body, uint32_t claim, size_t send_len,
                    bool *closed)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    char host[64];
    unsigned port = 0;
    sscanf(g.rpc, "%63[^:]:%u", host, &port);
    inet_pton(AF_INET, host, &sa.sin_addr);
    sa.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, 42, 0, claim);
    mc_wire_encode_header(&h, hb);
    assert_int_equal(send(fd, hb, sizeof(hb), MSG_NOSIGNAL), (ssize_t)sizeof(hb));
    if (send_len)
        assert_int_equal(send(fd, body, send_len, MSG_NOSIGNAL), (ssize_t)send_len);
    uint8_t rb[MC_WIRE_HEADER_SIZE];
    size_t got = 0;
    uint64_t deadline = cu_now_ms() + 5000;
    while (got < sizeof(rb) && cu_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, rb + got, sizeof(rb) - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    assert_int_equal(got, sizeof(rb));
    struct mc_wire_header resp;
    mc_wire_decode_header(rb, &resp);
    assert_int_equal(resp.kind, MC_WIRE_RESPONSE);
    assert_int_equal(resp.body_length, 0);
    /* then EOF (or a reset) within the deadline */
    *closed = false;
    deadline = cu_now_ms() + 5000;
    while (cu_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        uint8_t b;
        if (recv(fd, &b, 1, 0) <= 0) {
            *closed = true;
            break;
        }
    }
    close(fd);
    return resp.status;
}

static void test_master_no_token(void **state)
{
    (void)state;
    struct cu_run r;
    /* data commands (a real client) and admin commands (a plain RPC connection) */
    cli(&r, NULL, NULL, "exist", "sec/a", NULL);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "UNAUTHENTICATED"));
    cu_run_free(&r);
    cli(&r, NULL, NULL, "segments", NULL);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "UNAUTHENTICATED"));
    cu_run_free(&r);
    cli(&r, g.bad_tok_flag, NULL, "stat", "sec/a", NULL);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "UNAUTHENTICATED"));
    cu_run_free(&r);
    cli(&r, g.bad_tok_flag, NULL, "get", "sec/a", NULL);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "UNAUTHENTICATED"));
    cu_run_free(&r);

    /* the review's attack: a Ping with an invented client id, ListSegments */
    Mc__Uuid id = MC__UUID__INIT;
    id.hi = 0x1234;
    id.lo = 0x5678;
    Mc__PingRequest ping = MC__PING_REQUEST__INIT;
    ping.client_id = &id;
    uint8_t body[64];
    size_t len = mc__ping_request__pack(&ping, body);
    bool closed = false;
    assert_int_equal(raw_call(MC_METHOD_PING, body, (uint32_t)len, len, &closed),
                     MC_ERR_UNAUTHENTICATED);
    assert_true(closed);
    assert_int_equal(raw_call(MC_METHOD_LIST_SEGMENTS, NULL, 0, 0, &closed),
                     MC_ERR_UNAUTHENTICATED);
    assert_true(closed);
    /* a header that claims 64 MiB: answered and closed before any body byte arrives */
    assert_int_equal(raw_call(MC_METHOD_PUT_START, NULL, 64u << 20, 0, &closed),
                     MC_ERR_UNAUTHENTICATED);
    assert_true(closed);

    /* the same through the RPC client: no key, another key */
    struct mc_rpc_client *c = master_rpc(NULL);
    ProtobufCMessage *resp = NULL;
    Mc__ListSegmentsRequest ls = MC__LIST_SEGMENTS_REQUEST__INIT;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &ls.base,
                                            &mc__list_segments_response__descriptor, 0, &resp),
                     MC_ERR_UNAUTHENTICATED);
    mc_rpc_client_free(c);
    c = master_rpc(&g.bad_key);
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &ls.base,
                                            &mc__list_segments_response__descriptor, 0, &resp),
                     MC_ERR_UNAUTHENTICATED);
    mc_rpc_client_free(c);
    c = master_rpc(&g.key);
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &ls.base,
                                            &mc__list_segments_response__descriptor, 0, &resp),
                     0);
    assert_int_equal(((Mc__ListSegmentsResponse *)resp)->n_segments, 1);
    protobuf_c_message_free_unpacked(resp, NULL);
    mc_rpc_client_free(c);
}

/* The descriptor of key's only replica, from the master over an authenticated connection. */
static void locate(const char *key, struct mc_id *seg, uint64_t *off, uint64_t *epoch, char *ep,
                   size_t cap)
{
    struct mc_rpc_client *c = master_rpc(&g.key);
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = (char *)key;
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_GET_REPLICA_LIST, &req.base,
                                            &mc__get_replica_list_response__descriptor, 0, &m),
                     0);
    Mc__GetReplicaListResponse *r = (Mc__GetReplicaListResponse *)m;
    assert_int_equal(r->n_replicas, 1);
    Mc__MemoryLocation *loc = r->replicas[0]->memory;
    assert_non_null(loc);
    seg->hi = loc->segment_id->hi;
    seg->lo = loc->segment_id->lo;
    *off = loc->offset;
    *epoch = loc->mount_epoch;
    snprintf(ep, cap, "%s", loc->endpoint);
    protobuf_c_message_free_unpacked(m, NULL);
    mc_rpc_client_free(c);
}

static struct mc_transport *peer_transport(const struct mc_auth_key *key)
{
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    tc.auth = key;
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_tcp_new(&tc, &t), 0);
    return t;
}

static void test_peer_no_token(void **state)
{
    (void)state;
    char ep[128];
    struct mc_xfer_loc loc;
    uint64_t off = 0, epoch = 0;
    locate("sec/a", &loc.segment_id, &off, &epoch, ep, sizeof(ep));
    assert_string_equal(ep, g.ep);
    loc.offset = off;
    loc.mount_epoch = epoch;
    loc.endpoint = ep;

    uint8_t *want = malloc(VALUE_LEN), *buf = malloc(VALUE_LEN);
    assert_non_null(want);
    assert_non_null(buf);
    sec_fill(want, VALUE_LEN, 7);
    const struct mc_auth_key *keys[2] = {NULL, &g.bad_key};
    for (int i = 0; i < 2; i++) {
        struct mc_transport *t = peer_transport(keys[i]);
        memset(buf, 0xAB, VALUE_LEN);
        assert_int_equal(mc_transport_read(t, &loc, buf, VALUE_LEN), MC_ERR_UNAUTHENTICATED);
        for (size_t k = 0; k < VALUE_LEN; k++)
            assert_int_equal(buf[k], 0xAB); /* not one byte came back */
        assert_int_equal(mc_transport_write(t, &loc, buf, 4096), MC_ERR_UNAUTHENTICATED);
        mc_transport_free(t);
    }
    /* the same descriptor with the token: the bytes are intact (nothing was written) */
    struct mc_transport *t = peer_transport(&g.key);
    assert_int_equal(mc_transport_read(t, &loc, buf, VALUE_LEN), 0);
    assert_memory_equal(buf, want, VALUE_LEN);
    mc_transport_free(t);
    free(want);
    free(buf);
}

/* The review's forgery, from a connection that holds the token and is bound to its own client
 * id: every request naming the daemon's client id is ILLEGAL_CLIENT and changes nothing. */
static void test_forged_client_id(void **state)
{
    (void)state;
    struct mc_rpc_client *c = master_rpc(&g.key);
    ProtobufCMessage *m = NULL;
    Mc__ListSegmentsRequest ls = MC__LIST_SEGMENTS_REQUEST__INIT;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &ls.base,
                                            &mc__list_segments_response__descriptor, 0, &m),
                     0);
    Mc__ListSegmentsResponse *lr = (Mc__ListSegmentsResponse *)m;
    assert_int_equal(lr->n_segments, 1);
    Mc__Uuid victim = MC__UUID__INIT, seg = MC__UUID__INIT, own = MC__UUID__INIT;
    victim.hi = lr->segments[0]->owner->hi;
    victim.lo = lr->segments[0]->owner->lo;
    seg.hi = lr->segments[0]->id->hi;
    seg.lo = lr->segments[0]->id->lo;
    protobuf_c_message_free_unpacked(m, NULL);

    /* bind the connection to its own id (minted by the master: an invented one is refused) */
    struct mc_id mine;
    assert_int_equal(sec_register(c, &mine, NULL, NULL), 0);
    own.hi = mine.hi;
    own.lo = mine.lo;
    Mc__PingRequest ping = MC__PING_REQUEST__INIT;
    ping.client_id = &own;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_PING, &ping.base,
                                            &mc__ping_response__descriptor, 0, &m),
                     0);
    protobuf_c_message_free_unpacked(m, NULL);

    /* now forge the daemon's id */
    ping.client_id = &victim;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_PING, &ping.base,
                                            &mc__ping_response__descriptor, 0, &m),
                     MC_ERR_ILLEGAL_CLIENT);
    Mc__UnmountSegmentRequest um = MC__UNMOUNT_SEGMENT_REQUEST__INIT;
    um.client_id = &victim;
    um.segment_id = &seg;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_UNMOUNT_SEGMENT, &um.base,
                                            &mc__unmount_segment_response__descriptor, 0, &m),
                     MC_ERR_ILLEGAL_CLIENT);
    Mc__PutStartRequest ps = MC__PUT_START_REQUEST__INIT;
    ps.client_id = &victim;
    ps.key = "sec/forged";
    ps.value_length = 4096;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_PUT_START, &ps.base,
                                            &mc__put_start_response__descriptor, 0, &m),
                     MC_ERR_ILLEGAL_CLIENT);
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.client_id = &victim;
    ra.force = 1;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_REMOVE_ALL, &ra.base,
                                            &mc__remove_all_response__descriptor, 0, &m),
                     MC_ERR_ILLEGAL_CLIENT);
    mc_rpc_client_free(c);

    /* nothing changed: the segment is mounted, the objects are there */
    struct cu_run r;
    cli(&r, g.tok_flag, NULL, "exist", "sec/a", NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    cli(&r, g.tok_flag, NULL, "exist", "sec/forged", NULL);
    assert_int_equal(r.status, 1);
    cu_run_free(&r);
    c = master_rpc(&g.key);
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &ls.base,
                                            &mc__list_segments_response__descriptor, 0, &m),
                     0);
    assert_int_equal(((Mc__ListSegmentsResponse *)m)->n_segments, 1);
    protobuf_c_message_free_unpacked(m, NULL);
    mc_rpc_client_free(c);
}

static uint64_t metric(const char *addr, const char *name)
{
    struct cu_run r;
    char m[128];
    snprintf(m, sizeof(m), "--metrics=%s", addr);
    cli(&r, NULL, NULL, "metrics", m, NULL);
    assert_int_equal(r.status, 0);
    double v = 0;
    if (mc_metrics_find(r.out, name, &v) != 0)
        fprintf(stderr, "no %s in:\n%s\n", name, r.out);
    assert_int_equal(mc_metrics_find(r.out, name, &v), 0);
    cu_run_free(&r);
    return (uint64_t)v;
}

static void test_metrics(void **state)
{
    (void)state;
    char daddr[64];
    snprintf(daddr, sizeof(daddr), "127.0.0.1:%d", g.d_metrics);
    /* master: at least the 3 raw calls, 2 rpc clients and the failed cli/library runs */
    assert_true(metric(g.metrics, "master_rpc_auth_failures_total") >= 7);
    assert_int_equal(metric(g.metrics, "master_rpc_protected_mode_refusals_total"), 0);
    /* daemon: at least one refused read and write per bad key */
    uint64_t pf = metric(daddr, "mooncake_client_peer_auth_failures_total");
    fprintf(stderr, "peer failures %llu\n", (unsigned long long)pf);
    assert_true(pf >= 4);
    /* the logs name the peer address */
    char *log = cu_slurp(g.master.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "authentication failed"));
    assert_non_null(strstr(log, "peer=127.0.0.1:"));
    free(log);
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.d.out_fd = -1;
    if (sec_env_init(&g.e, "mc_security") != 0)
        return -1;
    snprintf(g.tok, sizeof(g.tok), "%s/token", g.e.dir);
    snprintf(g.bad_tok, sizeof(g.bad_tok), "%s/other_token", g.e.dir);
    if (sec_make_token(g.tok, "s3cret-shared-by-the-cluster-0123456789\n", &g.key) ||
        sec_make_token(g.bad_tok, "s3cret-shared-by-the-cluster-0123456788\n", &g.bad_key))
        return -1;
    snprintf(g.tok_flag, sizeof(g.tok_flag), "--auth_token_file=%s", g.tok);
    snprintf(g.bad_tok_flag, sizeof(g.bad_tok_flag), "--auth_token_file=%s", g.bad_tok);
    if (start_master() != 0 || start_daemon() != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    struct cu_proc *const procs[] = {&g.d, &g.master};
    sec_env_close(&g.e, procs, 2);
    return 0;
}

int main(void)
{
    mc_log_set_level(MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_file),       cmocka_unit_test(test_right_token),
        cmocka_unit_test(test_master_no_token),  cmocka_unit_test(test_peer_no_token),
        cmocka_unit_test(test_forged_client_id), cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
