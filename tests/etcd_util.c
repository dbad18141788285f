/*
 * etcd_util.c - see etcd_util.h.
 */
#include "etcd_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/etcd.h"

static int find_etcd(char *path, size_t cap)
{
    const char *env = getenv("MC_ETCD_BIN");
    if (env && env[0]) {
        snprintf(path, cap, "%s", env);
        return access(path, X_OK);
    }
    const char *p = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s:/usr/bin:/usr/local/bin", p ? p : "");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(path, cap, "%s/etcd", d);
        if (access(path, X_OK) == 0)
            return 0;
    }
    return -1;
}

char eu_extra_listen_host[64];

static int spawn_member(struct eu_etcd *e, int i)
{
    char bin[600], name[16], data[128], lc[128], ac[64], lp[64], ap[64], cluster[256], log[128];
    if (find_etcd(bin, sizeof(bin)) != 0)
        return 77;
    snprintf(name, sizeof(name), "m%d", i);
    snprintf(data, sizeof(data), "--data-dir=%s/%s", e->dir, name);
    if (eu_extra_listen_host[0]) /* also reachable from a network namespace */
        snprintf(lc, sizeof(lc), "--listen-client-urls=http://127.0.0.1:%d,http://%s:%d",
                 e->client_port[i], eu_extra_listen_host, e->client_port[i]);
    else
        snprintf(lc, sizeof(lc), "--listen-client-urls=http://127.0.0.1:%d", e->client_port[i]);
    snprintf(ac, sizeof(ac), "--advertise-client-urls=http://127.0.0.1:%d", e->client_port[i]);
    snprintf(lp, sizeof(lp), "--listen-peer-urls=http://127.0.0.1:%d", e->peer_port[i]);
    snprintf(ap, sizeof(ap), "--initial-advertise-peer-urls=http://127.0.0.1:%d", e->peer_port[i]);
    size_t off = (size_t)snprintf(cluster, sizeof(cluster), "--initial-cluster=");
    for (int k = 0; k < e->n; k++)
        off += (size_t)snprintf(cluster + off, sizeof(cluster) - off, "%sm%d=http://127.0.0.1:%d",
                                k ? "," : "", k, e->peer_port[k]);
    snprintf(log, sizeof(log), "%s/%s.log", e->dir, name);
    char nm[32];
    snprintf(nm, sizeof(nm), "--name=%s", name);
    const char *argv[] = {bin, nm, data, lc, ac, lp, ap, cluster, "--initial-cluster-token=mc-test",
                          "--initial-cluster-state=new",
                          /* short election timings: a member's death is noticed quickly */
                          "--heartbeat-interval=50", "--election-timeout=500", "--log-level=warn",
                          NULL};
    return cu_spawn(&e->proc[i], argv, log) == 0 ? 0 : -1;
}

void eu_member_endpoint(const struct eu_etcd *e, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "127.0.0.1:%d", e->client_port[i]);
}

static int wait_ready(struct eu_etcd *e, int timeout_ms)
{
    struct mc_etcd_config cfg = {.endpoints = e->endpoints, .timeout_ms = 1000};
    struct mc_etcd *c;
    if (mc_etcd_new(&cfg, &c) != 0)
        return -1;
    uint64_t deadline = cu_now_ms() + (uint64_t)timeout_ms;
    int rc = -1;
    while (cu_now_ms() < deadline) {
        struct mc_etcd_kv kv;
        bool found;
        /* a put, not a read: it needs a raft leader (a quorum) */
        if (mc_etcd_put(c, "/mc-test/ready", "1", 1, 0) == 0 &&
            mc_etcd_get(c, "/mc-test/ready", &kv, &found, NULL) == 0 && found) {
            mc_etcd_kv_clear(&kv);
            rc = 0;
            break;
        }
        cu_sleep_ms(50);
    }
    mc_etcd_free(c);
    return rc;
}

int eu_start(struct eu_etcd *e, int n, int timeout_ms)
{
    char bin[600];
    memset(e, 0, sizeof(*e));
    if (find_etcd(bin, sizeof(bin)) != 0) {
        fprintf(stderr, "etcd is not installed (etcd-server): skipping\n");
        return 77;
    }
    if (n < 1 || n > EU_MAX_MEMBERS)
        return -1;
    e->n = n;
    if (mc_proc_mkdtemp(e->dir, sizeof(e->dir), "/dev/shm", "mc-etcd") != 0 &&
        mc_proc_mkdtemp(e->dir, sizeof(e->dir), "/tmp", "mc-etcd") != 0)
        return -1;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        e->client_port[i] = cu_free_port();
        e->peer_port[i] = cu_free_port();
        off += (size_t)snprintf(e->endpoints + off, sizeof(e->endpoints) - off, "%s127.0.0.1:%d",
                                i ? ";" : "", e->client_port[i]);
    }
    for (int i = 0; i < n; i++)
        if (spawn_member(e, i) != 0)
            goto fail;
    if (wait_ready(e, timeout_ms) != 0)
        goto fail;
    return 0;
fail:
    for (int i = 0; i < n; i++)
        cu_dump_log(&e->proc[i], "etcd");
    eu_stop(e);
    return -1;
}

int eu_leader(struct eu_etcd *e)
{
    for (int i = 0; i < e->n; i++) {
        if (e->proc[i].pid <= 0)
            continue;
        char ep[64];
        eu_member_endpoint(e, i, ep, sizeof(ep));
        struct mc_etcd_config cfg = {.endpoints = ep, .timeout_ms = 1000};
        struct mc_etcd *c;
        uint64_t me = 0, leader = 0;
        if (mc_etcd_new(&cfg, &c) != 0)
            continue;
        int rc = mc_etcd_status(c, &me, &leader);
        mc_etcd_free(c);
        if (rc == 0 && me != 0 && me == leader)
            return i;
    }
    return -1;
}

void eu_kill_member(struct eu_etcd *e, int i)
{
    if (e->proc[i].pid > 0)
        cu_stop(&e->proc[i], SIGKILL, 2000);
}

int eu_restart_member(struct eu_etcd *e, int i)
{
    eu_kill_member(e, i);
    return spawn_member(e, i);
}

void eu_stop(struct eu_etcd *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->proc[i].pid > 0)
            cu_stop(&e->proc[i], SIGKILL, 2000);
    if (e->dir[0])
        cu_rm_rf(e->dir);
    e->dir[0] = '\0';
}
