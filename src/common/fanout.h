/* fanout.h - run a few independent blocking tasks at once and wait for all of them.
 *
 * The client's batch Get sends one request per peer (a DRAM batch, a PeerDiskRead per LOCAL_DISK
 * holder) and each call blocks until its reply is in; one after the other, a Get that touches
 * two holders waits for the sum of their SSD reads. mc_fanout runs the tasks side by side so it
 * waits for the slowest one only. */
#ifndef MC_COMMON_FANOUT_H
#define MC_COMMON_FANOUT_H

#include <stddef.h>

/* At most this many threads per call; more tasks share them (task i runs on thread i mod it). */
#define MC_FANOUT_MAX_THREADS 16

typedef void (*mc_fanout_fn)(void *arg, size_t i);

/* Runs fn(arg, i) for every i in [0, n) and returns when all have returned. Task 0 (and those
 * sharing its slot) runs on the calling thread, the others each on a short-lived thread of their
 * own; a thread that cannot be started leaves its tasks to the caller, so every task always
 * runs exactly once. The tasks must not depend on each other. Each thread logs through the
 * caller's current logger (log.h), as the caller would. */
void mc_fanout(size_t n, mc_fanout_fn fn, void *arg);

#endif
