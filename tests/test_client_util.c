/*
 * test_client_util.c - see test_client_util.h. The master child is started, READY-parsed and
 * stopped by the shared harness (tools/proc_harness.h).
 */
#include "test_client_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/proc_harness.h"

void tm_fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 12345;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)(x >> 8);
    }
}

int tm_start(struct test_master *m, uint16_t port, const char *const *extra)
{
    struct mc_proc p;
    struct mc_proc_ready r;
    const char *bin = getenv("MC_BIN_DIR");
    char path[1024], portarg[64];
    const char *argv[32] = {path,
                            portarg,
                            "--rpc_address=127.0.0.1",
                            "--metrics_port=0",
                            "--metrics_host=127.0.0.1",
                            "--log_level=warn"};
    int argc = 6, rc;

    memset(m, 0, sizeof(*m));
    m->pid = -1;
    m->out_fd = -1;
    snprintf(path, sizeof(path), "%s/mooncake_master", bin ? bin : ".");
    snprintf(portarg, sizeof(portarg), "--rpc_port=%u", port);
    for (int i = 0; extra && extra[i] && argc < 31; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    /* stderr stays the test's own: the master's log lands in the test's output */
    if (mc_proc_spawn(&p, argv, NULL) != 0)
        return -1;
    m->pid = p.pid;
    m->out_fd = p.out_fd;
    rc = mc_proc_await_ready(&p, &r, 10000);
    if (rc != 0 || r.kind != MC_PROC_READY_MASTER) {
        fprintf(stderr, "master did not print READY (got \"%s\")\n", r.line);
        tm_kill(m);
        return -1;
    }
    m->port = r.rpc_port;
    snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%u", m->port);
    return 0;
}

/* sig, then SIGKILL after wait_ms; reaped, pipe closed. */
static void reap(struct test_master *m, int sig, int wait_ms)
{
    struct mc_proc p = {.pid = m->pid > 0 ? m->pid : 0, .out_fd = m->out_fd};

    mc_proc_stop(&p, sig, wait_ms);
    m->pid = -1;
    m->out_fd = -1;
}

void tm_stop(struct test_master *m)
{
    reap(m, SIGTERM, 5000);
}

void tm_kill(struct test_master *m)
{
    reap(m, SIGKILL, 5000);
}
