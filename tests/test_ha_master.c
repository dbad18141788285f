/*
 * test_ha_master.c - master high availability with real processes: one etcd member and two
 * mooncake_master processes on loopback (--enable_ha, --ha_lease_ttl_sec=2), driven over RPC.
 *
 *   - exactly one leads; the standby answers Ping with NOT_LEADER and GetLeader with the
 *     leader's address and epoch; Ping on the leader reports that epoch (view_version); GET
 *     /role and /leader on each HTTP port say leader/standby and the leader's address;
 *   - SIGTERM hand-over: the leader revokes its lease, the standby leads (higher epoch);
 *   - SIGKILL: the standby leads once the dead leader's lease expires (higher epoch);
 *   - SIGSTOP past the TTL, SIGCONT: the resumed master acknowledges nothing (NOT_LEADER or no
 *     answer) and exits with status 3 (leadership lost);
 *   - etcd lost: the leader stops acknowledging (NOT_LEADER) within its TTL, keeps running,
 *     and serves again once etcd is back;
 *   - three etcd members: the raft leader killed (never two masters acknowledging, one serves
 *     again), quorum lost (none serves), quorum back (one serves).
 * Deadlines are generous liveness bounds; timings are the benchmark's business. Exit 77 when
 * etcd is not installed.
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
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/rpc_client.h"
#include "common/wire.h"
#include "etcd_util.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "test_skip.h"

#define TTL_S 2

static struct eu_etcd g_etcd;
static int g_etcd_rc;
static struct cu_cluster g_c;

struct master {
    struct cu_proc p;
    char rpc[64], http[64];
};

static void start_master_on(struct master *m, const struct eu_etcd *e, const char *cluster)
{
    char ep[300], cl[64];
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", e->endpoints);
    snprintf(cl, sizeof(cl), "--cluster_id=%s", cluster);
    const char *flags[] = {"--enable_ha", ep, cl, "--ha_lease_ttl_sec=2", NULL};
    assert_int_equal(cu_start_master(&g_c, &m->p, 0, flags, 10000), 0);
    snprintf(m->rpc, sizeof(m->rpc), "%s", g_c.rpc);
    snprintf(m->http, sizeof(m->http), "%s", g_c.metrics);
}

/* GET path on the master's HTTP port: the status and the body (out, NUL-terminated). */
static int http_get(const struct master *m, const char *path, char *out, size_t cap)
{
    char host[64];
    snprintf(host, sizeof(host), "%s", m->http);
    char *colon = strrchr(host, ':');
    assert_non_null(colon);
    *colon = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    assert_int_equal(inet_pton(AF_INET, host, &sa.sin_addr), 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char req[128], buf[4096];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t len = 0;
    ssize_t r;
    while (len < sizeof(buf) - 1 && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = 0;
    int status = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &status), 1);
    const char *body = strstr(buf, "\r\n\r\n");
    snprintf(out, cap, "%s", body ? body + 4 : "");
    return status;
}

static void start_master(struct master *m)
{
    start_master_on(m, &g_etcd, "t_ha");
}

static struct mc_rpc_client *connect_to(const char *addr)
{
    static char buf[8][64];
    static int next;
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    char *b = buf[next++ % 8];
    assert_int_equal(mc_rpc_parse_endpoint(addr, b, 64, &cfg), 0);
    cfg.connect_timeout_ms = 500;
    cfg.call_timeout_ms = 1000;
    cfg.reconnect_max_ms = 100;
    struct mc_rpc_client *c;
    assert_int_equal(mc_rpc_client_new(&cfg, &c), 0);
    return c;
}

/* Ping as client 1:n (a mutation: it registers the client). Returns the status; *epoch. */
static int ping(const char *addr, uint64_t n, uint64_t *epoch)
{
    struct mc_rpc_client *c = connect_to(addr);
    Mc__Uuid id = MC__UUID__INIT;
    id.hi = 1;
    id.lo = n;
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = &id;
    Mc__PingResponse *r = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_PING, &req.base, &mc__ping_response__descriptor, 0,
                                    (ProtobufCMessage **)&r);
    if (rc == 0 && epoch)
        *epoch = (uint64_t)r->view_version;
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    mc_rpc_client_free(c);
    return rc;
}

struct leader_info {
    char role[16], addr[64];
    uint64_t epoch;
};

static int get_leader(const char *addr, struct leader_info *li)
{
    struct mc_rpc_client *c = connect_to(addr);
    Mc__GetLeaderRequest req = MC__GET_LEADER_REQUEST__INIT;
    Mc__GetLeaderResponse *r = NULL;
    int rc =
        mc_rpc_client_call_msg(c, MC_METHOD_GET_LEADER, &req.base,
                               &mc__get_leader_response__descriptor, 0, (ProtobufCMessage **)&r);
    memset(li, 0, sizeof(*li));
    if (rc == 0) {
        snprintf(li->role, sizeof(li->role), "%s", r->role);
        snprintf(li->addr, sizeof(li->addr), "%s", r->leader_address);
        li->epoch = r->epoch;
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    mc_rpc_client_free(c);
    return rc;
}

/* Waits until m says it leads; returns its epoch. */
static uint64_t wait_leader(struct master *m, int timeout_ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)timeout_ms;
    struct leader_info li;
    while (cu_now_ms() < deadline) {
        if (get_leader(m->rpc, &li) == 0 && strcmp(li.role, "leader") == 0) {
            assert_string_equal(li.addr, m->rpc);
            return li.epoch;
        }
        cu_sleep_ms(20);
    }
    cu_dump_log(&m->p, "master");
    fail_msg("%s did not become the leader", m->rpc);
    return 0;
}

static void wait_status(const char *addr, int want, int timeout_ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)timeout_ms;
    int rc = 1;
    while (cu_now_ms() < deadline) {
        rc = ping(addr, 99, NULL);
        if (rc == want)
            return;
        cu_sleep_ms(20);
    }
    fail_msg("%s: Ping gave %s, wanted %s", addr, mc_strerror(rc), mc_strerror(want));
}

static int setup(void **state)
{
    (void)state;
    g_etcd_rc = eu_start(&g_etcd, 1, 20000);
    if (g_etcd_rc != 0)
        return 0;
    return cu_cluster_init(&g_c, "mc-ha");
}

static int teardown(void **state)
{
    (void)state;
    eu_stop(&g_etcd);
    cu_cluster_destroy(&g_c);
    return 0;
}

static void test_failover(void **state)
{
    (void)state;
    if (g_etcd_rc == 77)
        skip();
    assert_int_equal(g_etcd_rc, 0);
    struct master a = {0}, b = {0};
    start_master(&a);
    uint64_t e1 = wait_leader(&a, 10000);
    start_master(&b);
    /* b stands by: NOT_LEADER for Ping, the leader's address and epoch from GetLeader */
    struct leader_info li;
    uint64_t deadline = cu_now_ms() + 10000;
    do {
        assert_int_equal(get_leader(b.rpc, &li), 0);
        if (li.addr[0])
            break;
        cu_sleep_ms(20);
    } while (cu_now_ms() < deadline);
    assert_string_equal(li.role, "standby");
    assert_string_equal(li.addr, a.rpc);
    assert_int_equal(li.epoch, e1);
    assert_int_equal(ping(b.rpc, 1, NULL), MC_ERR_NOT_LEADER);
    /* the HTTP port says the same */
    char body[256], want[96];
    assert_int_equal(http_get(&a, "/role", body, sizeof(body)), 200);
    assert_string_equal(body, "leader\n");
    assert_int_equal(http_get(&b, "/role", body, sizeof(body)), 200);
    assert_string_equal(body, "standby\n");
    snprintf(want, sizeof(want), "%s\n", a.rpc);
    assert_int_equal(http_get(&b, "/leader", body, sizeof(body)), 200);
    assert_string_equal(body, want);
    assert_int_equal(http_get(&a, "/leader", body, sizeof(body)), 200);
    assert_string_equal(body, want);
    /* /health reports the election's role, not a standalone leader */
    assert_int_equal(http_get(&a, "/health", body, sizeof(body)), 200);
    assert_non_null(strstr(body, "\"role\":\"leader\",\"ha_state\":\"leader\""));
    assert_int_equal(http_get(&b, "/health", body, sizeof(body)), 200);
    assert_non_null(strstr(body, "\"role\":\"standby\",\"ha_state\":\"standby\""));
    assert_non_null(strstr(body, "\"service_ready\":false"));
    uint64_t pe = 0;
    assert_int_equal(ping(a.rpc, 1, &pe), 0);
    assert_int_equal(pe, e1); /* Ping carries the etcd epoch */

    /* SIGTERM hand-over: the lease is revoked, b leads long before a TTL could expire */
    uint64_t t0 = cu_now_ms();
    assert_int_equal(cu_stop(&a.p, SIGTERM, 10000), 0);
    uint64_t e2 = wait_leader(&b, 10000);
    uint64_t handover = cu_now_ms() - t0;
    assert_true(e2 > e1);
    fprintf(stderr, "SIGTERM hand-over: %llu ms (TTL %d s)\n", (unsigned long long)handover, TTL_S);
    assert_int_equal(ping(b.rpc, 2, &pe), 0);
    assert_int_equal(pe, e2);

    /* SIGKILL: a (restarted, standing by) leads once b's lease expired */
    start_master(&a);
    wait_status(a.rpc, MC_ERR_NOT_LEADER, 5000);
    assert_int_equal(cu_stop(&b.p, SIGKILL, 5000), 128 + SIGKILL);
    uint64_t e3 = wait_leader(&a, (TTL_S + 10) * 1000);
    assert_true(e3 > e2);

    /* SIGSTOP past the TTL: b (restarted) takes over; a, resumed, acknowledges nothing */
    start_master(&b);
    wait_status(b.rpc, MC_ERR_NOT_LEADER, 5000);
    kill(a.p.pid, SIGSTOP);
    uint64_t e4 = wait_leader(&b, (TTL_S + 10) * 1000);
    assert_true(e4 > e3);
    kill(a.p.pid, SIGCONT);
    for (int i = 0; i < 20; i++) {
        int rc = ping(a.rpc, 100 + (uint64_t)i, &pe);
        assert_true(rc != 0); /* NOT_LEADER, or it is gone */
        if (rc != MC_ERR_NOT_LEADER)
            break;
    }
    assert_int_equal(cu_stop(&a.p, 0, 10000), 3); /* exits by itself: leadership lost */
    assert_int_equal(ping(b.rpc, 3, &pe), 0);
    assert_int_equal(pe, e4);
    cu_stop(&b.p, SIGTERM, 5000);
}

static void test_etcd_lost(void **state)
{
    (void)state;
    if (g_etcd_rc == 77)
        skip();
    assert_int_equal(g_etcd_rc, 0);
    struct master a = {0};
    start_master(&a);
    uint64_t e = wait_leader(&a, 10000);
    assert_int_equal(ping(a.rpc, 1, NULL), 0);
    eu_kill_member(&g_etcd, 0);
    /* self-fenced within its TTL (generous bound), still running */
    wait_status(a.rpc, MC_ERR_NOT_LEADER, (TTL_S + 5) * 1000);
    struct leader_info li;
    assert_int_equal(get_leader(a.rpc, &li), 0);
    assert_string_equal(li.role, "standby");
    assert_int_equal(eu_restart_member(&g_etcd, 0), 0);
    /* etcd back with its data: it renews every lease when it elects its leader, so the master
     * keeps its leadership (same epoch) and serves again */
    uint64_t deadline = cu_now_ms() + 20000;
    int rc = 1;
    uint64_t pe = 0;
    while (cu_now_ms() < deadline) {
        rc = ping(a.rpc, 2, &pe);
        if (rc == 0)
            break;
        cu_sleep_ms(50);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(pe, e);
    cu_stop(&a.p, SIGTERM, 5000);
}

/* How many of the masters acknowledge a Ping right now (never more than one may). */
static int serving(struct master *ms, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ms[i].p.pid > 0 && ping(ms[i].rpc, 50, NULL) == 0)
            k++;
    return k;
}

/* Polls for ms: never two acknowledging; returns when `want` serve (or fails at the end). */
static void watch_serving(struct master *ms, int n, int want, int ms_total)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)ms_total;
    int k = -1;
    while (cu_now_ms() < deadline) {
        k = serving(ms, n);
        assert_true(k <= 1);
        if (k == want)
            return;
        cu_sleep_ms(20);
    }
    fail_msg("%d masters serve, wanted %d", k, want);
}

/* Three etcd members: the raft leader killed (the master keeps its leadership or another takes
 * over, never two serving); quorum lost (nobody serves); quorum back (one serves again). */
static void test_etcd3(void **state)
{
    (void)state;
    if (g_etcd_rc == 77)
        skip();
    struct eu_etcd e3;
    int rc = eu_start(&e3, 3, 30000);
    if (rc == 77)
        MC_SKIP("three etcd members could not start here");
    assert_int_equal(rc, 0);
    struct master ms[2] = {0};
    start_master_on(&ms[0], &e3, "t_ha3");
    wait_leader(&ms[0], 10000);
    start_master_on(&ms[1], &e3, "t_ha3");
    watch_serving(ms, 2, 1, 5000);
    int l = eu_leader(&e3);
    assert_true(l >= 0);
    eu_kill_member(&e3, l);
    /* for a few TTLs: exactly one master serves at a time, at most */
    uint64_t until = cu_now_ms() + 3 * 2000;
    while (cu_now_ms() < until) {
        assert_true(serving(ms, 2) <= 1);
        cu_sleep_ms(20);
    }
    watch_serving(ms, 2, 1, 15000);
    /* a second member gone: no quorum, no master serves (within a TTL and some) */
    int other = (l + 1) % 3;
    eu_kill_member(&e3, other);
    watch_serving(ms, 2, 0, (TTL_S + 5) * 1000);
    assert_int_equal(eu_restart_member(&e3, l), 0);
    assert_int_equal(eu_restart_member(&e3, other), 0);
    /* quorum back: one serves again (etcd renews the leases when it elects its leader, so
     * the fenced leader usually resumes; if its lease did lapse, it exits and the other leads) */
    watch_serving(ms, 2, 1, 30000);
    for (int i = 0; i < 2; i++)
        cu_stop(&ms[i].p, SIGTERM, 5000);
    eu_stop(&e3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failover),
        cmocka_unit_test(test_etcd_lost),
        cmocka_unit_test(test_etcd3),
    };
    int failed = MC_RUN_TESTS(tests, setup, teardown);
    if (failed == 0 && g_etcd_rc == 77)
        return 77;
    return failed;
}
