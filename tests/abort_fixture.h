/*
 * abort_fixture.h - runs a sequence that must abort (a lock-order violation, a failed MC_ASSERT)
 * in a forked child whose stderr goes to a pipe, so the test process survives and can check how
 * the child died and what it printed. Shared by the lock-order and `_locked` assertion tests.
 */
#ifndef MC_TESTS_ABORT_FIXTURE_H
#define MC_TESTS_ABORT_FIXTURE_H

#include <stddef.h>

typedef void (*af_seq_fn)(void);

/* Runs fn in a child (killed with the test, tests/test_spawn.h) with stderr captured; returns
 * its wait status and fills out (NUL-terminated). A child whose fn returns exits 0. */
int af_run_child(af_seq_fn fn, char *out, size_t cap);

/* Fails the test unless fn, run in a child, dies of SIGABRT with every non-NULL needle in its
 * stderr. */
void af_expect_abort(af_seq_fn fn, const char *a, const char *b, const char *c);

/* Fails the test unless fn, run in a child, exits 0 with nothing on stderr (the control that
 * shows an abort came from the check, not from the call). */
void af_expect_clean(af_seq_fn fn);

#endif
