/*
 * etcd_util.h - a real etcd for the tests: 1 or 3 members on loopback ports, data on tmpfs
 * (/dev/shm, else /tmp), started from $PATH's `etcd` (Debian's etcd-server). Children die with
 * the test (PR_SET_PDEATHSIG, through the proc harness); eu_stop kills every member and removes
 * the data directory.
 */
#ifndef MC_TESTS_ETCD_UTIL_H
#define MC_TESTS_ETCD_UTIL_H

#include "cluster_util.h"

#define EU_MAX_MEMBERS 3

struct eu_etcd {
    int n;
    char dir[64];
    struct cu_proc proc[EU_MAX_MEMBERS];
    int client_port[EU_MAX_MEMBERS], peer_port[EU_MAX_MEMBERS];
    char endpoints[256]; /* "127.0.0.1:P1;127.0.0.1:P2;..." */
};

/* An address the members listen on for clients besides 127.0.0.1 ("" = none; set before
 * eu_start): a test that partitions a master in a network namespace reaches etcd through it. */
extern char eu_extra_listen_host[64];
/* Starts n members and waits until the cluster answers a read (timeout_ms). Returns 0, 77 when
 * no etcd binary is installed, -1 on failure (logs dumped). */
int eu_start(struct eu_etcd *e, int n, int timeout_ms);
/* Stops member i (SIGKILL) / starts it again with its data. */
void eu_kill_member(struct eu_etcd *e, int i);
int eu_restart_member(struct eu_etcd *e, int i);
/* Index of the member that is the raft leader now, or -1. */
int eu_leader(struct eu_etcd *e);
/* Kills every member and removes the data. Safe on a zeroed or failed struct. */
void eu_stop(struct eu_etcd *e);
/* "127.0.0.1:P" of member i. */
void eu_member_endpoint(const struct eu_etcd *e, int i, char *buf, size_t cap);

#endif
