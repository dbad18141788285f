/*
 * client_get.c - Get, BatchGet and GetSize (DESIGN.md §8, upstream-client.md §3).
 *
 * A Get is GetReplicaList (one RPC: readable replicas with their endpoints, the object's size,
 * version and CRC, and a read lease of lease_ttl_ms counted from just before the RPC) -> read
 * one replica -> checks. Replica choice: a MEMORY replica in a segment this process serves
 * (memcpy), then remote MEMORY replicas in the master's order (tcp); a replica whose read fails
 * is skipped for the next one (REPLICA_IS_GONE included: the holder re-mounted its segment since
 * the master issued the descriptor, so its bytes may belong to another object now; nothing was
 * read). Then LOCAL_DISK replicas (client_disk.c): the holder's store directly when that is
 * this process, else one PeerDiskRead to the holder, naming the object's version (a record of
 * another version is REPLICA_NOT_FOUND, never served). When no replica could be read the Get
 * fails with TRANSFER_FAIL (or the disk read's REPLICA_NOT_FOUND / CHECKSUM_MISMATCH).
 *
 * After the bytes moved: with checksums on, the CRC32C of the bytes must equal the object's;
 * a replica whose bytes do not (a corrupted transfer or segment, a damaged disk record) is
 * skipped for the next one like a failed read, MEMORY ones first, then LOCAL_DISK, and the Get
 * fails with CHECKSUM_MISMATCH only when no replica served good bytes (a batch key whose
 * bytes fail is read again the single way). Then, if the lease ran out during the read, the bytes
 * may already belong to another object (the master was free to evict and reuse the space), so the
 * call fails with LEASE_EXPIRED. BatchGet is one BatchGetReplicaList and one lease clock for
 * every key; keys with a replica in this process's segment are copied, the others are read as
 * one transport batch (one PeerBatchRead per endpoint), keys with only a LOCAL_DISK replica as
 * one disk batch (one PeerDiskRead per holder), and a key whose MEMORY batch read failed is
 * read again the single way (every replica in turn). mc_batch_get_tiers reports the kind of
 * replica that served each key.
 *
 * GetSize is not a read: it asks the master's lease-free admin query (QueryKey), so it takes
 * no lease and counts no access; mc_get_ex reports the size on BUFFER_OVERFLOW, so a reader
 * that guessed a buffer too small learns the size from the one Get; mc_get_alloc sizes its own
 * buffer from the GetReplicaList answer, so a reader that knows nothing of the size makes one
 * call (mooncake_cli get does).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/fanout.h"
#include "common/log.h"
#include "common/wire.h"

static int check_bytes(struct mc_client *c, const Mc__GetReplicaListResponse *r, void *buf,
                       size_t size);

/* Test builds: flips a byte of buf while test_corrupt_reads is above zero (a corrupted
 * transfer); true when it did. */
static bool corrupt_hook(struct mc_client *c, void *buf, size_t size)
{
#ifdef MC_TEST_HOOKS
    if (size && atomic_load(&c->test_corrupt_reads) > 0 &&
        atomic_fetch_sub(&c->test_corrupt_reads, 1) > 0) {
        ((uint8_t *)buf)[size / 2] ^= 0x5a;
        return true;
    }
#else
    (void)c;
    (void)buf;
    (void)size;
#endif
    return false;
}

/* One LOCAL_DISK replica d of the object r describes into buf (size bytes), under r's version;
 * the holder's stored CRC must be the object's. */
static int read_disk_replica(struct mc_client *c, const char *key,
                             const Mc__GetReplicaListResponse *r, const Mc__ReplicaDescriptor *d,
                             void *buf, size_t size)
{
    struct mc_disk_read_item it = {.key = key, .size = size, .version = r->version, .buf = buf};
    const Mc__LocalDiskLocation *h = d->local_disk;
    mc_client_disk_read(c, &h, &it, 1);
    if (it.status == 0 && r->crc_valid && it.crc_valid && it.crc != r->crc32c)
        return MC_ERR_CHECKSUM_MISMATCH;
    return it.status;
}

/* A value read into buf whose CRC32C (crc) was taken while it was copied or received: 0, or
 * CHECKSUM_MISMATCH when it is not r's. */
static int check_crc(struct mc_client *c, const Mc__GetReplicaListResponse *r, void *buf,
                     size_t size, uint32_t crc)
{
    if (corrupt_hook(c, buf, size))
        crc = mc_crc32c(buf, size); /* the hook's flipped byte stands for a bad copy */
    return crc == r->crc32c ? 0 : MC_ERR_CHECKSUM_MISMATCH;
}

/* The bytes of r at loc, a replica in this process's own segment, copied into buf; with
 * checksums on they are checked against r's CRC32C in the same pass over memory (the CRC is
 * taken chunk by chunk while the copy is in cache: mc_crc32c_copy). 0, CHECKSUM_MISMATCH, or
 * the read's error. */
static int local_copy_checked(struct mc_client *c, const Mc__GetReplicaListResponse *r,
                              const struct mc_xfer_loc *loc, void *buf, size_t size)
{
    if (!c->cfg.checksums || !r->crc_valid) {
        int rc = mc_transport_read(c->local, loc, buf, size);
        return rc ? rc : check_bytes(c, r, buf, size);
    }
    uint32_t crc;
    int rc = mc_transport_local_read_crc(c->local, loc, buf, size, &crc);
    return rc ? rc : check_crc(c, r, buf, size, crc);
}

/* A MEMORY replica d of r held in this process's own segment, copied into buf and checked. */
static int read_local_checked(struct mc_client *c, const Mc__GetReplicaListResponse *r,
                              const Mc__ReplicaDescriptor *d, void *buf, size_t size)
{
    struct mc_xfer_loc loc;
    bool local;
    int rc = mc_client_replica_loc(c, d, size, &loc, &local);
    if (rc == 0 && !local)
        rc = MC_ERR_SEGMENT_NOT_FOUND; /* unmounted since has_segment said yes */
    return rc ? rc : local_copy_checked(c, r, &loc, buf, size);
}

/* A MEMORY replica d of r held by another process, read into buf and checked. Over tcp with
 * checksums on, the CRC32C is taken as the bytes arrive (mc_transport_tcp_read_crc), not in a
 * second pass over the value. */
static int read_remote_checked(struct mc_client *c, const Mc__GetReplicaListResponse *r,
                               const Mc__ReplicaDescriptor *d, void *buf, size_t size)
{
    struct mc_xfer_loc loc;
    bool local;
    if (!c->cfg.checksums || !r->crc_valid || mc_client_replica_is_rdma(c, d) ||
        mc_client_replica_loc(c, d, size, &loc, &local) != 0 || local) {
        int rc = mc_client_replica_io(c, d, false, buf, size);
        return rc ? rc : check_bytes(c, r, buf, size);
    }
    uint32_t crc;
    int rc = mc_transport_tcp_read_crc(c->tcp, &loc, buf, size, &crc);
    return rc ? rc : check_crc(c, r, buf, size, crc);
}

/* Reads one replica of r into buf: local MEMORY, then remote MEMORY in the master's order,
 * then LOCAL_DISK; *tier says which kind served it. A replica whose bytes fail the checksum
 * (check_bytes) counts as a failed read: the next one is tried, so one bad copy (a corrupted
 * transfer or segment) does not fail a Get that another copy can serve. */
static int read_some_replica(struct mc_client *c, const char *key,
                             const Mc__GetReplicaListResponse *r, void *buf, size_t size, int *tier)
{
    int rc = MC_ERR_OBJECT_NOT_FOUND;
    bool bad = false; /* a replica's bytes failed the checksum */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < r->n_replicas; i++) {
            const Mc__ReplicaDescriptor *d = r->replicas[i];
            if (d->type != MC__REPLICA_TYPE__RT_MEMORY || !d->memory || !d->memory->segment_id)
                continue;
            struct mc_id sid = {d->memory->segment_id->hi, d->memory->segment_id->lo};
            bool local = mc_peer_server_has_segment(c->ps, sid);
            if (local != (pass == 0))
                continue;
            int x;
            if (local) {
                x = read_local_checked(c, r, d, buf, size); /* copied and checked */
            } else {
                x = read_remote_checked(c, r, d, buf, size);
            }
            if (x == 0) {
                *tier = MC_REPLICA_MEMORY;
                return 0;
            }
            mc_warn("client", "replica read failed, trying the next one", "replica=%llu rc=%s",
                    (unsigned long long)d->id, mc_strerror(x));
            bad |= x == MC_ERR_CHECKSUM_MISMATCH;
            rc = MC_ERR_TRANSFER_FAIL;
        }
    }
    for (size_t i = 0; i < r->n_replicas; i++) {
        const Mc__ReplicaDescriptor *d = r->replicas[i];
        if (d->type != MC__REPLICA_TYPE__RT_LOCAL_DISK || !d->local_disk)
            continue;
        int x = read_disk_replica(c, key, r, d, buf, size);
        if (x == 0 && (x = check_bytes(c, r, buf, size)) == 0) {
            *tier = MC_REPLICA_LOCAL_DISK;
            return 0;
        }
        bad |= x == MC_ERR_CHECKSUM_MISMATCH;
        mc_warn("client", "LOCAL_DISK replica read failed", "replica=%llu endpoint=%s rc=%s",
                (unsigned long long)d->id, d->local_disk->endpoint ? d->local_disk->endpoint : "",
                mc_strerror(x));
        rc = x == MC_ERR_REPLICA_NOT_FOUND || x == MC_ERR_CHECKSUM_MISMATCH ? x
                                                                            : MC_ERR_TRANSFER_FAIL;
    }
    return bad ? MC_ERR_CHECKSUM_MISMATCH : rc;
}

/* The object's size as a GetReplicaList answer states it. */
static uint64_t answer_size(const Mc__GetReplicaListResponse *r)
{
    uint64_t size = r->size;
    if (size == 0 && r->n_replicas && r->replicas[0]->memory)
        size = r->replicas[0]->memory->size;
    return size;
}

/* The size of the object r describes, if it fits buf (capacity cap); else the error. */
static int64_t get_size_check(const Mc__GetReplicaListResponse *r, const void *buf, size_t cap)
{
    uint64_t size = answer_size(r);
    if (size > cap)
        return MC_ERR_BUFFER_OVERFLOW;
    if (size > INT64_MAX)
        return MC_ERR_INVALID_REPLICA;
    if (size && !buf)
        return MC_ERR_INVALID_PARAMS;
    return (int64_t)size;
}

/* The bytes of one replica of r read into buf: with checksums on their CRC32C must be the
 * object's. 0 or CHECKSUM_MISMATCH (the caller tries another replica). */
static int check_bytes(struct mc_client *c, const Mc__GetReplicaListResponse *r, void *buf,
                       size_t size)
{
    corrupt_hook(c, buf, size);
    if (c->cfg.checksums && r->crc_valid && mc_crc32c(buf, size) != r->crc32c)
        return MC_ERR_CHECKSUM_MISMATCH;
    return 0;
}

/* The last check of a read: the lease (started at t0_ms) must not have run out. */
static int64_t lease_check(struct mc_client *c, const Mc__GetReplicaListResponse *r, size_t size,
                           uint64_t t0_ms)
{
#ifdef MC_TEST_HOOKS
    uint32_t delay = atomic_load(&c->test_read_delay_ms);
    if (delay) {
        struct timespec ts = {(time_t)(delay / 1000), (long)(delay % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
#else
    (void)c;
#endif
    /* elapsed > ttl, not now > t0 + ttl: a huge ttl from the wire must not wrap the sum */
    if (mc_now_ms() - t0_ms > r->lease_ttl_ms)
        return MC_ERR_LEASE_EXPIRED;
    return (int64_t)size;
}

/* The checks after the bytes of r moved into buf; t0_ms is when the lease started. */
static int64_t get_finish(struct mc_client *c, const Mc__GetReplicaListResponse *r, void *buf,
                          size_t size, uint64_t t0_ms)
{
    int rc = check_bytes(c, r, buf, size);
    if (rc)
        return rc;
    return lease_check(c, r, size, t0_ms);
}

/* Reads the object r describes into buf; t0_ms is when the lease started; *tier says which
 * kind of replica served it. */
static int64_t get_with(struct mc_client *c, const char *key, const Mc__GetReplicaListResponse *r,
                        void *buf, size_t cap, uint64_t t0_ms, int *tier)
{
    int64_t size = get_size_check(r, buf, cap);
    if (size < 0)
        return size;
    int rc = read_some_replica(c, key, r, buf, (size_t)size, tier);
    if (rc)
        return rc;
    return lease_check(c, r, (size_t)size, t0_ms); /* the bytes were checked */
}

static int replica_list(struct mc_client *c, const char *key, Mc__GetReplicaListResponse **out)
{
    *out = NULL;
    int rc = mc_client_check_key(key);
    if (rc)
        return rc;
    Mc__Uuid u;
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = (char *)key;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    rc = mc_master_conn_call(c->mc, MC_METHOD_GET_REPLICA_LIST, &req.base,
                             &mc__get_replica_list_response__descriptor, &m);
    if (rc)
        return rc;
    Mc__GetReplicaListResponse *r = (Mc__GetReplicaListResponse *)m;
    if (r->status) {
        rc = r->status;
        protobuf_c_message_free_unpacked(m, NULL);
        return rc;
    }
    *out = r;
    return 0;
}

#ifdef MC_TEST_HOOKS
int mc_client_test_flip_stored(struct mc_client *c, const char *key, size_t at)
{
    Mc__GetReplicaListResponse *r = NULL;
    int rc = replica_list(c, key, &r);
    if (rc)
        return rc;
    uint64_t size = answer_size(r);
    rc = at < size ? MC_ERR_REPLICA_NOT_FOUND : MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; rc == MC_ERR_REPLICA_NOT_FOUND && i < r->n_replicas; i++) {
        struct mc_xfer_loc loc;
        bool local = false;
        uint8_t *p = NULL;
        if (mc_client_replica_loc(c, r->replicas[i], (size_t)size, &loc, &local) != 0 || !local)
            continue;
        if (mc_peer_server_resolve(c->ps, loc.segment_id, loc.mount_epoch, loc.offset, size, &p) ==
            0) {
            p[at] ^= 0x5a;
            rc = 0;
        }
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rc;
}
#endif

int64_t mc_get_ex(struct mc_client *c, const char *key, void *buf, size_t cap, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!c)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    uint64_t t0 = mc_now_ms(), t0_ns = mc_now_ns();
    Mc__GetReplicaListResponse *r = NULL;
    int rc = replica_list(c, key, &r);
    if (rc) {
        mc_cm_get(&c->metrics, rc, -1);
        mc_cm_latency(&c->metrics, MC_CM_GET, t0_ns);
        return rc;
    }
    int tier = -1;
    int64_t n = get_with(c, key, r, buf, cap, t0, &tier);
    if (needed && (n >= 0 || n == MC_ERR_BUFFER_OVERFLOW)) {
        uint64_t size = answer_size(r);
        *needed = size > SIZE_MAX ? SIZE_MAX : (size_t)size;
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    mc_cm_get(&c->metrics, n, tier);
    mc_cm_latency(&c->metrics, MC_CM_GET, t0_ns);
    return n;
}

int64_t mc_get(struct mc_client *c, const char *key, void *buf, size_t cap)
{
    return mc_get_ex(c, key, buf, cap, NULL);
}

int64_t mc_get_alloc(struct mc_client *c, const char *key, size_t max_size, void **out)
{
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (!c)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    uint64_t t0 = mc_now_ms(), t0_ns = mc_now_ns();
    Mc__GetReplicaListResponse *r = NULL;
    void *buf = NULL;
    int tier = -1;
    int64_t n = replica_list(c, key, &r);
    if (n)
        goto out;
    uint64_t size = answer_size(r);
    if (size > INT64_MAX || size > SIZE_MAX) {
        n = MC_ERR_INVALID_REPLICA;
        goto out;
    }
    if (max_size && size > max_size) {
        n = MC_ERR_BUFFER_OVERFLOW;
        goto out;
    }
    if (size) {
        buf = malloc((size_t)size);
        if (!buf) {
            mc_warn("client", "cannot allocate a buffer for the value", "size=%llu",
                    (unsigned long long)size);
            n = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
    }
    n = get_with(c, key, r, buf, (size_t)size, t0, &tier);
out:
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    if (n < 0)
        free(buf);
    else
        *out = buf;
    mc_cm_get(&c->metrics, n, tier);
    mc_cm_latency(&c->metrics, MC_CM_GET, t0_ns);
    return n;
}

void mc_value_free(void *value)
{
    free(value);
}

/* A size query is the master's admin query (QueryKey): no lease, no access counted, no
 * promotion, so asking a size never changes what eviction or promotion decide. A key with no
 * COMPLETE replica (a Put in flight) is REPLICA_IS_NOT_READY, as a Get would answer. */
int64_t mc_get_size(struct mc_client *c, const char *key)
{
    if (!c)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    int rc = mc_client_check_key(key);
    if (rc)
        return rc;
    Mc__QueryKeyRequest req = MC__QUERY_KEY_REQUEST__INIT;
    req.key = (char *)key;
    ProtobufCMessage *m = NULL;
    rc = mc_master_conn_call(c->mc, MC_METHOD_QUERY_KEY, &req.base,
                             &mc__query_key_response__descriptor, &m);
    if (rc)
        return rc;
    const Mc__QueryKeyResponse *q = (const Mc__QueryKeyResponse *)m;
    bool readable = false;
    for (size_t i = 0; i < q->n_replicas; i++) {
        const Mc__ReplicaInfo *ri = q->replicas[i];
        if (ri && ri->replica && ri->replica->status == MC__REPLICA_STATUS__RS_COMPLETE)
            readable = true;
    }
    int64_t out = readable ? (q->size > INT64_MAX ? MC_ERR_INVALID_REPLICA : (int64_t)q->size)
                  : q->n_replicas ? MC_ERR_REPLICA_IS_NOT_READY
                                  : MC_ERR_OBJECT_NOT_FOUND;
    protobuf_c_message_free_unpacked(m, NULL);
    return out;
}

#define PENDING INT64_MIN /* a batch result not known yet */

/* The first MEMORY replica of r in a segment this process serves (read with memcpy), else the
 * first remote one; -1 when r has none. */
static int pick_replica(struct mc_client *c, const Mc__GetReplicaListResponse *r, size_t size,
                        struct mc_xfer_loc *loc, bool *local)
{
    int remote = -1;
    struct mc_xfer_loc rloc = {.endpoint = NULL};
    for (size_t i = 0; i < r->n_replicas; i++) {
        bool l = false;
        struct mc_xfer_loc x;
        if (mc_client_replica_loc(c, r->replicas[i], size, &x, &l) != 0)
            continue;
        if (l) {
            *loc = x;
            *local = true;
            return (int)i;
        }
        if (remote < 0) {
            remote = (int)i;
            rloc = x;
        }
    }
    if (remote >= 0) {
        *loc = rloc;
        *local = false;
    }
    return remote;
}

/* The first COMPLETE LOCAL_DISK replica of r, or NULL. */
static const Mc__ReplicaDescriptor *disk_replica(const Mc__GetReplicaListResponse *r)
{
    for (size_t i = 0; i < r->n_replicas; i++)
        if (r->replicas[i]->type == MC__REPLICA_TYPE__RT_LOCAL_DISK && r->replicas[i]->local_disk)
            return r->replicas[i];
    return NULL;
}

/* The two remote halves of a batch read, run side by side: the MEMORY replicas as one
 * transport batch (task 0) and the LOCAL_DISK-only keys as one disk batch (task 1). */
struct remote_reads {
    struct mc_client *c;
    struct mc_xfer_item *items;
    size_t ni;
    int brc;
    const Mc__LocalDiskLocation **dloc;
    struct mc_disk_read_item *ditems;
    size_t nd;
};

static void remote_read(void *arg, size_t task)
{
    struct remote_reads *r = arg;
    if (task == 0)
        r->brc = r->ni ? mc_transport_batch(r->c->tcp, false, r->items, r->ni) : 0;
    else if (r->nd)
        mc_client_disk_read(r->c, r->dloc, r->ditems, r->nd);
}

/* The reads of a batch: every key's local replica with memcpy, its rdma replica (protocol rdma)
 * with one-sided reads, the other remote MEMORY ones as one transport batch (one peer round
 * trip per endpoint), and the keys with only a LOCAL_DISK replica as one disk batch (this
 * process's store directly, else one PeerDiskRead per holder), the two side by side. A key whose
 * chosen replica fails is read again the single way, trying each of its replicas. tiers[i] gets the
 * kind that served key i. */
int mc_client_batch_read(struct mc_client *c, const char *const *keys,
                         Mc__GetReplicaListResponse **rs, size_t n, void *const *bufs,
                         const size_t *caps, int64_t *results, int *tiers, uint64_t t0)
{
    struct mc_xfer_item *items = calloc(n, sizeof(*items));
    size_t *owner = calloc(n, sizeof(*owner));
    int64_t *sizes = calloc(n, sizeof(*sizes));
    struct mc_disk_read_item *ditems = calloc(n, sizeof(*ditems));
    const Mc__LocalDiskLocation **dloc = calloc(n, sizeof(*dloc));
    size_t *downer = calloc(n, sizeof(*downer));
    struct mc_xfer_item *ritems = calloc(n, sizeof(*ritems)); /* rdma: one stream per holder */
    size_t *rowner = calloc(n, sizeof(*rowner));
    uint32_t *crcs = calloc(n, sizeof(*crcs)); /* tcp items: CRC32C taken as the bytes arrive */
    int rc = 0;
    if (!items || !owner || !sizes || !ditems || !dloc || !downer || !ritems || !rowner || !crcs) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    size_t ni = 0, nd = 0, nr = 0;
    for (size_t i = 0; i < n; i++) {
        const Mc__GetReplicaListResponse *ri = rs[i];
        results[i] = PENDING;
        tiers[i] = -1;
        if (ri->status) {
            results[i] = ri->status;
            continue;
        }
        sizes[i] = get_size_check(ri, bufs[i], caps[i]);
        if (sizes[i] < 0) {
            results[i] = sizes[i];
            continue;
        }
        struct mc_xfer_loc loc;
        bool local = false;
        int k = pick_replica(c, ri, (size_t)sizes[i], &loc, &local);
        const Mc__ReplicaDescriptor *dd = k < 0 ? disk_replica(ri) : NULL;
        int x = k < 0   ? (dd ? 2 : -1)
                : local ? local_copy_checked(c, ri, &loc, bufs[i], (size_t)sizes[i])
                : mc_client_replica_is_rdma(c, ri->replicas[k]) ? 3
                                                                : 1;
        if (x == 3) { /* rdma: into the rdma batch */
            ritems[nr] = (struct mc_xfer_item){loc, bufs[i], (size_t)sizes[i], 0, NULL};
            rowner[nr++] = i;
        } else if (x == 1) { /* remote over tcp: into the batch, checked as it arrives */
            uint32_t *crc = c->cfg.checksums && ri->crc_valid ? &crcs[ni] : NULL;
            items[ni] = (struct mc_xfer_item){loc, bufs[i], (size_t)sizes[i], 0, crc};
            owner[ni++] = i;
        } else if (x == 2) { /* LOCAL_DISK only: into the disk batch */
            ditems[nd] = (struct mc_disk_read_item){
                .key = keys[i], .size = (uint64_t)sizes[i], .version = ri->version, .buf = bufs[i]};
            dloc[nd] = dd->local_disk;
            downer[nd++] = i;
        } else if (x == 0) { /* copied and checked in one pass */
            results[i] = lease_check(c, ri, (size_t)sizes[i], t0);
            tiers[i] = MC_REPLICA_MEMORY;
        }
        /* else: no usable replica, or the local one failed (its bytes the checksum included):
         * every replica in turn, the single path below */
    }
    if (nr) /* a failed key stays PENDING: the single path tries every replica, below */
        mc_transport_batch(c->rdma, false, ritems, nr);
    for (size_t j = 0; j < nr; j++)
        if (ritems[j].status == 0) {
            size_t i = rowner[j];
            results[i] = get_finish(c, rs[i], bufs[i], (size_t)sizes[i], t0);
            tiers[i] = MC_REPLICA_MEMORY;
            if (results[i] == MC_ERR_CHECKSUM_MISMATCH)
                results[i] = PENDING;
        }
    struct remote_reads rr = {c, items, ni, 0, dloc, ditems, nd};
    if (ni && nd)
        mc_fanout(2, remote_read, &rr);
    else
        remote_read(&rr, ni ? 0 : 1); /* one half only: on this thread */
    int brc = rr.brc;
    for (size_t j = 0; j < ni; j++) {
        size_t i = owner[j];
        if (brc == 0 && items[j].status == 0) {
            if (items[j].crc) { /* checked as it arrived */
                int x = check_crc(c, rs[i], bufs[i], (size_t)sizes[i], crcs[j]);
                results[i] = x ? x : lease_check(c, rs[i], (size_t)sizes[i], t0);
            } else {
                results[i] = get_finish(c, rs[i], bufs[i], (size_t)sizes[i], t0);
            }
            tiers[i] = MC_REPLICA_MEMORY;
            if (results[i] == MC_ERR_CHECKSUM_MISMATCH) {
                mc_warn("client", "batch replica bytes failed the checksum, trying each replica",
                        "key=%s", keys[i]);
                results[i] = PENDING;
            }
        } else if (brc == 0) {
            mc_warn("client", "batch replica read failed, trying each replica", "rc=%s",
                    mc_strerror(items[j].status));
        }
    }
    for (size_t j = 0; j < nd; j++) {
        size_t i = downer[j];
        const struct mc_disk_read_item *d = &ditems[j];
        int st = d->status;
        if (st == 0 && rs[i]->crc_valid && d->crc_valid && d->crc != rs[i]->crc32c)
            st = MC_ERR_CHECKSUM_MISMATCH;
        if (st == 0) {
            results[i] = get_finish(c, rs[i], bufs[i], (size_t)sizes[i], t0);
            tiers[i] = MC_REPLICA_LOCAL_DISK;
            if (results[i] == MC_ERR_CHECKSUM_MISMATCH)
                results[i] = PENDING; /* another LOCAL_DISK replica may serve it, below */
        } else {
            /* the key's only readable copy: no other replica to try */
            mc_warn("client", "batch LOCAL_DISK read failed", "key=%s rc=%s", keys[i],
                    mc_strerror(st));
            results[i] = st == MC_ERR_REPLICA_NOT_FOUND || st == MC_ERR_CHECKSUM_MISMATCH
                             ? st
                             : MC_ERR_TRANSFER_FAIL;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (results[i] == PENDING)
            results[i] = get_with(c, keys[i], rs[i], bufs[i], caps[i], t0, &tiers[i]);
    for (size_t i = 0; i < n; i++)
        if (results[i] < 0)
            tiers[i] = -1;
out:
    free(items);
    free(owner);
    free(sizes);
    free(ditems);
    free(dloc);
    free(downer);
    free(ritems);
    free(rowner);
    free(crcs);
    return rc;
}

static int batch_get(struct mc_client *c, size_t n, const char *const *keys, void *const *bufs,
                     const size_t *caps, int64_t *results, int *tiers)
{
    if (!c || (n && (!keys || !bufs || !caps || !results)))
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    for (size_t i = 0; tiers && i < n; i++)
        tiers[i] = -1;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (mc_client_check_key(keys[i]))
            return MC_ERR_INVALID_KEY;
    int *tv = calloc(n, sizeof(*tv));
    if (!tv)
        return MC_ERR_INTERNAL_ERROR;
    uint64_t t0 = mc_now_ms();
    Mc__Uuid u;
    Mc__BatchGetReplicaListRequest req = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    req.n_keys = n;
    req.keys = (char **)keys;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_GET_REPLICA_LIST, &req.base,
                                 &mc__batch_get_replica_list_response__descriptor, &m);
    if (rc) {
        free(tv);
        return rc;
    }
    Mc__BatchGetReplicaListResponse *r = (Mc__BatchGetReplicaListResponse *)m;
    if (r->n_results != n) {
        rc = MC_ERR_RPC_FAIL;
        goto out;
    }
    rc = mc_client_batch_read(c, keys, r->results, n, bufs, caps, results, tv, t0);
    for (size_t i = 0; tiers && rc == 0 && i < n; i++)
        tiers[i] = tv[i];
out:
    free(tv);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* batch_get, counted (client_metrics.h): each key read or failed, the call's latency. */
int mc_batch_get_tiers(struct mc_client *c, size_t n, const char *const *keys, void *const *bufs,
                       const size_t *caps, int64_t *results, int *tiers)
{
    uint64_t t0 = mc_now_ns();
    int *tv = tiers;
    if (c && n && !tiers)
        tv = malloc(n * sizeof(*tv)); /* NULL: counted as memory reads */
    int rc = batch_get(c, n, keys, bufs, caps, results, tv);
    if (c && n) {
        for (size_t i = 0; i < n; i++)
            mc_cm_get(&c->metrics, rc ? rc : results[i], rc || !tv ? -1 : tv[i]);
        mc_cm_latency(&c->metrics, MC_CM_BATCH_GET, t0);
    }
    if (tv != tiers)
        free(tv);
    return rc;
}

int mc_batch_get(struct mc_client *c, size_t n, const char *const *keys, void *const *bufs,
                 const size_t *caps, int64_t *results)
{
    return mc_batch_get_tiers(c, n, keys, bufs, caps, results, NULL);
}
