/*
 * test_client_install.c - the library as a user gets it: `cmake --install` into a temporary
 * prefix, then, each run against a real mooncake_master:
 *   - examples/hello.c compiled with `pkg-config --cflags --libs mooncake_client` (shared) and
 *     with the installed static archive;
 *   - examples/hello.c compiled against the build tree's pkg-config file (no install);
 *   - examples/CMakeLists.txt configured with find_package(MooncakeClient) against the prefix;
 *   - the installed executables (--version), the systemd units (ExecStart names the installed
 *     binary and the flagfile in etc/mooncake) and the installed master started from its
 *     shipped flagfile;
 *   - the installed Python package put/get (plain builds: a sanitizer's runtime would have to be
 *     preloaded into the interpreter).
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
#ifndef MC_PYTHON
#define MC_PYTHON "python3"
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

/* hello.c against <build>/lib/pkgconfig, the build tree's own .pc (headers from the source). */
static int check_build_tree_pc(const char *bin, const char *src, const char *tmp, const char *addr)
{
    if (sh("PKG_CONFIG_PATH='%s/../lib/pkgconfig' && export PKG_CONFIG_PATH && "
           "%s %s -Wall -Werror '%s/examples/hello.c' -o '%s/hello-buildtree' "
           "$(pkg-config --cflags --libs mooncake_client)",
           bin, MC_HELLO_CC, MC_HELLO_CFLAGS, src, tmp) != 0)
        return -1;
    return sh("LD_LIBRARY_PATH='%s/../lib' '%s/hello-buildtree' %s | grep -q '^hello -> world'",
              bin, tmp, addr);
}

/* examples/CMakeLists.txt: find_package(MooncakeClient), shared and static targets. */
static int check_cmake_package(const char *src, const char *tmp, const char *addr)
{
    if (sh("cmake -S '%s/examples' -B '%s/consumer' -DCMAKE_PREFIX_PATH='%s' "
           "-DCMAKE_C_COMPILER='%s' -DCMAKE_C_FLAGS='%s' -DCMAKE_EXE_LINKER_FLAGS='%s' >/dev/null "
           "&& cmake --build '%s/consumer' >/dev/null",
           src, tmp, tmp, MC_HELLO_CC, MC_HELLO_CFLAGS, MC_HELLO_CFLAGS, tmp) != 0)
        return -1;
    if (sh("'%s/consumer/hello' %s | grep -q '^hello -> world'", tmp, addr) != 0)
        return -1;
    /* the shared target really links the installed .so (found through the imported target's
     * location, no LD_LIBRARY_PATH) */
    if (sh("ldd '%s/consumer/hello' | grep -q '%s/lib/libmooncake_client.so'", tmp, tmp) != 0)
        return -1;
    return sh("'%s/consumer/hello_static' %s | grep -q '^hello -> world'", tmp, addr);
}

static int check_programs_and_units(const char *tmp)
{
    static const char *const progs[] = {"mooncake_master", "mooncake_client", "mooncake_cli",
                                        "mooncake_bench"};
    for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "bin/%s", progs[i]);
        assert_file(tmp, rel);
    }
    assert_file(tmp, "lib/cmake/MooncakeClient/MooncakeClientConfig.cmake");
    assert_file(tmp, "lib/cmake/MooncakeClient/MooncakeClientConfigVersion.cmake");
    if (sh("'%s/bin/mooncake_master' --version | grep -q '^mooncake_master version '", tmp) != 0 ||
        sh("'%s/bin/mooncake_client' --version | grep -q '^mooncake_client version '", tmp) != 0)
        return -1;
    if (sh("grep -qx 'ExecStart=%s/bin/mooncake_master "
           "--flagfile=/etc/mooncake/mooncake_master.flags' "
           "'%s/lib/systemd/system/mooncake-master.service'",
           tmp, tmp) != 0 ||
        sh("grep -qx 'ExecStart=%s/bin/mooncake_client "
           "--flagfile=/etc/mooncake/mooncake_client.flags' "
           "'%s/lib/systemd/system/mooncake-client.service'",
           tmp, tmp) != 0)
        return -1;
    assert_file(tmp, "etc/mooncake/mooncake_client.flags");
    /* Where systemd-analyze exists, the units must verify without a single complaint (it
     * exits 0 on bad values too, so any output fails). */
    if (sh("command -v systemd-analyze >/dev/null || exit 0; cd '%s/lib/systemd/system' && "
           "out=$(systemd-analyze verify ./mooncake-master.service ./mooncake-client.service "
           "2>&1); [ -z \"$out\" ] || { echo \"$out\"; exit 1; }",
           tmp) != 0)
        return -1;
    /* The shipped master flagfile parses and the master serves with it (ports overridden after
     * it, later flags win); READY within a 10 s deadline. */
    return sh("cd '%s' && { bin/mooncake_master --flagfile=etc/mooncake/mooncake_master.flags "
              "--rpc_address=127.0.0.1 --rpc_port=0 --metrics_host=127.0.0.1 --metrics_port=0 "
              "> master.out 2> master.err & pid=$!; i=0; "
              "while [ $i -lt 100 ] && ! grep -q '^READY ' master.out; do sleep 0.1; "
              "i=$((i+1)); done; grep -q '^READY ' master.out; r=$?; kill $pid; wait $pid; "
              "[ $r = 0 ] && [ $? = 0 ]; }",
              tmp);
}

static int check_python(const char *tmp, const char *addr)
{
    if (MC_HELLO_CFLAGS[0]) /* sanitizer build: the library needs its runtime preloaded */
        return 0;
    assert_file(tmp, "lib/python3/dist-packages/mooncake_c/__init__.py");
    return sh(
        "cd / && PYTHONPATH='%s/lib/python3/dist-packages' %s -c \""
        "import mooncake_c, sys; "
        "assert mooncake_c._native.lib._name.startswith(sys.argv[1]), mooncake_c._native.lib; "
        "s = mooncake_c.MooncakeDistributedStore(); "
        "assert s.setup('127.0.0.1', 'P2PHANDSHAKE', 16 << 20, 0, 'tcp', '', sys.argv[2]) == 0; "
        "assert s.put('py', b'from python') == 0; "
        "assert s.get('py') == b'from python'; s.close()\" '%s' %s",
        tmp, MC_PYTHON, tmp, addr);
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
    if (check_build_tree_pc(bin, src, tmp, m.addr) != 0 ||
        check_cmake_package(src, tmp, m.addr) != 0 || check_programs_and_units(tmp) != 0 ||
        check_python(tmp, m.addr) != 0)
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
