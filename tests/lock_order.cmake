# The master core's lock-order check (src/master/lock_order.h; on in test builds).
mc_add_test(test_lock_order SOURCES test_lock_order.c LIBS mc_master_core TIMEOUT 60)
