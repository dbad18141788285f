/*
 * test_rdma_hw.c - what a real NIC refuses, against the test provider (rdma_fake.h), and the
 * transport's answers to each. No device is involved: these pass on the provider's model of
 * hardware, which is written from the verbs and rdma_cm man pages, not from a run on a NIC.
 *
 *   provider      loopback bind/resolve is ENODEV; a key just deregistered can come back
 *                 (mkey cache); access flags are enforced; private data over the IB CM
 *                 limits is EINVAL; the memlock budget; more than 8 devices; a completion
 *                 that lands before the arm raises no event; RNR/RETRY_EXC errors; a port-down
 *                 async event
 *   transport     loopback host refused with the fix named; protected mode admits this
 *                 host's own addresses; re-registration gives a new key even with key reuse;
 *                 access rights by purpose; devices in use; ACK timeout/ToS; port state;
 *                 async port events; fork safety; the passive side's RDMA read depths
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/rdma_internal.h"
#include "client/rdma_plan.h"
#include "client/transport.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "rdma_fake.h"

#define PEER "10.0.0.2:7000"

/* ---- helpers ------------------------------------------------------------------------------ */

struct captured {
    char text[16384];
    size_t len;
};

static void capture(void *arg, enum mc_log_level level, const char *line, size_t len)
{
    (void)level;
    struct captured *c = arg;
    if (c->len + len + 2 < sizeof(c->text)) {
        memcpy(c->text + c->len, line, len);
        c->len += len;
        c->text[c->len++] = '\n';
        c->text[c->len] = 0;
    }
}

static struct mc_transport *transport_with(const struct mc_rdma_transport_config *over)
{
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    if (over)
        cfg = *over;
    cfg.io_timeout_ms = 1000;
    cfg.connect_timeout_ms = 1000;
    cfg.staging_bytes = 8192;
    cfg.slice_bytes = 4096;
    cfg.window = 4;
    if (mc_id_is_zero(cfg.client_id))
        cfg.client_id = (struct mc_id){0xabc, 0xdef};
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), 0);
    return t;
}

static struct mc_transport *transport(void)
{
    return transport_with(NULL);
}

static struct mc_xfer_loc loc(const char *ep, void *addr, uint32_t rkey)
{
    struct mc_xfer_loc l = {.segment_id = {1, 1},
                            .endpoint = ep,
                            .mount_epoch = 1,
                            .remote_addr = (uint64_t)(uintptr_t)addr,
                            .rkey = rkey};
    return l;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 13 + seed);
}

static void check_clean(const struct fake *f)
{
    assert_int_equal(f->pds, 0);
    assert_int_equal(f->mrs_live, 0);
    assert_int_equal(f->cqs, 0);
    assert_int_equal(f->chans, 0);
    assert_int_equal(f->echs, 0);
    assert_int_equal(f->qps_created, f->qps_destroyed);
    assert_int_equal(f->ids_created, f->ids_destroyed);
    assert_int_equal(f->outstanding, 0);
}

static uint32_t key_of(const struct fake *f, const void *addr)
{
    for (int i = 0; i < f->nmrs; i++)
        if (f->mrs[i].mr && f->mrs[i].addr == addr)
            return f->mrs[i].key;
    return 0;
}

static int regions_of(const struct fake *f, const void *addr)
{
    int n = 0;
    for (int i = 0; i < f->nmrs; i++)
        n += f->mrs[i].mr && f->mrs[i].addr == addr;
    return n;
}

/* A peer's 64 KiB, zeroed and exposed through the provider; its key into *rkey. */
static uint8_t *peer_memory(uint32_t *rkey)
{
    uint8_t *remote = calloc(1, 65536);
    assert_non_null(remote);
    *rkey = fake_expose(remote, 65536);
    return remote;
}

/* Reads sizeof-dst bytes at l through t, which must succeed and match the peer's memory. */
static void read_back(struct mc_transport *t, const struct mc_xfer_loc *l, uint8_t *dst, size_t n,
                      const uint8_t *remote)
{
    assert_int_equal(mc_transport_read(t, l, dst, n), 0);
    assert_memory_equal(dst, remote, n);
}

/* The end of a test: t and the peer's memory freed, nothing left in the provider. */
static void done(const struct fake *f, struct mc_transport *t, uint8_t *remote)
{
    mc_transport_free(t);
    free(remote);
    check_clean(f);
}

static void sa4(struct sockaddr_in *sa, const char *ip, uint16_t port)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, ip, &sa->sin_addr), 1);
}

/* ---- the provider ------------------------------------------------------------------------- */

static void test_fake_loopback_enodev(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct rdma_event_channel *ch = fake_ops.create_event_channel();
    struct rdma_cm_id *id = NULL;
    assert_int_equal(fake_ops.create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
    struct sockaddr_in a;
    sa4(&a, "127.0.0.1", 7000);
    errno = 0;
    assert_int_equal(fake_ops.bind_addr(id, (struct sockaddr *)&a), -1);
    assert_int_equal(errno, ENODEV);
    errno = 0;
    assert_int_equal(fake_ops.resolve_addr(id, NULL, (struct sockaddr *)&a, 100), -1);
    assert_int_equal(errno, ENODEV);
    sa4(&a, "10.0.0.1", 7000); /* the device's own address binds, to that device */
    assert_int_equal(fake_ops.bind_addr(id, (struct sockaddr *)&a), 0);
    assert_ptr_equal(id->verbs, &f.ctx[0]);
    fake_ops.destroy_id(id);
    fake_ops.destroy_event_channel(ch);
}

static void test_fake_key_reuse(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct ibv_pd *pd = fake_ops.alloc_pd(&f.ctx[0]);
    uint8_t buf[4096];
    struct ibv_mr *m1 = fake_ops.reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    uint32_t k1 = m1->rkey;
    fake_ops.dereg_mr(m1);
    struct ibv_mr *m2 = fake_ops.reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    assert_int_not_equal(m2->rkey, k1); /* default: fresh keys */
    uint32_t k2 = m2->rkey;
    fake_ops.dereg_mr(m2);
    f.reuse_keys = true;
    struct ibv_mr *m3 = fake_ops.reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    assert_int_equal(m3->rkey, k2); /* the cache hands the revoked key back */
    fake_ops.dereg_mr(m3);
    fake_ops.dealloc_pd(pd);
}

static void test_fake_access_flags(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct ibv_pd *pd = fake_ops.alloc_pd(&f.ctx[0]);
    uint8_t buf[8192];
    errno = 0;
    assert_null(fake_ops.reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE));
    assert_int_equal(errno, EINVAL);
    f.ro_addr = buf;
    f.ro_len = sizeof(buf);
    errno = 0;
    assert_null(fake_ops.reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE));
    assert_int_equal(errno, EFAULT);
    struct ibv_mr *src = fake_ops.reg_mr(pd, buf, 4096, 0); /* a pure source registers */
    assert_non_null(src);
    fake_ops.dereg_mr(src);
    fake_ops.dealloc_pd(pd);

    /* a remote WRITE into a LOCAL_WRITE-only region is a remote access error */
    fake_init(&f);
    struct mc_transport *t = transport();
    uint8_t *target = calloc(1, 8192);
    pd = fake_ops.alloc_pd(&f.ctx[0]);
    struct ibv_mr *lw = fake_ops.reg_mr(pd, target, 8192, IBV_ACCESS_LOCAL_WRITE);
    uint8_t data[4096];
    fill(data, sizeof(data), 3);
    struct mc_xfer_loc l = loc(PEER, target, lw->rkey);
    assert_int_equal(mc_transport_write(t, &l, data, sizeof(data)), MC_ERR_REPLICA_IS_GONE);
    for (size_t i = 0; i < 8192; i++)
        assert_int_equal(target[i], 0);
    fake_ops.dereg_mr(lw);
    fake_ops.dealloc_pd(pd);
    mc_transport_free(t);
    free(target);
    check_clean(&f);
}

static void test_fake_private_data_limits(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    uint8_t big[200] = {0};
    struct rdma_event_channel *ch = fake_ops.create_event_channel();
    struct rdma_cm_id *id = NULL;
    assert_int_equal(fake_ops.create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
    struct rdma_conn_param cp = {.private_data = big, .private_data_len = FAKE_PDATA_REQ + 1};
    errno = 0;
    assert_int_equal(fake_ops.connect(id, &cp), -1);
    assert_int_equal(errno, EINVAL);
    cp.private_data_len = FAKE_PDATA_REP + 1;
    errno = 0;
    assert_int_equal(fake_ops.accept(id, &cp), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(fake_ops.reject(id, big, FAKE_PDATA_REJ + 1), -1);
    assert_int_equal(errno, EINVAL);
    fake_ops.destroy_id(id);
    fake_ops.destroy_event_channel(ch);
    /* what the transport sends fits: a connect request and the handshake's largest reply */
    assert_true(MC_RDMA_CONN_MSG_LEN <= FAKE_PDATA_REQ);
    assert_true(MC_RDMA_CONN_MSG_MAX <= FAKE_PDATA_REJ);
}

static void test_fake_memlock_and_many_devices(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.memlock_limit = 64 << 10;
    struct ibv_pd *pd = fake_ops.alloc_pd(&f.ctx[0]);
    static uint8_t buf[128 << 10];
    struct ibv_mr *a = fake_ops.reg_mr(pd, buf, 48 << 10, IBV_ACCESS_LOCAL_WRITE);
    assert_non_null(a);
    errno = 0;
    assert_null(fake_ops.reg_mr(pd, buf + (64 << 10), 32 << 10, IBV_ACCESS_LOCAL_WRITE));
    assert_int_equal(errno, ENOMEM);
    fake_ops.dereg_mr(a);
    fake_ops.dealloc_pd(pd);
    f.ndev = 10;
    int n = 0;
    struct ibv_context **list = fake_ops.get_devices(&n);
    assert_int_equal(n, 10);
    assert_ptr_equal(list[9], &f.ctx[9]);
    assert_null(list[10]);
    assert_string_equal(fake_ops.device_name(list[9]), "fake9");
    fake_ops.free_devices(list);
}

/* A completion that lands between the last poll and the arm raises no event: a transport that
 * slept after arming without polling once more would wait for its whole timeout. */
static void test_fake_completion_before_arm(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.complete_on_arm = true;
    struct mc_transport *t = transport();
    uint32_t rkey;
    uint8_t *remote = peer_memory(&rkey);
    uint8_t src[4 * 4096]; /* one window: every completion lands at the arm */
    fill(src, sizeof(src), 9);
    struct mc_xfer_loc l = loc(PEER, remote, rkey);
    assert_int_equal(mc_transport_write(t, &l, src, sizeof(src)), 0);
    assert_memory_equal(remote, src, sizeof(src));
    assert_int_equal(f.waits, 0); /* every completion was found by the poll after the arm */
    done(&f, t, remote);
}

static void test_fake_rnr_and_retry_exceeded(void **state)
{
    (void)state;
    const enum ibv_wc_status st[] = {IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_RETRY_EXC_ERR};
    for (int k = 0; k < 2; k++) {
        struct fake f;
        fake_init(&f);
        struct mc_transport *t = transport();
        uint32_t rkey;
        uint8_t *remote = peer_memory(&rkey);
        uint8_t dst[16384];
        struct mc_xfer_loc l = loc(PEER, remote, rkey);
        f.fail_at_wr = 2;
        f.fail_status = st[k];
        assert_int_equal(mc_transport_read(t, &l, dst, sizeof(dst)), MC_ERR_TRANSFER_FAIL);
        struct mc_rdma_transport_stats s;
        mc_transport_rdma_get_stats(t, &s);
        assert_int_equal(s.teardowns, 1);
        assert_int_equal(s.errors, 1);
        fill(remote, 16384, 4);
        read_back(t, &l, dst, sizeof(dst), remote);
        done(&f, t, remote);
    }
}

/* ---- 1: a loopback host is refused, naming the fix ----------------------------------------- */

static void test_loopback_host_refused(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct mc_transport *t = transport();
    struct captured cap = {.len = 0};
    struct mc_logger lg = {.level = MC_LOG_WARN, .sink = capture, .arg = &cap};
    const struct mc_logger *prev = mc_log_set_current(&lg);
    assert_int_equal(mc_transport_rdma_listen(t, "127.0.0.1", 7000, true), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cap.text, "--host"));
    assert_non_null(strstr(cap.text, "bind_address=127.0.0.1"));
    cap.len = 0;
    mc_transport_rdma_serve_on(t, "localhost");
    assert_int_equal(mc_transport_rdma_listen(t, NULL, 7000, true), MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cap.text, "host=localhost"));
    mc_log_set_current(prev);
    mc_transport_rdma_serve_on(t, "10.0.0.1");
    assert_int_equal(mc_transport_rdma_listen(t, NULL, 7000, true), 0);
    mc_transport_free(t);
    check_clean(&f);

    /* the library: protocol rdma with the default host fails at open, before the master */
    fake_init(&f);
    mc_client_test_set_rdma_ops(&fake_ops);
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = "127.0.0.1:1";
    cfg.protocol = "rdma";
    cfg.log_level = MC_CLIENT_LOG_OFF;
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_INVALID_PARAMS);
    assert_null(c);
    mc_client_test_set_rdma_ops(NULL);
    check_clean(&f);
}

/* ---- 2: protected mode admits this host's own addresses ------------------------------------ */

static bool first_interface_ipv4(char *out, size_t cap)
{
    struct ifaddrs *ifa = NULL;
    bool found = false;
    if (getifaddrs(&ifa))
        return false;
    for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        const struct in_addr *a = &((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
        if ((ntohl(a->s_addr) >> 24) != 127)
            found = inet_ntop(AF_INET, a, out, (socklen_t)cap) != NULL;
    }
    freeifaddrs(ifa);
    return found;
}

static void test_protected_mode_own_addresses(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    uint8_t msg[MC_RDMA_CONN_MSG_LEN];
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_REQUEST, .client_id = {5, 6}};
    mc_rdma_conn_msg_encode(&m, msg);
    struct captured cap = {.len = 0};
    struct mc_logger lg = {.level = MC_LOG_WARN, .sink = capture, .arg = &cap};
    const struct mc_logger *prev = mc_log_set_current(&lg); /* the listener logs through it */
    struct mc_transport *t = transport();
    mc_transport_rdma_serve_on(t, "10.0.0.1");
    assert_int_equal(mc_transport_rdma_listen(t, "10.0.0.1", 7000, true), 0);
    /* another process on this host dials from the RDMA netdev's address, never 127/8 */
    fake_inject_connect_from("10.0.0.1", msg, sizeof(msg));
    assert_true(fake_wait_for(&f.accepted, 1));
    int want = 1;
    char own[INET_ADDRSTRLEN];
    if (first_interface_ipv4(own, sizeof(own))) { /* an address of one of our interfaces */
        fake_inject_connect_from(own, msg, sizeof(msg));
        assert_true(fake_wait_for(&f.accepted, ++want));
    }
    fake_inject_connect_from("10.1.2.3", msg, sizeof(msg)); /* another host: refused */
    assert_true(fake_wait_for(&f.rejected, 1));
    assert_int_equal(f.accepted, want);
    mc_transport_free(t);
    mc_log_set_current(prev);
    assert_non_null(strstr(cap.text, "auth_token_file"));
    assert_non_null(strstr(cap.text, "peer=10.1.2.3"));
    check_clean(&f);
}

/* ---- 3: re-registration yields a new key even where the device recycles keys --------------- */

static void test_reregister_new_key_despite_key_cache(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.reuse_keys = true;
    struct mc_transport *t = transport();
    uint8_t *seg = calloc(1, 65536);
    fill(seg, 65536, 1);
    uint32_t k1 = 0, k2 = 0;
    assert_int_equal(mc_transport_rdma_register(t, seg, 65536, &k1), 0);
    assert_int_equal(mc_transport_rdma_reregister(t, seg, &k2), 0);
    assert_int_not_equal(k2, k1);
    assert_int_equal(regions_of(&f, seg), 1); /* the old one is gone */
    /* a descriptor of the earlier mount reads nothing, and writes nothing */
    uint8_t out[8192];
    memset(out, 0x5a, sizeof(out));
    struct mc_xfer_loc l = loc(PEER, seg, k1);
    assert_int_equal(mc_transport_read(t, &l, out, sizeof(out)), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(out[0], 0x5a);
    assert_int_equal(mc_transport_write(t, &l, out, sizeof(out)), MC_ERR_REPLICA_IS_GONE);
    assert_int_not_equal(seg[0], 0x5a);
    l.rkey = k2;
    assert_int_equal(mc_transport_read(t, &l, out, sizeof(out)), 0);
    assert_memory_equal(out, seg, sizeof(out));
    /* a failed re-registration leaves the range unregistered: the fence still holds */
    f.memlock_limit = 1;
    assert_int_equal(mc_transport_rdma_reregister(t, seg, &k1), MC_ERR_TRANSFER_FAIL);
    assert_int_equal(regions_of(&f, seg), 0);
    assert_int_equal(mc_transport_rdma_unregister(t, seg), MC_ERR_INVALID_PARAMS);
    f.memlock_limit = 0;
    mc_transport_free(t);
    free(seg);
    check_clean(&f);
}

/* ---- 4: access rights by purpose ---------------------------------------------------------- */

static void test_access_by_purpose(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct mc_transport *t = transport();
    uint8_t *seg = calloc(1, 16384), *ubuf = calloc(1, 16384);
    uint32_t rk = 0, k = 0;
    assert_int_equal(mc_transport_rdma_register(t, seg, 16384, &rk), 0);
    assert_int_equal(f.last_access,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    assert_int_equal(mc_transport_rdma_register(t, ubuf, 16384, NULL), 0);
    assert_int_equal(f.last_access, IBV_ACCESS_LOCAL_WRITE);
    /* no remote key for a user buffer, and its local key does not let a peer write */
    assert_int_equal(mc_transport_rdma_rkey(t, ubuf, 100, &k), MC_ERR_SEGMENT_NOT_FOUND);
    uint8_t data[4096];
    fill(data, sizeof(data), 2);
    struct mc_xfer_loc l = loc(PEER, ubuf, key_of(&f, ubuf));
    assert_int_equal(mc_transport_write(t, &l, data, sizeof(data)), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(ubuf[1], 0);
    /* the registered user buffer is still a fine local buffer for a Get */
    fill(seg, 16384, 6);
    l = loc(PEER, seg, rk);
    assert_int_equal(mc_transport_read(t, &l, ubuf, 8192), 0);
    assert_memory_equal(ubuf, seg, 8192);
    /* a read-only source buffer (not registered) still goes: its one-shot region has no
     * rights, which read-only pages allow */
    static uint8_t rodata[8192];
    fill(rodata, sizeof(rodata), 8);
    f.ro_addr = rodata;
    f.ro_len = sizeof(rodata);
    assert_int_equal(mc_transport_write(t, &l, rodata, sizeof(rodata)), 0);
    assert_memory_equal(seg, rodata, sizeof(rodata));
    assert_int_equal(f.last_access, 0);
    /* a one-shot destination gets LOCAL_WRITE only */
    uint8_t *dst = malloc(4096);
    assert_int_equal(mc_transport_read(t, &l, dst, 4096), 0);
    assert_int_equal(f.last_access, IBV_ACCESS_LOCAL_WRITE);
    /* a buffer exposed for one request takes the peer's writes until it is revoked */
    void *h = NULL;
    uint32_t ek = 0;
    assert_int_equal(mc_transport_rdma_expose(t, dst, 4096, &ek, &h), 0);
    assert_int_equal(f.last_access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    uint8_t late[4096];
    fill(late, sizeof(late), 13);
    struct mc_xfer_loc pl = loc(PEER, dst, ek);
    assert_int_equal(mc_transport_write(t, &pl, late, sizeof(late)), 0); /* during the request */
    assert_memory_equal(dst, late, sizeof(late));
    mc_transport_rdma_revoke(t, h);
    assert_int_equal(regions_of(&f, dst), 0);
    /* a holder's write that arrives after the request ended is refused, no byte lands */
    memset(dst, 0x77, 4096);
    assert_int_equal(mc_transport_write(t, &pl, late, sizeof(late)), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(dst[0], 0x77);
    free(dst);
    assert_int_equal(mc_transport_rdma_unregister(t, ubuf), 0);
    assert_int_equal(mc_transport_rdma_unregister(t, seg), 0);
    mc_transport_free(t);
    free(seg);
    free(ubuf);
    check_clean(&f);
}

/* ---- 5: devices in use -------------------------------------------------------------------- */

static void test_devices_in_use(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.ndev = 10;
    for (int d = 0; d < 10; d++)
        snprintf(f.dev_addr[d], sizeof(f.dev_addr[d]), "10.0.0.%d", d + 1);
    struct mc_transport *t = transport();
    assert_int_equal(f.pds, 10); /* every device is seen, the ninth and tenth included */
    assert_int_equal(mc_transport_rdma_serve_on(t, "10.0.0.10"), 9);
    assert_string_equal(mc_transport_rdma_device(t), "fake9");
    uint8_t *seg = calloc(1, 65536);
    uint32_t rk = 0;
    assert_int_equal(mc_transport_rdma_register(t, seg, 65536, &rk), 0);
    assert_int_equal(regions_of(&f, seg), 1); /* on the device that owns --host only */
    for (int i = 0; i < f.nmrs; i++)
        if (f.mrs[i].mr)
            assert_ptr_equal(f.mrs[i].mr->context, &f.ctx[9]);
    assert_int_equal(mc_transport_rdma_unregister(t, seg), 0);
    mc_transport_free(t);
    check_clean(&f);

    /* named devices: registrations go to those */
    fake_init(&f);
    f.ndev = 4;
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.devices = "fake1, fake3";
    t = transport_with(&cfg);
    assert_int_equal(mc_transport_rdma_register(t, seg, 65536, &rk), 0);
    assert_int_equal(regions_of(&f, seg), 2);
    mc_transport_free(t);
    check_clean(&f);
    fake_init(&f);
    cfg.devices = "mlx5_7";
    struct mc_transport *bad = NULL;
    cfg.client_id = (struct mc_id){1, 2};
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &bad), MC_ERR_INVALID_PARAMS);
    assert_null(bad);
    check_clean(&f);
    /* the library passes its rdma_devices through (a device that is not there: refused) */
    fake_init(&f);
    mc_client_test_set_rdma_ops(&fake_ops);
    struct mc_client_config ccfg;
    mc_client_config_init(&ccfg);
    ccfg.master_address = "127.0.0.1:1";
    ccfg.protocol = "rdma";
    ccfg.host = "10.0.0.1";
    ccfg.rdma_devices = "mlx5_7";
    ccfg.log_level = MC_CLIENT_LOG_OFF;
    struct mc_client *cl = NULL;
    assert_int_equal(mc_client_open(&ccfg, &cl), MC_ERR_INVALID_PARAMS);
    assert_null(cl);
    mc_client_test_set_rdma_ops(NULL);
    check_clean(&f);

    /* the locked-memory limit: the failure names the limit and the fix */
    fake_init(&f);
    struct rlimit old, rl;
    assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &old), 0);
    rl = old;
    rl.rlim_cur = 64 << 10;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur)
        rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
    f.memlock_limit = 32 << 10;
    t = transport();
    struct captured cap = {.len = 0};
    struct mc_logger lg = {.level = MC_LOG_WARN, .sink = capture, .arg = &cap};
    const struct mc_logger *prev = mc_log_set_current(&lg);
    assert_int_equal(mc_transport_rdma_register(t, seg, 65536, &rk), MC_ERR_TRANSFER_FAIL);
    mc_log_set_current(prev);
    assert_non_null(strstr(cap.text, "RLIMIT_MEMLOCK"));
    assert_non_null(strstr(cap.text, "ulimit -l"));
    char lim[64];
    snprintf(lim, sizeof(lim), "memlock_limit=%llu", (unsigned long long)rl.rlim_cur);
    assert_non_null(strstr(cap.text, lim));
    assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &old), 0);
    mc_transport_free(t);
    free(seg);
    check_clean(&f);
}

/* Connections we dial leave from the serving device: on a host with several NICs the buffers
 * registered there (and only there) are usable without a per-call registration. */
static void test_dial_from_serving_device(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    f.ndev = 2;
    snprintf(f.dev_addr[1], sizeof(f.dev_addr[1]), "10.0.0.2");
    struct mc_transport *a = transport();
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.client_id = (struct mc_id){2, 2};
    struct mc_transport *b = transport_with(&cfg);
    assert_int_equal(mc_transport_rdma_serve_on(a, "10.0.0.2"), 1);
    assert_int_equal(mc_transport_rdma_serve_on(b, "10.0.0.2"), 1);
    assert_int_equal(mc_transport_rdma_listen(b, "10.0.0.2", 7000, false), 0);
    uint8_t *seg = calloc(1, 65536), *ubuf = calloc(1, 65536);
    fill(seg, 65536, 17);
    uint32_t rk = 0;
    assert_int_equal(mc_transport_rdma_register(b, seg, 65536, &rk), 0);
    assert_int_equal(mc_transport_rdma_register(a, ubuf, 65536, NULL), 0);
    struct mc_xfer_loc l = loc("10.0.0.2:7000", seg, rk);
    assert_int_equal(mc_transport_read(a, &l, ubuf, 16384), 0);
    assert_memory_equal(ubuf, seg, 16384);
    struct mc_rdma_transport_stats s;
    mc_transport_rdma_get_stats(a, &s);
    assert_int_equal(s.temp_regs, 0); /* the registered buffer's own region was used */
    assert_int_equal(mc_transport_rdma_unregister(a, ubuf), 0);
    assert_int_equal(mc_transport_rdma_unregister(b, seg), 0);
    mc_transport_free(a);
    mc_transport_free(b);
    free(seg);
    free(ubuf);
    check_clean(&f);
}

/* ---- 6: ACK timeout, ToS, port state, async events ------------------------------------------ */

static void test_ack_timeout_and_tos(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    struct mc_transport *a = transport(), *b = NULL;
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.tos = 106;
    cfg.client_id = (struct mc_id){2, 2};
    b = transport_with(&cfg);
    mc_transport_rdma_serve_on(b, "10.0.0.1");
    assert_int_equal(mc_transport_rdma_listen(b, "10.0.0.1", 7000, false), 0);
    uint8_t *seg = calloc(1, 8192), buf[4096];
    uint32_t rk = 0;
    assert_int_equal(mc_transport_rdma_register(b, seg, 8192, &rk), 0);
    struct mc_xfer_loc l = loc("10.0.0.1:7000", seg, rk);
    assert_int_equal(mc_transport_read(a, &l, buf, sizeof(buf)), 0);
    assert_true(fake_wait_for(&f.accepted, 1));
    /* the dialler (default config): ACK timeout 14, ToS left alone; then the listener's side
     * of the same connection set its ToS (106) and the same ACK timeout */
    assert_int_equal(f.ack_timeout, 14);
    assert_int_equal(f.tos, 106);
    f.tos = -1;
    f.ack_timeout = -1;
    mc_transport_free(b); /* a's pooled QP now points at nothing; a fresh dial below */
    struct mc_rdma_transport_config c2;
    mc_rdma_transport_config_init(&c2);
    c2.ack_timeout = -1; /* leave rdma_cm's default */
    c2.client_id = (struct mc_id){3, 3};
    b = transport_with(&c2);
    mc_transport_rdma_serve_on(b, "10.0.0.1");
    assert_int_equal(mc_transport_rdma_listen(b, "10.0.0.1", 7001, false), 0);
    assert_int_equal(mc_transport_rdma_register(b, seg, 8192, &rk), 0);
    l = loc("10.0.0.1:7001", seg, rk);
    assert_int_equal(mc_transport_read(a, &l, buf, sizeof(buf)), 0);
    assert_true(fake_wait_for(&f.accepted, 2));
    assert_int_equal(f.tos, -1);
    assert_int_equal(f.ack_timeout, 14); /* a's own; b set none */
    mc_transport_free(a);
    mc_transport_free(b);
    free(seg);
    check_clean(&f);
}

static void test_port_state_and_async_events(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.port_down[0] = true; /* the only device has no active port: nothing to start on */
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.client_id = (struct mc_id){1, 2};
    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_rdma_new(&cfg, &fake_ops, &t), MC_ERR_NOT_SUPPORTED);
    check_clean(&f);

    fake_init(&f);
    t = transport();
    uint32_t rkey;
    uint8_t *remote = peer_memory(&rkey);
    fill(remote, 65536, 7);
    uint8_t dst[8192];
    struct mc_xfer_loc l = loc(PEER, remote, rkey);
    assert_int_equal(mc_transport_read(t, &l, dst, sizeof(dst)), 0); /* one pooled QP */
    fake_inject_async(0, IBV_EVENT_PORT_ERR);
    struct mc_rdma_transport_stats s;
    for (int i = 0; i < 500; i++) {
        mc_transport_rdma_get_stats(t, &s);
        if (s.async_events >= 1)
            break;
        usleep(2000);
    }
    assert_int_equal(s.async_events, 1);
    /* the pooled QP predates the event: replaced, not used; the link is down, so it fails */
    assert_int_equal(mc_transport_read(t, &l, dst, sizeof(dst)), MC_ERR_TRANSFER_FAIL);
    mc_transport_rdma_get_stats(t, &s);
    assert_int_equal(s.stale, 1);
    assert_int_equal(s.reuses, 0);
    fake_inject_async(0, IBV_EVENT_PORT_ACTIVE);
    for (int i = 0; i < 500; i++) {
        mc_transport_rdma_get_stats(t, &s);
        if (s.async_events >= 2)
            break;
        usleep(2000);
    }
    assert_int_equal(s.async_events, 2);
    memset(dst, 0, sizeof(dst));
    read_back(t, &l, dst, sizeof(dst), remote);
    done(&f, t, remote);
}

/* A device removal reported on the listener: the peer's queue pair on it is closed, the device
 * marked down (our pooled queue pairs on it are replaced). */
static void test_device_removal_closes_connections(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct mc_transport *t = transport();
    mc_transport_rdma_serve_on(t, "10.0.0.1");
    assert_int_equal(mc_transport_rdma_listen(t, "10.0.0.1", 7000, false), 0);
    uint8_t msg[MC_RDMA_CONN_MSG_LEN];
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_REQUEST, .client_id = {5, 6}};
    mc_rdma_conn_msg_encode(&m, msg);
    fake_inject_connect_from("10.0.0.3", msg, sizeof(msg));
    assert_true(fake_wait_for(&f.accepted, 1));
    uint32_t rkey;
    uint8_t *remote = peer_memory(&rkey);
    uint8_t dst[4096];
    struct mc_xfer_loc l = loc(PEER, remote, rkey);
    assert_int_equal(mc_transport_read(t, &l, dst, sizeof(dst)), 0); /* one pooled QP */
    int destroyed = f.qps_destroyed;
    fake_inject_event_last(RDMA_CM_EVENT_DEVICE_REMOVAL);
    assert_true(fake_wait_for(&f.qps_destroyed, destroyed + 1)); /* the passive one */
    assert_int_equal(mc_transport_read(t, &l, dst, sizeof(dst)), 0);
    struct mc_rdma_transport_stats s;
    mc_transport_rdma_get_stats(t, &s);
    assert_int_equal(s.stale, 1); /* the pooled one predated the removal: replaced */
    done(&f, t, remote);
}

/* ---- 7: fork safety ----------------------------------------------------------------------- */

static void test_fork_safe_before_registration(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct mc_transport *t = transport();
    assert_true(f.fork_inited); /* called before the staging buffer was registered */
    mc_transport_free(t);
    check_clean(&f);
}

/* A short spin before arming: completions that arrive within a few polls cost no interrupt. */
static void test_cq_spin_before_arming(void **state)
{
    (void)state;
    for (int spin = 0; spin < 2; spin++) {
        struct fake f;
        fake_init(&f);
        f.poll_latency = 10; /* the device completes while the application polls */
        struct mc_rdma_transport_config cfg;
        mc_rdma_transport_config_init(&cfg);
        if (!spin)
            cfg.cq_spin_polls = -1;
        struct mc_transport *t = transport_with(&cfg);
        uint32_t rkey;
        uint8_t *remote = peer_memory(&rkey);
        fill(remote, 65536, 12);
        uint8_t dst[4 * 4096];
        struct mc_xfer_loc l = loc(PEER, remote, rkey);
        read_back(t, &l, dst, sizeof(dst), remote);
        if (spin) { /* the default: found by spinning, never armed, never slept */
            assert_int_equal(f.arms, 0);
            assert_int_equal(f.waits, 0);
        } else {
            assert_true(f.arms > 0);
        }
        done(&f, t, remote);
    }
}

/* Concurrent LOCAL_DISK pushes each get a staging buffer (and a queue pair) of their own. */
struct pushers {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int entered, want;
    struct mc_transport *t;
    uint8_t *remote;
    uint32_t rkey;
    int rc[8];
};

struct pusher {
    struct pushers *p;
    int i;
};

static int wait_all_fill(void *arg, uint64_t off, void *buf, size_t n)
{
    struct pusher *me = arg;
    struct pushers *p = me->p;
    memset(buf, 0x30 + me->i, n);
    if (off != 0)
        return 0;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 500 * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->lock);
    p->entered++;
    pthread_cond_broadcast(&p->cond);
    int rc = 0;
    while (p->entered < p->want && rc == 0)
        rc = pthread_cond_timedwait(&p->cond, &p->lock, &dl);
    bool all = p->entered >= p->want;
    pthread_mutex_unlock(&p->lock);
    return all ? 0 : MC_ERR_INTERNAL_ERROR; /* the others never got a staging buffer */
}

static void *push_main(void *arg)
{
    struct pusher *me = arg;
    struct pushers *p = me->p;
    p->rc[me->i] =
        mc_transport_rdma_push(p->t, PEER, (uint64_t)(uintptr_t)(p->remote + 8192 * (size_t)me->i),
                               p->rkey, 8192, wait_all_fill, me);
    return NULL;
}

static int run_pushers(struct fake *f, uint32_t staging_count, int n, struct mc_transport **tp,
                       struct pushers *p)
{
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.staging_count = staging_count;
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->want = n;
    p->t = *tp = transport_with(&cfg);
    p->remote = peer_memory(&p->rkey);
    (void)f;
    pthread_t th[8];
    struct pusher me[8];
    for (int i = 0; i < n; i++) {
        me[i] = (struct pusher){p, i};
        assert_int_equal(pthread_create(&th[i], NULL, push_main, &me[i]), 0);
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        failed += p->rc[i] != 0;
    }
    return failed;
}

static void test_concurrent_pushes_have_own_staging(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct mc_transport *t = NULL;
    struct pushers p;
    assert_int_equal(run_pushers(&f, 0, 4, &t, &p), 0); /* the default: 4 at once */
    for (int i = 0; i < 4; i++)
        for (size_t k = 0; k < 8192; k++)
            assert_int_equal(p.remote[8192 * (size_t)i + k], 0x30 + i);
    struct mc_rdma_transport_stats s;
    mc_transport_rdma_get_stats(t, &s);
    assert_int_equal(s.connects, 4); /* four queue pairs at once, all pooled after */
    assert_int_equal(s.idle, 4);
    mc_transport_free(t);
    free(p.remote);
    check_clean(&f);
    /* one staging buffer: the second push waits for the first, which waits for it in vain */
    fake_init(&f);
    assert_int_equal(run_pushers(&f, 1, 2, &t, &p), 1);
    mc_transport_free(t);
    free(p.remote);
    check_clean(&f);
}

/* The queue pair pool follows the machine's threads: one per CPU (4 .. 64) per peer. */
static void test_qp_pool_sized_by_cpus(void **state)
{
    (void)state;
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t want = cpus < 4 ? 4 : cpus > 64 ? 64 : (uint32_t)cpus;
    assert_int_equal(cfg.max_idle_per_peer, want);
}

/* A batch posts every key of one holder on one queue pair as one stream. */
static void test_batch_posted_at_once(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.cq_spin_polls = -1;
    struct mc_transport *t = transport_with(&cfg); /* 4 KiB slices, window 4 */
    uint32_t rkey;
    uint8_t *remote = peer_memory(&rkey);
    fill(remote, 65536, 19);
    uint8_t *dst = calloc(1, 65536);
    struct mc_xfer_item it[5];
    for (int i = 0; i < 4; i++)
        it[i] = (struct mc_xfer_item){loc(PEER, remote + 4096 * i, rkey), dst + 4096 * i, 4096, -1,
                                      NULL};
    it[4] = (struct mc_xfer_item){loc(PEER, remote, rkey), dst + 32768, 100, -1, NULL};
    it[4].loc.mount_epoch = 0; /* refused before anything is posted */
    assert_int_equal(mc_transport_batch(t, false, it, 5), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(it[i].status, 0);
    assert_int_equal(it[4].status, MC_ERR_REPLICA_IS_GONE);
    assert_memory_equal(dst, remote, 16384);
    assert_int_equal(f.post_calls, 1); /* the four keys in one chain */
    assert_int_equal(f.waits, 1);      /* and one wait for all of them */
    /* a key the holder refuses fails alone; the ones before it landed, the ones after are
     * flushed with it (and go to the single path in the caller) */
    memset(dst, 0, 65536);
    it[4].loc.mount_epoch = 1;
    it[1].loc.rkey = rkey + 1000;
    assert_int_equal(mc_transport_batch(t, false, it, 4), 0);
    assert_int_equal(it[0].status, 0);
    assert_int_equal(it[1].status, MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(it[2].status, MC_ERR_TRANSFER_FAIL);
    assert_memory_equal(dst, remote, 4096);
    /* writes: the same, with each item's CRC */
    uint32_t crc[2];
    struct mc_xfer_item w[2] = {
        {loc(PEER, remote + 40000, rkey), dst, 3000, -1, &crc[0]},
        {loc(PEER, remote + 50000, rkey), dst + 3000, 3000, -1, &crc[1]},
    };
    fill(dst, 6000, 23);
    assert_int_equal(mc_transport_batch(t, true, w, 2), 0);
    assert_int_equal(w[0].status, 0);
    assert_int_equal(w[1].status, 0);
    assert_memory_equal(remote + 40000, dst, 3000);
    assert_memory_equal(remote + 50000, dst + 3000, 3000);
    assert_int_equal(crc[1], mc_crc32c(dst + 3000, 3000));
    mc_transport_free(t);
    free(remote);
    free(dst);
    check_clean(&f);
}

/* Completion queues spread over the device's completion vectors, not all on vector 0. */
static void test_cqs_spread_over_vectors(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.ctx[0].num_comp_vectors = 4;
    struct mc_transport *t = transport();
    uint8_t buf[4096];
    uint32_t rkey;
    uint8_t *remote = peer_memory(&rkey);
    fill(remote, 65536, 29);
    for (int i = 0; i < 8; i++) { /* eight peers: eight queue pairs, eight CQs */
        char ep[32];
        snprintf(ep, sizeof(ep), "10.0.0.2:%d", 7000 + i);
        struct mc_xfer_loc l = loc(ep, remote + 4096 * i, rkey);
        memset(buf, 0, sizeof(buf));
        assert_int_equal(mc_transport_read(t, &l, buf, sizeof(buf)), 0);
        assert_memory_equal(buf, remote + 4096 * i, sizeof(buf));
    }
    for (int v = 0; v < 4; v++)
        assert_int_equal(f.cq_vec[v], 2);
    done(&f, t, remote);
}

/* ---- 8: the passive side's RDMA read depths (rdma_accept(3)) -------------------------------- */

static void test_passive_read_depths(void **state)
{
    (void)state;
    struct fake f;
    fake_init(&f);
    f.loopback = true;
    f.ndev = 2;
    snprintf(f.dev_addr[1], sizeof(f.dev_addr[1]), "10.0.0.2");
    f.rd_atom[0] = 16; /* the dialler's device (a): responds to 16, initiates 4 */
    f.init_rd_atom[0] = 4;
    f.rd_atom[1] = 8; /* the listener's device (b): responds to 8, initiates 16 */
    f.init_rd_atom[1] = 16;
    struct mc_transport *a = transport();
    struct mc_rdma_transport_config cfg;
    mc_rdma_transport_config_init(&cfg);
    cfg.client_id = (struct mc_id){2, 2};
    struct mc_transport *b = transport_with(&cfg);
    assert_int_equal(mc_transport_rdma_serve_on(b, "10.0.0.2"), 1);
    assert_int_equal(mc_transport_rdma_listen(b, "10.0.0.2", 7000, false), 0);
    uint8_t *seg = calloc(1, 8192), buf[4096];
    uint32_t rk = 0;
    assert_int_equal(mc_transport_rdma_register(b, seg, 8192, &rk), 0);
    struct mc_xfer_loc l = loc("10.0.0.2:7000", seg, rk);
    assert_int_equal(mc_transport_read(a, &l, buf, sizeof(buf)), 0);
    assert_true(fake_wait_for(&f.accepted, 1));
    /* b answers a's 4 outstanding READs (a's initiator depth, capped by b's 8) and may issue
     * as many as a answers (a's responder resources 16, capped by b's 16) */
    assert_int_equal(f.accept_resp, 4);
    assert_int_equal(f.accept_init, 16);
    mc_transport_free(a);
    mc_transport_free(b);
    free(seg);
    check_clean(&f);
}

int main(void)
{
    mc_log_set_level(MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fake_loopback_enodev),
        cmocka_unit_test(test_fake_key_reuse),
        cmocka_unit_test(test_fake_access_flags),
        cmocka_unit_test(test_fake_private_data_limits),
        cmocka_unit_test(test_fake_memlock_and_many_devices),
        cmocka_unit_test(test_fake_completion_before_arm),
        cmocka_unit_test(test_fake_rnr_and_retry_exceeded),
        cmocka_unit_test(test_loopback_host_refused),
        cmocka_unit_test(test_protected_mode_own_addresses),
        cmocka_unit_test(test_reregister_new_key_despite_key_cache),
        cmocka_unit_test(test_access_by_purpose),
        cmocka_unit_test(test_devices_in_use),
        cmocka_unit_test(test_dial_from_serving_device),
        cmocka_unit_test(test_ack_timeout_and_tos),
        cmocka_unit_test(test_port_state_and_async_events),
        cmocka_unit_test(test_device_removal_closes_connections),
        cmocka_unit_test(test_fork_safe_before_registration),
        cmocka_unit_test(test_cq_spin_before_arming),
        cmocka_unit_test(test_concurrent_pushes_have_own_staging),
        cmocka_unit_test(test_qp_pool_sized_by_cpus),
        cmocka_unit_test(test_batch_posted_at_once),
        cmocka_unit_test(test_cqs_spread_over_vectors),
        cmocka_unit_test(test_passive_read_depths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
