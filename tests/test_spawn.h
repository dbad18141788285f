/*
 * test_spawn.h - spawn hygiene for tests that fork children (daemons, helpers).
 *
 * A child must never outlive a crashed test: an orphaned daemon keeps the test's stdout/stderr
 * pipe open, so ctest waits for the whole TIMEOUT instead of reporting the failure. Every
 * forked child calls tu_die_with_parent() first thing, with the parent's pid taken before
 * fork(): the kernel then sends it SIGKILL when the parent dies, and a parent that died between
 * fork() and the prctl (the race PR_SET_PDEATHSIG alone leaves open) is caught by getppid().
 * Only async-signal-safe calls, so it is fine between fork() and exec in a threaded test.
 *
 * Note: the signal follows the forking *thread*; fork from a thread that outlives the child
 * (the test's main thread).
 */
#ifndef MC_TEST_SPAWN_H
#define MC_TEST_SPAWN_H

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

static inline void tu_die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(125);
}

#endif
