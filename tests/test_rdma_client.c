/*
 * test_rdma_client.c - the client library with protocol rdma, end to end except for the
 * device: a real mooncake_master, and in this process a holder client B (a DRAM segment), a
 * reader/writer client A with no DRAM, both protocol rdma over the loopback test provider
 * (tests/rdma_fake.h, which executes one-sided READ/WRITE on the memory it knows by rkey), and
 * a client T with protocol tcp.
 *
 *   descriptors   B's segment is mounted with its rkey: the replica descriptor of a Put is
 *                 protocol RDMA with B's rkey and remote_addr = B's segment base + offset
 *   round_trip    A's Puts and Gets of 1 B .. 1 MiB+ move with RDMA work requests (counted by
 *                 the provider), the bytes are equal, and T reads the same bytes from B over
 *                 TCP (the two data planes agree); a buffer A registers with
 *                 mc_register_buffer becomes a memory region (and stops being one when
 *                 unregistered) and a Get into it works
 *   failure       work requests that fail (on the pooled queue pair and on the one retry)
 *                 make A's Get fail with TRANSFER_FAIL; the next Get rebuilds the queue pair
 *                 and succeeds
 *   teardown      once every client is closed, every verbs object the provider handed out
 *                 (protection domains, memory regions, queue pairs, CQs, channels) is gone
 *
 * The group runs twice: without a token (the provider answers connects itself), and with one
 * auth token shared by the master and every client, the provider routing each connect to the
 * peer's listener (loopback): A's queue pairs to B then exist only after the token handshake,
 * and the token never shows on the wire.
 *
 * A third group, disk: the master offloads on eviction, B has a small segment and a disk_path,
 * A puts more than fits; the keys B evicted to its disk are then read by A's Get with the
 * holder RDMA-writing them from its staging buffer into A's buffer (PeerDiskRead in RDMA mode),
 * bytes and tiers checked.
 *
 * rdma_cm (and so the provider) cannot bind a loopback address, and the library refuses one
 * with protocol rdma: the clients advertise this machine's first non-loopback IPv4 address,
 * which the provider gives its device (no such address: the test is skipped, exit 77). The TCP
 * peer servers count only 127/8 as local in protected mode, so the groups without a token turn
 * protected mode off (the token group keeps it on).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/master_conn.h"
#include "client/rdma_plan.h"
#include "client/transport.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "rdma_fake.h"
#include "test_client_util.h"

#define BIG ((1u << 20) + 123)

#define TOKEN "rdma-client-test-token-0123456789"

static struct {
    bool token;     /* this run shares an auth token */
    char tok[64];   /* its file */
    char flag[128]; /* --auth_token_file=tok */
    const char *extra[2];
    struct fake f;
    struct test_master m;
    struct mc_client *a, *b, *t;
    uint8_t *val, *buf;
} g;

static char g_disk[64];              /* the disk group's B disk_path ("" otherwise) */
static char g_host[INET_ADDRSTRLEN]; /* this machine's non-loopback IPv4 address */

/* The first non-loopback IPv4 address of an interface that is up, or false. */
static bool find_host(char *out, size_t cap)
{
    struct ifaddrs *ifa = NULL;
    bool found = false;
    if (getifaddrs(&ifa))
        return false;
    for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        const struct in_addr *a = &((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
        if ((ntohl(a->s_addr) >> 24) == 127)
            continue;
        found = inet_ntop(AF_INET, a, out, (socklen_t)cap) != NULL;
    }
    freeifaddrs(ifa);
    return found;
}

static void fake_setup(void)
{
    fake_init(&g.f);
    snprintf(g.f.dev_addr[0], sizeof(g.f.dev_addr[0]), "%s", g_host);
}

static struct mc_client *open_client(const char *protocol, uint64_t seg)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    if (g_disk[0] && seg) {
        cfg.disk_path = g_disk;
        cfg.disk_capacity = 256u << 20;
        cfg.put_retry_window_ms = 3000;
    }
    cfg.master_address = g.m.addr;
    cfg.protocol = protocol;
    cfg.host = g_host;
    cfg.protected_mode = g.token;
    cfg.segment_size = seg;
    cfg.rpc_timeout_ms = 3000;
    cfg.ping_interval_ms = 200; /* pings counted while a re-registration runs */
    cfg.log_level = getenv("MC_TEST_LOG") ? MC_CLIENT_LOG_INFO : MC_CLIENT_LOG_OFF;
    if (g.token)
        cfg.auth_token_file = g.tok;
    struct mc_client *c = NULL;
    int rc = mc_client_open(&cfg, &c);
    if (rc)
        fail_msg("mc_client_open(%s): %s", protocol, mc_strerror(rc));
    return c;
}

/* Put by A into B's segment (the only DRAM). */
static int put_a(const char *key, const void *v, size_t n)
{
    return mc_put(g.a, key, v, n, NULL);
}

static void test_descriptors(void **state)
{
    (void)state;
    tm_fill(g.val, 4096, 1);
    assert_int_equal(put_a("desc", g.val, 4096), 0);
    Mc__Uuid u;
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = "desc";
    req.client_id = mc_client_uuid(g.a, &u);
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_master_conn_call(mc_client_master_conn(g.a), MC_METHOD_GET_REPLICA_LIST,
                                         &req.base, &mc__get_replica_list_response__descriptor, &m),
                     0);
    Mc__GetReplicaListResponse *r = (Mc__GetReplicaListResponse *)m;
    assert_int_equal(r->n_replicas, 1);
    const Mc__MemoryLocation *loc = r->replicas[0]->memory;
    assert_non_null(loc);
    assert_string_equal(loc->endpoint, mc_client_endpoint(g.b));
    assert_int_equal(loc->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
    assert_true(loc->rkey != 0);
    /* the provider knows B's segment by that rkey, at that address */
    bool found = false;
    for (int i = 0; i < g.f.nmrs; i++)
        if (g.f.mrs[i].key == loc->rkey && g.f.mrs[i].mr &&
            (uint64_t)(uintptr_t)g.f.mrs[i].addr + loc->offset == loc->remote_addr &&
            loc->offset + 4096 <= g.f.mrs[i].len)
            found = true;
    assert_true(found);
    /* mooncake_cli stat --json shows that rkey (the hardware plan's rkey-reuse probe reads it) */
    const char *bin = getenv("MC_BIN_DIR");
    if (bin) {
        char cmd[1024], out[4096] = "", want[64];
        snprintf(cmd, sizeof(cmd), "'%s/mooncake_cli' --master=%s%s%s stat desc --json", bin,
                 g.m.addr, g.token ? " --auth_token_file=" : "", g.token ? g.tok : "");
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        size_t n = fread(out, 1, sizeof(out) - 1, p);
        out[n] = 0;
        assert_int_equal(pclose(p), 0);
        snprintf(want, sizeof(want), "\"rkey\":%u", loc->rkey);
        assert_non_null(strstr(out, want));
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void test_round_trip(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 4095, 65536, 300000, BIG};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char key[32];
        size_t n = sizes[i];
        snprintf(key, sizeof(key), "rt-%zu", n);
        tm_fill(g.val, n, (uint32_t)(10 + i));
        uint64_t wrs = g.f.wrs;
        assert_int_equal(put_a(key, g.val, n), 0);
        assert_true(g.f.wrs > wrs); /* the bytes went as RDMA WRITEs */
        wrs = g.f.wrs;
        memset(g.buf, 0, n);
        assert_int_equal(mc_get(g.a, key, g.buf, BIG), (int64_t)n);
        assert_memory_equal(g.buf, g.val, n);
        assert_true(g.f.wrs > wrs); /* and came back as RDMA READs */
        wrs = g.f.wrs;
        memset(g.buf, 0, n);
        assert_int_equal(mc_get(g.t, key, g.buf, BIG), (int64_t)n);
        assert_memory_equal(g.buf, g.val, n);
        assert_int_equal(g.f.wrs, wrs); /* T read over TCP */
    }
    /* a registered buffer is a memory region while registered */
    uint8_t *reg = malloc(BIG);
    assert_non_null(reg);
    int mrs = g.f.mrs_live;
    assert_int_equal(mc_register_buffer(g.a, reg, BIG), 0);
    assert_int_equal(g.f.mrs_live, mrs + 1);
    assert_int_equal(mc_get(g.a, "rt-300000", reg, BIG), 300000);
    tm_fill(g.val, 300000, 13);
    assert_memory_equal(reg, g.val, 300000);
    assert_int_equal(mc_unregister_buffer(g.a, reg), 0);
    assert_int_equal(g.f.mrs_live, mrs);
    free(reg);
}

/* A batch Get of keys on one holder: one stream of READs on one queue pair, bytes equal. */
static void test_batch_get_one_stream(void **state)
{
    (void)state;
    enum { N = 8, SZ = 5000 };
    char keys[N][16];
    const char *kp[N];
    void *bufs[N];
    size_t caps[N];
    int64_t res[N];
    uint8_t *out = calloc(N, SZ);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "bg-%d", i);
        kp[i] = keys[i];
        tm_fill(g.val, SZ, (uint32_t)(40 + i));
        assert_int_equal(put_a(keys[i], g.val, SZ), 0);
        bufs[i] = out + (size_t)i * SZ;
        caps[i] = SZ;
    }
    int calls = g.f.post_calls;
    uint64_t wrs = g.f.wrs;
    assert_int_equal(mc_batch_get(g.a, N, kp, bufs, caps, res), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i], SZ);
        tm_fill(g.val, SZ, (uint32_t)(40 + i));
        assert_memory_equal(bufs[i], g.val, SZ);
    }
    assert_int_equal(g.f.wrs, wrs + N);          /* one READ per key (one slice each) */
    assert_int_equal(g.f.post_calls, calls + 1); /* all of them in one post */
    free(out);
}

/* A batch Put of keys to one holder: one stream of WRITEs on one queue pair, bytes equal. */
static void test_batch_put_one_stream(void **state)
{
    (void)state;
    enum { N = 8, SZ = 5000 };
    char keys[N][16];
    const char *kp[N];
    const void *bufs[N];
    size_t lens[N];
    int res[N];
    uint8_t *in = calloc(N, SZ);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "bp-%d", i);
        kp[i] = keys[i];
        tm_fill(in + (size_t)i * SZ, SZ, (uint32_t)(60 + i));
        bufs[i] = in + (size_t)i * SZ;
        lens[i] = SZ;
    }
    int calls = g.f.post_calls;
    uint64_t wrs = g.f.wrs;
    assert_int_equal(mc_batch_put(g.a, N, kp, bufs, lens, NULL, res), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i], 0);
    assert_int_equal(g.f.wrs, wrs + N);          /* one WRITE per key (one slice each) */
    assert_int_equal(g.f.post_calls, calls + 1); /* all of them in one post */
    for (int i = 0; i < N; i++) {                /* read back over tcp too: the bytes landed */
        memset(g.buf, 0, SZ);
        assert_int_equal(mc_get(g.t, keys[i], g.buf, BIG), SZ);
        assert_memory_equal(g.buf, in + (size_t)i * SZ, SZ);
    }
    free(in);
}

static void test_failure(void **state)
{
    (void)state;
    tm_fill(g.val, 65536, 77);
    assert_int_equal(put_a("fail", g.val, 65536), 0);
    /* one slice per attempt: the pooled queue pair's request fails, and so does the request
     * of the one retry on a fresh queue pair */
    g.f.fail_at_wr = g.f.wrs + 1;
    g.f.fail_at_wr2 = g.f.wrs + 2;
    g.f.fail_status = IBV_WC_RETRY_EXC_ERR;
    memset(g.buf, 0, 65536);
    uint64_t wrs = g.f.wrs;
    int64_t n = mc_get(g.a, "fail", g.buf, BIG);
    g.f.fail_at_wr = g.f.fail_at_wr2 = 0;
    assert_int_equal(g.f.wrs, wrs + 2);
    assert_int_equal(n, MC_ERR_TRANSFER_FAIL);
    n = mc_get(g.a, "fail", g.buf, BIG);
    assert_int_equal(n, 65536);
    assert_memory_equal(g.buf, g.val, 65536);
}

/* A raw GetReplicaList by A: the descriptors exactly as the master sent them. */
static Mc__GetReplicaListResponse *replica_list(const char *key)
{
    Mc__Uuid u;
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = (char *)key;
    req.client_id = mc_client_uuid(g.a, &u);
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_master_conn_call(mc_client_master_conn(g.a), MC_METHOD_GET_REPLICA_LIST,
                                         &req.base, &mc__get_replica_list_response__descriptor, &m),
                     0);
    Mc__GetReplicaListResponse *r = (Mc__GetReplicaListResponse *)m;
    assert_int_equal(r->status, 0);
    assert_int_equal(r->n_replicas, 1);
    assert_non_null(r->replicas[0]->memory);
    return r;
}

/* The master restarts with no state; B re-mounts its segment (new epoch, and over rdma a new
 * registration: a new rkey). A descriptor from before never returns bytes over RDMA. */
static void test_stale_descriptor_after_remount(void **state)
{
    (void)state;
    const size_t n = 65536;
    tm_fill(g.val, n, 91);
    assert_int_equal(put_a("epoch/a", g.val, n), 0);
    Mc__GetReplicaListResponse *old = replica_list("epoch/a");
    const Mc__ReplicaDescriptor *od = old->replicas[0];
    memset(g.buf, 0, n);
    assert_int_equal(mc_client_replica_io(g.a, od, false, g.buf, n), 0);
    assert_memory_equal(g.buf, g.val, n);

    uint16_t port = g.m.port;
    tm_kill(&g.m);
    assert_int_equal(tm_start(&g.m, port, g.token ? g.extra : NULL), 0);
    uint64_t deadline = mc_now_ms() + 10000;
    struct mc_master_conn_stats ms;
    do {
        mc_master_conn_get_stats(mc_client_master_conn(g.b), &ms);
        if (ms.up && ms.remounts >= 1)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    } while (mc_now_ms() < deadline);
    assert_true(ms.remounts >= 1);
    int rc;
    tm_fill(g.val, n, 92);
    while ((rc = put_a("epoch/b", g.val, n)) != 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(rc, 0);
    Mc__GetReplicaListResponse *cur = replica_list("epoch/b");
    const Mc__ReplicaDescriptor *cd = cur->replicas[0];
    assert_true(cd->memory->mount_epoch != od->memory->mount_epoch);
    assert_true(cd->memory->rkey != 0);
    assert_true(cd->memory->rkey != od->memory->rkey); /* registered afresh */
    assert_int_equal(cd->memory->protocol, MC__PROTOCOL__PROTOCOL_RDMA);

    /* the stale descriptor: refused for reads (no byte lands) and writes (nothing changes) */
    memset(g.buf, 0x5a, n);
    assert_int_equal(mc_client_replica_io(g.a, od, false, g.buf, n), MC_ERR_REPLICA_IS_GONE);
    for (size_t i = 0; i < n; i++)
        if (g.buf[i] != 0x5a)
            fail_msg("a refused stale read delivered byte %zu", i);
    assert_int_equal(mc_client_replica_io(g.a, od, true, g.buf, n), MC_ERR_REPLICA_IS_GONE);
    /* the current one works and epoch/b's bytes are intact */
    memset(g.buf, 0, n);
    assert_int_equal(mc_client_replica_io(g.a, cd, false, g.buf, n), 0);
    assert_memory_equal(g.buf, g.val, n);
    memset(g.buf, 0, n);
    assert_int_equal(mc_get(g.a, "epoch/b", g.buf, BIG), (int64_t)n);
    assert_memory_equal(g.buf, g.val, n);
    protobuf_c_message_free_unpacked(&old->base, NULL);
    protobuf_c_message_free_unpacked(&cur->base, NULL);
}

static int fake_read(const int *counter)
{
    pthread_mutex_lock(&g.f.lock);
    int v = *counter;
    pthread_mutex_unlock(&g.f.lock);
    return v;
}

/* Registering a large segment takes seconds on a device: the re-registration of a re-mount runs
 * on a worker, so B keeps pinging and transfers keep flowing meanwhile, and the ReMount (with
 * the new rkey) goes out only once the new region exists. */
static void test_slow_reregistration_off_ping_thread(void **state)
{
    (void)state;
    const size_t n = 65536;
    tm_fill(g.val, n, 93);
    assert_int_equal(put_a("slow/a", g.val, n), 0);
    Mc__GetReplicaListResponse *old = replica_list("slow/a");
    const Mc__ReplicaDescriptor *od = old->replicas[0];
    struct mc_master_conn_stats ms0, ms;
    mc_master_conn_get_stats(mc_client_master_conn(g.b), &ms0);

    pthread_mutex_lock(&g.f.lock);
    g.f.reg_delay_len = 16u << 20; /* B's segment only, not the one-shot buffers */
    g.f.reg_delay_ms = 2500;
    int slow_before = g.f.regs_slow_done;
    pthread_mutex_unlock(&g.f.lock);
    uint16_t port = g.m.port;
    tm_kill(&g.m);
    assert_int_equal(tm_start(&g.m, port, g.token ? g.extra : NULL), 0);
    assert_true(fake_wait_for(&g.f.regs_slow, 1)); /* B's fence: the segment is registering */
    mc_master_conn_get_stats(mc_client_master_conn(g.b), &ms);
    uint64_t pings_at_start = ms.pings;

    /* while it registers: pings go on, and A's transfer from B completes */
    bool pinged = false, moved = false;
    while (fake_read(&g.f.regs_slow) > 0 && !(pinged && moved)) {
        if (!moved) {
            memset(g.buf, 0, n);
            moved = mc_client_replica_io(g.a, od, false, g.buf, n) == 0 &&
                    memcmp(g.buf, g.val, n) == 0 && fake_read(&g.f.regs_slow) > 0;
        }
        mc_master_conn_get_stats(mc_client_master_conn(g.b), &ms);
        pinged = ms.pings >= pings_at_start + 3 && fake_read(&g.f.regs_slow) > 0;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(pinged); /* the ping thread was not the one registering */
    assert_true(moved);
    assert_int_equal(ms.remounts, ms0.remounts); /* held back until the new key exists */

    uint64_t deadline = mc_now_ms() + 10000;
    do {
        mc_master_conn_get_stats(mc_client_master_conn(g.b), &ms);
        if (ms.up && ms.remounts > ms0.remounts)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    } while (mc_now_ms() < deadline);
    assert_true(ms.remounts > ms0.remounts);
    pthread_mutex_lock(&g.f.lock);
    g.f.reg_delay_ms = 0;
    assert_int_equal(g.f.regs_slow_done, slow_before + 1); /* one registration for the fence */
    pthread_mutex_unlock(&g.f.lock);

    int rc;
    tm_fill(g.val, n, 94);
    while ((rc = put_a("slow/b", g.val, n)) != 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(rc, 0);
    Mc__GetReplicaListResponse *cur = replica_list("slow/b");
    const Mc__ReplicaDescriptor *cd = cur->replicas[0];
    assert_int_equal(cd->memory->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
    assert_true(cd->memory->rkey != 0 && cd->memory->rkey != od->memory->rkey);
    memset(g.buf, 0x5a, n);
    assert_int_equal(mc_client_replica_io(g.a, od, false, g.buf, n), MC_ERR_REPLICA_IS_GONE);
    memset(g.buf, 0, n);
    assert_int_equal(mc_get(g.a, "slow/b", g.buf, BIG), (int64_t)n);
    assert_memory_equal(g.buf, g.val, n);
    protobuf_c_message_free_unpacked(&old->base, NULL);
    protobuf_c_message_free_unpacked(&cur->base, NULL);
}

/* With a token: every queue pair A has to B came from the hello / challenge / prove exchange,
 * nothing was refused, and the token is not on the wire. Without one: plain requests. */
static void test_handshake_on_the_wire(void **state)
{
    (void)state;
    pthread_mutex_lock(&g.f.lock);
    int hello = 0, prove = 0, request = 0;
    for (size_t off = 0; off + MC_RDMA_CONN_MSG_LEN <= g.f.wire_len;) {
        struct mc_rdma_conn_msg m;
        assert_int_equal(mc_rdma_conn_msg_decode(g.f.wire + off, g.f.wire_len - off, &m), 0);
        hello += m.kind == MC_RDMA_CONN_HELLO;
        prove += m.kind == MC_RDMA_CONN_PROVE;
        request += m.kind == MC_RDMA_CONN_REQUEST;
        off += mc_rdma_conn_msg_len(m.kind);
    }
    bool leaked = memmem(g.f.wire, g.f.wire_len, TOKEN, 8) != NULL;
    pthread_mutex_unlock(&g.f.lock);
    assert_false(leaked);
    struct mc_rdma_transport_stats sa, sb;
    mc_transport_rdma_get_stats(g.a->rdma, &sa);
    mc_transport_rdma_get_stats(g.b->rdma, &sb);
    assert_true(sa.connects >= 1);
    if (g.token) {
        assert_int_equal(request, 0);
        assert_int_equal(hello, (int)sa.connects);
        assert_int_equal(prove, (int)sa.connects);
        assert_int_equal(g.f.accepted, (int)sa.connects); /* B's listener made each queue pair */
    } else {
        assert_int_equal(hello + prove, 0);
        assert_int_equal(request, (int)sa.connects);
    }
    assert_int_equal(sa.auth_failed, 0);
    assert_int_equal(sb.auth_refused, 0);
}

static void test_teardown(void **state)
{
    (void)state;
    mc_client_close(g.a);
    mc_client_close(g.b);
    g.a = g.b = NULL;
    assert_int_equal(g.f.pds, 0);
    assert_int_equal(g.f.mrs_live, 0);
    assert_int_equal(g.f.cqs, 0);
    assert_int_equal(g.f.chans, 0);
    assert_int_equal(g.f.echs, 0);
    assert_int_equal(g.f.qps_created, g.f.qps_destroyed);
    assert_int_equal(g.f.ids_created, g.f.ids_destroyed);
    assert_int_equal(g.f.outstanding, 0);
}

static int group_setup_common(bool token)
{
    memset(&g, 0, sizeof(g));
    fake_setup();
    g.token = token;
    g.f.loopback = token;
    mc_client_test_set_rdma_ops(&fake_ops);
    g.val = malloc(BIG);
    g.buf = malloc(BIG);
    g.extra[0] = g.flag;
    if (token) {
        snprintf(g.tok, sizeof(g.tok), "/tmp/mc_rdma_client_tok_XXXXXX");
        int fd = mkstemp(g.tok);
        if (fd < 0 || write(fd, TOKEN "\n", strlen(TOKEN) + 1) != (ssize_t)strlen(TOKEN) + 1)
            return -1;
        close(fd);
        snprintf(g.flag, sizeof(g.flag), "--auth_token_file=%s", g.tok);
    }
    if (!g.val || !g.buf || tm_start(&g.m, 0, token ? g.extra : NULL) != 0)
        return -1;
    g.b = open_client("rdma", 16u << 20);
    g.a = open_client("rdma", 0);
    g.t = open_client("tcp", 0);
    return 0;
}

static int group_setup_plain(void **state)
{
    (void)state;
    return group_setup_common(false);
}

static int group_setup_token(void **state)
{
    (void)state;
    return group_setup_common(true);
}

static int group_teardown(void **state)
{
    (void)state;
    mc_client_close(g.t);
    mc_client_close(g.a);
    mc_client_close(g.b);
    mc_client_test_set_rdma_ops(NULL);
    tm_stop(&g.m);
    free(g.val);
    free(g.buf);
    if (g.token)
        unlink(g.tok);
    return 0;
}

/* ---- disk group ------------------------------------------------------------------------- */

#define DKEYS 48
#define DLEN (256u << 10)

static void test_disk_replicas_over_rdma(void **state)
{
    (void)state;
    char key[32];
    for (int i = 0; i < DKEYS; i++) {
        snprintf(key, sizeof(key), "dk/%d", i);
        tm_fill(g.val, DLEN, 500 + (uint32_t)i);
        uint64_t deadline = mc_now_ms() + 20000;
        int rc;
        while ((rc = put_a(key, g.val, DLEN)) != 0 && mc_now_ms() < deadline) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
        assert_int_equal(rc, 0);
    }
    int disk = 0;
    struct mc_rdma_transport_stats b0, b1;
    for (int i = 0; i < DKEYS; i++) {
        snprintf(key, sizeof(key), "dk/%d", i);
        const char *kp[1] = {key};
        void *bufs[1] = {g.buf};
        size_t caps[1] = {DLEN};
        int64_t res[1];
        int tiers[1];
        /* the read lease is short (eviction needs it to run out): a read slower than it, as
         * under a sanitizer on a loaded host, fails with LEASE_EXPIRED and is tried again */
        for (int attempt = 0; attempt < 5; attempt++) {
            memset(g.buf, 0, DLEN);
            mc_transport_rdma_get_stats(g.b->rdma, &b0);
            assert_int_equal(mc_batch_get_tiers(g.a, 1, kp, bufs, caps, res, tiers), 0);
            mc_transport_rdma_get_stats(g.b->rdma, &b1);
            if (res[0] != MC_ERR_LEASE_EXPIRED)
                break;
        }
        assert_int_equal(res[0], (int64_t)DLEN);
        tm_fill(g.val, DLEN, 500 + (uint32_t)i);
        assert_memory_equal(g.buf, g.val, DLEN);
        if (tiers[0] == MC_REPLICA_LOCAL_DISK) {
            disk++;
            /* the holder pushed the value with RDMA WRITEs (nothing else makes B post) */
            assert_true(b1.completed - b0.completed >= DLEN / (64u << 10));
        } else {
            assert_int_equal(b1.posted, b0.posted);
        }
        /* the single-key Get path too */
        int64_t got = MC_ERR_LEASE_EXPIRED;
        for (int attempt = 0; attempt < 5 && got == MC_ERR_LEASE_EXPIRED; attempt++) {
            memset(g.buf, 0, DLEN);
            got = mc_get(g.a, key, g.buf, DLEN);
        }
        assert_int_equal(got, (int64_t)DLEN);
        assert_memory_equal(g.buf, g.val, DLEN);
    }
    print_message("disk group: %d of %d keys read from B's disk over rdma\n", disk, DKEYS);
    assert_true(disk >= DKEYS / 2); /* 12 MiB never fit B's 4 MiB segment */
    mc_transport_rdma_get_stats(g.b->rdma, &b1);
    assert_true(b1.connects >= 1); /* B dialled A's listener to write */
    assert_int_equal(b1.errors, 0);
}

static int group_setup_disk(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    fake_setup();
    mc_client_test_set_rdma_ops(&fake_ops);
    g.val = malloc(BIG);
    g.buf = malloc(BIG);
    snprintf(g_disk, sizeof(g_disk), "/tmp/mc_rdma_disk_XXXXXX");
    if (!g.val || !g.buf || !mkdtemp(g_disk))
        return -1;
    const char *extra[] = {"--enable_offload", "--offload_on_evict", "--default_kv_lease_ttl=300",
                           NULL};
    if (tm_start(&g.m, 0, extra) != 0)
        return -1;
    g.b = open_client("rdma", 4u << 20);
    g.a = open_client("rdma", 0);
    g.t = open_client("tcp", 0);
    return 0;
}

static int group_teardown_disk(void **state)
{
    group_teardown(state);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_disk);
    if (system(cmd) != 0)
        return -1;
    g_disk[0] = 0;
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_OFF);
    if (!find_host(g_host, sizeof(g_host))) {
        fprintf(stderr, "skipped: no non-loopback IPv4 address on this machine\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_batch_get_one_stream),
        cmocka_unit_test(test_batch_put_one_stream),
        cmocka_unit_test(test_failure),
        cmocka_unit_test(test_stale_descriptor_after_remount),
        cmocka_unit_test(test_slow_reregistration_off_ping_thread),
        cmocka_unit_test(test_handshake_on_the_wire),
        cmocka_unit_test(test_teardown),
    };
    int fails = cmocka_run_group_tests_name("plain", tests, group_setup_plain, group_teardown);
    fails += cmocka_run_group_tests_name("token", tests, group_setup_token, group_teardown);
    const struct CMUnitTest disk_tests[] = {
        cmocka_unit_test(test_disk_replicas_over_rdma),
        cmocka_unit_test(test_teardown),
    };
    fails += cmocka_run_group_tests_name("disk", disk_tests, group_setup_disk, group_teardown_disk);
    return fails;
}
