/*
 * test_ha_partition.c - the leader partitioned from etcd in a network namespace: master A runs
 * in its own namespace, reaching etcd and its clients through a veth pair; master B and a
 * library client (etcd://) run in the test's namespace. Taking the pair's link down cuts A off
 * from etcd and clients at once:
 *   - A stops serving (its /health says it is not the leader) no later than B starts: B's first
 *     "leader" is only ever seen after A's gate has closed;
 *   - B takes over with a higher epoch and the client follows: a new Put succeeds and reads
 *     back with exact bytes through B;
 *   - with the link back, A learns its lease is gone and exits (status 3) without serving again.
 * Needs `ip netns` (root, CAP_NET_ADMIN) and etcd: exits 77 where either is missing. Every
 * process, the namespace and the link are removed at the end. Bounded polls, no fixed sleeps.
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
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster_data.h"
#include "cluster_util.h"
#include "etcd_util.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"

#define WAIT_MS 20000
#define VLEN 4096

static struct eu_etcd g_etcd;
static int g_rc; /* 0 ready, 77 skip, -1 failure */
static struct cu_cluster g_c;
static struct cu_proc g_ma, g_mb;
static char g_ns[32], g_veth_root[16], g_veth_ns[16], g_ip_root[32], g_ip_ns[32];
static bool g_ns_made;

static int sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc;
}

/* GET path from host:port: the status and the body; -1 when it cannot connect. */
static int http_get(const char *hostport, const char *path, char *out, size_t cap)
{
    char host[64];
    snprintf(host, sizeof(host), "%s", hostport);
    char *colon = strrchr(host, ':');
    assert_non_null(colon);
    *colon = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    assert_int_equal(inet_pton(AF_INET, host, &sa.sin_addr), 1);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    (void)connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    fd_set w;
    FD_ZERO(&w);
    FD_SET(fd, &w);
    struct timeval tv = {0, 300 * 1000};
    int err = 0;
    socklen_t el = sizeof(err);
    if (select(fd + 1, NULL, &w, NULL, &tv) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    struct timeval rt = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
    char req[128], buf[4096];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t len = 0;
    ssize_t r;
    while (len < sizeof(buf) - 1 && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = 0;
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    const char *body = strstr(buf, "\r\n\r\n");
    snprintf(out, cap, "%s", body ? body + 4 : "");
    return status;
}

/* 1 when the master at hostport says it leads, 0 when it answers otherwise, -1 unreachable. */
static int leads(const char *hostport)
{
    char body[512];
    if (http_get(hostport, "/health", body, sizeof(body)) != 200)
        return -1;
    return strstr(body, "\"role\":\"leader\"") != NULL;
}

/* 1 when the master at hostport serves as leader (its lease is live: /health's ha_state is
 * "leader", not "fenced" or "standby"), 0 when not, -1 unreachable. */
static int serves(const char *hostport)
{
    char body[512];
    if (http_get(hostport, "/health", body, sizeof(body)) != 200)
        return -1;
    return strstr(body, "\"ha_state\":\"leader\"") != NULL;
}

/* Runs fn's spawn inside the namespace: the calling thread enters it, the child inherits it. */
static int enter_ns(const char *name)
{
    char path[96];
    snprintf(path, sizeof(path), "/var/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = setns(fd, CLONE_NEWNET);
    close(fd);
    return rc;
}

static void value_of(int i, uint8_t *v)
{
    for (int k = 0; k < VLEN; k++)
        v[k] = (uint8_t)(i * 131 + k * 7 + (k >> 8));
}

static void net_down(void)
{
    if (g_ns_made)
        (void)sh("ip netns del %s", g_ns); /* takes its end of the pair, and so the pair */
    g_ns_made = false;
}

static int net_up(void)
{
    int id = (int)(getpid() % 200) + 20;
    snprintf(g_ns, sizeof(g_ns), "mc_part_%d", (int)getpid());
    snprintf(g_veth_root, sizeof(g_veth_root), "mcpr%d", (int)(getpid() % 100000));
    snprintf(g_veth_ns, sizeof(g_veth_ns), "mcpn%d", (int)(getpid() % 100000));
    snprintf(g_ip_root, sizeof(g_ip_root), "10.213.%d.1", id);
    snprintf(g_ip_ns, sizeof(g_ip_ns), "10.213.%d.2", id);
    if (system("ip netns add mc_part_probe_$$ >/dev/null 2>&1 && ip netns del mc_part_probe_$$") !=
        0) {
        fprintf(stderr, "ip netns is refused here: skipping\n");
        return 77;
    }
    if (sh("ip netns add %s", g_ns) != 0)
        return -1;
    g_ns_made = true;
    if (sh("ip link add %s type veth peer name %s", g_veth_root, g_veth_ns) ||
        sh("ip link set %s netns %s", g_veth_ns, g_ns) ||
        sh("ip addr add %s/24 dev %s", g_ip_root, g_veth_root) ||
        sh("ip link set %s up", g_veth_root) ||
        sh("ip netns exec %s ip addr add %s/24 dev %s", g_ns, g_ip_ns, g_veth_ns) ||
        sh("ip netns exec %s ip link set %s up", g_ns, g_veth_ns) ||
        sh("ip netns exec %s ip link set lo up", g_ns))
        return -1;
    return 0;
}

static int setup(void **state)
{
    (void)state;
    g_rc = net_up();
    if (g_rc != 0)
        return 0;
    snprintf(eu_extra_listen_host, sizeof(eu_extra_listen_host), "%s", g_ip_root);
    g_rc = eu_start(&g_etcd, 1, 20000);
    if (g_rc != 0)
        return 0;
    if (cu_cluster_init(&g_c, "mc-hap") != 0)
        g_rc = -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cu_stop(&g_ma, SIGKILL, 5000);
    cu_stop(&g_mb, SIGKILL, 5000);
    eu_stop(&g_etcd);
    cu_cluster_destroy(&g_c);
    net_down();
    return 0;
}

static void test_partition(void **state)
{
    (void)state;
    if (g_rc == 77)
        skip();
    assert_int_equal(g_rc, 0);
    char ep_ns[128], ep_root[300], url[300], a_http[64], b_http[64], rpcaddr[64];
    snprintf(ep_ns, sizeof(ep_ns), "--etcd_endpoints=%s:%d", g_ip_root, g_etcd.client_port[0]);
    snprintf(ep_root, sizeof(ep_root), "--etcd_endpoints=%s", g_etcd.endpoints);
    snprintf(rpcaddr, sizeof(rpcaddr), "--rpc_address=%s", g_ip_ns);

    /* A in the namespace: RPC and HTTP on its end of the pair */
    int root_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    assert_true(root_fd >= 0);
    assert_int_equal(enter_ns(g_ns), 0);
    const char *fa[] = {"--enable_ha", ep_ns, "--cluster_id=t_part", "--ha_lease_ttl_sec=2",
                        rpcaddr, "--metrics_host=0.0.0.0", "--protected_mode=false",
                        /* W reaches A through the pair but names its loopback segment */
                        "--check_segment_endpoint=false", NULL};
    int st = cu_start_master(&g_c, &g_ma, 0, fa, 10000);
    assert_int_equal(setns(root_fd, CLONE_NEWNET), 0);
    close(root_fd);
    assert_int_equal(st, 0);
    snprintf(a_http, sizeof(a_http), "%s:%s", g_ip_ns, strrchr(g_c.metrics, ':') + 1);
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    while (leads(a_http) != 1 && cu_now_ms() < deadline)
        cu_sleep_ms(20);
    assert_int_equal(leads(a_http), 1);

    /* B here, standing by */
    const char *fb[] = {"--enable_ha", ep_root, "--cluster_id=t_part", "--ha_lease_ttl_sec=2",
                        NULL};
    assert_int_equal(cu_start_master(&g_c, &g_mb, 0, fb, 10000), 0);
    snprintf(b_http, sizeof(b_http), "%s", g_c.metrics);
    deadline = cu_now_ms() + WAIT_MS;
    while (leads(b_http) != 0 && cu_now_ms() < deadline)
        cu_sleep_ms(20);
    assert_int_equal(leads(b_http), 0);

    /* a client that follows the leader through etcd, attached to A */
    snprintf(url, sizeof(url), "etcd://%s/t_part", g_etcd.endpoints);
    assert_true(strlen(url) < sizeof(g_c.rpc));
    memcpy(g_c.rpc, url, strlen(url) + 1);
    struct mc_client *w = NULL;
    assert_int_equal(cu_open_client(&g_c, 16u << 20, NULL, 0, 0, &w), 0);
    uint8_t *want = malloc(VLEN), *buf = malloc(VLEN);
    assert_non_null(want);
    assert_non_null(buf);
    value_of(1, want);
    assert_int_equal(cu_put_retry(w, "part-1", want, VLEN, NULL, WAIT_MS), 0);

    /* the partition: A loses etcd and its clients at once */
    assert_int_equal(sh("ip link set %s down", g_veth_root), 0);
    bool b_leads = false;
    deadline = cu_now_ms() + WAIT_MS;
    while (!b_leads && cu_now_ms() < deadline) {
        /* B first, then A: a B seen leading stays leader, so an A that still serves when asked
         * after that would be a second master acknowledging mutations (asking A first would
         * let a slow answer from A race B's election on a loaded machine) */
        int b = leads(b_http);
        int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(enter_ns(g_ns), 0);
        char a_lo[64];
        snprintf(a_lo, sizeof(a_lo), "127.0.0.1:%s", strrchr(a_http, ':') + 1);
        int a = serves(a_lo); /* A's view, from inside its namespace (its loopback works) */
        assert_int_equal(setns(fd, CLONE_NEWNET), 0);
        close(fd);
        if (b == 1) {
            b_leads = true;
            /* never two leaders: A no longer serves once B leads */
            assert_int_not_equal(a, 1);
        }
        cu_sleep_ms(20);
    }
    assert_true(b_leads);

    /* the client follows: a new Put lands on B and reads back exactly */
    value_of(2, want);
    assert_int_equal(cu_put_retry(w, "part-2", want, VLEN, NULL, WAIT_MS), 0);
    int64_t r = -1;
    deadline = cu_now_ms() + WAIT_MS;
    while ((r = cu_read(w, "part-2", buf, VLEN)) < 0 && cu_now_ms() < deadline)
        cu_sleep_ms(50);
    assert_int_equal(r, VLEN);
    assert_memory_equal(buf, want, VLEN);

    /* healed: A finds its lease gone and exits (3) instead of serving again */
    assert_int_equal(sh("ip link set %s up", g_veth_root), 0);
    deadline = cu_now_ms() + WAIT_MS;
    while (serves(a_http) != -1 && cu_now_ms() < deadline) {
        assert_int_not_equal(serves(a_http), 1); /* elected once, it never serves again */
        cu_sleep_ms(50);
    }
    /* A exits by itself (3) once it sees its lease gone; a moment of unreachability right after
     * the link comes back may end the loop above first, so wait for the exit itself */
    st = mc_proc_wait(&g_ma, WAIT_MS);
    if (st == MC_PROC_TIMEOUT)
        st = cu_stop(&g_ma, SIGKILL, 5000);
    assert_int_equal(st, 3);
    assert_int_equal(leads(b_http), 1);

    mc_client_close(w);
    free(want);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    if (failed == 0 && g_rc == 77)
        return 77;
    return failed;
}
