/*
 * transport.h - how the client moves bytes to and from a segment (DESIGN.md §6).
 *
 * A transport is a small vtable: write(len bytes to segment+offset), read(len bytes from
 * segment+offset). The caller picks one per replica:
 *   - local (transport_local.c): the segment is served by this process's own peer server, so
 *     the bytes move with memcpy after the same id and bounds checks a remote peer would get;
 *   - tcp (transport_tcp.c): the peer protocol (wire.h peer body, proto/peer.proto) over a small
 *     pool of connections per peer endpoint. A transfer larger than one slice is cut into
 *     slices (default 1 MiB) sent pipelined on one connection, up to `window` slices in flight,
 *     so the peer copies slice k while slice k+1 is on the wire; a read lands each slice's
 *     payload straight in the caller's buffer. Sends use MSG_NOSIGNAL.
 *   - rdma (transport_rdma.c, rdma_*.c; RDMA builds only): one-sided RDMA READ/WRITE on RC
 *     queue pairs set up with librdmacm, one pool of queue pairs per peer endpoint (the peer's
 *     rdma_cm listener uses the peer server's port number), created on first use. The remote
 *     side is named by the replica's remote address and rkey (MemoryLocation.remote_addr/rkey);
 *     the local buffer must lie in a registered range (segment, mc_register_buffer) or is
 *     registered for the call. A transfer is cut into slices with a bounded number in flight;
 *     an error completion fails it (TRANSFER_FAIL, the verbs status in the log) and the queue
 *     pair is destroyed, a new one is built on the next use. One-sided verbs never reach the
 *     holder's CPU, so the holder's segment-id and mount-epoch checks (peer_server.h) do not
 *     apply: the master's descriptor (address, rkey) is all the protection there is.
 * Batches: mc_transport_batch moves many items in one call; over tcp the items of one endpoint
 * travel as one PeerBatchWrite / PeerBatchRead request (transport_tcp_batch.c), so a batch of
 * small objects costs one round trip per endpoint instead of one per object.
 *
 * Results: 0; the peer's refusal (SEGMENT_NOT_FOUND, REPLICA_IS_GONE, INVALID_PARAMS, ...) as
 * its code; a
 * network failure (refused, reset, timed out, malformed reply) as MC_ERR_TRANSFER_FAIL. A
 * connection that saw any error is closed, never returned to the pool; a pooled connection
 * found dead before any reply arrived is replaced once (reads and writes of a range are
 * idempotent). Every transport is thread-safe.
 */
#ifndef MC_CLIENT_TRANSPORT_H
#define MC_CLIENT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/crc32c.h"
#include "common/id.h"
#include "mooncake/errors.h"

struct mc_peer_server;
struct mc_auth_key;
struct mc_tls_ctx;

/* Where the bytes live: a segment (by id) at an offset, served at endpoint "host:port", under
 * the mount epoch of the replica descriptor (the peer refuses another one: REPLICA_IS_GONE). */
struct mc_xfer_loc {
    struct mc_id segment_id;
    uint64_t offset;
    const char *endpoint; /* unused by the local transport */
    uint64_t mount_epoch; /* MemoryLocation.mount_epoch */
    uint64_t remote_addr; /* rdma only: MemoryLocation.remote_addr (segment base + offset) */
    uint32_t rkey;        /* rdma only: MemoryLocation.rkey */
};

/* One transfer of a batch: where, the caller's bytes, and (set by the call) its result. */
struct mc_xfer_item {
    struct mc_xfer_loc loc;
    void *buf; /* source of a write, destination of a read */
    size_t len;
    int status;    /* out: 0 or this item's error (codes as for a single transfer) */
    uint32_t *crc; /* optional: set to the CRC32C of the item's bytes, a write's as sent, a
                    * read's as received (over tcp computed while they are on the wire, as
                    * mc_transport_tcp_write_crc / _read_crc do); the rdma transport does not
                    * set it for reads: leave it NULL there */
};

struct mc_transport;
struct mc_transport_ops {
    const char *name;
    int (*write)(struct mc_transport *t, const struct mc_xfer_loc *dst, const void *src,
                 size_t len);
    int (*read)(struct mc_transport *t, const struct mc_xfer_loc *src, void *dst, size_t len);
    /* Optional (NULL: one transfer at a time): every item, each item's result in its status. */
    int (*batch)(struct mc_transport *t, bool is_write, struct mc_xfer_item *items, size_t n);
    void (*free)(struct mc_transport *t);
};
struct mc_transport {
    const struct mc_transport_ops *ops;
};

static inline int mc_transport_write(struct mc_transport *t, const struct mc_xfer_loc *dst,
                                     const void *src, size_t len)
{
    return t->ops->write(t, dst, src, len);
}
static inline int mc_transport_read(struct mc_transport *t, const struct mc_xfer_loc *src,
                                    void *dst, size_t len)
{
    return t->ops->read(t, src, dst, len);
}
/* Moves every item (writes when is_write, else reads); item i's result lands in items[i].status.
 * Returns 0 when the batch was carried out (look at the statuses), else an error of the whole
 * call (INVALID_PARAMS, INTERNAL_ERROR) with no status meaningful. The tcp transport groups the
 * items by endpoint: one PeerBatchWrite / PeerBatchRead round trip per endpoint (see
 * transport_tcp_batch.c); other transports move them one at a time. */
static inline int mc_transport_batch(struct mc_transport *t, bool is_write,
                                     struct mc_xfer_item *items, size_t n)
{
    if (n && !items)
        return MC_ERR_INVALID_PARAMS;
    if (t->ops->batch)
        return t->ops->batch(t, is_write, items, n);
    for (size_t i = 0; i < n; i++) {
        if (is_write && items[i].crc)
            *items[i].crc = mc_crc32c(items[i].buf, items[i].len);
        items[i].status = is_write ? t->ops->write(t, &items[i].loc, items[i].buf, items[i].len)
                                   : t->ops->read(t, &items[i].loc, items[i].buf, items[i].len);
        if (!is_write && items[i].crc && items[i].status == 0)
            *items[i].crc = mc_crc32c(items[i].buf, items[i].len);
    }
    return 0;
}
static inline void mc_transport_free(struct mc_transport *t)
{
    if (t)
        t->ops->free(t);
}

/* memcpy into/out of the segments of ps (which must outlive the transport). */
int mc_transport_local_new(struct mc_peer_server *ps, struct mc_transport **out);
/* A read through the local transport t (mc_transport_local_new's) that also sets *crc to the
 * CRC32C of the len bytes, computed while they are copied (one pass over them). */
int mc_transport_local_read_crc(struct mc_transport *t, const struct mc_xfer_loc *src, void *dst,
                                size_t len, uint32_t *crc);
/* The same for a write: *crc is the CRC32C of the len bytes of src, taken as they are copied. */
int mc_transport_local_write_crc(struct mc_transport *t, const struct mc_xfer_loc *dst,
                                 const void *src, size_t len, uint32_t *crc);

struct mc_tcp_transport_config {
    uint32_t connect_timeout_ms;   /* 0 = 3000 */
    uint32_t io_timeout_ms;        /* a send or receive stalled this long fails; 0 = 5000 */
    uint32_t slice_bytes;          /* 0 = 1 MiB; at most 16 MiB */
    uint32_t window;               /* slices in flight per transfer; 0 = 8 */
    uint32_t max_idle_per_peer;    /* pooled idle connections per endpoint; 0 = 4 */
    uint32_t max_frame_bytes;      /* largest reply accepted; 0 = 64 MiB */
    uint32_t idle_timeout_ms;      /* a pooled connection unused this long is closed; 0 = 30 s */
    uint32_t max_conn_age_ms;      /* a connection this old is closed, not pooled; 0 = 10 min */
    uint64_t (*now_ms)(void *arg); /* the pool's clock (tests inject one); NULL = mc_now_ms */
    void *now_arg;
    const struct mc_auth_key *auth; /* shared secret (copied): every new connection proves it
                                     * (common/auth.h); NULL/unset = none */
    struct mc_tls_ctx *tls; /* TLS to peers (common/tls.h; not owned, outlives t); NULL = plain */
};
void mc_tcp_transport_config_init(struct mc_tcp_transport_config *cfg);
int mc_transport_tcp_new(const struct mc_tcp_transport_config *cfg, struct mc_transport **out);
/* A write through the tcp transport t that also extends *crc (CRC32C) over src, slice by slice
 * while the slices are on the wire (transport_tcp.c). On success *crc covers all len bytes. */
int mc_transport_tcp_write_crc(struct mc_transport *t, const struct mc_xfer_loc *dst,
                               const void *src, size_t len, uint32_t *crc);
/* A read through the tcp transport t that also sets *crc to the CRC32C of the len bytes it
 * received, taken piece by piece as they arrive (transport_tcp.c); on success it covers all of
 * them. */
int mc_transport_tcp_read_crc(struct mc_transport *t, const struct mc_xfer_loc *src, void *dst,
                              size_t len, uint32_t *crc);

struct mc_tcp_transport_stats {
    uint64_t connects; /* connections opened */
    uint64_t reuses;   /* transfers that used a pooled connection */
    uint64_t slices;   /* requests sent */
    uint64_t retries;  /* stale pooled connections replaced */
    uint64_t idle;     /* connections in the pool now */
    uint64_t peers;    /* endpoints the pool has an entry for now */
    uint64_t expired;  /* pooled connections closed for idle time or age */
};
/* t must be a tcp transport. */
void mc_transport_tcp_get_stats(struct mc_transport *t, struct mc_tcp_transport_stats *st);
/* Closes the pooled connections past their idle time or age and frees the entries of endpoints
 * unused for the idle time. Transfers do this on their own (at most once a second); a caller
 * with a periodic thread calls it so an unused transport lets go of its connections too. */
void mc_transport_tcp_prune(struct mc_transport *t);

/* One LOCAL_DISK value of a PeerDiskRead (proto/peer.proto): the reader names the key, the
 * object's size and version (what the master's descriptor says) and a buffer of size bytes;
 * the holder reads its SSD and streams the value back. */
struct mc_disk_read_item {
    const char *key;
    uint64_t size;
    uint64_t version; /* 0 = any */
    void *buf;
    int status;     /* out: 0, the holder's per-item code (REPLICA_NOT_FOUND for another
                     * version or no record, CHECKSUM_MISMATCH, ...) or TRANSFER_FAIL */
    uint32_t crc;   /* out: the holder's stored CRC32C of the value (when crc_valid) */
    bool crc_valid; /* out */
};
/* t must be a tcp transport. Reads every item from the holder at endpoint: one PeerDiskRead
 * request per MC_PEER_MAX_BATCH items or one frame's worth of bytes (a batch that fits a
 * frame is one round trip), on a pooled connection. Returns 0 (look at the statuses) or
 * INVALID_PARAMS / INTERNAL_ERROR for the whole call (transport_tcp_disk.c). */
int mc_transport_tcp_disk_read(struct mc_transport *t, const char *endpoint,
                               struct mc_disk_read_item *items, size_t n);
/* The same request in RDMA mode (rdma_disk.h): each item's buf lies in memory registered with
 * the reader's rdma transport under rkeys[i]; the holder RDMA-writes the values to the reader
 * at rdma_endpoint (its rdma listener) and answers statuses, lengths and CRCs only. A holder
 * that cannot (no rdma transport, a value larger than its staging buffer) answers
 * NOT_SUPPORTED for the request or INVALID_PARAMS for the item. */
int mc_transport_tcp_disk_read_rdma(struct mc_transport *t, const char *endpoint,
                                    const char *rdma_endpoint, const uint32_t *rkeys,
                                    struct mc_disk_read_item *items, size_t n);

/* ---- rdma (RDMA builds only: MC_WITH_RDMA) ---------------------------------------------- */

struct mc_rdma_ops;
struct mc_rdma_transport_config {
    uint32_t connect_timeout_ms; /* each rdma_cm step; 0 = 3000 */
    uint32_t io_timeout_ms;      /* a transfer with no completion this long fails; 0 = 5000 */
    uint32_t slice_bytes;        /* 0 = 64 KiB; 4 KiB .. 64 MiB */
    uint32_t window;             /* work requests in flight per transfer; 0 = 32, at most 256 */
    uint32_t max_idle_per_peer;  /* pooled idle queue pairs per endpoint; 0 = the CPUs, 4..64 */
    uint32_t staging_bytes;      /* disk staging buffer (mc_transport_rdma_push); 0 = 4 MiB */
    uint32_t staging_count;      /* staging buffers: pushes at once; 0 = 4, at most 64 */
    int cq_spin_polls;           /* empty CQ polls before sleeping on it; 0 = 128, -1 = none */
    struct mc_id client_id;      /* sent in the connection message */
    /* The shared secret (copied), or NULL: with one, every connection this transport dials or
     * accepts proves it first (rdma_plan.h: hello, challenge, prove over rdma_cm private data). */
    const struct mc_auth_key *auth;
    /* RDMA_OPTION_ID_ACK_TIMEOUT of every connection (4.096 us * 2^n); 0 = 14 (~67 ms), -1 =
     * leave rdma_cm's default */
    int ack_timeout;
    int tos; /* RDMA_OPTION_ID_TOS of every connection; 0 = leave the fabric's default */
    /* Comma-separated device names to use (ibv_devices), or NULL/"": the device that owns the
     * address given to mc_transport_rdma_serve_on (every device until then). */
    const char *devices;
    /* The advertised address and the listen address, or NULL: a loopback one is refused before
     * any device is opened (INVALID_PARAMS, logged naming --host), as rdma_cm cannot use it. */
    const char *host, *bind_address;
};
void mc_rdma_transport_config_init(struct mc_rdma_transport_config *cfg);
/* ops NULL = the real libraries (mc_rdma_ops_verbs). Opens every RDMA device and registers the
 * staging buffer. MC_ERR_NOT_SUPPORTED, logged with a line that names the problem and suggests
 * protocol tcp, when the host has no usable device; INVALID_PARAMS for a bad config. */
int mc_transport_rdma_new(const struct mc_rdma_transport_config *cfg, const struct mc_rdma_ops *ops,
                          struct mc_transport **out);
/* Accepts peers' queue pairs on bind_addr:port (NULL = any address). With an auth token a peer
 * gets a queue pair only after proving it (refusals counted in auth_refused); without one,
 * loopback_only (protected mode) rejects a peer on another host. */
int mc_transport_rdma_listen(struct mc_transport *t, const char *bind_addr, uint16_t port,
                             bool loopback_only);
/* Peers reach this process at host (the address its endpoint advertises): the keys handed to
 * peers (mc_transport_rdma_register, _rkey, _reregister) and the device name become those of
 * the device that owns that address, the one a peer's connection lands on. With several devices
 * and an address none owns (a wildcard, a name that does not resolve to a local address) the
 * first device stays, with a warning. Returns the device index chosen. */
int mc_transport_rdma_serve_on(struct mc_transport *t, const char *host);
/* Registers [addr, addr+len) for remote access (and as a local source/target), on every device;
 * *rkey (may be NULL) is the key peers use (the serving device's, see above). INVALID_PARAMS for
 * an overlap. */
int mc_transport_rdma_register(struct mc_transport *t, void *addr, size_t len, uint32_t *rkey);
int mc_transport_rdma_unregister(struct mc_transport *t, void *addr);
/* A re-mount of the segment registered at addr: its memory regions are made afresh, so every
 * rkey handed out before stops working (a reader holding an old descriptor gets
 * REPLICA_IS_GONE, never bytes); *rkey (may be NULL) is the new one. 0, INVALID_PARAMS (addr
 * does not start a registered range), TRANSFER_FAIL (no longer registered at all). */
int mc_transport_rdma_reregister(struct mc_transport *t, void *addr, uint32_t *rkey);
/* The same, on a worker thread (registering a large segment takes seconds; the mount fence
 * must not hold up the ping thread): starts one unless one is running or its result was not
 * settled yet (then that one serves). done(arg) (may be NULL) runs on the worker when it ends.
 * 0, NOT_SUPPORTED (stopping), INTERNAL_ERROR (no thread). */
int mc_transport_rdma_rereg_start(struct mc_transport *t, void *addr, void (*done)(void *arg),
                                  void *arg);
/* false while the worker runs; true otherwise, with the last run's result (rc and the new rkey,
 * 0 on failure) until it is settled (rc 0 and rkey 0 when nothing ran). */
bool mc_transport_rdma_rereg_ready(struct mc_transport *t, int *rc, uint32_t *rkey);
/* The new key was announced (a mount epoch arrived): the next fence registers again. Whether a
 * result was pending. */
bool mc_transport_rdma_rereg_settle(struct mc_transport *t);
/* No further start; waits for a running worker. Idempotent (mc_transport_free calls it too). */
void mc_transport_rdma_rereg_stop(struct mc_transport *t);
/* The rkey peers use for [addr, addr+len), which must lie in one registered range: 0 or
 * SEGMENT_NOT_FOUND. */
int mc_transport_rdma_rkey(struct mc_transport *t, const void *addr, size_t len, uint32_t *rkey);
/* Bytes of the staging buffer (the largest value one push moves in one piece). */
uint64_t mc_transport_rdma_staging_bytes(struct mc_transport *t);
/* Registers [addr, addr+len) for one request in which a peer RDMA-WRITEs into it (a LOCAL_DISK
 * read), apart from the ranges table (it may overlap a registered buffer): *rkey for the peer,
 * *handle for mc_transport_rdma_revoke, which the caller calls once the request is over, so a
 * write that arrives late is refused by the device. 0 or TRANSFER_FAIL. */
int mc_transport_rdma_expose(struct mc_transport *t, void *addr, size_t len, uint32_t *rkey,
                             void **handle);
void mc_transport_rdma_revoke(struct mc_transport *t, void *handle);
/* The name of the device whose rkey mc_transport_rdma_register returns (the serving one). */
const char *mc_transport_rdma_device(struct mc_transport *t);
/* The holder's side of a LOCAL_DISK read over RDMA: fill(arg, offset, buf, n) produces the next
 * n bytes of the value into the registered staging buffer (a disk read), which is then
 * RDMA-written to remote_addr + offset (the reader's registered buffer, key rkey) at endpoint,
 * chunk by chunk. 0, fill's error, or TRANSFER_FAIL. */
typedef int (*mc_rdma_fill_fn)(void *arg, uint64_t offset, void *buf, size_t n);
int mc_transport_rdma_push(struct mc_transport *t, const char *endpoint, uint64_t remote_addr,
                           uint32_t rkey, uint64_t len, mc_rdma_fill_fn fill, void *arg);

struct mc_rdma_transport_stats {
    uint64_t connects;     /* queue pairs connected */
    uint64_t reuses;       /* transfers on a pooled queue pair */
    uint64_t teardowns;    /* queue pairs destroyed after an error */
    uint64_t posted;       /* work requests posted */
    uint64_t completed;    /* successful completions */
    uint64_t errors;       /* transfers failed by an error completion */
    uint64_t flushed;      /* completions flushed after an error */
    uint64_t stray;        /* completions matching no request */
    uint64_t empty_events; /* completion events with nothing to poll */
    uint64_t idle;         /* pooled queue pairs now */
    uint64_t temp_regs;    /* transfers whose local buffer was registered for the call */
    uint64_t stale;        /* pooled queue pairs found disconnected and replaced before use */
    uint64_t retries;      /* transfers retried once on a fresh queue pair */
    uint64_t auth_refused; /* connections our listener refused: no proof of the token, or wrong */
    uint64_t auth_failed;  /* connections we dialled whose token handshake failed */
    uint64_t async_events; /* device async events seen (port down/up, device fatal, ...) */
};
/* t must be an rdma transport. */
void mc_transport_rdma_get_stats(struct mc_transport *t, struct mc_rdma_transport_stats *st);

#endif
