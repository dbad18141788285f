/*
 * test_client_util.h - helpers for the client's process tests: a real mooncake_master child
 * (started on a free or given port, READY line read with a deadline, stopped with SIGTERM or
 * killed), temp directories, and a deterministic byte pattern.
 */
#ifndef MC_TEST_CLIENT_UTIL_H
#define MC_TEST_CLIENT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct test_master {
    pid_t pid;
    int out_fd;    /* its stdout (READY line) */
    uint16_t port; /* RPC port */
    char addr[64]; /* "127.0.0.1:port" */
};

/* Starts $MC_BIN_DIR/mooncake_master on 127.0.0.1:port (0 = free port) with extra flags
 * (NULL-terminated, may be NULL); waits up to 10 s for READY. Returns 0 or -1. */
int tm_start(struct test_master *m, uint16_t port, const char *const *extra);
/* SIGTERM and wait (SIGKILL after 5 s). */
void tm_stop(struct test_master *m);
/* SIGKILL and wait. */
void tm_kill(struct test_master *m);

void tm_fill(uint8_t *p, size_t n, uint32_t seed);

#endif
