/*
 * bench_procs.c - the daemons of the loopback benches. See bench_procs.h.
 */
#include "tools/bench_procs.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ARGV_MAX 32 /* the fixed flags, the extras and the NULL */

void mc_bench_self_dir(char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    snprintf(out, cap, ".");
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(out, cap, "%s", self);
    }
}

/* base[0..nbase), extra, then tail, NULL-terminated, into argv[ARGV_MAX]; -1 when too many. */
static int join_argv(const char **argv, const char *const *base, size_t nbase,
                     const char *const *extra, const char *const *tail)
{
    size_t n = 0;
    for (size_t i = 0; i < nbase; i++)
        argv[n++] = base[i];
    for (size_t i = 0; extra && extra[i]; i++) {
        if (n + 1 >= ARGV_MAX)
            return -1;
        argv[n++] = extra[i];
    }
    for (size_t i = 0; tail && tail[i]; i++) {
        if (n + 1 >= ARGV_MAX)
            return -1;
        argv[n++] = tail[i];
    }
    argv[n] = NULL;
    return 0;
}

int mc_bench_start_master(const struct mc_bench_procs *b, uint16_t rpc_port,
                          const char *const *extra, int retry_ms, struct mc_proc *p,
                          uint16_t *port_out)
{
    char path[PATH_MAX + 32], port[32], log[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/mooncake_master", b->bin);
    snprintf(port, sizeof(port), "--rpc_port=%u", (unsigned)rpc_port);
    snprintf(log, sizeof(log), "%s/master.log", b->dir);
    const char *const base[] = {path,
                                port,
                                "--rpc_address=127.0.0.1",
                                "--metrics_port=0",
                                "--metrics_host=127.0.0.1",
                                "--log_level=warn"};
    const char *argv[ARGV_MAX];
    if (join_argv(argv, base, sizeof(base) / sizeof(base[0]), extra, NULL) != 0) {
        fprintf(stderr, "%s: too many flags for %s\n", b->bench, path);
        return -1;
    }
    const struct mc_proc_io io = {.err_path = log, .err_append = true};
    struct mc_proc_ready r;
    uint64_t end = mc_proc_now_ms() + (uint64_t)(retry_ms > 0 ? retry_ms : 0);
    for (;;) {
        if (mc_proc_start(p, argv, &io, MC_PROC_READY_MASTER, &r, 20000) == 0) {
            if (port_out)
                *port_out = r.rpc_port;
            return 0;
        }
        if (mc_proc_now_ms() >= end)
            break;
        mc_proc_sleep_ms(20);
    }
    fprintf(stderr, "%s: could not start %s\n", b->bench, path);
    return -1;
}

int mc_bench_start_daemon(const struct mc_bench_procs *b, const char *name, const char *master,
                          uint64_t segment_size, const char *const *extra, struct mc_proc *p)
{
    char path[PATH_MAX + 32], m[400], seg[64], log[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/mooncake_client", b->bin);
    snprintf(m, sizeof(m), "--master=%s", master);
    snprintf(seg, sizeof(seg), "--segment_size=%llu", (unsigned long long)segment_size);
    snprintf(log, sizeof(log), "%s/%s.log", b->dir, name);
    const char *const base[] = {path, m, "--host=127.0.0.1", "--data_port=0", seg};
    const char *const tail[] = {"--log_level=warn", "--master_wait=20s", NULL};
    const char *argv[ARGV_MAX];
    if (join_argv(argv, base, sizeof(base) / sizeof(base[0]), extra, tail) != 0) {
        fprintf(stderr, "%s: too many flags for %s\n", b->bench, path);
        return -1;
    }
    const struct mc_proc_io io = {.err_path = log, .err_append = true};
    struct mc_proc_ready r;
    if (mc_proc_start(p, argv, &io, MC_PROC_READY_DAEMON, &r, 30000) != 0) {
        fprintf(stderr, "%s: could not start %s\n", b->bench, path);
        return -1;
    }
    return 0;
}
