/*
 * abort_fixture.c - see abort_fixture.h.
 */
#include "abort_fixture.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_spawn.h"

int af_run_child(af_seq_fn fn, char *out, size_t cap)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tu_die_with_parent(parent);
        close(p[0]);
        dup2(p[1], 2);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(p[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

void af_expect_abort(af_seq_fn fn, const char *a, const char *b, const char *c)
{
    char buf[1024];
    int st = af_run_child(fn, buf, sizeof(buf));
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
        fail_msg("child did not abort (status %d), stderr: %s", st, buf);
    const char *needles[] = {a, b, c};
    for (size_t i = 0; i < 3; i++)
        if (needles[i] && !strstr(buf, needles[i]))
            fail_msg("child's stderr lacks \"%s\": %s", needles[i], buf);
}

void af_expect_clean(af_seq_fn fn)
{
    char buf[1024];
    int st = af_run_child(fn, buf, sizeof(buf));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("child failed (status %d): %s", st, buf);
    assert_string_equal(buf, "");
}
