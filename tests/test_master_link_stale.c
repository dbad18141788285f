/*
 * test_master_link_stale.c - the client's master link under a late failure report
 * (src/client/master_conn.c), against a real mooncake_master.
 *
 * On a loaded machine a thread whose call failed on a dropped connection may report the failure
 * only after the connection has been dialled again. That report must not take the link down: it
 * would cut the fresh connection and fail every call in flight on it (the holder's heartbeat
 * carrying delete acks, a re-registration chunk), whose callers report in turn. The test holds
 * the failing call's report (master_conn's test hook) while another call reconnects, then lets
 * it go: the link stays up and is not dialled again.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static struct {
    struct test_master m;
    struct mc_client *c;
    struct mc_master_conn *mc;
} g;

static int stats_call(void)
{
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(g.mc, MC_METHOD_GET_STATS, NULL,
                                 &mc__get_stats_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

static void *failing_call(void *arg)
{
    *(int *)arg = stats_call();
    return NULL;
}

static struct mc_master_conn_stats link_stats(void)
{
    struct mc_master_conn_stats s;
    mc_master_conn_get_stats(g.mc, &s);
    return s;
}

/* Until the link is up, at most 10 s. */
static void wait_up(void)
{
    uint64_t deadline = mc_now_ms() + 10000;
    while (!link_stats().up && mc_now_ms() < deadline)
        cu_sleep_ms(10);
    assert_true(link_stats().up);
}

static void test_late_report_of_replaced_connection(void **state)
{
    (void)state;
    wait_up();
    assert_int_equal(stats_call(), 0);
    mc_master_conn_test_hold_reports(true);
    mc_rpc_test_drop_next(MC_METHOD_GET_STATS, MC_RPC_TEST_DROP_BEFORE_SEND);
    int rc = 12345;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, failing_call, &rc), 0);
    uint64_t deadline = mc_now_ms() + 10000;
    while (mc_master_conn_test_reports_held() == 0 && mc_now_ms() < deadline)
        cu_sleep_ms(5);
    assert_int_equal(mc_master_conn_test_reports_held(), 1);
    /* the connection is gone, the link not yet down: the next call dials again */
    deadline = mc_now_ms() + 10000;
    int ok;
    while ((ok = stats_call()) != 0 && mc_now_ms() < deadline)
        cu_sleep_ms(20);
    assert_int_equal(ok, 0);
    struct mc_master_conn_stats s0 = link_stats();
    assert_true(s0.up);
    mc_master_conn_test_hold_reports(false); /* the late report */
    pthread_join(th, NULL);
    assert_int_equal(rc, MC_ERR_RPC_FAIL);
    /* ten ping intervals: the fresh connection was neither cut nor dialled again */
    for (int i = 0; i < 20; i++) {
        struct mc_master_conn_stats s = link_stats();
        if (!s.up || s.reconnects != s0.reconnects)
            fail_msg("a late failure report of a replaced connection took the link down (up %d, "
                     "reconnects %llu -> %llu)",
                     s.up, (unsigned long long)s0.reconnects, (unsigned long long)s.reconnects);
        cu_sleep_ms(50);
    }
    assert_int_equal(stats_call(), 0);
}

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    if (tm_start(&g.m, 0, NULL) != 0)
        return -1;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.m.addr;
    cfg.segment_size = 0;
    cfg.ping_interval_ms = 50;
    cfg.rpc_timeout_ms = 3000;
    cfg.log_level = MC_CLIENT_LOG_ERROR;
    if (mc_client_open(&cfg, &g.c) != 0)
        return -1;
    g.mc = mc_client_master_conn(g.c);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_master_conn_test_hold_reports(false);
    mc_rpc_test_drop_reset();
    mc_client_close(g.c);
    tm_stop(&g.m);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_ERROR); /* the hook's and the reconnects' warnings are expected */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_report_of_replaced_connection),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
