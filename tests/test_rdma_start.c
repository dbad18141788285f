/*
 * test_rdma_start.c - protocol rdma on a host without a usable RDMA device: the library refuses
 * to open with NOT_SUPPORTED (never a silent fallback to tcp), and the mooncake_client daemon
 * exits 1 with a message that names the problem and suggests --protocol=tcp. On a host that
 * does have a device these cases do not apply and are skipped (scripts/rdma_selftest.sh is the
 * check there).
 *
 * A loopback host with protocol rdma is refused first, on any host, device or not: rdma_cm can
 * neither bind nor resolve one. The library, the daemon and mooncake_cli (which takes --host)
 * say so and name --host. The other cases advertise a TEST-NET address (192.0.2.1), which is
 * never bound because the device check fails first.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_skip.h"

#include "common/log.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "test_spawn.h"

/* Whether the kernel shows any RDMA device. */
static int host_has_rdma(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    if (!d)
        return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n > 0;
}

static void test_library_refuses_rdma_without_device(void **state)
{
    if (host_has_rdma())
        MC_SKIP("this host has an RDMA device: the no-device path cannot be checked");
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.protocol = "rdma";
    cfg.master_address = "127.0.0.1:1"; /* never reached: the device check comes first */
    cfg.segment_size = 1 << 20;
    cfg.host = "192.0.2.1";
    struct mc_client *c = (struct mc_client *)0x1;
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_NOT_SUPPORTED);
    assert_null(c);
    cfg.protocol = "carrier-pigeon";
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_NOT_SUPPORTED);
}

/* Runs program with args, collects stderr (up to cap) and returns its exit status. */
static int run_program(const char *program, const char *const *args, char *err, size_t cap)
{
    const char *bin = getenv("MC_BIN_DIR");
    assert_non_null(bin);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", bin, program);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tu_die_with_parent(parent);
        dup2(p[1], 2);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        close(p[0]);
        char *argv[16];
        int n = 0;
        argv[n++] = path;
        for (int i = 0; args[i] && n < 15; i++)
            argv[n++] = (char *)args[i];
        argv[n] = NULL;
        execv(path, argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int r = poll(&pf, 1, 1000);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 20) { /* deadline: a daemon that went on serving */
            kill(pid, SIGKILL);
            break;
        }
        if (r <= 0)
            continue;
        ssize_t k = read(p[0], err + got, cap - 1 - got);
        if (k <= 0)
            break;
        got += (size_t)k;
        if (got == cap - 1)
            break;
    }
    err[got] = 0;
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int run_daemon(const char *const *args, char *err, size_t cap)
{
    return run_program("mooncake_client", args, err, cap);
}

static void test_daemon_exits_with_message(void **state)
{
    if (host_has_rdma())
        MC_SKIP("this host has an RDMA device: the no-device path cannot be checked");
    static char err[16384];
    const char *args[] = {"--protocol=rdma", "--master=127.0.0.1:1", "--segment_size=1048576",
                          "--host=192.0.2.1", NULL};
    int st = run_daemon(args, err, sizeof(err));
    assert_int_equal(st, 1);
    assert_non_null(strstr(err, "cannot start"));
    assert_non_null(strstr(err, "--protocol=tcp"));
#ifdef MC_WITH_RDMA
    assert_non_null(strstr(err, "no RDMA device"));
#else
    assert_non_null(strstr(err, "MC_WITH_RDMA=OFF"));
#endif
    /* it never reached the master or served: no READY, no fallback */
    assert_null(strstr(err, "client open"));
}

/* An auth token with protocol rdma is accepted (rdma_cm connections prove the token): on a host
 * without a device the daemon gets past the token to the device check and fails there. */
static void test_daemon_takes_rdma_with_token(void **state)
{
    if (host_has_rdma())
        MC_SKIP("this host has an RDMA device: the no-device path cannot be checked");
    char path[] = "/tmp/mc_rdma_token_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char tok[] = "0123456789abcdef0123456789abcdef\n";
    assert_int_equal(write(fd, tok, sizeof(tok) - 1), (ssize_t)(sizeof(tok) - 1));
    close(fd);
    char flag[128];
    snprintf(flag, sizeof(flag), "--auth_token_file=%s", path);
    static char err[16384];
    const char *args[] = {"--protocol=rdma",
                          "--master=127.0.0.1:1",
                          "--segment_size=1048576",
                          "--host=192.0.2.1",
                          flag,
                          NULL};
    int st = run_daemon(args, err, sizeof(err));
    unlink(path);
    assert_int_equal(st, 1);
    assert_null(strstr(err, "auth token")); /* neither refused for it nor unable to load it */
    assert_non_null(strstr(err, "cannot start"));
#ifdef MC_WITH_RDMA
    assert_non_null(strstr(err, "no RDMA device"));
#else
    assert_non_null(strstr(err, "MC_WITH_RDMA=OFF"));
#endif
    assert_null(strstr(err, "client open"));
}

/* The default host (127.0.0.1) with protocol rdma: refused before any device is looked at. */
static void test_loopback_host_refused(void **state)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.protocol = "rdma";
    cfg.master_address = "127.0.0.1:1";
    cfg.log_level = MC_CLIENT_LOG_OFF;
    struct mc_client *c = (struct mc_client *)0x1;
#ifdef MC_WITH_RDMA
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_INVALID_PARAMS);
#else
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_NOT_SUPPORTED);
#endif
    assert_null(c);
#ifdef MC_WITH_RDMA
    static char err[16384];
    const char *dargs[] = {"--protocol=rdma", "--master=127.0.0.1:1", "--segment_size=1048576",
                           NULL};
    assert_int_equal(run_daemon(dargs, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "loopback"));
    assert_non_null(strstr(err, "--host"));
    assert_null(strstr(err, "client open"));
    /* mooncake_cli: the same refusal by default, and --host reaches the library */
    const char *cargs[] = {"--master=127.0.0.1:1",
                           "--protocol=rdma",
                           "--log_level=error",
                           "put",
                           "k",
                           "--value=v",
                           NULL};
    assert_int_equal(run_program("mooncake_cli", cargs, err, sizeof(err)), 3);
    assert_non_null(strstr(err, "--host"));
    const char *hargs[] = {"--master=127.0.0.1:1",
                           "--protocol=rdma",
                           "--host=192.0.2.1",
                           "--log_level=error",
                           "put",
                           "k",
                           "--value=v",
                           NULL};
    assert_int_equal(run_program("mooncake_cli", hargs, err, sizeof(err)), 3);
    assert_null(strstr(err, "loopback"));
    if (!host_has_rdma())
        assert_non_null(strstr(err, "no RDMA device"));
    /* mooncake_bench transfer takes the protocol and host too (the hardware plan uses it) */
    const char *bargs[] = {"transfer", "--protocol=rdma", "--sizes=4KiB",
                           "--runs=1", "--mode=same",     NULL};
    assert_int_equal(run_program("mooncake_bench", bargs, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "--host"));
    /* the daemon's RDMA fabric flags are range-checked */
    const char *targs[] = {"--protocol=rdma", "--host=192.0.2.1", "--rdma_tos=300", NULL};
    assert_int_not_equal(run_daemon(targs, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "--rdma_tos"));
    const char *aargs[] = {"--protocol=rdma", "--host=192.0.2.1", "--rdma_ack_timeout=40", NULL};
    assert_int_not_equal(run_daemon(aargs, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "--rdma_ack_timeout"));
    const char *qargs[] = {"--protocol=rdma", "--host=192.0.2.1", "--rdma_qp_pool=5000", NULL};
    assert_int_not_equal(run_daemon(qargs, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "--rdma_qp_pool"));
    const char *pargs[] = {"transfer", "--protocol=carrier-pigeon", NULL};
    assert_int_equal(run_program("mooncake_bench", pargs, err, sizeof(err)), 2);
#endif
}

int main(void)
{
    mc_log_set_level(MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_refuses_rdma_without_device),
        cmocka_unit_test(test_daemon_exits_with_message),
        cmocka_unit_test(test_daemon_takes_rdma_with_token),
        cmocka_unit_test(test_loopback_host_refused),
    };
    return MC_RUN_TESTS(tests, NULL, NULL);
}
