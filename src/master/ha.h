/*
 * ha.h - master high availability: leader election and fencing on etcd (DESIGN.md §6).
 *
 * Masters started with --enable_ha campaign for the leader key /mooncake-c/<cluster_id>/leader:
 * a create-if-absent txn puts this master's RPC address there, attached to a lease of
 * lease_ttl_s. The winner is the leader; its epoch is the key's create_revision (it grows with
 * every new leader, and etcd never reuses a revision). The others are standbys: they watch the
 * key and campaign again when it is deleted (lease revoked or expired).
 *
 * Fencing. The leader renews its lease every TTL/3. It may acknowledge mutations only until
 * `last keepalive sent + granted TTL - margin` (mc_ha_gate says so, per call): a leader that
 * cannot reach etcd, or was stopped past its TTL, stops serving before its lease can have run out
 * in etcd, and serves again when a keepalive succeeds with TTL > 0. A keepalive answered without
 * TTL (the lease is gone: etcd can revoke a live lease, etcd #15247), a watched DELETE of its key
 * or the key holding another create_revision means leadership is lost for good: the on_lost
 * callback runs (the daemon exits so a supervisor restarts it as a standby: its in-memory state
 * may be stale). Every etcd write of the leader other than its own campaign compares the leader
 * key's create_revision with its epoch (mc_ha_put_fenced).
 *
 * Threads. One HA thread does all etcd I/O (unary calls and the watch's curl multi handle);
 * mc_ha_gate and mc_ha_view are lock-free reads any thread may make. mc_ha_stop(resign=true)
 * revokes the lease first, so a standby takes over at once (SIGTERM hand-over).
 */
#ifndef MC_MASTER_HA_H
#define MC_MASTER_HA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_fences;
struct mc_ha;
struct mc_textbuf;

struct mc_ha_config {
    const char *endpoints;  /* etcd "h1:2379;h2:2379" */
    const char *cluster_id; /* the key's namespace; [A-Za-z0-9._-], 1..64 chars */
    const char *ca_file, *cert_file, *key_file; /* TLS to etcd (optional) */
    uint32_t lease_ttl_s;                       /* 1..60; 0 = 3 */
    uint32_t margin_ms;                         /* fencing margin; 0 = min(500, TTL/4) */
    /* Runs on the HA thread once this master won, before it serves anything. */
    void (*on_leader)(void *arg, uint64_t epoch);
    /* Runs on the HA thread when leadership is lost for good (see above). */
    void (*on_lost)(void *arg, const char *why);
    void *cb_arg;
};

struct mc_ha_view {
    bool leader;           /* this master is the leader (it may still be fenced: mc_ha_gate) */
    char leader_addr[256]; /* "" when unknown */
    uint64_t epoch;        /* the leader's epoch; 0 when unknown */
};

/* Checks the config (MC_ERR_INVALID_PARAMS with a log line) and parses the endpoints. */
int mc_ha_new(const struct mc_ha_config *cfg, struct mc_ha **out);
/* The delete rule's fences (fence.h) to keep in etcd (ha_fence.h): a new leader loads them
 * before it serves (and resigns when it cannot), the leader's HA thread writes the journal's
 * pending records every POLL (50 ms) while its gate is open. Before mc_ha_start. */
void mc_ha_set_fences(struct mc_ha *ha, struct mc_fences *f);
/* Starts the HA thread (campaigning) once this master's RPC port is bound; advertise is its RPC
 * address for clients, "host:port". Returns 0, MC_ERR_INVALID_PARAMS or MC_ERR_INTERNAL_ERROR. */
int mc_ha_start(struct mc_ha *ha, const char *advertise);
/* Stops the HA thread; with resign, a leader revokes its lease first (its key goes at once). */
void mc_ha_stop(struct mc_ha *ha, bool resign);
void mc_ha_free(struct mc_ha *ha);

/* 0 when this master may serve a call now (the leader, inside its lease), else
 * MC_ERR_NOT_LEADER. NULL ha (no HA) = 0. */
int mc_ha_gate(const struct mc_ha *ha);
void mc_ha_view(const struct mc_ha *ha, struct mc_ha_view *v);
/* The leader key of a cluster id ("/mooncake-c/<id>/leader"). */
int mc_ha_leader_key(const char *cluster_id, char *buf, size_t cap);

/* A write to etcd under the leader's fence: key = val only while the leader key still has this
 * leader's create_revision. MC_ERR_NOT_LEADER when not (or no longer) the leader. HA thread
 * only (etcd handles are single-threaded); for records the leader keeps in etcd. */
int mc_ha_put_fenced(struct mc_ha *ha, const char *key, const void *val, size_t len);

/* HTTP bodies of GET /role ("leader\n" or "standby\n") and GET /leader (the leader's address,
 * or 503 with "unknown\n"). Return the HTTP status. */
int mc_ha_http_role(const struct mc_ha *ha, struct mc_textbuf *body);
int mc_ha_http_leader(const struct mc_ha *ha, struct mc_textbuf *body);
/* The HTTP port's /health body under HA: {"status":"ok","role":"leader"|"standby",
 * "ha_state":"leader"|"fenced"|"standby","service_ready":BOOL,"epoch":N}; role is "leader" and
 * service_ready true only while the gate is open; "fenced" = elected but not serving (its
 * lease may have lapsed). Always 200: the process is alive either way. */
int mc_ha_http_health(const struct mc_ha *ha, struct mc_textbuf *body);

#endif
