/*
 * test_client_install.c - the library as a user gets it: `cmake --install` into a temporary
 * prefix, examples/hello.c compiled with `pkg-config --cflags --libs mooncake_client` (shared)
 * and with the installed static archive, each run against a real mooncake_master.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_client_util.h"

#ifndef MC_HELLO_CC
#define MC_HELLO_CC "cc"
#endif
#ifndef MC_HELLO_CFLAGS
#define MC_HELLO_CFLAGS ""
#endif

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    if (st != 0)
        fprintf(stderr, "command failed (%d): %s\n", st, cmd);
    return st;
}

static void assert_file(const char *dir, const char *rel)
{
    char p[2048];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    struct stat st;
    if (stat(p, &st) != 0)
        fail_msg("not installed: %s", rel);
}

static void test_install_and_hello(void **state)
{
    (void)state;
    const char *bin = getenv("MC_BIN_DIR");
    const char *src = getenv("MC_SOURCE_DIR");
    assert_non_null(bin);
    assert_non_null(src);
    char tmp[] = "/tmp/mc-install-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    struct test_master m;
    m.pid = -1;
    int ok = 0;
    if (sh("cmake --install '%s/..' --prefix '%s' >/dev/null", bin, tmp) != 0)
        goto out;
    assert_file(tmp, "include/mooncake/client.h");
    assert_file(tmp, "include/mooncake/errors.h");
    assert_file(tmp, "lib/libmooncake_client.so");
    assert_file(tmp, "lib/libmooncake_client.a");
    assert_file(tmp, "lib/pkgconfig/mooncake_client.pc");
    if (sh("PKG_CONFIG_PATH='%s/lib/pkgconfig' && export PKG_CONFIG_PATH && "
           "%s %s -Wall -Werror '%s/examples/hello.c' -o '%s/hello' "
           "$(pkg-config --cflags --libs mooncake_client)",
           tmp, MC_HELLO_CC, MC_HELLO_CFLAGS, src, tmp) != 0)
        goto out;
    if (sh("PKG_CONFIG_PATH='%s/lib/pkgconfig' && export PKG_CONFIG_PATH && "
           "%s %s '%s/examples/hello.c' -o '%s/hello-static' $(pkg-config --cflags "
           "mooncake_client) $(pkg-config --static --libs mooncake_client | sed "
           "'s/-lmooncake_client/-l:libmooncake_client.a/')",
           tmp, MC_HELLO_CC, MC_HELLO_CFLAGS, src, tmp) != 0)
        goto out;
    if (tm_start(&m, 0, NULL) != 0)
        goto out;
    if (sh("LD_LIBRARY_PATH='%s/lib' '%s/hello' %s > '%s/out.txt'", tmp, tmp, m.addr, tmp) != 0)
        goto out;
    if (sh("grep -q '^hello -> world' '%s/out.txt'", tmp) != 0)
        goto out;
    /* the shared build really is the installed .so */
    if (sh("LD_LIBRARY_PATH='%s/lib' ldd '%s/hello' | grep -q '%s/lib/libmooncake_client.so'", tmp,
           tmp, tmp) != 0)
        goto out;
    if (sh("'%s/hello-static' %s > '%s/out2.txt' && grep -q '^hello -> world' '%s/out2.txt'", tmp,
           m.addr, tmp, tmp) != 0)
        goto out;
    ok = 1;
out:
    tm_stop(&m);
    sh("rm -rf '%s'", tmp);
    assert_true(ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_install_and_hello),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
