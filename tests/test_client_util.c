/*
 * test_client_util.c - see test_client_util.h.
 */
#include "test_client_util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "test_spawn.h"

extern char **environ;

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
    memset(m, 0, sizeof(*m));
    m->pid = -1;
    m->out_fd = -1;
    const char *bin = getenv("MC_BIN_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/mooncake_master", bin ? bin : ".");
    char portarg[64];
    snprintf(portarg, sizeof(portarg), "--rpc_port=%u", port);
    const char *argv[32] = {path,
                            portarg,
                            "--rpc_address=127.0.0.1",
                            "--metrics_port=0",
                            "--metrics_host=127.0.0.1",
                            "--log_level=warn"};
    int argc = 6;
    for (int i = 0; extra && extra[i] && argc < 31; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    /* fork + exec, not posix_spawn: the child must die with this test (test_spawn.h) */
    pid_t parent = getpid();
    m->pid = fork();
    if (m->pid == 0) {
        tu_die_with_parent(parent);
        if (dup2(pfd[1], 1) < 0)
            _exit(126);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    if (m->pid < 0) {
        close(pfd[0]);
        m->pid = -1;
        return -1;
    }
    m->out_fd = pfd[0];
    char line[256];
    size_t got = 0;
    uint64_t deadline = mc_now_ms() + 10000;
    while (mc_now_ms() < deadline && got < sizeof(line) - 1) {
        struct pollfd p = {.fd = m->out_fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(m->out_fd, line + got, 1);
        if (n <= 0)
            break;
        got++;
        if (line[got - 1] == '\n')
            break;
    }
    line[got] = '\0';
    const char *r = strstr(line, "READY rpc=");
    const char *colon = r ? strchr(r + 10, ' ') : NULL;
    if (!r || !colon) {
        fprintf(stderr, "master did not print READY (got \"%s\")\n", line);
        tm_kill(m);
        return -1;
    }
    const char *pc = r + 10;
    const char *lastc = NULL;
    for (const char *q = pc; q < colon; q++)
        if (*q == ':')
            lastc = q;
    if (!lastc) {
        tm_kill(m);
        return -1;
    }
    m->port = (uint16_t)atoi(lastc + 1);
    snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%u", m->port);
    return 0;
}

static void reap(struct test_master *m, int sig, int wait_ms)
{
    if (m->pid <= 0)
        return;
    kill(m->pid, sig);
    uint64_t deadline = mc_now_ms() + (uint64_t)wait_ms;
    int st;
    for (;;) {
        pid_t r = waitpid(m->pid, &st, WNOHANG);
        if (r == m->pid || (r < 0 && errno != EINTR))
            break;
        if (mc_now_ms() > deadline) {
            kill(m->pid, SIGKILL);
            waitpid(m->pid, &st, 0);
            break;
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    m->pid = -1;
    if (m->out_fd >= 0)
        close(m->out_fd);
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
