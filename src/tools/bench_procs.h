/*
 * bench_procs.h - the daemons of the benches that run a small cluster on loopback (restart,
 * failover): where the binaries are, and a mooncake_master and mooncake_client daemons started
 * with the flags these benches share, each waited for (its READY line) with a deadline, its
 * stderr appended to a log file in the bench's directory. Built on the harness every test and
 * bench shares (tools/proc_harness.h): a child dies with the bench.
 */
#ifndef MC_TOOLS_BENCH_PROCS_H
#define MC_TOOLS_BENCH_PROCS_H

#include <stddef.h>
#include <stdint.h>

#include "tools/proc_harness.h"

struct mc_bench_procs {
    const char *bench; /* names the bench in error lines ("restart: could not start ...") */
    const char *bin;   /* where mooncake_master and mooncake_client are */
    const char *dir;   /* where the logs go */
};

/* The directory of the running executable into out, "." when /proc/self/exe cannot be read:
 * mooncake_bench is built beside the daemons. */
void mc_bench_self_dir(char *out, size_t cap);

/* Starts BIN/mooncake_master on 127.0.0.1 with --rpc_port=rpc_port (0: a free one),
 * --metrics_port=0, --log_level=warn, then extra (NULL-terminated; NULL: none); stderr appended
 * to DIR/master.log; READY within 20 s. retry_ms > 0: tried again every 20 ms for that long (the
 * port of a master just killed may still be in TIME_WAIT). Its RPC port into *port_out (may be
 * NULL). Returns 0, or -1 said on stderr (p not running). */
int mc_bench_start_master(const struct mc_bench_procs *b, uint16_t rpc_port,
                          const char *const *extra, int retry_ms, struct mc_proc *p,
                          uint16_t *port_out);

/* Starts BIN/mooncake_client --master=master --host=127.0.0.1 --data_port=0
 * --segment_size=segment_size, then extra (NULL-terminated; NULL: none), --log_level=warn
 * --master_wait=20s; stderr appended to DIR/NAME.log; READY within 30 s. Returns 0, or -1 said
 * on stderr (p not running). */
int mc_bench_start_daemon(const struct mc_bench_procs *b, const char *name, const char *master,
                          uint64_t segment_size, const char *const *extra, struct mc_proc *p);

#endif
