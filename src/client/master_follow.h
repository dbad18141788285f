/*
 * master_follow.h - finding the master that leads a high-availability cluster (DESIGN.md §6).
 *
 * A client names an HA cluster as `etcd://h1:2379;h2:2379` (commas work too), optionally
 * followed by `/<cluster_id>` (default mooncake_cluster, as the master's --cluster_id). The
 * resolver reads the leader key /mooncake-c/<cluster_id>/leader from etcd (common/etcd.h):
 * its value is the leader's RPC address, its create_revision the leader's epoch. master_conn.c
 * resolves again whenever the master it talks to fails, times out or answers NOT_LEADER, and
 * refuses a master whose epoch is below the highest it has seen.
 *
 * A plain "host:port" master needs no resolver; a standby reached that way still names the
 * leader in its GetLeader answer (master_conn.c follows that too).
 */
#ifndef MC_CLIENT_MASTER_FOLLOW_H
#define MC_CLIENT_MASTER_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_etcd;
struct mc_master_follow;
struct mc_master_link;
struct mc_rpc_client;
struct mc_rpc_client_config;

/* Whether a master address is an etcd:// cluster name. */
bool mc_master_follow_is_url(const char *address);
/* Parses an etcd:// address. INVALID_PARAMS (with a log line) for a bad one. */
int mc_master_follow_new(const char *url, struct mc_master_follow **out);
void mc_master_follow_free(struct mc_master_follow *f);
/* The resolver's etcd handle (single-threaded: its owner's thread only) and leader key. */
struct mc_etcd *mc_master_follow_etcd(struct mc_master_follow *f);
const char *mc_master_follow_key(const struct mc_master_follow *f);
/* Reads the leader key: *addr ("host:port") and *epoch. RPC_FAIL when etcd is unreachable or
 * no master leads right now (a retryable state). Not thread-safe: one caller at a time. */
int mc_master_follow_resolve(struct mc_master_follow *f, char *addr, size_t cap, uint64_t *epoch);

/*
 * The link: which master a client talks to now. It keeps one rpc client per master address it
 * has talked to (at most MC_MASTER_LINK_MAX; never freed before the link, so callers on other
 * threads may keep using the one they loaded) and an atomic pointer to the current one.
 * Switching is the ping thread's job (mc_master_link_follow); every other thread only loads.
 */
#define MC_MASTER_LINK_MAX 8

/* address: "host:port" or etcd://...; base: the rpc client settings (host/port ignored; its
 * auth key is copied). With etcd:// the leader is resolved now (RPC_FAIL: none yet or etcd
 * unreachable), the connect timeout capped at 500 ms. */
int mc_master_link_new(const char *address, const struct mc_rpc_client_config *base,
                       struct mc_master_link **out);
void mc_master_link_free(struct mc_master_link *l);
struct mc_rpc_client *mc_master_link_rpc(struct mc_master_link *l);
/* The current master's "host:port" (stable until the link is freed). */
const char *mc_master_link_addr(struct mc_master_link *l);
/* Whether this link follows an HA cluster (etcd://, or a master that said NOT_LEADER). */
bool mc_master_link_ha(struct mc_master_link *l);
/* Ping thread: the current master failed or said NOT_LEADER: find the leader (etcd, or the
 * current master's GetLeader) and make it current. 0 (maybe unchanged) or RPC_FAIL. */
int mc_master_link_follow(struct mc_master_link *l, bool not_leader);
/* A master reported epoch (Ping): NOT_LEADER when below the highest seen on an HA link (a
 * deposed leader), else 0 and remembered. */
int mc_master_link_check_epoch(struct mc_master_link *l, uint64_t epoch);
/* The highest epoch seen on this link (0 = none yet). */
uint64_t mc_master_link_epoch(struct mc_master_link *l);

#endif
