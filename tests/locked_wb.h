/*
 * locked_wb.h - white-box entry points of test_locked_asserts: each locked_wb_*.c compiles one
 * source file of src/ into the test (so that its static `_locked` functions can be called) and
 * offers, per function, a call without the lock (which must abort on the function's MC_ASSERT)
 * and the same call with the lock (which must not). The copies replace the library's objects in
 * this test binary only (the linker does not pull an archive member whose symbols are all
 * defined).
 */
#ifndef MC_TESTS_LOCKED_WB_H
#define MC_TESTS_LOCKED_WB_H

/* src/common/fanout.c */
void wb_fanout_claim_unlocked(void);
void wb_fanout_unqueue_unlocked(void);
void wb_fanout_find_helpers_unlocked(void);
void wb_fanout_all_locked(void);

/* src/common/rpc_client.c and rpc_client_conn.c; the clients point at wb_closed_port (a port
 * bound by the test and not listening: connects are refused) */
extern unsigned short wb_closed_port;
void wb_rpc_conn_broken_unlocked(void);
void wb_rpc_check_idle_unlocked(void);
void wb_rpc_lead_timeout_unlocked(void);
void wb_rpc_reconnect_without_connect_lock(void);
void wb_rpc_all_locked(void);

/* src/master/upsert.c */
void wb_upsert_take_unlocked(void);
void wb_upsert_take_locked(void);

#endif
