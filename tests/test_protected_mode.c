/*
 * test_protected_mode.c - protected mode (README "Security"): a master and a client daemon that
 * have no auth token serve loopback peers only, and refuse any other address with
 * PROTECTED_MODE and a hint that says how to set a token; --protected_mode=false opts out.
 *
 * A non-loopback address needs a network of our own: the test moves itself into a new network
 * namespace (unshare(CLONE_NEWNET), so it needs root; without it the test is skipped with exit
 * code 77), brings its `lo` up and adds 10.254.254.1/32 to it. A connection to 10.254.254.1
 * then comes from 10.254.254.1, which is not 127/8. Nothing leaves the namespace, and it goes
 * away with the test's processes.
 *
 *   master_refuses   cli via 10.254.254.1 exits 3 with PROTECTED_MODE and the hint on stderr;
 *                    via 127.0.0.1 the same command is served; the refusal is counted and
 *                    logged with the peer address
 *   peer_refuses     the daemon's peer port (bound to 0.0.0.0) answers a read from
 *                    10.254.254.1 with PROTECTED_MODE and serves the same read from 127.0.0.1
 *   opt_out          a master started with --protected_mode=false serves 10.254.254.1 and
 *                    says so in a warning
 *   conns_per_addr   --max_conns_per_addr=2: a third connection from 10.254.254.1 is closed,
 *                    loopback is exempt, a closed connection gives its slot back
 *   peer_conn_limits mooncake_client --max_conns_per_addr=1: a second peer connection from
 *                    10.254.254.1 is closed, loopback is exempt; --idle_timeout=300ms closes
 *                    an idle peer connection, while --idle_timeout=0 keeps it
 *   loopback_host_remote_master_warns
 *                    mooncake_client with a loopback --host (the default) and a master at
 *                    10.254.254.1 warns that remote peers cannot reach it; not otherwise
 */
#include <sched.h>
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

#include <cmocka.h>

#include "client/transport.h"
#include "cluster_util.h"
#include "common/log.h"
#include "common/wire.h"
#include "mooncake/errors.h"

#define START_MS 20000
#define CLI_MS 30000
#define REMOTE "10.254.254.1"

static struct {
    char dir[64];
    char master_bin[600], daemon_bin[600], cli_bin[600];
} g;

struct master {
    struct cu_proc p;
    int rpc_port;
    char metrics[96];
};

static int start_master2(struct master *m, const char *name, const char *extra, const char *extra2)
{
    char log[128];
    const char *argv[] = {g.master_bin,
                          "--rpc_port=0",
                          "--rpc_address=0.0.0.0",
                          "--metrics_port=0",
                          "--metrics_host=127.0.0.1",
                          "--log_level=info",
                          extra,
                          extra2,
                          NULL};
    memset(m, 0, sizeof(*m));
    m->p.out_fd = -1;
    snprintf(log, sizeof(log), "%s/%s.log", g.dir, name);
    if (cu_spawn(&m->p, argv, log) != 0)
        return -1;
    struct mc_proc_ready r;
    if (cu_await_ready(&m->p, MC_PROC_READY_MASTER, &r, name, START_MS) != 0)
        return -1;
    m->rpc_port = r.rpc_port;
    snprintf(m->metrics, sizeof(m->metrics), "%s:%u", r.metrics_host, r.metrics_port);
    return 0;
}

static int start_master(struct master *m, const char *name, const char *extra)
{
    return start_master2(m, name, extra, NULL);
}

static void cli(struct cu_run *r, const char *host, int port, ...)
{
    const char *argv[16];
    char master[128];
    int n = 0;
    snprintf(master, sizeof(master), "--master=%s:%d", host, port);
    argv[n++] = g.cli_bin;
    argv[n++] = master;
    va_list ap;
    va_start(ap, port);
    for (const char *a = va_arg(ap, const char *); a && n < 15; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cu_run(r, g.dir, argv, NULL, CLI_MS);
}

static uint64_t metric(const struct master *m, const char *name)
{
    struct cu_run r;
    char opt[128];
    snprintf(opt, sizeof(opt), "--metrics=%s", m->metrics);
    cli(&r, "127.0.0.1", m->rpc_port, "metrics", opt, NULL);
    assert_int_equal(r.status, 0);
    double v = 0;
    assert_int_equal(mc_metrics_find(r.out, name, &v), 0);
    cu_run_free(&r);
    return (uint64_t)v;
}

static void test_master_refuses(void **state)
{
    (void)state;
    struct master m;
    assert_int_equal(start_master(&m, "master", "--protected_mode=true"), 0);
    struct cu_run r;
    cli(&r, REMOTE, m.rpc_port, "exist", "k", NULL);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "PROTECTED_MODE"));
    assert_non_null(strstr(r.err, "--auth_token_file")); /* the hint */
    cu_run_free(&r);
    cli(&r, REMOTE, m.rpc_port, "segments", NULL);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "PROTECTED_MODE"));
    cu_run_free(&r);
    /* loopback is served: an absent key is exit 1, not an error */
    cli(&r, "127.0.0.1", m.rpc_port, "exist", "k", NULL);
    assert_int_equal(r.status, 1);
    cu_run_free(&r);
    assert_true(metric(&m, "master_rpc_protected_mode_refusals_total") >= 2);
    assert_int_equal(metric(&m, "master_rpc_auth_failures_total"), 0);
    char *log = cu_slurp(m.p.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "peer=" REMOTE ":"));
    free(log);
    assert_int_equal(cu_stop(&m.p, SIGTERM, 10000), 0);
}

static void test_peer_refuses(void **state)
{
    (void)state;
    struct master m;
    assert_int_equal(start_master(&m, "master2", "--protected_mode=true"), 0);
    char master[64], log[128];
    snprintf(master, sizeof(master), "--master=127.0.0.1:%d", m.rpc_port);
    snprintf(log, sizeof(log), "%s/daemon.log", g.dir);
    const char *argv[] = {g.daemon_bin,       master,
                          "--host=127.0.0.1", "--bind_address=0.0.0.0",
                          "--data_port=0",    "--segment_size=16MiB",
                          "--log_level=info", NULL};
    struct cu_proc d = {.out_fd = -1};
    assert_int_equal(cu_spawn(&d, argv, log), 0);
    struct mc_proc_ready ready;
    assert_int_equal(cu_await_ready(&d, MC_PROC_READY_DAEMON, &ready, "daemon", START_MS), 0);
    int port = ready.endpoint_port;

    struct mc_transport *t = NULL;
    assert_int_equal(mc_transport_tcp_new(NULL, &t), 0);
    char ep[64];
    uint8_t buf[64];
    struct mc_xfer_loc loc = {.segment_id = {1, 2}, .offset = 0, .endpoint = ep};
    snprintf(ep, sizeof(ep), REMOTE ":%d", port);
    assert_int_equal(mc_transport_read(t, &loc, buf, sizeof(buf)), MC_ERR_PROTECTED_MODE);
    assert_int_equal(mc_transport_write(t, &loc, buf, sizeof(buf)), MC_ERR_PROTECTED_MODE);
    /* from loopback the request reaches the segment checks (no such segment) */
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
    assert_int_equal(mc_transport_read(t, &loc, buf, sizeof(buf)), MC_ERR_SEGMENT_NOT_FOUND);
    mc_transport_free(t);
    char *dl = cu_slurp(d.log, NULL);
    assert_non_null(dl);
    assert_non_null(strstr(dl, "protected mode"));
    assert_non_null(strstr(dl, "peer=" REMOTE ":"));
    free(dl);
    assert_int_equal(cu_stop(&d, SIGTERM, 10000), 0);
    assert_int_equal(cu_stop(&m.p, SIGTERM, 10000), 0);
}

static void test_opt_out(void **state)
{
    (void)state;
    struct master m;
    assert_int_equal(start_master(&m, "master3", "--protected_mode=false"), 0);
    struct cu_run r;
    cli(&r, REMOTE, m.rpc_port, "exist", "k", NULL);
    assert_int_equal(r.status, 1);
    cu_run_free(&r);
    assert_int_equal(metric(&m, "master_rpc_protected_mode_refusals_total"), 0);
    char *log = cu_slurp(m.p.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "protected mode is off"));
    free(log);
    assert_int_equal(cu_stop(&m.p, SIGTERM, 10000), 0);
}

/* A raw connection to host:port that sends an Echo; true when it is answered, false when the
 * server closed the connection instead. */
static bool echo_ok(int fd)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, MC_METHOD_ECHO, 1, 0, 0);
    mc_wire_encode_header(&h, hb);
    if (send(fd, hb, sizeof(hb), MSG_NOSIGNAL) != (ssize_t)sizeof(hb))
        return false;
    size_t got = 0;
    uint64_t deadline = cu_now_ms() + 5000;
    while (got < sizeof(hb) && cu_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, hb + got, sizeof(hb) - got, 0);
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return got == sizeof(hb);
}

static int dial(const char *host, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* --max_conns_per_addr: the third connection from 10.254.254.1 is closed at once, the first two
 * are served; loopback is exempt; a slot comes back when a connection closes. */
static void test_conns_per_addr(void **state)
{
    (void)state;
    struct master m;
    assert_int_equal(
        start_master2(&m, "master4", "--protected_mode=false", "--max_conns_per_addr=2"), 0);
    int a = dial(REMOTE, m.rpc_port), b = dial(REMOTE, m.rpc_port);
    assert_true(echo_ok(a));
    assert_true(echo_ok(b));
    int c = dial(REMOTE, m.rpc_port);
    assert_false(echo_ok(c));
    close(c);
    int lo[5];
    for (int i = 0; i < 5; i++) {
        lo[i] = dial("127.0.0.1", m.rpc_port);
        assert_true(echo_ok(lo[i]));
    }
    close(a);
    /* a's slot comes back once the master saw it close */
    bool served = false;
    for (uint64_t deadline = cu_now_ms() + 5000; !served && cu_now_ms() < deadline;) {
        c = dial(REMOTE, m.rpc_port);
        served = echo_ok(c);
        close(c);
    }
    assert_true(served);
    close(b);
    for (int i = 0; i < 5; i++)
        close(lo[i]);
    char *log = cu_slurp(m.p.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "too many connections from one address"));
    free(log);
    assert_int_equal(cu_stop(&m.p, SIGTERM, 10000), 0);
}

/* Starts mooncake_client (peer port on 0.0.0.0, protected mode off so 10.254.254.1 is served)
 * with two extra flags; returns its peer port or -1. */
static int start_daemon(struct cu_proc *d, int master_port, const char *name, const char *extra,
                        const char *extra2)
{
    char master[64], log[128];
    snprintf(master, sizeof(master), "--master=127.0.0.1:%d", master_port);
    snprintf(log, sizeof(log), "%s/%s.log", g.dir, name);
    const char *argv[] = {g.daemon_bin,
                          master,
                          "--host=127.0.0.1",
                          "--bind_address=0.0.0.0",
                          "--segment_size=16MiB",
                          "--protected_mode=false",
                          "--log_level=info",
                          extra,
                          extra2,
                          NULL};
    memset(d, 0, sizeof(*d));
    d->out_fd = -1;
    if (cu_spawn(d, argv, log) != 0)
        return -1;
    struct mc_proc_ready r;
    if (cu_await_ready(d, MC_PROC_READY_DAEMON, &r, name, START_MS) != 0)
        return -1;
    return r.endpoint_port;
}

/* true when the server closed fd (EOF or reset) within ms */
static bool closed_within(int fd, uint64_t ms)
{
    uint64_t deadline = cu_now_ms() + ms;
    while (cu_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        uint8_t b;
        if (recv(fd, &b, 1, 0) <= 0)
            return true;
    }
    return false;
}

/* mooncake_client's --max_conns_per_addr and --idle_timeout reach its peer server: over a cap
 * of 1 the second connection from 10.254.254.1 is closed at once (loopback exempt); an idle
 * peer connection is closed after --idle_timeout, and never with --idle_timeout=0. */
static void test_peer_conn_limits(void **state)
{
    (void)state;
    struct master m;
    struct cu_proc d, d0;
    assert_int_equal(start_master(&m, "master5", "--protected_mode=true"), 0);
    int port =
        start_daemon(&d, m.rpc_port, "daemon5", "--max_conns_per_addr=1", "--idle_timeout=300ms");
    assert_true(port > 0);
    int a = dial(REMOTE, port);
    assert_true(echo_ok(a));
    int b = dial(REMOTE, port);
    assert_false(echo_ok(b));
    close(b);
    int lo1 = dial("127.0.0.1", port), lo2 = dial("127.0.0.1", port);
    assert_true(echo_ok(lo1));
    assert_true(echo_ok(lo2));
    /* idle: every one of them is closed by the daemon well within a few seconds */
    assert_true(closed_within(a, 5000));
    assert_true(closed_within(lo1, 5000));
    assert_true(closed_within(lo2, 5000));
    close(a);
    close(lo1);
    close(lo2);
    char *dl = cu_slurp(d.log, NULL);
    assert_non_null(dl);
    assert_non_null(strstr(dl, "too many connections from one address"));
    free(dl);
    assert_int_equal(cu_stop(&d, SIGTERM, 10000), 0);

    /* --idle_timeout=0: never closed for idleness; no cap with --max_conns_per_addr=0 */
    port = start_daemon(&d0, m.rpc_port, "daemon6", "--idle_timeout=0", "--max_conns_per_addr=0");
    assert_true(port > 0);
    int r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = dial(REMOTE, port);
        assert_true(echo_ok(r[i]));
    }
    assert_false(closed_within(r[0], 1500));
    assert_true(echo_ok(r[0]));
    for (int i = 0; i < 3; i++)
        close(r[i]);
    assert_int_equal(cu_stop(&d0, SIGTERM, 10000), 0);
    assert_int_equal(cu_stop(&m.p, SIGTERM, 10000), 0);

    /* bad values are refused like the master's: usage error, exit 2 */
    const char *bad[] = {g.daemon_bin, "--idle_timeout=-1", NULL};
    struct cu_run br;
    cu_run(&br, g.dir, bad, NULL, CLI_MS);
    assert_int_equal(br.status, 2);
    cu_run_free(&br);
}

/* mooncake_client with its default --host (127.0.0.1) and a master on another host warns that
 * peers elsewhere cannot reach its segment; with a loopback master, or a --host that is not
 * loopback, it does not. (The master is not there: --master_wait ends each run quickly.) */
static void test_loopback_host_remote_master_warns(void **state)
{
    (void)state;
    const char *warning = "--host is a loopback address but the master is remote";
    struct {
        const char *master, *host;
        bool warns;
    } cases[] = {
        {"--master=" REMOTE ":1", NULL, true},
        {"--master=127.0.0.1:1", NULL, false},
        {"--master=" REMOTE ":1", "--host=" REMOTE, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *argv[] = {g.daemon_bin,
                              cases[i].master,
                              "--master_wait=200ms",
                              "--segment_size=1MiB",
                              "--log_level=warn",
                              cases[i].host,
                              NULL};
        struct cu_run r;
        cu_run(&r, g.dir, argv, NULL, CLI_MS);
        assert_int_equal(r.status, 1); /* no master within --master_wait */
        if (cases[i].warns) {
            assert_non_null(strstr(r.err, warning));
        } else {
            assert_null(strstr(r.err, warning));
        }
        cu_run_free(&r);
    }
}

static int group_setup(void **state)
{
    (void)state;
    const char *bin = getenv("MC_BIN_DIR");
    if (!bin)
        return -1;
    snprintf(g.master_bin, sizeof(g.master_bin), "%s/mooncake_master", bin);
    snprintf(g.daemon_bin, sizeof(g.daemon_bin), "%s/mooncake_client", bin);
    snprintf(g.cli_bin, sizeof(g.cli_bin), "%s/mooncake_cli", bin);
    snprintf(g.dir, sizeof(g.dir), "/tmp/mc_protected.XXXXXX");
    return mkdtemp(g.dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (g.dir[0])
        cu_rm_rf(g.dir);
    return 0;
}

int main(void)
{
    mc_log_set_level(MC_LOG_OFF);
    /* a network of our own: loopback up, plus an address that is not 127/8 */
    if (unshare(CLONE_NEWNET) != 0) {
        fprintf(stderr, "SKIP: cannot create a network namespace (needs root)\n");
        return 77;
    }
    if (system("ip link set lo up && ip addr add " REMOTE "/32 dev lo") != 0) {
        fprintf(stderr, "SKIP: cannot configure the namespace's lo (is iproute2 installed?)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_refuses),
        cmocka_unit_test(test_peer_refuses),
        cmocka_unit_test(test_opt_out),
        cmocka_unit_test(test_conns_per_addr),
        cmocka_unit_test(test_peer_conn_limits),
        cmocka_unit_test(test_loopback_host_remote_master_warns),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
