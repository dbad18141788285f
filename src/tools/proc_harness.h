/*
 * proc_harness.h - the one child-process harness of the tests and the bench tools: start a
 * program, read and parse its READY line with a deadline, wait for it, stop and reap it, and
 * make and remove the temporary directories its files live in, and pick a free loopback port.
 *
 * Spawning. fork + execvp, not posix_spawn: between the two the child asks the kernel for
 * SIGKILL when its parent dies (PR_SET_PDEATHSIG) and checks that the parent did not die before
 * that (getppid), so no child outlives a crashed test or bench (an orphan holding a test's pipe
 * makes ctest wait out the whole TIMEOUT). It then clears the signal mask and the SIGPIPE
 * disposition it inherited and puts its stdio in place. Every file is opened by the parent
 * (O_CLOEXEC), so the child only makes async-signal-safe calls: safe in a threaded parent.
 * The death signal follows the forking thread: spawn from one that outlives the child.
 *
 * Stdio (struct mc_proc_io; NULL = every default): stdin from a file or /dev/null; stdout to a
 * pipe the parent reads lines from (p->out_fd) or to a file; stderr to a file (truncated or
 * appended; its path stays in p->log for diagnostics) or the parent's own.
 *
 * READY lines are parsed by tools/ready_line.h (the one parser of the contract in C).
 *
 * Statuses are decoded as a shell does: the exit code, or 128 + the signal that ended it.
 * Stopping is a signal (usually SIGTERM), a deadline, then SIGKILL; the child is always reaped.
 */
#ifndef MC_TOOLS_PROC_HARNESS_H
#define MC_TOOLS_PROC_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tools/ready_line.h"

/* Negative results of the wait / stop / run calls. */
#define MC_PROC_NOT_RUNNING (-1) /* no child (or it could not be started / waited for) */
#define MC_PROC_TIMEOUT (-2)     /* still running at the deadline */
#define MC_PROC_KILLED (-3)      /* ignored the stop signal: ended by SIGKILL after the deadline */

struct mc_proc {
    pid_t pid;     /* 0 when not running */
    int out_fd;    /* read end of its stdout pipe; -1 when none */
    char log[256]; /* the file its stderr goes to; "" when inherited */
};

struct mc_proc_io {
    const char *in_path;  /* stdin from this file; NULL = /dev/null */
    const char *out_path; /* stdout to this file (truncated); NULL = a pipe, p->out_fd */
    const char *err_path; /* stderr to this file; NULL = this process's stderr */
    bool err_append;      /* append to err_path instead of truncating it */
};

/* Starts argv[0] (a path, or a name looked up in PATH) with argv. Returns 0, or -1 with p
 * not running (nothing to clean up). */
int mc_proc_spawn(struct mc_proc *p, const char *const *argv, const struct mc_proc_io *io);
/* One line of the child's stdout (without the newline; a longer line is cut to cap - 1 bytes)
 * within timeout_ms. Reads byte by byte, so nothing after the line is consumed. Returns 0, or
 * -1 on timeout, EOF or no pipe. */
int mc_proc_read_line(struct mc_proc *p, char *line, size_t cap, int timeout_ms);
/* Waits up to timeout_ms for the child to exit and reaps it (p->pid = 0; the pipe stays open:
 * what it wrote can still be read). Returns its status, MC_PROC_TIMEOUT or MC_PROC_NOT_RUNNING. */
int mc_proc_wait(struct mc_proc *p, int timeout_ms);
/* Sends sig and waits up to timeout_ms, then SIGKILL (and 10 s more). Reaps it and closes the
 * pipe. Returns its status, MC_PROC_KILLED when it had to be killed (sig != SIGKILL), or
 * MC_PROC_NOT_RUNNING when it was not running (the pipe is still closed). */
int mc_proc_stop(struct mc_proc *p, int sig, int timeout_ms);
/* Runs argv to completion within timeout_ms (killed when it overruns); stdout goes to
 * io->out_path or /dev/null (never a pipe nobody drains). Returns its status, MC_PROC_TIMEOUT,
 * or MC_PROC_NOT_RUNNING when it could not be started. */
int mc_proc_run(const char *const *argv, const struct mc_proc_io *io, int timeout_ms);
/* Prints at most the last max_bytes of the child's stderr file on stderr, headed by what. */
void mc_proc_dump_log(const struct mc_proc *p, const char *what, size_t max_bytes);

/* ---- READY lines (parsed by tools/ready_line.h) ----------------------------------------- */

/* Reads the child's first stdout line within timeout_ms and parses it. Returns 0, -1 when no
 * line came (timeout, EOF), or -2 when it is not a READY line (r->line holds it). */
int mc_proc_await_ready(struct mc_proc *p, struct mc_proc_ready *r, int timeout_ms);

/* Spawns argv (mc_proc_spawn) and waits up to timeout_ms for a READY line of the given kind
 * (into r). Returns 0; or -1 with the child's log dumped on stderr (when it has one) and the
 * child killed and reaped, r->line holding what it printed instead, if anything. */
int mc_proc_start(struct mc_proc *p, const char *const *argv, const struct mc_proc_io *io,
                  enum mc_proc_ready_kind kind, struct mc_proc_ready *r, int timeout_ms);

/* ---- time and temporary directories ------------------------------------------------------ */

uint64_t mc_proc_now_ms(void); /* CLOCK_MONOTONIC */
void mc_proc_sleep_ms(int ms);
/* A loopback TCP port that was free a moment ago (bound to port 0 and closed), for a child
 * that must be told its port; -1 on error. */
int mc_proc_free_port(void);
/* A non-loopback IPv4 address of this host that is up, as text into out (cap bytes), for a test
 * that needs a caller which is not 127.0.0.1. False when there is none. */
bool mc_proc_local_ipv4(char *out, size_t cap);
/* Creates PARENT/PREFIX.XXXXXX (PARENT NULL: $TMPDIR, else /tmp) into out. Returns 0 or -1. */
int mc_proc_mkdtemp(char *out, size_t cap, const char *parent, const char *prefix);
/* rm -rf of a directory tree (never follows a symlink; removes the link). */
void mc_proc_rm_rf(const char *path);

#endif
