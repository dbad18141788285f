/*
 * ha_fixture.h - the fixture of the fail-over tests with real processes (test_ha_clients.c,
 * test_ha_dram.c): one etcd member, two mooncake_master processes of one high-availability
 * cluster (lease TTL 2 s), a holder daemon and in-test clients that name the cluster by its
 * etcd:// URL, and the masters' answer to GetLeader. Assertions are cmocka's.
 */
#ifndef MC_TESTS_HA_FIXTURE_H
#define MC_TESTS_HA_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster_util.h"
#include "common/rpc_client.h"
#include "etcd_util.h"

struct hx {
    struct eu_etcd etcd;
    int etcd_rc; /* eu_start's: 0, 77 (etcd not installed) or -1 */
    struct cu_cluster c;
    struct cu_proc ma, mb, holder; /* the two masters and the holder daemon */
    char rpc_a[64], rpc_b[64];     /* their RPC addresses (hx_start_master) */
    char cluster_id[32];
    char url[300]; /* "etcd://ENDPOINTS/CLUSTER_ID" once hx_name_cluster ran */
};

/* One etcd member (20 s), then cu_cluster_init(prefix). Returns 0 when etcd is not there or
 * did not start (h->etcd_rc says which: the tests skip or fail on it), else cu_cluster_init's. */
int hx_setup(struct hx *h, const char *prefix, const char *cluster_id);
/* SIGKILLs the holder and both masters, stops etcd, removes the directory. Safe after any
 * hx_setup. */
void hx_teardown(struct hx *h);
/* Starts a master of the cluster: --enable_ha, --etcd_endpoints, --cluster_id,
 * --ha_lease_ttl_sec=2, then flags (NULL-terminated, may be NULL); its RPC address into rpc
 * (64 bytes). Asserts it started. */
void hx_start_master(struct hx *h, struct cu_proc *p, char *rpc, const char *const *flags);
/* The usual start: master A (h->ma) started and leading, then master B (h->mb) standing by,
 * both with flags, and the cluster named (hx_name_cluster). Returns A's epoch. */
uint64_t hx_start_pair(struct hx *h, const char *const *flags, int timeout_ms);
/* From here on the daemons and clients started by cu_start_daemon / cu_open_client name the
 * cluster (h->url) instead of one master. */
void hx_name_cluster(struct hx *h);
/* An RPC client of the master at addr (3 s calls); free with mc_rpc_client_free. */
struct mc_rpc_client *hx_admin(const char *addr);
/* Whether the master at addr answers GetLeader as the leader; its epoch into *epoch. */
bool hx_leads(const char *addr, uint64_t *epoch);
/* Waits (up to timeout_ms, else fails the test) until the master at addr leads; its epoch. */
uint64_t hx_wait_leads(const char *addr, int timeout_ms);

#endif
