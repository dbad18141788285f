/*
 * disk_tier.h - the client's LOCAL_DISK tier (DESIGN.md §6, §8): its disk store, its
 * registration with the master, and the holder's side of LOCAL_DISK reads.
 *
 * Start-up (mc_disk_tier_open, then mc_disk_tier_register before the client is ready):
 *   - the store in disk_path is opened and recovered (disk_store.h: every extent scanned, torn
 *     or corrupt records dropped);
 *   - MountLocalDiskSegment(client id, endpoint, capacity) registers the tier; the client id is
 *     the one persisted in disk_path (client_id.h), so a restart within the master's client_ttl
 *     is the same holder to the master;
 *   - every recovered record is re-registered, NotifyOffloadSuccess(reregister = true) with its
 *     key, size, version and CRC, in chunks, the last one (empty when there is no record)
 *     marked reregister_complete: the listing is authoritative, and the master drops this
 *     holder's copies it did not name (a record lost at recovery is no phantom replica). The
 *     master attaches a LOCAL_DISK replica only to the same version of a present object (or
 *     recreates an absent one after its own restart; the higher version wins where two
 *     holders' records meet), and a record it refuses (non-zero per-item status) is deleted
 *     here, so a removed or re-put key never comes back with old bytes — unless the master's
 *     version it sends back is below the record's (never delete a copy newer than the
 *     master's) or the refusal was INTERNAL_ERROR (nothing decided).
 * The same registration runs again when the master lost track of this client (a master restart:
 * master_conn's on_remounted, or an offload heartbeat refused for an unknown holder).
 *
 * Capacity eviction (the store's mc_disk_evict_fn): BatchEvictDiskReplica with the keys and
 * versions of the records about to go, BEFORE the files are deleted; when the master cannot be
 * told, the eviction is cancelled (the store deletes nothing and the append fails).
 *
 * Holder reads. PeerDiskRead requests (proto/peer.proto) arrive on the peer server's I/O
 * threads and are handed to this tier's serve threads (a queue, `serve_threads` of them), so
 * SSD reads never stall the I/O threads. A serve thread reads every item of the request with
 * one batched store read (io_uring, O_DIRECT) straight into one 4 KiB-aligned reply buffer, and
 * the reply's payload iovecs point into it (no copy). Per item: a record of another version or
 * size than the reader asked for, or none, is REPLICA_NOT_FOUND (stale bytes are never served);
 * a CRC failure is CHECKSUM_MISMATCH; the stored CRC goes back with the bytes for the reader to
 * check. A request whose values would not fit one reply frame gets INVALID_PARAMS for the items
 * past the limit. A reader in this process reads the store directly (mc_disk_tier_read).
 *
 * Test hook (MC_TEST_HOOKS builds only): MC_TEST_DISK_EXTENT_SIZE in the environment (bytes, a
 * multiple of 4 KiB) sets the store's extent size at open, so a fault test fills a small
 * disk_capacity and runs capacity eviction after a few offloads.
 *
 * Thread safety: every call may come from any thread; register and the worker's appends are
 * called from one thread at a time (the worker's).
 */
#ifndef MC_CLIENT_DISK_TIER_H
#define MC_CLIENT_DISK_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "client/transport.h"
#include "common/id.h"
#include "mooncake/errors.h"

struct mc_disk_tier;
struct mc_disk_store;
struct mc_master_conn;
struct mc_rpc_call;

struct mc_disk_tier_config {
    const char *path;
    uint64_t capacity;
    struct mc_master_conn *mc; /* NULL (tests): nothing registered, evictions tell no one */
    struct mc_id client_id;
    const char *endpoint; /* this client's peer server "host:port" */
    uint64_t max_payload; /* the largest reply payload of one peer frame */
    int serve_threads;    /* 0 = 2 */
    bool enable_offloading;
    /* The client's rdma transport (protocol rdma), or NULL: with one, a PeerDiskRead in RDMA
     * mode (rdma_disk.h) is served by RDMA-writing each value into the reader's buffer through
     * the transport's staging buffer; without one it is refused with NOT_SUPPORTED. */
    struct mc_transport *rdma;
};

/* Opens and recovers the store and starts the serve threads; registers nothing yet. Errors
 * of mc_disk_store_open (logged with the path), INTERNAL_ERROR. */
int mc_disk_tier_open(const struct mc_disk_tier_config *cfg, struct mc_disk_tier **out);
/* MountLocalDiskSegment and the re-registration of every record (see above). 0, or the
 * failing call's code (NOT_SUPPORTED from a master without the tier). */
int mc_disk_tier_register(struct mc_disk_tier *t);
/* Whether a registration or heartbeat error says the master runs without the tier. */
static inline bool mc_disk_tier_master_lacks_tier(int rc)
{
    return rc == MC_ERR_UNABLE_OFFLOAD || rc == MC_ERR_NOT_SUPPORTED ||
           rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS || rc == MC_ERR_UNAVAILABLE_IN_CURRENT_MODE;
}
/* Asks for a registration the next time the worker looks (mc_disk_tier_take_register). */
void mc_disk_tier_want_register(struct mc_disk_tier *t);
bool mc_disk_tier_take_register(struct mc_disk_tier *t);
/* UnmountLocalDiskSegment (best effort; the master expires the client anyway). */
void mc_disk_tier_unmount(struct mc_disk_tier *t);
/* Stops the serve threads; calls still queued are answered UNAVAILABLE_IN_CURRENT_STATUS.
 * Call after the peer server stopped (no new calls arrive). */
void mc_disk_tier_stop(struct mc_disk_tier *t);
/* Stops if needed, closes the store (files stay) and frees. NULL is a no-op. */
void mc_disk_tier_close(struct mc_disk_tier *t);

struct mc_disk_store *mc_disk_tier_store(struct mc_disk_tier *t);

/* The peer server's PeerDiskRead handler (arg = the tier). */
void mc_disk_tier_on_peer_read(void *arg, struct mc_rpc_call *call);

/* A reader in this process: every item read from the store into its buffer, with the holder's
 * per-item rules above (status, crc, crc_valid set). */
void mc_disk_tier_read(struct mc_disk_tier *t, struct mc_disk_read_item *items, size_t n);

/* Deletes key's record when its version is <= version (0 = any): the master removed the object
 * or refused the record. 0 (also when there is nothing to delete) or the store's error. */
int mc_disk_tier_delete(struct mc_disk_tier *t, const char *key, uint64_t version);
/* The same for n keys at once (the master's deletes of one heartbeat): the dead marks of every
 * record to drop go to the store in one call, written through one ring. rcs[i]: 0 when key i's
 * record is gone (or was never there, or is newer than versions[i]), else why not (it stays: its
 * delete must not be acknowledged). Returns 0 or the first failure. */
int mc_disk_tier_delete_many(struct mc_disk_tier *t, const char *const *keys,
                             const uint64_t *versions, size_t n, int *rcs);

struct mc_disk_tier_stats {
    uint64_t reregistered; /* records the master accepted at (re-)registration */
    uint64_t refused;      /* records it refused (deleted here) */
    uint64_t registrations;
    uint64_t evict_notified; /* records reported by BatchEvictDiskReplica */
    uint64_t peer_reads;     /* items served to peers */
    uint64_t peer_bytes;
};
void mc_disk_tier_get_stats(struct mc_disk_tier *t, struct mc_disk_tier_stats *st);

#endif
