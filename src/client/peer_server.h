/*
 * peer_server.h - the client's data-plane server: peers read and write this process's segments.
 *
 * Design. A peer server is an mc_rpc_server (common/rpc_server.h: epoll I/O threads, many
 * connections, framing, bad-frame handling) with handlers for the peer methods of wire.h:
 * PeerWrite, PeerRead, PeerBatchWrite and PeerBatchRead (proto/peer.proto). Handlers run on the
 * I/O threads and only copy: a write lands in the segment with one memcpy from the request
 * body, a read is answered straight from segment memory (no copy; the segment outlives the
 * server because the owner stops the server before unmapping).
 *
 * The server keeps a small table of the segments it serves: {id, base, size, mount epoch}.
 * Every request is checked against it, every time:
 *   - the segment id must name a segment in the table. The id is drawn once per client (a new
 *     client gets a fresh id) and a segment leaves the table when it is unmounted, so a
 *     descriptor of an unmounted segment gets SEGMENT_NOT_FOUND;
 *   - the request's mount epoch must be the segment's: the id survives a re-mount (after the
 *     master expired the client, or restarted, the client re-mounts the same segment, and the
 *     master hands its offsets out afresh), so the epoch, fresh for every mount (DESIGN.md §6),
 *     is what tells a descriptor of the current mount from one of an earlier mount. The owner
 *     sets the epoch from every (Re)MountSegment answer, and sets 0 when a Ping asks for a
 *     re-mount: 0 is never a mount's epoch and means "no current mount", every request is
 *     refused until the ReMount answer sets the new epoch. A mismatch is REPLICA_IS_GONE with
 *     a log line; that includes epoch 0 (a peer that predates epochs). Until the first epoch
 *     is set the segment accepts any epoch: it was never mounted, so no descriptor of an
 *     earlier mount can exist, and this closes the window between the master's MountSegment
 *     and the owner reading its answer;
 *   - offset + length must lie inside the segment (overflow-safe), else INVALID_PARAMS;
 *   - a write's payload must hold exactly `length` bytes (a truncated or padded payload is
 *     INVALID_PARAMS and nothing is written); a batch write's payload must be exactly the sum
 *     of its slices' lengths (else the whole call is INVALID_PARAMS);
 *   - a read (or a batch read's successful slices) must fit one frame, else INVALID_PARAMS.
 * Batch calls answer one status per slice. A peer that breaks the framing (bad magic, a frame
 * above max_frame_bytes, a connection dropped mid-frame) is disconnected by the RPC layer;
 * other peers never notice. PeerDiskRead (LOCAL_DISK reads) is handed to the owner's
 * on_disk_read handler (the client's disk tier, disk_tier.h); without one it is NOT_SUPPORTED.
 *
 * Segment bytes and threads. Bytes of an object are only written by its Put (before PutEnd
 * makes it readable) and only read under a read lease, and the master never reuses the space of
 * a leased object, so reads and writes of the same bytes are ordered by the master, not by
 * this process; a read that outlives its lease is caught by the reader (LEASE_EXPIRED). Thread
 * sanitizer cannot see that ordering (it crosses sockets), so TSan builds copy read replies and
 * serialize every segment copy on one mutex; normal builds answer reads straight from the
 * segment.
 *
 * Lifetime: new -> add_segment (any time) -> start -> ... -> stop -> free. Thread-safe.
 */
#ifndef MC_CLIENT_PEER_SERVER_H
#define MC_CLIENT_PEER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"

#define MC_PEER_MAX_SEGMENTS 16
#define MC_PEER_MAX_BATCH 4096 /* slices per batch call */

struct mc_peer_server;
struct mc_auth_key;
struct mc_tls_ctx;
struct mc_rpc_call;
struct mc_holder_index;

struct mc_peer_server_config {
    const char *bind_addr;    /* NULL/"" = 0.0.0.0 */
    uint16_t port;            /* 0 = ephemeral */
    int io_threads;           /* 0 = 2 */
    uint32_t max_frame_bytes; /* 0 = MC_WIRE_DEFAULT_MAX_FRAME_BYTES */
    /* who may connect (common/auth.h): with a key every peer proves it; without one only
     * loopback peers are served unless protected_mode_off */
    const struct mc_auth_key *auth;
    bool protected_mode_off;
    struct mc_tls_ctx *tls; /* TLS on the peer port (common/tls.h; not owned); NULL = plain */
    /* close a peer connection idle this long; 0 = never (the client passes its config's
     * peer_idle_timeout_ms, 5 min by default; the transports' pools drop theirs after 30 s) */
    uint32_t idle_timeout_ms;
    uint32_t max_conns_per_addr; /* per non-loopback peer address; 0 = no limit */
    int max_conns;               /* peer connections in all; 0 = 10000 */
    /* PeerDiskRead handler (may be NULL: NOT_SUPPORTED); it owns the call, as an rpc_server
     * handler does, and runs on the I/O thread (it should hand the disk I/O to another). */
    void (*on_disk_read)(void *arg, struct mc_rpc_call *call);
    void *disk_arg;
};

struct mc_peer_server_stats {
    uint64_t requests;           /* peer requests handled */
    uint64_t rejected;           /* requests (or batch slices) refused */
    uint64_t stale_epoch;        /* refused for another mount epoch (REPLICA_IS_GONE; local too) */
    uint64_t bytes_written;      /* into segments */
    uint64_t bytes_read;         /* out of segments */
    uint64_t auth_failures;      /* connections refused by the handshake (common/auth.h) */
    uint64_t protected_refusals; /* non-loopback peers refused in protected mode */
};

int mc_peer_server_new(const struct mc_peer_server_config *cfg, struct mc_peer_server **out);
/* Binds and starts serving. 0, MC_ERR_RPC_FAIL (bind failed) or INTERNAL_ERROR. */
int mc_peer_server_start(struct mc_peer_server *ps);
uint16_t mc_peer_server_port(const struct mc_peer_server *ps);
void mc_peer_server_stop(struct mc_peer_server *ps);
void mc_peer_server_free(struct mc_peer_server *ps);

/* Serves [base, base+size) as segment id. INVALID_PARAMS (zero id, NULL base, size 0),
 * SEGMENT_ALREADY_EXISTS (id taken), NO_AVAILABLE_HANDLE (table full). */
int mc_peer_server_add_segment(struct mc_peer_server *ps, struct mc_id id, void *base,
                               uint64_t size);
/* Stops serving segment id (its requests get SEGMENT_NOT_FOUND from now on). 0 or
 * SEGMENT_NOT_FOUND. */
int mc_peer_server_remove_segment(struct mc_peer_server *ps, struct mc_id id);
/* Records the mount epoch of segment id's current mount: from now on only requests carrying
 * exactly this epoch are served; epoch 0 (no current mount) serves none. 0 or
 * SEGMENT_NOT_FOUND. */
int mc_peer_server_set_segment_epoch(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch);

/* The checks of every request, for the in-process (memcpy) transport: on success *out points
 * at offset of segment id, with length bytes inside it. SEGMENT_NOT_FOUND, REPLICA_IS_GONE
 * (another mount epoch) or INVALID_PARAMS. */
int mc_peer_server_resolve(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch,
                           uint64_t offset, uint64_t length, uint8_t **out);
/* Copies into / out of segment memory (plain memcpy; serialized in TSan builds, see above).
 * Every copy touching a served segment goes through these. */
void mc_peer_server_copy_in(struct mc_peer_server *ps, void *seg_dst, const void *src, size_t n);
void mc_peer_server_copy_out(struct mc_peer_server *ps, void *dst, const void *seg_src, size_t n);
/* copy_out that also returns the CRC32C of the n bytes, in one pass (mc_crc32c_copy). */
uint32_t mc_peer_server_copy_out_crc(struct mc_peer_server *ps, void *dst, const void *seg_src,
                                     size_t n);
/* The largest reply payload one frame of this server carries. */
uint64_t mc_peer_server_max_payload(const struct mc_peer_server *ps);
/* Copies len bytes into this process's segment id at offset, under the segment's epoch lock
 * (the table's lock, which every epoch change takes exclusively), and only while the segment's
 * current mount is epoch: a write for a mount that has ended (the owner was expired while it
 * was stopped, and mounted again or is about to) lands nowhere. Unlike resolve, a segment
 * whose epoch was never set refuses too (a promotion always names a mount). Returns 0,
 * SEGMENT_NOT_FOUND (not ours), REPLICA_IS_GONE (another mount) or INVALID_PARAMS. */
/* The holder index every write to a served segment is announced to (NULL: none): the entries a
 * write overlaps are dropped before its bytes land (holder_index.h). */
void mc_peer_server_set_index(struct mc_peer_server *ps, struct mc_holder_index *ix);
/* Announces a write of [offset, offset + len) to segment id (the write paths call it; so must
 * any other code that writes a served segment). */
void mc_peer_server_note_write(struct mc_peer_server *ps, struct mc_id id, uint64_t offset,
                               uint64_t len);
int mc_peer_server_write_current(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch,
                                 uint64_t offset, const void *src, size_t len);
/* The same, the CRC32C of the bytes taken in the same pass as the copy (*crc). */
int mc_peer_server_write_current_crc(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch,
                                     uint64_t offset, const void *src, size_t len, uint32_t *crc);
/* Whether id is one of this server's segments (whatever its epoch). */
int mc_peer_server_has_segment(struct mc_peer_server *ps, struct mc_id id);

void mc_peer_server_get_stats(struct mc_peer_server *ps, struct mc_peer_server_stats *st);

#ifdef MC_TEST_HOOKS
struct mc_rpc_server;
/* The peer server's RPC server (fuzzers feed it bytes with mc_rpc_server_test_feed). */
struct mc_rpc_server *mc_peer_server_test_rpc(struct mc_peer_server *ps);
#endif

#endif
