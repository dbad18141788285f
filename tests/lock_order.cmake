# The master core's lock-order check (src/master/lock_order.h; on in test builds).
mc_add_test(test_lock_order SOURCES test_lock_order.c abort_fixture.c LIBS mc_master_core
            TIMEOUT 60)
# The client's locks under the same checker: the disk store's order and its `_locked` asserts.
if(TARGET mc_client_static)
  mc_add_test(test_lock_order_client SOURCES test_lock_order_client.c abort_fixture.c
              LIBS mc_client_static TIMEOUT 60)
endif()
# The `_locked` functions of the RPC client, the fanout pool and the Upsert table assert their
# lock (white-box copies of their sources, locked_wb_*.c), and the RPC client's and the fanout
# pool's levels in the order.
mc_add_test(test_locked_asserts
            SOURCES test_locked_asserts.c abort_fixture.c locked_wb_fanout.c locked_wb_rpc.c
                    locked_wb_upsert.c
            LIBS mc_master_core TIMEOUT 60)
