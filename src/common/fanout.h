/* fanout.h - run a few independent blocking tasks at once and wait for all of them.
 *
 * The client's batch Get sends one request per peer (a DRAM batch, a PeerDiskRead per LOCAL_DISK
 * holder) and each call blocks until its reply is in; one after the other, a Get that touches
 * two holders waits for the sum of their SSD reads. mc_fanout runs the tasks side by side so it
 * waits for the slowest one only. */
#ifndef MC_COMMON_FANOUT_H
#define MC_COMMON_FANOUT_H

#include <stddef.h>

/* At most this many threads per call (the caller and its helpers); more tasks share them. */
#define MC_FANOUT_MAX_THREADS 16

typedef void (*mc_fanout_fn)(void *arg, size_t i);

/* Runs fn(arg, i) for every i in [0, n) and returns when all have returned. The tasks are split
 * into slots (slot k: tasks k, k + MC_FANOUT_MAX_THREADS, ...); slot 0 runs on the calling
 * thread, the others on helper threads of a process-wide pool (started on demand, kept while
 * used, gone after 30 s idle), side by side when helpers are free. A slot no helper has taken by
 * the time slot 0 is done runs on the calling thread, so every task runs exactly once and a full
 * pool or a failed thread start costs time, never progress. The tasks must not depend on each
 * other. Each helper logs through the caller's current logger (log.h), as the caller would.
 * Safe across fork(): the child starts with an empty pool. */
void mc_fanout(size_t n, mc_fanout_fn fn, void *arg);

/* Helper threads alive in the pool (for tests and metrics). */
size_t mc_fanout_threads(void);

#endif
