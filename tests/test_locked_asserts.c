/*
 * test_locked_asserts.c - the `_locked` functions of the RPC client, the fanout pool and the
 * master's Upsert table assert their lock (MC_ASSERT on the lock-order checker's record), and
 * those locks sit where common/lock_order.h puts them (with the client's buffer list and the
 * RDMA context's memory-region table).
 *
 * Each `_locked` function is called without its lock in a forked child (tests/abort_fixture.h),
 * which must abort naming the function; the same calls with the lock held must not (the control
 * that shows the abort is the assertion's). The static ones are reached through white-box copies
 * of their sources (locked_wb_*.c). Wrong orders among the new levels abort naming both locks,
 * the documented order passes, and real calls (a refused connect, a refused call, a fanout)
 * return holding nothing.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "abort_fixture.h"
#include "common/fanout.h"
#include "common/lock_order.h"
#include "common/rpc_client.h"
#include "locked_wb.h"
#include "mooncake/errors.h"

#ifndef MC_LOCK_ORDER_CHECK
#error "test builds define MC_LOCK_ORDER_CHECK (top CMakeLists.txt)"
#endif

/* A bound, not listening socket: connects to its port are refused while it stays open. */
static int closed_fd = -1;

static int closed_port_setup(void **state)
{
    (void)state;
    closed_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (closed_fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (bind(closed_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(closed_fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    wb_closed_port = ntohs(a.sin_port);
    return 0;
}

static int closed_port_teardown(void **state)
{
    (void)state;
    close(closed_fd);
    closed_fd = -1;
    return 0;
}

static void test_locked_functions_assert_their_lock(void **state)
{
    (void)state;
    const char *inv = "invariant failed";
    af_expect_abort(wb_fanout_claim_unlocked, "claim_locked", inv, NULL);
    af_expect_abort(wb_fanout_unqueue_unlocked, "unqueue_locked", inv, NULL);
    af_expect_abort(wb_fanout_find_helpers_unlocked, "find_helpers_locked", inv, NULL);
    af_expect_clean(wb_fanout_all_locked);

    af_expect_abort(wb_rpc_conn_broken_unlocked, "mc_rpcc_conn_broken_locked", inv, NULL);
    af_expect_abort(wb_rpc_check_idle_unlocked, "check_idle_locked", inv, NULL);
    af_expect_abort(wb_rpc_lead_timeout_unlocked, "lead_timeout_locked", inv, NULL);
    af_expect_abort(wb_rpc_reconnect_without_connect_lock, "reconnect_serialized", inv, NULL);
    af_expect_clean(wb_rpc_all_locked);

    af_expect_abort(wb_upsert_take_unlocked, "take_locked", inv, NULL);
    af_expect_clean(wb_upsert_take_locked);
}

static void send_under_lock(void)
{
    mc_lo_acquire(MC_LO_RPC, 0);
    mc_lo_acquire(MC_LO_RPC_SEND, 0);
}
static void connect_under_send(void)
{
    mc_lo_acquire(MC_LO_RPC_SEND, 3);
    mc_lo_acquire(MC_LO_RPC_CONNECT, 3);
}
static void two_clients(void)
{
    mc_lo_acquire(MC_LO_RPC, 1);
    mc_lo_acquire(MC_LO_RPC, 2);
}
static void link_under_rpc(void)
{
    mc_lo_acquire(MC_LO_RPC_CONNECT, 0);
    mc_lo_acquire(MC_LO_MASTER_LINK, 0);
}
static void rpc_under_fanout(void)
{
    mc_lo_acquire(MC_LO_FANOUT, 0);
    mc_lo_acquire(MC_LO_RPC, 0);
}
static void bufs_under_rdma_mr(void)
{
    mc_lo_acquire(MC_LO_RDMA_MR, 0);
    mc_lo_acquire(MC_LO_CLIENT_BUFS, 0);
}
static void bufs_under_rpc(void)
{
    mc_lo_acquire(MC_LO_RPC, 0);
    mc_lo_acquire(MC_LO_CLIENT_BUFS, 0);
}
/* The rdma transport's leaves: nothing under one, the region table included. */
static void mr_under_rdma_leaf(void)
{
    mc_lo_acquire(MC_LO_RDMA_LEAF, 0);
    mc_lo_acquire(MC_LO_RDMA_MR, 0);
}
static void two_rdma_leaves(void)
{
    mc_lo_acquire(MC_LO_RDMA_LEAF, 0);
    mc_lo_acquire(MC_LO_RDMA_LEAF, 0);
}
static void upserts_under_leaf(void)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    mc_lo_acquire(MC_LO_LEAF, MC_LO_LEAF_UPSERTS);
}
/* A caller holding its own locks (a shard, the master link) calls: connect, send, lock. */
static void legal_order(void)
{
    mc_lo_acquire(MC_LO_SHARD, 4);
    mc_lo_acquire(MC_LO_MASTER_LINK, 0);
    mc_lo_acquire(MC_LO_RPC_CONNECT, 9);
    mc_lo_acquire(MC_LO_RPC_SEND, 9);
    mc_lo_acquire(MC_LO_RPC, 9);
    if (!mc_lo_holds(MC_LO_RPC, 9, false) || mc_lo_holds(MC_LO_RPC, 8, false))
        _exit(4);
    mc_lo_release(MC_LO_RPC, 9);
    mc_lo_release(MC_LO_RPC_SEND, 9);
    mc_lo_release(MC_LO_RPC_CONNECT, 9);
    mc_lo_release(MC_LO_MASTER_LINK, 0);
    mc_lo_acquire(MC_LO_FANOUT, 0);
    mc_lo_release(MC_LO_FANOUT, 0);
    mc_lo_release(MC_LO_SHARD, 4);
    mc_lo_acquire(MC_LO_LEAF, MC_LO_LEAF_UPSERTS);
    mc_lo_release(MC_LO_LEAF, MC_LO_LEAF_UPSERTS);
    /* registering a buffer: the client's list, then the RDMA context's regions */
    mc_lo_acquire(MC_LO_CLIENT_BUFS, 0);
    mc_lo_acquire(MC_LO_RDMA_MR, 2);
    mc_lo_release(MC_LO_RDMA_MR, 2);
    mc_lo_release(MC_LO_CLIENT_BUFS, 0);
    /* the data path looks keys up under whatever it holds */
    mc_lo_acquire(MC_LO_PEER_SEGS, 0);
    mc_lo_acquire(MC_LO_RPC, 1);
    mc_lo_acquire(MC_LO_FANOUT, 0);
    mc_lo_acquire(MC_LO_RDMA_MR, 2);
    mc_lo_release(MC_LO_PEER_SEGS, 0);
    mc_lo_release(MC_LO_RPC, 1);
    mc_lo_release(MC_LO_FANOUT, 0);
    mc_lo_release(MC_LO_RDMA_MR, 2);
    mc_lo_acquire(MC_LO_DISK_STORE, 0); /* a disk push's staging slot under the store */
    mc_lo_acquire(MC_LO_RDMA_LEAF, 0);
    mc_lo_release(MC_LO_RDMA_LEAF, 0);
    mc_lo_release(MC_LO_DISK_STORE, 0);
    if (mc_lo_depth() != 0)
        _exit(3);
}

static void test_order_of_the_new_levels(void **state)
{
    (void)state;
    const char *v = "lock order violation";
    af_expect_abort(send_under_lock, v, "acquiring rpc client send[0]", "holding rpc client[0]");
    af_expect_abort(connect_under_send, v, "acquiring rpc client connect[3]",
                    "holding rpc client send[3]");
    af_expect_abort(two_clients, v, "acquiring rpc client[2]", "holding rpc client[1]");
    af_expect_abort(link_under_rpc, v, "acquiring master link[0]", "holding rpc client connect[0]");
    af_expect_abort(rpc_under_fanout, v, "acquiring rpc client[0]", "holding fanout pool[0]");
    af_expect_abort(upserts_under_leaf, v, "acquiring leaf lock[1]", "holding leaf lock[0]");
    af_expect_abort(bufs_under_rdma_mr, v, "acquiring client buffer list[0]",
                    "holding rdma memory regions[0]");
    af_expect_abort(bufs_under_rpc, v, "acquiring client buffer list[0]", "holding rpc client[0]");
    af_expect_abort(mr_under_rdma_leaf, v, "acquiring rdma memory regions[0]",
                    "holding rdma transport leaf[0]");
    af_expect_abort(two_rdma_leaves, v, "acquiring rdma transport leaf[0]",
                    "holding rdma transport leaf[0]");
    af_expect_clean(legal_order);
}

struct fan {
    _Atomic int sum;
    _Atomic int held; /* tasks that ran with a lock recorded as held */
};

static void fan_task(void *arg, size_t i)
{
    struct fan *f = arg;
    if (mc_lo_depth() != 0)
        f->held++;
    f->sum += (int)i + 1;
}

/* Real paths: every call returns with nothing held, and the fanout's tasks run outside its lock. */
static void test_real_paths_balanced(void **state)
{
    (void)state;
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    cfg.host = "127.0.0.1";
    cfg.port = wb_closed_port;
    cfg.connect_timeout_ms = 500;
    cfg.call_timeout_ms = 500;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cfg, &c), 0);
    assert_int_equal(mc_rpc_client_connect(c), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(mc_rpc_client_connected(c), 0);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(mc_rpc_client_call(c, 1, "x", 1, 0, NULL, NULL), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_lo_depth(), 0);
    mc_rpc_client_disconnect(c);
    assert_int_equal(mc_lo_depth(), 0);
    mc_rpc_client_free(c);

    struct fan f = {0};
    mc_fanout(64, fan_task, &f);
    assert_int_equal(f.sum, 64 * 65 / 2);
    assert_int_equal(f.held, 0);
    assert_int_equal(mc_lo_depth(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locked_functions_assert_their_lock),
        cmocka_unit_test(test_order_of_the_new_levels),
        cmocka_unit_test(test_real_paths_balanced),
    };
    return cmocka_run_group_tests(tests, closed_port_setup, closed_port_teardown);
}
