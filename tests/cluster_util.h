/*
 * cluster_util.h - helpers of the multi-process tests (test_cluster.c): child processes on
 * loopback and a small strict JSON reader.
 *
 * Processes. A thin layer over the harness every test and bench tool shares
 * (src/tools/proc_harness.h): every child runs with PR_SET_PDEATHSIG = SIGKILL, so nothing
 * outlives a crashed or killed test; daemons are stopped explicitly in teardown. A daemon's
 * stdout is a pipe the test reads its READY line from (with a deadline); its stderr is appended
 * to a log file that is printed when something goes wrong. A command (mooncake_cli) runs with
 * stdout and stderr captured to files and is waited for with a deadline (killed when it
 * overruns).
 *
 * Clusters. struct cu_cluster is the fixture the cluster tests share: the binaries from
 * $MC_BIN_DIR, a private temporary directory for logs and stores, and the master's addresses
 * as its READY line gave them. cu_start_master / cu_start_daemon start the two daemons on
 * loopback with the flags every test passes plus the test's own, and wait for READY.
 *
 * JSON. mooncake_cli's --json output is parsed with a strict recursive-descent reader (RFC 8259
 * grammar, whole input consumed) into a small tree, so a malformed document fails the test
 * instead of passing a substring check. Numbers keep their text: versions are 64-bit.
 */
#ifndef MC_TESTS_CLUSTER_UTIL_H
#define MC_TESTS_CLUSTER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tools/metrics_scrape.h" /* mc_metrics_value: a sample of mooncake_cli metrics */
#include "tools/proc_harness.h"

struct mc_rpc_client; /* common/rpc_client.h: cu_admin_open */

/* ---- processes ------------------------------------------------------------------------- */

/* A child is the harness's handle: pid (0 when not running), out_fd (read end of its stdout
 * pipe, -1 when none) and log (its stderr file). The tests' name for it stays. */
#define cu_proc mc_proc

/* Starts argv[0] (a path) with stdout on a pipe and stderr appended to log_path. */
int cu_spawn(struct cu_proc *p, const char *const *argv, const char *log_path);
/* Reads one line of the child's stdout within timeout_ms. Returns 0, or -1 (timeout / EOF). */
int cu_read_line(struct cu_proc *p, char *line, size_t cap, int timeout_ms);
/* Sends sig and waits up to timeout_ms (then SIGKILL). Returns the exit status, 128 + signal
 * when killed by one, or -1 when it was not running. */
int cu_stop(struct cu_proc *p, int sig, int timeout_ms);
/* SIGSTOP to a child, returning once every one of its threads has stopped (waitpid
 * WUNTRACED): kill() alone returns before the group stop reaches threads that are running or
 * waking, and such a thread may still answer a request it already received. 0, or -1. */
int cu_freeze(pid_t pid);
/* Prints the last bytes of the child's log on stderr (diagnostics). */
void cu_dump_log(const struct cu_proc *p, const char *what);
/* Reads the child's first stdout line within timeout_ms and parses it (tools/ready_line.h).
 * Returns 0 when it is a READY line of kind (into r); -1 otherwise, with what it printed on
 * stderr and its log dumped under what. The child is left running either way. */
int cu_await_ready(struct cu_proc *p, enum mc_proc_ready_kind kind, struct mc_proc_ready *r,
                   const char *what, int timeout_ms);

struct cu_run {
    int status; /* exit status, 128 + signal, or -1 when it overran the deadline */
    char *out;  /* stdout, NUL-terminated (malloc'd) */
    char *err;  /* stderr */
};
/* Runs argv to completion within timeout_ms; stdin from in_path (NULL = /dev/null). Output
 * files live in dir. */
void cu_run(struct cu_run *r, const char *dir, const char *const *argv, const char *in_path,
            int timeout_ms);
void cu_run_free(struct cu_run *r);

/* Reads a whole file (malloc'd, NUL-terminated); NULL on error. */
char *cu_slurp(const char *path, size_t *len);
int cu_write_file(const char *path, const void *buf, size_t len);
/* rm -rf of a directory tree built by the tests (no symlink following). */
void cu_rm_rf(const char *path);
uint64_t cu_now_ms(void);
void cu_sleep_ms(int ms);

/* ---- a cluster on loopback ------------------------------------------------------------- */

struct cu_cluster {
    char dir[64]; /* private temporary directory: logs, inputs, disk stores (short: tests
                   * build paths in it into small buffers) */
    char master_bin[600], daemon_bin[600], cli_bin[600]; /* in $MC_BIN_DIR */
    char rpc[64];     /* the master's RPC address "127.0.0.1:PORT" (cu_start_master) */
    char metrics[64]; /* the master's /metrics address "127.0.0.1:PORT" */
};

/* Finds the binaries in $MC_BIN_DIR and makes $TMPDIR/PREFIX.XXXXXX (/tmp when $TMPDIR is
 * unset or too long for dir). Returns 0, or -1 (said on stderr). */
int cu_cluster_init(struct cu_cluster *c, const char *prefix);
/* Removes the directory (stop the processes first). */
void cu_cluster_destroy(struct cu_cluster *c);
/* Starts mooncake_master on 127.0.0.1 with --rpc_port=rpc_port (0: a free one),
 * --metrics_port=0, then flags (NULL-terminated, may be NULL); stderr appended to
 * DIR/master.log. Waits up to timeout_ms for READY and sets c->rpc and c->metrics. Returns 0,
 * or -1 with the log dumped and the child killed. */
int cu_start_master(struct cu_cluster *c, struct cu_proc *p, int rpc_port, const char *const *flags,
                    int timeout_ms);
/* Starts mooncake_client --master=c->rpc --host=127.0.0.1 --data_port=0, then flags; stderr
 * appended to DIR/NAME.log. Waits up to timeout_ms for READY; its endpoint into ep. Returns 0,
 * or -1 with the log dumped and the child killed. */
int cu_start_daemon(struct cu_cluster *c, struct cu_proc *p, const char *name,
                    const char *const *flags, char *ep, size_t cap, int timeout_ms);
/* The value of the master's unlabelled /metrics sample NAME, read the way an operator reads it:
 * `mooncake_cli metrics --metrics=c->metrics` (20 s deadline). -1 when the command fails (its
 * stderr is printed) or the sample is absent. */
double cu_master_metric(const struct cu_cluster *c, const char *name);
/* cu_master_metric polled every 50 ms until it equals want; false at timeout_ms. */
bool cu_wait_master_metric(const struct cu_cluster *c, const char *name, double want,
                           int timeout_ms);

/* A LOCAL_DISK holder daemon as the tier tests start it. */
struct cu_holder_opts {
    const char *segment_size; /* --segment_size, e.g. "64MiB" */
    const char *log_level;    /* --log_level (NULL: info) */
    int stall_ms;             /* > 0: MC_TEST_PROMOTION_STALL_MS for it (test builds) */
    int metrics_port;         /* > 0: --metrics_port */
};
/* cu_start_daemon named "holder" with --segment_size, --disk_path=disk_path,
 * --disk_capacity=1GiB, --log_level, --master_wait=20s and the options of o. */
int cu_start_holder(struct cu_cluster *c, struct cu_proc *p, const char *disk_path,
                    const struct cu_holder_opts *o, char *ep, size_t cap, int timeout_ms);
/* A loopback TCP port that was free a moment ago (--metrics_port=0 means "off" for a daemon,
 * so a test picks one); -1 on error. */
int cu_free_port(void);
/* An RPC client of the master at addr ("HOST:PORT") with call_timeout_ms per call and the rest
 * of the defaults: the tests' admin link (GetStats, replica queries, GetLeader). Returns 0, or
 * -1 with *out NULL (a bad address). */
int cu_admin_open(const char *addr, int call_timeout_ms, struct mc_rpc_client **out);
/* A deterministic byte pattern of seed (xorshift64, 8 bytes a step). */
void cu_fill(uint8_t *buf, size_t len, uint64_t seed);

/* ---- JSON -------------------------------------------------------------------------------- */

enum cu_json_type { CU_JNULL, CU_JBOOL, CU_JNUM, CU_JSTR, CU_JARR, CU_JOBJ };

struct cu_json {
    enum cu_json_type type;
    bool b;
    char *str;             /* string value, or a number's text */
    size_t n;              /* items of an array / object */
    struct cu_json *items; /* n values */
    char **keys;           /* n keys (objects) */
};

/* Parses text (the whole of it, surrounding whitespace allowed). NULL on any syntax error. */
struct cu_json *cu_json_parse(const char *text);
void cu_json_free(struct cu_json *v);
/* Member of an object, or NULL (also when v is not an object). */
const struct cu_json *cu_json_get(const struct cu_json *v, const char *key);
/* Typed accessors: false when the member is absent or of another type. */
bool cu_json_str(const struct cu_json *obj, const char *key, const char **out);
bool cu_json_u64(const struct cu_json *obj, const char *key, uint64_t *out);
bool cu_json_i64(const struct cu_json *obj, const char *key, int64_t *out);

#endif
