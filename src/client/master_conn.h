/*
 * master_conn.h - the client's link to mooncake_master: calls, liveness, re-mount, reconnect.
 *
 * Design. One mc_rpc_client (common/rpc_client.h) carries every master call; it is thread-safe
 * and pipelined, so API calls from many threads share it. On top of it this module keeps a
 * `up` flag and a ping thread:
 *   - open: connect, ServiceReady (a different proto number is INVALID_VERSION), and the flag
 *     is up;
 *   - every ping_interval_ms the thread sends Ping(client id). A reply of NEED_REMOUNT (the
 *     master restarted, or never saw this client) makes it send ReMountSegment with every
 *     segment this client mounted (the list is kept here), then go on pinging. Each segment's
 *     mount epoch (fresh for every mount, DESIGN.md §6) is handed to on_mount_epoch: from the
 *     MountSegment answer, and from the ReMountSegment answer; before the ReMount goes out,
 *     every remembered segment is handed epoch 0 ("no current mount": serve nothing), since
 *     the master dropped those mounts and descriptors of them must stop working now;
 *   - a call or ping that fails at the transport level (RPC_FAIL; a ping also on RPC_TIMEOUT)
 *     drops the flag, unless the connection it went out on was replaced meanwhile by one that
 *     is up (the rpc client's generation moved on): a failure reported late, by a caller
 *     descheduled under load, must not cut the fresh connection and the calls on it. While it is
 * down, every call fails at once with MC_ERR_RPC_FAIL instead of waiting on connect timeouts, and
 * the ping thread redials with exponential back-off (50 ms doubling up to ping_interval_ms):
 * connect, ServiceReady, Ping, ReMount when asked, and only then raises the flag again. The library
 * never sleeps in a caller's thread for the master's sake.
 */
#ifndef MC_CLIENT_MASTER_CONN_H
#define MC_CLIENT_MASTER_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "common/id.h"

struct mc_master_conn;
struct mc_auth_key;
struct mc_tls_ctx;

/* Segments one connection keeps mounted (and mounts again after a master restart); a further
 * mc_master_conn_mount is NO_AVAILABLE_HANDLE. */
#define MC_MASTER_CONN_MAX_SEGMENTS 16

struct mc_master_conn_config {
    const char *address; /* "host:port" */
    struct mc_id client_id;
    uint32_t connect_timeout_ms;
    uint32_t rpc_timeout_ms;
    uint32_t ping_interval_ms;
    const struct mc_auth_key *auth; /* shared secret (common/auth.h); NULL/unset = none */
    struct mc_tls_ctx *tls;         /* TLS to the master (common/tls.h); NULL = plain */
    /* Called (may be NULL) with the mount epoch of one of this client's segments: on the ping
     * thread with 0 for each remembered segment when a Ping asks for a re-mount (before the
     * ReMount goes out) and with each segment's new epoch after a successful ReMountSegment;
     * on the caller's thread after every successful MountSegment. 0 = the segment has no
     * current mount (the master never gives 0). Never called with the conn's lock held. */
    void (*on_mount_epoch)(void *arg, struct mc_id segment_id, uint64_t mount_epoch);
    /* Called (may be NULL) on the ping thread once per ping period, for the client's periodic
     * housekeeping (the tcp transport's pool prune). */
    void (*on_tick)(void *arg);
    /* Called (may be NULL) on the ping thread after a successful ReMountSegment: the master
     * restarted or expired this client, so registrations beyond the DRAM segments (the
     * LOCAL_DISK tier and its records) must be made again. */
    void (*on_remounted)(void *arg);
    /* Called (may be NULL) on the ping thread after the epoch-0 fence, before a ReMount: false
     * holds the ReMount back (the segment's new rdma key is still being registered on another
     * thread); pings go on, and the next one that is asked to re-mount asks again. */
    bool (*remount_ready)(void *arg);
    void *cb_arg;
};

/* What this client has mounted, re-sent on NEED_REMOUNT. */
struct mc_mounted_segment {
    struct mc_id id;
    char name[128];
    uint64_t base;
    uint64_t size;
    char endpoint[128];
    bool rdma;            /* mounted for protocol rdma: peers use base and rkey */
    uint32_t rkey;        /* rdma: the segment's remote key */
    char rdma_device[64]; /* rdma: device name (informational) */
};

/* Connects and checks the version; does not start the ping thread. RPC_FAIL / RPC_TIMEOUT
 * (master unreachable), INVALID_VERSION, INVALID_PARAMS (bad address). */
int mc_master_conn_open(const struct mc_master_conn_config *cfg, struct mc_master_conn **out);
int mc_master_conn_start(struct mc_master_conn *mc); /* starts the ping thread */
/* RegisterClient (with a token, for a client that holds no credential): the master mints a
 * fresh client id and its credential (MC_AUTH_CRED_BYTES into cred); this link acts for that id
 * from now on. Before mc_master_conn_start only. NOT_SUPPORTED from an older master;
 * INVALID_VERSION for an answer without both. */
int mc_master_conn_register(struct mc_master_conn *mc, struct mc_id *id, uint8_t *cred);
/* Makes the ping thread ping now (e.g. a held-back re-mount can go out). */
void mc_master_conn_kick(struct mc_master_conn *mc);

/* Whether the link is up (calls go out rather than failing fast); no lock. */
bool mc_master_conn_is_up(struct mc_master_conn *mc);

#ifdef MC_TEST_HOOKS
/* Test builds: while held, a call that failed with RPC_FAIL waits before it reports the
 * failure (takes the link down), as a caller descheduled on a loaded machine does; held counts
 * the calls waiting. */
void mc_master_conn_test_hold_reports(bool hold);
int mc_master_conn_test_reports_held(void);
#endif
/* Stops the ping thread and closes the connection. NULL is a no-op. */
void mc_master_conn_close(struct mc_master_conn *mc);

/* A master call (protobuf in, protobuf out). Fails fast with RPC_FAIL while the master is
 * known to be down. */
int mc_master_conn_call(struct mc_master_conn *mc, uint16_t method, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp);

/* mc_master_conn_call for a call the master may park (a long-poll with wait_ms): the call
 * timeout is wait_ms plus the normal one. */
int mc_master_conn_call_wait(struct mc_master_conn *mc, uint16_t method,
                             const ProtobufCMessage *req,
                             const ProtobufCMessageDescriptor *resp_desc, uint32_t wait_ms,
                             ProtobufCMessage **resp);

/* MountSegment, remembering the segment for re-mounts. */
int mc_master_conn_mount(struct mc_master_conn *mc, const struct mc_mounted_segment *seg);
/* The rkey the next ReMountSegment announces for a remembered segment (its memory region was
 * registered afresh). 0 or SEGMENT_NOT_FOUND. */
int mc_master_conn_set_segment_rkey(struct mc_master_conn *mc, struct mc_id segment_id,
                                    uint32_t rkey);
/* UnmountSegment, forgetting the segment. */
int mc_master_conn_unmount(struct mc_master_conn *mc, struct mc_id segment_id);

struct mc_master_conn_stats {
    bool up;
    uint64_t pings, ping_failures, remounts, reconnects, fast_failures;
};
void mc_master_conn_get_stats(struct mc_master_conn *mc, struct mc_master_conn_stats *st);

#endif
