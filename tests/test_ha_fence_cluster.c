/*
 * test_ha_fence_cluster.c - a fence survives a fail-over (the delete rule under HA), with the
 * real binaries: etcd, leader A and standby B (--enable_ha --enable_offload), a holder daemon H
 * with a --disk_path and an in-test client W with no DRAM, both naming the cluster etcd://.
 *
 *   1. key k is Put and offloaded to H's disk (listed on LOCAL_DISK by A);
 *   2. H is killed (-9) and k removed: the Remove returns 0 once H is fenced after the delete
 *      timeout and the fence's record is in etcd;
 *   3. A is killed (-9); B takes over (loading the fence records);
 *   4. H comes back and re-registers its disk records with B: k's record is refused (fenced),
 *      k stays removed (W reads OBJECT_NOT_FOUND, B lists no copy), while a key put after the
 *      fence is on H's disk and listed.
 * Without the fence in etcd, step 4 brings k back with its old bytes (the window of a master
 * restart without HA, test_delete_rule_cluster). Exits 77 without etcd. Every process dies
 * with the test; the temporary directory is removed.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster_data.h"
#include "cluster_util.h"
#include "common/rpc_client.h"
#include "etcd_util.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "tier_query.h"

#define VLEN (16u * 1024u)
#define START_MS 20000
#define WAIT_MS 20000

static struct {
    struct eu_etcd etcd;
    int etcd_rc;
    struct cu_cluster cl;
    char disk[128], url[300], rpc_a[64], rpc_b[64], http_a[64];
    struct cu_proc ma, mb, h;
    char ep[256];
    struct mc_client *w;
    uint8_t *buf, *want;
} g;

static void start_master(struct cu_proc *p, char *rpc)
{
    char ep[300];
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", g.etcd.endpoints);
    const char *flags[] = {"--enable_ha",
                           ep,
                           "--cluster_id=t_hfc",
                           "--ha_lease_ttl_sec=2",
                           "--client_ttl=10",
                           "--default_kv_lease_ttl=200",
                           "--enable_offload",
                           "--log_level=warn",
                           NULL};
    assert_int_equal(cu_start_master(&g.cl, p, 0, flags, START_MS), 0);
    snprintf(rpc, 64, "%s", g.cl.rpc);
}

/* Whether GET /role on the HTTP port hostport answers want. */
static bool role_is(const char *hostport, const char *want)
{
    char host[64];
    snprintf(host, sizeof(host), "%s", hostport);
    char *colon = strrchr(host, ':');
    if (!colon)
        return false;
    *colon = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return false;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    char buf[1024];
    size_t len = 0;
    ssize_t r;
    static const char req[] = "GET /role HTTP/1.0\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1))
        while (len < sizeof(buf) - 1 && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
            len += (size_t)r;
    close(fd);
    buf[len] = 0;
    const char *body = strstr(buf, "\r\n\r\n");
    return body && strncmp(body + 4, want, strlen(want)) == 0;
}

static int start_holder(void)
{
    char disk[160];
    const char *flags[] = {"--segment_size=64MiB", disk, "--disk_capacity=1GiB", "--log_level=warn",
                           "--master_wait=20s",    NULL};
    snprintf(disk, sizeof(disk), "--disk_path=%s", g.disk);
    return cu_start_daemon(&g.cl, &g.h, "holder", flags, g.ep, sizeof(g.ep), START_MS);
}

static struct mc_rpc_client *admin(const char *addr)
{
    struct mc_rpc_client *c = NULL;
    assert_int_equal(cu_admin_open(addr, 5000, &c), 0);
    return c;
}

/* The version of key when adm's master lists a LOCAL_DISK replica of it, else 0. */
static uint64_t disk_version(struct mc_rpc_client *adm, const char *key)
{
    int mem, disk;
    uint64_t v;
    return tq_replicas(adm, key, &mem, &disk, &v) && disk > 0 ? v : 0;
}

static void put_on_disk(struct mc_rpc_client *adm, const char *key, uint64_t seed)
{
    cu_fill(g.want, VLEN, seed);
    assert_int_equal(cu_put_retry(g.w, key, g.want, VLEN, NULL, WAIT_MS), 0);
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    while (disk_version(adm, key) == 0) {
        if (cu_now_ms() >= deadline)
            fail_msg("%s not on LOCAL_DISK", key);
        cu_sleep_ms(20);
    }
}

static void test_fence_survives_failover(void **state)
{
    (void)state;
    if (g.etcd_rc == 77)
        skip();
    assert_int_equal(g.etcd_rc, 0);
    start_master(&g.ma, g.rpc_a);
    snprintf(g.http_a, sizeof(g.http_a), "%s", g.cl.metrics);
    struct mc_rpc_client *adm_a = admin(g.rpc_a);
    /* A leads before B starts: B's first campaign loses */
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    while (!role_is(g.http_a, "leader")) {
        if (cu_now_ms() >= deadline)
            fail_msg("A did not become the leader");
        cu_sleep_ms(20);
    }
    start_master(&g.mb, g.rpc_b);
    snprintf(g.url, sizeof(g.url), "etcd://%s/t_hfc", g.etcd.endpoints);
    assert_true(strlen(g.url) < sizeof(g.cl.rpc));
    memcpy(g.cl.rpc, g.url, strlen(g.url) + 1);
    assert_int_equal(start_holder(), 0);
    assert_int_equal(cu_open_client(&g.cl, 0, NULL, 0, 3000, &g.w), 0);

    /* 1-2: k on H's disk; H dies; the Remove returns once H is fenced */
    put_on_disk(adm_a, "hf-k", 11);
    assert_int_equal(cu_stop(&g.h, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(mc_remove(g.w, "hf-k", false), 0);
    mc_rpc_client_free(adm_a);

    /* 3: A dies; B leads */
    assert_int_equal(cu_stop(&g.ma, SIGKILL, 5000), 128 + SIGKILL);
    struct mc_rpc_client *adm_b = admin(g.rpc_b);

    /* 4: H back, re-registering with B (READY after its re-registration) */
    assert_int_equal(start_holder(), 0);
    put_on_disk(adm_b, "hf-after", 12); /* H serves B: a key after the fence is kept */
    assert_int_equal(disk_version(adm_b, "hf-k"), 0);
    int64_t r = cu_read(g.w, "hf-k", g.buf, VLEN);
    for (int t = 0; r < 0 && r != MC_ERR_OBJECT_NOT_FOUND && t < 100; t++) {
        cu_sleep_ms(50);
        r = cu_read(g.w, "hf-k", g.buf, VLEN);
    }
    assert_int_equal(r, MC_ERR_OBJECT_NOT_FOUND);
    cu_fill(g.want, VLEN, 12);
    r = cu_read(g.w, "hf-after", g.buf, VLEN);
    cu_assert_value("hf-after", r, g.buf, g.want, VLEN);
    mc_rpc_client_free(adm_b);
}

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.ma.out_fd = g.mb.out_fd = g.h.out_fd = -1;
    g.etcd_rc = eu_start(&g.etcd, 1, 20000);
    if (g.etcd_rc != 0)
        return 0;
    if (cu_cluster_init(&g.cl, "mc_hfc") != 0)
        return -1;
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.cl.dir);
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    return g.buf && g.want ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_client_close(g.w);
    cu_stop(&g.h, SIGKILL, 5000);
    cu_stop(&g.ma, SIGKILL, 5000);
    cu_stop(&g.mb, SIGKILL, 5000);
    eu_stop(&g.etcd);
    if (g.etcd_rc == 0)
        cu_cluster_destroy(&g.cl);
    free(g.buf);
    free(g.want);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fence_survives_failover),
    };
    int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
    if (failed == 0 && g.etcd_rc == 77)
        return 77;
    return failed;
}
