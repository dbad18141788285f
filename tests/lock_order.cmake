# The master core's lock-order check (src/master/lock_order.h; on in test builds).
mc_add_test(test_lock_order SOURCES test_lock_order.c LIBS mc_master_core TIMEOUT 60)
# The client's locks under the same checker: the disk store's order and its `_locked` asserts.
if(TARGET mc_client_static)
  mc_add_test(test_lock_order_client SOURCES test_lock_order_client.c LIBS mc_client_static
              TIMEOUT 60)
endif()
