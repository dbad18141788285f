/*
 * client_internal.h - struct mc_client and what the client's source files share.
 *
 * The client is split by job: client.c (open/close, config, exist/remove/query, registered
 * buffers), client_put.c (Put and BatchPut), client_get.c (Get, BatchGet, GetSize),
 * client_rdma.c (what protocol rdma adds), client_disk.c (LOCAL_DISK replica reads), disk_tier.c
 * (the tier), worker.c (offload), worker_promote.c (promotion). Helpers declared here are internal
 * to the library; the test hooks (MC_TEST_HOOKS builds) are for the test suite only.
 */
#ifndef MC_CLIENT_CLIENT_INTERNAL_H
#define MC_CLIENT_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "client/client_metrics.h"
#include "client/disk_tier.h"
#include "client/master_conn.h"
#include "client/peer_server.h"
#include "client/segment.h"
#include "client/transport.h"
#include "client/worker.h"
#include "common/auth.h"
#include "common/id.h"
#include "common/log.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"

#define MC_CLIENT_MAX_KEY 4096
#define MC_CLIENT_STR 256

struct mc_reg_buffer {
    void *addr;
    size_t len;
};

struct mc_client {
    struct mc_client_config cfg; /* strings point into the arrays below */
    struct mc_logger logger;     /* cfg's log_level / log_fn: see mc_log_scope */
    char master_address[MC_CLIENT_STR];
    char host[MC_CLIENT_STR];
    char bind_address[MC_CLIENT_STR];
    char protocol[16];
    char disk_path[MC_CLIENT_STR];
    char endpoint[128]; /* host:port of the peer server (= the segment name) */

    struct mc_auth_key auth;        /* from cfg.auth_token_file; unset = none */
    struct mc_auth_key master_auth; /* auth with the client credential: master links only */
    struct mc_auth_cred *cred;      /* this client's credential (with a token) */
    struct mc_tls_ctx *tls;         /* from cfg.tls_*_file; NULL = plain TCP */
    struct mc_id id;
    struct mc_segment_mem seg;
    struct mc_id seg_id;
    bool mounted;

    struct mc_peer_server *ps;
    struct mc_transport *local, *tcp;
    struct mc_transport *rdma; /* protocol rdma only */
    struct mc_master_conn *mc;
    /* LOCAL_DISK tier (disk_path set): set once before its mount, read by the peer server's
     * PeerDiskRead handler */
    struct mc_disk_tier *_Atomic disk;
    struct mc_worker *worker;               /* offload and promotion loops (with the disk tier) */
    struct mc_holder_index *hidx;           /* what the DRAM segment holds (holder_index.h) */
    struct mc_hidx_stream *_Atomic hstream; /* feeds hidx (holder_index_stream.h); read by
                                             * the ping thread's mount-epoch callback */
    /* held while the mount-epoch callback uses hstream and while close takes it away, so the
     * stream is never freed under a re-mount (order: hstream_lock, then the stream's own) */
    pthread_mutex_t hstream_lock;

    pthread_mutex_t buf_lock;
    struct mc_reg_buffer *bufs;
    size_t nbufs, capbufs;

#ifdef MC_TEST_HOOKS
    _Atomic uint32_t test_read_delay_ms;
    _Atomic int test_corrupt_reads;
#endif
    struct mc_client_metrics metrics; /* client_metrics.h: this client's own counts */
};

/* INVALID_KEY unless key is 1..MC_CLIENT_MAX_KEY bytes. */
int mc_client_check_key(const char *key);
/* A caller's config copied over the defaults, as far as its struct_size covers (ABI policy in
 * client.h); INVALID_PARAMS for a size this library does not know. rc NULL = defaults. */
int mc_client_config_copy(const struct mc_client_config *in, struct mc_client_config *out);
int mc_replicate_config_copy(const struct mc_replicate_config *in, struct mc_replicate_config *out);
/* The client id as a message field (u must outlive the message). */
Mc__Uuid *mc_client_uuid(const struct mc_client *c, Mc__Uuid *u);
/* Moves len bytes to/from one MEMORY replica, locally (memcpy) when this process serves its
 * segment, else over the network, under the descriptor's mount epoch: REPLICA_IS_GONE when the
 * segment has been re-mounted since the descriptor was issued (see peer_server.h). */
/* Whether the replica goes over rdma: this client runs protocol rdma and the descriptor carries
 * RDMA keys (the holder mounted its segment with protocol rdma). */
bool mc_client_replica_is_rdma(const struct mc_client *c, const Mc__ReplicaDescriptor *r);
int mc_client_replica_io(struct mc_client *c, const Mc__ReplicaDescriptor *r, bool is_write,
                         void *buf, size_t len);
/* A write by mc_client_replica_io that also sets *crc to the CRC32C of the len bytes, taken
 * while they are copied when the replica is in this process's segment (one pass), else in a
 * pass of its own. */
int mc_client_replica_write_crc(struct mc_client *c, const Mc__ReplicaDescriptor *r,
                                const void *buf, size_t len, uint32_t *crc);
/* Where len bytes of MEMORY replica r are, and whether this process serves its segment (then
 * the local transport moves them). INVALID_REPLICA for a descriptor that cannot hold them. */
int mc_client_replica_loc(struct mc_client *c, const Mc__ReplicaDescriptor *r, size_t len,
                          struct mc_xfer_loc *loc, bool *local);

/* LOCAL_DISK reads (client_disk.c): every item read from the holder its endpoint / holder id
 * names: this process's store directly, others by one PeerDiskRead per holder. holders[i] is
 * item i's LocalDiskLocation. Statuses in the items. */
void mc_client_disk_read(struct mc_client *c, const Mc__LocalDiskLocation *const *holders,
                         struct mc_disk_read_item *items, size_t n);

/* ---- protocol rdma (client_rdma.c; client_rdma_off.c in a build without RDMA) -------------- */

struct mc_rdma_ops;
/* Opens c->rdma (ops NULL = the real libraries); an error, logged, when the host has no usable
 * device or the build has no RDMA: protocol rdma never falls back to tcp. */
int mc_client_rdma_open(struct mc_client *c, const struct mc_rdma_ops *ops);
/* The rdma_cm listener on the peer server's port (no-op without c->rdma). */
int mc_client_rdma_listen(struct mc_client *c);
/* Registers the segment and fills ms's rkey and device (no-op without c->rdma). */
int mc_client_rdma_mount_keys(struct mc_client *c, struct mc_mounted_segment *ms);
/* The mount fence (epoch 0) of c's segment: starts registering it afresh on a worker thread (the
 * old rkey dies when the new one is swapped in); a new epoch settles it. */
void mc_client_rdma_fence(struct mc_client *c, struct mc_id segment_id, uint64_t epoch);
/* master_conn's remount_ready (arg: the client): false while the worker registers; then hands
 * the new rkey (0 on failure: re-mounted for tcp only) to the master link. */
bool mc_client_rdma_remount_ready(void *arg);
/* Waits for a running re-registration and starts no more (before the master link closes). */
void mc_client_rdma_stop(struct mc_client *c);
/* Registered buffers: registered with the rdma transport too (no-op without c->rdma). */
int mc_client_rdma_register_buffer(struct mc_client *c, void *addr, size_t len);
void mc_client_rdma_unregister_buffer(struct mc_client *c, void *addr);
/* LOCAL_DISK reads of one holder at ep in RDMA mode (the holder RDMA-writes the values into the
 * items' buffers, registered for the call when they are not already): the items it could not
 * take that way are left with status 1, for tcp (client_disk.c). */
void mc_client_rdma_disk_group(struct mc_client *c, const char *ep, struct mc_disk_read_item *items,
                               size_t m);

/* ---- for tests --------------------------------------------------------------------------- */

/* The reads of a batch whose BatchGetReplicaList answers are rs (client_get.c): results[i] is
 * key i's size or error, tiers[i] the kind of replica that served it; t0 is when the leases
 * started. Returns 0 or an error for the whole batch. */
int mc_client_batch_read(struct mc_client *c, const char *const *keys,
                         Mc__GetReplicaListResponse **rs, size_t n, void *const *bufs,
                         const size_t *caps, int64_t *results, int *tiers, uint64_t t0);
/* Put pieces shared with Upsert (client_put.c): the ReplicateConfig message for rc (NULL =
 * defaults), rc's checks, and the writes of a value to every replica of a start answer (*crc
 * gets the value's CRC32C). */
void mc_client_fill_config(Mc__ReplicateConfig *m, const struct mc_replicate_config *rc);
int mc_client_check_config(const struct mc_replicate_config *rc);
int mc_client_write_replicas(struct mc_client *c, Mc__ReplicaDescriptor **reps, size_t n,
                             const void *buf, size_t len, uint32_t *crc);
/* A public replica descriptor from the wire's (client.c). */
void mc_client_fill_replica(struct mc_replica_info *o, const Mc__ReplicaDescriptor *d);
struct mc_master_conn *mc_client_master_conn(struct mc_client *c);
struct mc_peer_server *mc_client_peer_server(struct mc_client *c);
struct mc_id mc_client_segment_id(const struct mc_client *c);
struct mc_transport *mc_client_tcp_transport(struct mc_client *c);

#ifdef MC_TEST_HOOKS
/* Every Get sleeps this long after moving the bytes and before its lease check. */
void mc_client_test_set_read_delay(struct mc_client *c, uint32_t ms);
/* The next n reads flip one byte of the value after the transfer (as a bad wire would). */
void mc_client_test_corrupt_reads(struct mc_client *c, int n);
/* Flips byte `at` of key's value where this process's own segment stores it (a damaged
 * segment, not a bad copy); again to mend it. 0, or why not (no such local replica). */
int mc_client_test_flip_stored(struct mc_client *c, const char *key, size_t at);
/* The RDMA ops table the next mc_client_open calls use with protocol rdma (NULL = the real
 * libraries): the tests pass their loopback test provider (tests/rdma_fake.h). */
void mc_client_test_set_rdma_ops(const struct mc_rdma_ops *ops);
#endif

/* The client's metrics registry (client_metrics.h), for the daemon to add its own series and
 * serve it; NULL when counting is off. */
struct mc_metrics *mc_client_registry(struct mc_client *c);

#endif
