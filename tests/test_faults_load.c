/*
 * test_faults_load.c - processes killed under load (docs/testing.md): a mooncake_master,
 * two mooncake_client daemons A and B (the only DRAM), and an in-test client with no DRAM of
 * its own whose threads Put, Get and Remove self-describing values all the time (each value
 * names its key and generation and is regenerated on every Get, so a wrong byte cannot pass).
 *
 *   daemon_killed_under_load   B gets SIGKILL at a random moment of the load. Objects on A
 *                              put before (and never touched by the load) are all still there
 *                              with their bytes once B's segment is reaped; no Get ever
 *                              returned wrong bytes; Puts succeed again on A; the master ends
 *                              with no Put in flight.
 *   master_restart_under_load  the master gets SIGKILL at a random moment of the load and is
 *                              restarted on the same port: A re-mounts, the client reconnects,
 *                              Puts and Gets succeed again, no Get ever returned wrong bytes,
 *                              and no Put is left in flight. (A restarted master starts with no
 *                              objects: that is the design, not a loss this test looks for.)
 *
 * The random moments (and the load's choices) come from a seed, the clock's unless
 * MC_FAULT_SEED is set; it is printed, so a failing run can be repeated with the same draws. Every
 * process dies with the test; the temporary directory is removed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/master_conn.h"
#include "cluster_util.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "test_client_util.h"

#define VLEN (64u * 1024u)
#define NLOAD 256 /* keys the load works on */
#define NKEEP 16  /* keys on A the load never touches */
#define THREADS 3
#define WAIT_MS 20000

static struct {
    char dir[64];
    char daemon_bin[600];
    struct test_master m;
    uint16_t port;
    struct cu_proc a, b;
    char ep_a[128], ep_b[128];
    struct mc_client *c;
    unsigned seed; /* MC_FAULT_SEED, or the clock */
    unsigned rnd;  /* drawn from seed */
    _Atomic bool stop;
    _Atomic uint64_t puts_ok, gets_ok, removes, misses, errors, wrong;
} g;

/* ---- self-describing values --------------------------------------------------------------- */

static void make_value(uint8_t *v, uint32_t k, uint32_t gen)
{
    memcpy(v, &k, 4);
    memcpy(v + 4, &gen, 4);
    tm_fill(v + 8, VLEN - 8, k * 65599u + gen);
}

/* Whether v (n bytes) is a value make_value wrote for key k. */
static bool value_ok(const uint8_t *v, int64_t n, uint32_t k, uint8_t *scratch)
{
    uint32_t kk, gen;
    if (n != (int64_t)VLEN)
        return false;
    memcpy(&kk, v, 4);
    memcpy(&gen, v + 4, 4);
    if (kk != k)
        return false;
    make_value(scratch, k, gen);
    return memcmp(v, scratch, VLEN) == 0;
}

struct loader {
    pthread_t th;
    unsigned rnd;
};

static void *load_main(void *arg)
{
    struct loader *l = arg;
    uint8_t *v = malloc(VLEN), *got = malloc(VLEN), *scratch = malloc(VLEN);
    char key[32];
    uint32_t gen = 0;
    while (v && got && scratch && !atomic_load(&g.stop)) {
        uint32_t k = (uint32_t)rand_r(&l->rnd) % NLOAD;
        int op = rand_r(&l->rnd) % 10;
        snprintf(key, sizeof(key), "load-%u", k);
        if (op < 4) {
            make_value(v, k, ++gen);
            if (mc_put(g.c, key, v, VLEN, NULL) == 0)
                atomic_fetch_add(&g.puts_ok, 1);
            else
                atomic_fetch_add(&g.errors, 1);
        } else if (op < 9) {
            int64_t n = mc_get(g.c, key, got, VLEN);
            if (n >= 0) {
                if (value_ok(got, n, k, scratch))
                    atomic_fetch_add(&g.gets_ok, 1);
                else
                    atomic_fetch_add(&g.wrong, 1);
            } else if (n == MC_ERR_OBJECT_NOT_FOUND || n == MC_ERR_REPLICA_IS_NOT_READY) {
                atomic_fetch_add(&g.misses, 1);
            } else if (n == MC_ERR_CHECKSUM_MISMATCH) {
                atomic_fetch_add(&g.wrong, 1); /* wrong bytes arrived (caught by the CRC) */
            } else {
                atomic_fetch_add(&g.errors, 1);
            }
        } else {
            mc_remove(g.c, key, false);
            atomic_fetch_add(&g.removes, 1);
        }
    }
    free(v);
    free(got);
    free(scratch);
    return NULL;
}

static void load_start(struct loader *ls)
{
    atomic_store(&g.stop, false);
    for (int i = 0; i < THREADS; i++) {
        ls[i].rnd = (unsigned)rand_r(&g.rnd);
        assert_int_equal(pthread_create(&ls[i].th, NULL, load_main, &ls[i]), 0);
    }
}

static void load_stop(struct loader *ls)
{
    atomic_store(&g.stop, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(ls[i].th, NULL);
}

/* Waits until `field` grew by at least `by` (the load makes progress). */
static void wait_progress(_Atomic uint64_t *field, uint64_t by, const char *what)
{
    uint64_t start = atomic_load(field), deadline = mc_now_ms() + WAIT_MS;
    while (atomic_load(field) < start + by) {
        if (mc_now_ms() >= deadline)
            fail_msg("%s: no progress (puts %llu gets %llu errors %llu)", what,
                     (unsigned long long)atomic_load(&g.puts_ok),
                     (unsigned long long)atomic_load(&g.gets_ok),
                     (unsigned long long)atomic_load(&g.errors));
        cu_sleep_ms(10);
    }
}

/* ---- the cluster -------------------------------------------------------------------------- */

static struct mc_rpc_client *admin(void)
{
    struct mc_rpc_client_config rc;
    static char host[64];
    struct mc_rpc_client *c = NULL;
    mc_rpc_client_config_init(&rc);
    assert_int_equal(mc_rpc_parse_endpoint(g.m.addr, host, sizeof(host), &rc), 0);
    rc.call_timeout_ms = 3000;
    rc.reconnect_min_ms = 1;
    rc.reconnect_max_ms = 50;
    assert_int_equal(mc_rpc_client_new(&rc, &c), 0);
    return c;
}

/* The master's segment count and Puts in flight; -1 when it cannot be asked. */
static int master_state(uint64_t *segments, uint64_t *processing)
{
    struct mc_rpc_client *c = admin();
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_GET_STATS, NULL,
                                    &mc__get_stats_response__descriptor, 0, &m);
    if (rc == 0) {
        Mc__GetStatsResponse *r = (Mc__GetStatsResponse *)m;
        *segments = r->segment_count;
        *processing = UINT64_MAX;
        for (size_t i = 0; i < r->n_extra; i++)
            if (strcmp(r->extra[i]->name, "master_processing_key_count") == 0)
                *processing = (uint64_t)r->extra[i]->value;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    mc_rpc_client_free(c);
    return rc ? -1 : 0;
}

/* Until the master has `segments` segments and (idle: once the load stopped) no Put in
 * flight. */
static void wait_master(uint64_t segments, bool idle, const char *what)
{
    uint64_t deadline = mc_now_ms() + WAIT_MS, segs = 0, proc = 0;
    for (;;) {
        if (master_state(&segs, &proc) == 0 && segs == segments && (!idle || proc == 0))
            return;
        if (mc_now_ms() >= deadline)
            fail_msg("%s: master has %llu segments (want %llu), %llu puts in flight", what,
                     (unsigned long long)segs, (unsigned long long)segments,
                     (unsigned long long)proc);
        cu_sleep_ms(50);
    }
}

static int spawn_daemon(struct cu_proc *p, const char *name, char *ep, size_t cap)
{
    char master[96], log[128];
    snprintf(master, sizeof(master), "--master=%s", g.m.addr);
    snprintf(log, sizeof(log), "%s/%s.log", g.dir, name);
    const char *argv[] = {g.daemon_bin,       master, "--host=127.0.0.1", "--segment_size=64MiB",
                          "--log_level=warn", NULL};
    p->out_fd = -1;
    if (cu_spawn(p, argv, log) != 0)
        return -1;
    struct mc_proc_ready r;
    if (cu_await_ready(p, MC_PROC_READY_DAEMON, &r, name, WAIT_MS) != 0)
        return -1;
    size_t n = strlen(r.endpoint);
    if (n >= cap)
        return -1;
    memcpy(ep, r.endpoint, n + 1);
    return 0;
}

static const char *const MASTER_FLAGS[] = {"--client_ttl=3s", "--default_kv_lease_ttl=200",
                                           "--put_start_discard_timeout_sec=300ms",
                                           "--put_start_release_timeout_sec=600ms", NULL};

/* A random moment of the load, 150..650 ms from now. */
static int random_ms(void)
{
    return 150 + (int)(rand_r(&g.rnd) % 500);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_daemon_killed_under_load(void **state)
{
    (void)state;
    uint8_t *v = malloc(VLEN), *got = malloc(VLEN), *scratch = malloc(VLEN);
    assert_non_null(v);
    assert_non_null(got);
    assert_non_null(scratch);
    char key[32];
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *on_a[1] = {g.ep_a};
    rc.preferred_segments = on_a;
    rc.preferred_segments_count = 1;
    for (uint32_t i = 0; i < NKEEP; i++) {
        snprintf(key, sizeof(key), "keep-%u", i);
        make_value(v, 1000000 + i, 1);
        assert_int_equal(mc_put(g.c, key, v, VLEN, &rc), 0);
    }

    struct loader ls[THREADS];
    load_start(ls);
    wait_progress(&g.puts_ok, 20, "before the kill");
    int at = random_ms();
    print_message("kill -9 of daemon B %d ms into the load\n", at);
    cu_sleep_ms(at);
    assert_int_equal(cu_stop(&g.b, SIGKILL, 5000), 128 + SIGKILL);
    /* the load goes on while the master still lists B, then after B is reaped */
    wait_master(1, false, "B reaped under load");
    wait_progress(&g.puts_ok, 20, "after B was reaped");
    wait_progress(&g.gets_ok, 20, "after B was reaped");
    load_stop(ls);
    print_message("puts %llu gets %llu misses %llu removes %llu errors %llu wrong %llu\n",
                  (unsigned long long)g.puts_ok, (unsigned long long)g.gets_ok,
                  (unsigned long long)g.misses, (unsigned long long)g.removes,
                  (unsigned long long)g.errors, (unsigned long long)g.wrong);
    assert_int_equal(atomic_load(&g.wrong), 0);
    wait_master(1, true, "after the load");
    /* nothing complete on the survivor was lost */
    for (uint32_t i = 0; i < NKEEP; i++) {
        snprintf(key, sizeof(key), "keep-%u", i);
        int64_t n = mc_get(g.c, key, got, VLEN);
        if (!value_ok(got, n, 1000000 + i, scratch))
            fail_msg("%s on the surviving daemon: get %lld", key, (long long)n);
    }
    free(v);
    free(got);
    free(scratch);
}

static void test_master_restart_under_load(void **state)
{
    (void)state;
    struct loader ls[THREADS];
    load_start(ls);
    wait_progress(&g.puts_ok, 20, "before the restart");
    int at = random_ms();
    print_message("kill -9 of the master %d ms into the load\n", at);
    cu_sleep_ms(at);
    tm_kill(&g.m);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    while (tm_start(&g.m, g.port, MASTER_FLAGS) != 0) {
        if (mc_now_ms() >= deadline)
            fail_msg("the master did not restart on port %u", g.port);
        cu_sleep_ms(100);
    }
    /* A re-mounts by itself; the load's client reconnects and goes on */
    wait_master(1, false, "A re-mounted under load");
    wait_progress(&g.puts_ok, 20, "after the restart");
    wait_progress(&g.gets_ok, 20, "after the restart");
    load_stop(ls);
    print_message("puts %llu gets %llu misses %llu removes %llu errors %llu wrong %llu\n",
                  (unsigned long long)g.puts_ok, (unsigned long long)g.gets_ok,
                  (unsigned long long)g.misses, (unsigned long long)g.removes,
                  (unsigned long long)g.errors, (unsigned long long)g.wrong);
    assert_int_equal(atomic_load(&g.wrong), 0);
    wait_master(1, true, "after the load");
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    const char *bin = getenv("MC_BIN_DIR");
    const char *seed = getenv("MC_FAULT_SEED");
    memset(&g, 0, sizeof(g));
    g.a.out_fd = g.b.out_fd = g.m.out_fd = -1;
    g.seed = seed ? (unsigned)strtoul(seed, NULL, 0) : (unsigned)time(NULL);
    g.rnd = g.seed;
    print_message("MC_FAULT_SEED=%u\n", g.seed);
    if (!bin)
        return -1;
    snprintf(g.daemon_bin, sizeof(g.daemon_bin), "%s/mooncake_client", bin);
    snprintf(g.dir, sizeof(g.dir), "/tmp/mc_faults_load.XXXXXX");
    if (!mkdtemp(g.dir))
        return -1;
    if (tm_start(&g.m, 0, MASTER_FLAGS) != 0)
        return -1;
    g.port = g.m.port;
    if (spawn_daemon(&g.a, "daemon_a", g.ep_a, sizeof(g.ep_a)) ||
        spawn_daemon(&g.b, "daemon_b", g.ep_b, sizeof(g.ep_b)))
        return -1;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.m.addr;
    cfg.segment_size = 0;
    cfg.ping_interval_ms = 100;
    cfg.rpc_timeout_ms = 2000;
    cfg.connect_timeout_ms = 1000;
    cfg.log_level = MC_CLIENT_LOG_OFF; /* failures under faults are expected and counted */
    return mc_client_open(&cfg, &g.c);
}

static int group_teardown(void **state)
{
    (void)state;
    mc_client_close(g.c);
    cu_stop(&g.a, SIGTERM, 10000);
    cu_stop(&g.b, SIGTERM, 10000);
    tm_stop(&g.m);
    if (g.dir[0])
        cu_rm_rf(g.dir);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemon_killed_under_load),
        cmocka_unit_test(test_master_restart_under_load),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
