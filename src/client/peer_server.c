/*
 * peer_server.c - see peer_server.h for the design.
 *
 * The segment table is a fixed array under a reader-writer lock: handlers take it shared for
 * the lookup only; the bytes are copied after the lock is released (segment memory stays mapped
 * until the owner has stopped the server).
 */
#include "client/peer_server.h"
#include "client/holder_index.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common/crc32c.h"
#include "common/lock_order.h"
#include "common/log.h"
#include "common/mc_assert.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/peer.pb-c.h"

#if defined(__SANITIZE_THREAD__)
#define MC_PEER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MC_PEER_TSAN 1
#endif
#endif

/* Room the frame header, prefix and control message may take in a reply. */
#define REPLY_OVERHEAD (64u * 1024u)

struct seg_entry {
    bool used;
    bool epoch_set; /* false until the owner learnt its mount epoch: any epoch is accepted */
    struct mc_id id;
    uint8_t *base;
    uint64_t size;
    uint64_t epoch; /* mount epoch of the current mount (when epoch_set) */
};

struct mc_peer_server {
    struct mc_rpc_server *rpc;
    uint32_t max_frame_bytes;
    pthread_rwlock_t lock;
    struct seg_entry segs[MC_PEER_MAX_SEGMENTS];
    _Atomic uint64_t requests, rejected, stale_epoch, bytes_written, bytes_read;
    pthread_mutex_t copy_lock; /* TSan builds only: orders segment copies for the sanitizer */
    uint32_t lo_idx;           /* tells servers apart in the lock-order checker */
    struct mc_holder_index *_Atomic hidx; /* told of every write (holder_index.h); NULL: none */
};

/* The segment table's rwlock goes through these (a leaf of the lock order, common/lock_order.h:
 * nothing is taken while it is held); the functions that need it assert it. */
static void segs_rdlock(struct mc_peer_server *ps)
{
    mc_lo_acquire(MC_LO_PEER_SEGS, ps->lo_idx);
    pthread_rwlock_rdlock(&ps->lock);
}

static void segs_wrlock(struct mc_peer_server *ps)
{
    mc_lo_acquire_write(MC_LO_PEER_SEGS, ps->lo_idx);
    pthread_rwlock_wrlock(&ps->lock);
}

static void segs_unlock(struct mc_peer_server *ps)
{
    pthread_rwlock_unlock(&ps->lock);
    mc_lo_release(MC_LO_PEER_SEGS, ps->lo_idx);
}

void mc_peer_server_copy_in(struct mc_peer_server *ps, void *seg_dst, const void *src, size_t n)
{
#ifdef MC_PEER_TSAN
    pthread_mutex_lock(&ps->copy_lock);
    memcpy(seg_dst, src, n);
    pthread_mutex_unlock(&ps->copy_lock);
#else
    (void)ps;
    memcpy(seg_dst, src, n);
#endif
}

void mc_peer_server_copy_out(struct mc_peer_server *ps, void *dst, const void *seg_src, size_t n)
{
    mc_peer_server_copy_in(ps, dst, seg_src, n);
}

uint32_t mc_peer_server_copy_out_crc(struct mc_peer_server *ps, void *dst, const void *seg_src,
                                     size_t n)
{
#ifdef MC_PEER_TSAN
    pthread_mutex_lock(&ps->copy_lock);
    uint32_t crc = mc_crc32c_copy(0, dst, seg_src, n);
    pthread_mutex_unlock(&ps->copy_lock);
    return crc;
#else
    (void)ps;
    return mc_crc32c_copy(0, dst, seg_src, n);
#endif
}

/* ---- segment table ------------------------------------------------------------------------ */

static struct mc_id uuid_id(const Mc__Uuid *u)
{
    struct mc_id id = {0, 0};
    if (u) {
        id.hi = u->hi;
        id.lo = u->lo;
    }
    return id;
}

/* The used entry of segment id, or NULL (the table lock held, either mode). */
static struct seg_entry *seg_find_locked(struct mc_peer_server *ps, struct mc_id id)
{
    MC_ASSERT(mc_lo_holds(MC_LO_PEER_SEGS, ps->lo_idx, false));
    for (int i = 0; i < MC_PEER_MAX_SEGMENTS; i++)
        if (ps->segs[i].used && mc_id_eq(ps->segs[i].id, id))
            return &ps->segs[i];
    return NULL;
}

/* The lookup behind resolve; check_epoch false skips the epoch (has_segment). */
static int lookup(struct mc_peer_server *ps, struct mc_id id, bool check_epoch, uint64_t epoch,
                  uint64_t offset, uint64_t length, uint8_t **out)
{
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    uint64_t want = 0;
    *out = NULL;
    if (mc_id_is_zero(id))
        return rc;
    segs_rdlock(ps);
    struct seg_entry *e = seg_find_locked(ps, id);
    if (!e) {
        /* rc stays SEGMENT_NOT_FOUND */
    } else if (check_epoch && e->epoch_set && (e->epoch == 0 || epoch != e->epoch)) {
        want = e->epoch;
        rc = MC_ERR_REPLICA_IS_GONE;
    } else if (offset > e->size || length > e->size - offset) {
        rc = MC_ERR_INVALID_PARAMS;
    } else {
        *out = e->base + offset;
        rc = 0;
    }
    segs_unlock(ps);
    if (rc == MC_ERR_REPLICA_IS_GONE) {
        atomic_fetch_add(&ps->stale_epoch, 1);
        char idbuf[MC_ID_STRLEN];
        mc_warn("peer", "request for an earlier mount of the segment refused (stale descriptor)",
                "segment=%s epoch=%llx mount_epoch=%llx offset=%llu length=%llu rc=%s",
                mc_id_format(id, idbuf), (unsigned long long)epoch, (unsigned long long)want,
                (unsigned long long)offset, (unsigned long long)length, mc_strerror(rc));
    }
    return rc;
}

int mc_peer_server_resolve(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch,
                           uint64_t offset, uint64_t length, uint8_t **out)
{
    return lookup(ps, id, true, epoch, offset, length, out);
}

void mc_peer_server_set_index(struct mc_peer_server *ps, struct mc_holder_index *ix)
{
    atomic_store(&ps->hidx, ix);
}

void mc_peer_server_note_write(struct mc_peer_server *ps, struct mc_id id, uint64_t offset,
                               uint64_t len)
{
    struct mc_holder_index *ix = atomic_load_explicit(&ps->hidx, memory_order_acquire);
    if (ix && len)
        mc_holder_index_drop_range(ix, id, offset, len);
}

int mc_peer_server_write_current(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch,
                                 uint64_t offset, const void *src, size_t len)
{
    return mc_peer_server_write_current_crc(ps, id, epoch, offset, src, len, NULL);
}

int mc_peer_server_write_current_crc(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch,
                                     uint64_t offset, const void *src, size_t len, uint32_t *crc)
{
    if (mc_id_is_zero(id) || epoch == 0)
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    uint64_t want = 0;
    segs_rdlock(ps); /* the epoch lock: no (re)mount changes it meanwhile */
    struct seg_entry *e = seg_find_locked(ps, id);
    if (!e) {
        /* rc stays SEGMENT_NOT_FOUND */
    } else if (!e->epoch_set || e->epoch != epoch) {
        want = e->epoch;
        rc = MC_ERR_REPLICA_IS_GONE;
    } else if (offset > e->size || len > e->size - offset) {
        rc = MC_ERR_INVALID_PARAMS;
    } else {
        mc_peer_server_note_write(ps, id, offset, len);
        if (crc)
            *crc = mc_peer_server_copy_out_crc(ps, e->base + offset, src, len);
        else
            mc_peer_server_copy_in(ps, e->base + offset, src, len);
        rc = 0;
    }
    segs_unlock(ps);
    if (rc == MC_ERR_REPLICA_IS_GONE) {
        atomic_fetch_add(&ps->stale_epoch, 1);
        char idbuf[MC_ID_STRLEN];
        mc_warn("peer", "write for an earlier mount of the segment refused (stale task)",
                "segment=%s epoch=%llx mount_epoch=%llx offset=%llu length=%zu",
                mc_id_format(id, idbuf), (unsigned long long)epoch, (unsigned long long)want,
                (unsigned long long)offset, len);
    }
    return rc;
}

int mc_peer_server_has_segment(struct mc_peer_server *ps, struct mc_id id)
{
    uint8_t *p;
    return lookup(ps, id, false, 0, 0, 0, &p) == 0;
}

int mc_peer_server_set_segment_epoch(struct mc_peer_server *ps, struct mc_id id, uint64_t epoch)
{
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    uint64_t old = 0;
    bool had = false;
    segs_wrlock(ps);
    struct seg_entry *e = seg_find_locked(ps, id);
    if (e) {
        had = e->epoch_set;
        old = e->epoch;
        e->epoch = epoch;
        e->epoch_set = true;
        rc = 0;
    }
    segs_unlock(ps);
    if (rc == 0 && (!had || old != epoch)) {
        char idbuf[MC_ID_STRLEN];
        mc_info("peer", "segment mount epoch set", "segment=%s mount_epoch=%llx previous=%llx",
                mc_id_format(id, idbuf), (unsigned long long)epoch,
                had ? (unsigned long long)old : 0ull);
    }
    return rc;
}

int mc_peer_server_add_segment(struct mc_peer_server *ps, struct mc_id id, void *base,
                               uint64_t size)
{
    if (mc_id_is_zero(id) || !base || size == 0)
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_ERR_NO_AVAILABLE_HANDLE;
    segs_wrlock(ps);
    if (seg_find_locked(ps, id)) {
        rc = MC_ERR_SEGMENT_ALREADY_EXISTS;
        goto out;
    }
    for (int i = 0; i < MC_PEER_MAX_SEGMENTS; i++)
        if (!ps->segs[i].used) {
            ps->segs[i] = (struct seg_entry){.used = true, .id = id, .base = base, .size = size};
            rc = 0;
            break;
        }
out:
    segs_unlock(ps);
    return rc;
}

int mc_peer_server_remove_segment(struct mc_peer_server *ps, struct mc_id id)
{
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    segs_wrlock(ps);
    for (int i = 0; i < MC_PEER_MAX_SEGMENTS; i++)
        if (ps->segs[i].used && mc_id_eq(ps->segs[i].id, id)) {
            memset(&ps->segs[i], 0, sizeof(ps->segs[i]));
            rc = 0;
        }
    segs_unlock(ps);
    return rc;
}

/* ---- handlers ----------------------------------------------------------------------------- */

static void reject(struct mc_peer_server *ps, const char *what, int rc, uint64_t conn)
{
    atomic_fetch_add(&ps->rejected, 1);
    mc_debug("peer", "request refused", "op=%s rc=%s conn=%llu", what, mc_strerror(rc),
             (unsigned long long)conn);
}

static void on_write(void *arg, struct mc_rpc_call *call)
{
    struct mc_peer_server *ps = arg;
    atomic_fetch_add(&ps->requests, 1);
    const uint8_t *payload;
    size_t plen;
    Mc__PeerWriteRequest *req = (Mc__PeerWriteRequest *)mc_rpc_call_unpack_peer(
        call, &mc__peer_write_request__descriptor, &payload, &plen);
    if (!req) {
        atomic_fetch_add(&ps->rejected, 1);
        return;
    }
    uint8_t *dst = NULL;
    int rc = mc_peer_server_resolve(ps, uuid_id(req->segment_id), req->mount_epoch, req->offset,
                                    req->length, &dst);
    if (rc == 0 && plen != req->length)
        rc = MC_ERR_INVALID_PARAMS; /* truncated or padded payload: write nothing */
    if (rc) {
        reject(ps, "write", rc, mc_rpc_call_conn_id(call));
    } else {
        mc_peer_server_note_write(ps, uuid_id(req->segment_id), req->offset, plen);
        if (plen)
            mc_peer_server_copy_in(ps, dst, payload, plen);
        atomic_fetch_add(&ps->bytes_written, plen);
    }
    protobuf_c_message_free_unpacked(&req->base, NULL);
    Mc__PeerWriteResponse resp = MC__PEER_WRITE_RESPONSE__INIT;
    mc_rpc_reply_peer(call, rc, &resp.base, NULL, 0, NULL, NULL);
}

static void on_read(void *arg, struct mc_rpc_call *call)
{
    struct mc_peer_server *ps = arg;
    atomic_fetch_add(&ps->requests, 1);
    const uint8_t *payload;
    size_t plen;
    Mc__PeerReadRequest *req = (Mc__PeerReadRequest *)mc_rpc_call_unpack_peer(
        call, &mc__peer_read_request__descriptor, &payload, &plen);
    if (!req) {
        atomic_fetch_add(&ps->rejected, 1);
        return;
    }
    uint8_t *src = NULL;
    uint64_t len = req->length;
    int rc = mc_peer_server_resolve(ps, uuid_id(req->segment_id), req->mount_epoch, req->offset,
                                    len, &src);
    if (rc == 0 && len > ps->max_frame_bytes - REPLY_OVERHEAD)
        rc = MC_ERR_INVALID_PARAMS;
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (rc) {
        reject(ps, "read", rc, mc_rpc_call_conn_id(call));
        mc_rpc_reply_status(call, rc);
        return;
    }
    atomic_fetch_add(&ps->bytes_read, len);
    Mc__PeerReadResponse resp = MC__PEER_READ_RESPONSE__INIT;
    resp.length = len;
#ifdef MC_PEER_TSAN
    uint8_t *copy = malloc(len ? (size_t)len : 1);
    if (!copy) {
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
        return;
    }
    mc_peer_server_copy_out(ps, copy, src, (size_t)len);
    struct iovec iov = {copy, (size_t)len};
    mc_rpc_reply_peer(call, 0, &resp.base, &iov, len ? 1 : 0, free, copy);
#else
    struct iovec iov = {src, (size_t)len};
    mc_rpc_reply_peer(call, 0, &resp.base, &iov, len ? 1 : 0, NULL, NULL);
#endif
}

static void on_batch_write(void *arg, struct mc_rpc_call *call)
{
    struct mc_peer_server *ps = arg;
    atomic_fetch_add(&ps->requests, 1);
    const uint8_t *payload;
    size_t plen;
    Mc__PeerBatchWriteRequest *req = (Mc__PeerBatchWriteRequest *)mc_rpc_call_unpack_peer(
        call, &mc__peer_batch_write_request__descriptor, &payload, &plen);
    if (!req) {
        atomic_fetch_add(&ps->rejected, 1);
        return;
    }
    int32_t *st = NULL;
    int rc = 0;
    uint64_t total = 0;
    size_t n = req->n_slices;
    if (n > MC_PEER_MAX_BATCH) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t l = req->slices[i]->length;
        if (l > plen || total > plen - l) {
            rc = MC_ERR_INVALID_PARAMS; /* slices claim more bytes than the payload holds */
            goto out;
        }
        total += l;
    }
    if (total != plen) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    st = calloc(n ? n : 1, sizeof(*st));
    if (!st) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    const uint8_t *p = payload;
    for (size_t i = 0; i < n; i++) {
        Mc__PeerSlice *s = req->slices[i];
        uint8_t *dst = NULL;
        st[i] = mc_peer_server_resolve(ps, uuid_id(s->segment_id), s->mount_epoch, s->offset,
                                       s->length, &dst);
        if (st[i] == 0) {
            mc_peer_server_note_write(ps, uuid_id(s->segment_id), s->offset, s->length);
            if (s->length)
                mc_peer_server_copy_in(ps, dst, p, s->length);
            atomic_fetch_add(&ps->bytes_written, s->length);
        } else {
            reject(ps, "batch_write", st[i], mc_rpc_call_conn_id(call));
        }
        p += s->length;
    }
out:
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (rc) {
        reject(ps, "batch_write", rc, mc_rpc_call_conn_id(call));
        mc_rpc_reply_status(call, rc);
        free(st);
        return;
    }
    Mc__PeerBatchWriteResponse resp = MC__PEER_BATCH_WRITE_RESPONSE__INIT;
    resp.n_statuses = n;
    resp.statuses = st;
    mc_rpc_reply_peer(call, 0, &resp.base, NULL, 0, NULL, NULL);
    free(st);
}

struct batch_release {
    struct iovec *iov;
    void *copy;
};

static void free_batch(void *p)
{
    struct batch_release *br = p;
    free(br->iov);
    free(br->copy);
    free(br);
}

static void on_batch_read(void *arg, struct mc_rpc_call *call)
{
    struct mc_peer_server *ps = arg;
    atomic_fetch_add(&ps->requests, 1);
    const uint8_t *payload;
    size_t plen;
    Mc__PeerBatchReadRequest *req = (Mc__PeerBatchReadRequest *)mc_rpc_call_unpack_peer(
        call, &mc__peer_batch_read_request__descriptor, &payload, &plen);
    if (!req) {
        atomic_fetch_add(&ps->rejected, 1);
        return;
    }
    size_t n = req->n_slices;
    int rc = 0;
    int32_t *st = NULL;
    uint64_t *lens = NULL;
    struct iovec *iov = NULL;
    int niov = 0;
    uint64_t total = 0;
    void *free_copy = NULL; /* TSan builds: the copied payload */
    if (n > MC_PEER_MAX_BATCH) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    st = calloc(n ? n : 1, sizeof(*st));
    lens = calloc(n ? n : 1, sizeof(*lens));
    iov = calloc(n ? n : 1, sizeof(*iov));
    if (!st || !lens || !iov) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        Mc__PeerSlice *s = req->slices[i];
        uint8_t *src = NULL;
        st[i] = mc_peer_server_resolve(ps, uuid_id(s->segment_id), s->mount_epoch, s->offset,
                                       s->length, &src);
        if (st[i] == 0 && s->length > ps->max_frame_bytes - REPLY_OVERHEAD - total)
            st[i] = MC_ERR_INVALID_PARAMS; /* would not fit the reply frame */
        if (st[i]) {
            reject(ps, "batch_read", st[i], mc_rpc_call_conn_id(call));
            continue;
        }
        lens[i] = s->length;
        total += s->length;
        if (s->length)
            iov[niov++] = (struct iovec){src, (size_t)s->length};
    }
    atomic_fetch_add(&ps->bytes_read, total);
#ifdef MC_PEER_TSAN
    if (niov) {
        uint8_t *copy = malloc((size_t)total);
        if (!copy) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        size_t at = 0;
        for (int i = 0; i < niov; i++) {
            mc_peer_server_copy_out(ps, copy + at, iov[i].iov_base, iov[i].iov_len);
            at += iov[i].iov_len;
        }
        iov[0] = (struct iovec){copy, (size_t)total};
        niov = 1;
        free_copy = copy;
    }
#endif
out:
    protobuf_c_message_free_unpacked(&req->base, NULL);
    struct batch_release *br = rc ? NULL : malloc(sizeof(*br));
    if (!rc && !br)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc) {
        reject(ps, "batch_read", rc, mc_rpc_call_conn_id(call));
        mc_rpc_reply_status(call, rc);
        free(iov);
        free(free_copy);
    } else {
        br->iov = iov;
        br->copy = free_copy;
        Mc__PeerBatchReadResponse resp = MC__PEER_BATCH_READ_RESPONSE__INIT;
        resp.n_statuses = n;
        resp.statuses = st;
        resp.n_lengths = n;
        resp.lengths = lens;
        mc_rpc_reply_peer(call, 0, &resp.base, iov, niov, free_batch, br);
    }
    free(st);
    free(lens);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

int mc_peer_server_new(const struct mc_peer_server_config *cfg, struct mc_peer_server **out)
{
    *out = NULL;
    struct mc_peer_server *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return MC_ERR_INTERNAL_ERROR;
    pthread_rwlock_init(&ps->lock, NULL);
    static _Atomic uint32_t next_lo_idx;
    ps->lo_idx = atomic_fetch_add(&next_lo_idx, 1);
    pthread_mutex_init(&ps->copy_lock, NULL);
    struct mc_rpc_server_config rc;
    mc_rpc_server_config_init(&rc);
    rc.bind_addr = cfg->bind_addr;
    rc.port = cfg->port;
    if (cfg->io_threads > 0)
        rc.io_threads = cfg->io_threads;
    if (cfg->max_frame_bytes)
        rc.max_frame_bytes = cfg->max_frame_bytes;
    rc.name = "peer";
    rc.auth = cfg->auth;
    rc.tls = cfg->tls;
    rc.protected_mode = !cfg->protected_mode_off;
    rc.idle_timeout_ms = cfg->idle_timeout_ms;
    rc.max_conns_per_addr = cfg->max_conns_per_addr;
    rc.max_conns = cfg->max_conns;
    rc.max_repeated = MC_PEER_MAX_BATCH; /* refused before decoding, not after */
    ps->max_frame_bytes = rc.max_frame_bytes;
    if (ps->max_frame_bytes <= 2 * REPLY_OVERHEAD) {
        mc_peer_server_free(ps);
        return MC_ERR_INVALID_PARAMS;
    }
    int r = mc_rpc_server_new(&rc, &ps->rpc);
    if (r) {
        mc_peer_server_free(ps);
        return r;
    }
    mc_rpc_server_register(ps->rpc, MC_METHOD_PEER_WRITE, on_write, ps);
    mc_rpc_server_register(ps->rpc, MC_METHOD_PEER_READ, on_read, ps);
    mc_rpc_server_register(ps->rpc, MC_METHOD_PEER_BATCH_WRITE, on_batch_write, ps);
    mc_rpc_server_register(ps->rpc, MC_METHOD_PEER_BATCH_READ, on_batch_read, ps);
    if (cfg->on_disk_read)
        mc_rpc_server_register(ps->rpc, MC_METHOD_PEER_DISK_READ, cfg->on_disk_read, cfg->disk_arg);
    *out = ps;
    return 0;
}

int mc_peer_server_start(struct mc_peer_server *ps)
{
    return mc_rpc_server_start(ps->rpc);
}

uint64_t mc_peer_server_max_payload(const struct mc_peer_server *ps)
{
    return ps->max_frame_bytes - REPLY_OVERHEAD;
}

uint16_t mc_peer_server_port(const struct mc_peer_server *ps)
{
    return mc_rpc_server_port(ps->rpc);
}

void mc_peer_server_stop(struct mc_peer_server *ps)
{
    if (ps && ps->rpc)
        mc_rpc_server_stop(ps->rpc);
}

void mc_peer_server_free(struct mc_peer_server *ps)
{
    if (!ps)
        return;
    mc_rpc_server_free(ps->rpc);
    pthread_rwlock_destroy(&ps->lock);
    pthread_mutex_destroy(&ps->copy_lock);
    free(ps);
}

void mc_peer_server_get_stats(struct mc_peer_server *ps, struct mc_peer_server_stats *st)
{
    st->requests = atomic_load(&ps->requests);
    st->rejected = atomic_load(&ps->rejected);
    st->stale_epoch = atomic_load(&ps->stale_epoch);
    st->bytes_written = atomic_load(&ps->bytes_written);
    st->bytes_read = atomic_load(&ps->bytes_read);
    struct mc_rpc_server_stats rs;
    mc_rpc_server_get_stats(ps->rpc, &rs);
    st->auth_failures = rs.auth_failures;
    st->protected_refusals = rs.protected_refusals;
}

#ifdef MC_TEST_HOOKS
struct mc_rpc_server *mc_peer_server_test_rpc(struct mc_peer_server *ps)
{
    return ps->rpc;
}
#endif
