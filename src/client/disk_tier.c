/*
 * disk_tier.c - see disk_tier.h for the design.
 *
 * Locking: `mu` guards the serve queue, the stop flag and the counters; no RPC and no disk I/O
 * runs under it.
 */
#include "client/disk_tier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "client/disk_store.h"
#include "client/master_conn.h"
#ifdef MC_WITH_RDMA
#include "client/rdma_disk.h"
#endif
#include "common/lock_order.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "proto/peer.pb-c.h"

#define MAX_SERVE_THREADS 8
#define REREGISTER_CHUNK 512 /* records per NotifyOffloadSuccess at registration */
#define SERVE_MAX_ITEMS 4096 /* items per PeerDiskRead (MC_PEER_MAX_BATCH) */

struct qnode {
    struct mc_rpc_call *call;
    struct qnode *next;
};

struct mc_disk_tier {
    struct mc_disk_tier_config cfg;
    char path[256];
    char endpoint[128];
    struct mc_disk_store *store;
    pthread_mutex_t mu; /* st and the serve queue; a leaf, through tier_lock / tier_unlock */
    pthread_cond_t cv;
    struct qnode *head, *tail;
    bool stop;
    pthread_t threads[MAX_SERVE_THREADS];
    int nthreads;
    const struct mc_logger *logger;
    _Atomic bool want_register;
    int last_mount_rc; /* the last MountLocalDiskSegment failure logged (not repeated) */
    struct mc_disk_tier_stats st;
};

/* t->mu is a leaf: nothing is taken while it is held (checking builds check it, see
 * common/lock_order.h). */
static void tier_lock(struct mc_disk_tier *t)
{
    mc_lo_acquire(MC_LO_DISK_TIER, 0);
    pthread_mutex_lock(&t->mu);
}

static void tier_unlock(struct mc_disk_tier *t)
{
    pthread_mutex_unlock(&t->mu);
    mc_lo_release(MC_LO_DISK_TIER, 0);
}

static Mc__Uuid *uuid(struct mc_id id, Mc__Uuid *u)
{
    mc__uuid__init(u);
    u->hi = id.hi;
    u->lo = id.lo;
    return u;
}

static uint64_t round_up(uint64_t n)
{
    return (n + MC_DISK_BLOCK - 1) & ~(uint64_t)(MC_DISK_BLOCK - 1);
}

#ifdef MC_TEST_HOOKS
/* MC_TEST_DISK_EXTENT_SIZE (bytes, a multiple of 4 KiB) in the environment: the store's extent
 * size, so a test fills a small disk_capacity (and evicts) after a few offloads. 0 (the
 * store's default) when unset or not a positive multiple of 4 KiB. */
static uint64_t test_extent_size(void)
{
    const char *v = getenv("MC_TEST_DISK_EXTENT_SIZE");
    if (!v || !*v)
        return 0;
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end || n == 0 || n % MC_DISK_BLOCK)
        return 0;
    return (uint64_t)n;
}
#endif

/* ---- eviction: tell the master first -------------------------------------------------------- */

/* Tells the master these records are gone (BatchEvictDiskReplica): capacity evictions before
 * the delete, damaged records (dropped = 1) after the store dropped them. */
static int report_gone(struct mc_disk_tier *t, const struct mc_disk_evict_item *items, size_t n,
                       int dropped)
{
    int rc = MC_ERR_INTERNAL_ERROR;
    if (!t->cfg.mc)
        return 0; /* a tier without a master (tests): nobody to tell */
    char **keys = calloc(n ? n : 1, sizeof(*keys));
    uint64_t *versions = calloc(n ? n : 1, sizeof(*versions));
    if (!keys || !versions)
        goto out;
    for (size_t i = 0; i < n; i++) {
        keys[i] = malloc(items[i].key_len + 1u);
        if (!keys[i])
            goto out;
        memcpy(keys[i], items[i].key, items[i].key_len);
        keys[i][items[i].key_len] = '\0';
        versions[i] = items[i].version;
    }
    Mc__Uuid u;
    Mc__BatchEvictDiskReplicaRequest req = MC__BATCH_EVICT_DISK_REPLICA_REQUEST__INIT;
    req.client_id = uuid(t->cfg.client_id, &u);
    req.n_keys = n;
    req.keys = keys;
    req.n_versions = n;
    req.versions = versions;
    ProtobufCMessage *m = NULL;
    rc = mc_master_conn_call(t->cfg.mc, MC_METHOD_BATCH_EVICT_DISK_REPLICA, &req.base,
                             &mc__batch_evict_disk_replica_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (rc && dropped) {
        mc_warn("disk", "cannot tell the master about damaged disk records (dropped here)",
                "records=%zu rc=%s", n, mc_strerror(rc));
    } else if (rc) {
        mc_warn("disk", "cannot tell the master about a disk eviction: nothing deleted",
                "records=%zu rc=%s", n, mc_strerror(rc));
    } else {
        tier_lock(t);
        t->st.evict_notified += n;
        tier_unlock(t);
        mc_info("disk",
                dropped ? "damaged disk records reported to the master"
                        : "disk capacity eviction reported to the master",
                "records=%zu", n);
    }
out:
    for (size_t i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
    free(versions);
    return rc;
}

static int on_evict(void *ctx, const struct mc_disk_evict_item *items, size_t n)
{
    return report_gone(ctx, items, n, 0);
}

/* A read found these records damaged and the store dropped them: the master stops listing
 * the replicas (a Get then reads another copy instead of failing here forever). */
static int on_drop(void *ctx, const struct mc_disk_evict_item *items, size_t n)
{
    return report_gone(ctx, items, n, 1);
}

/* ---- registration --------------------------------------------------------------------------- */

struct rec {
    char *key;
    uint64_t version, size;
    uint32_t crc;
};

struct recs {
    struct rec *v;
    size_t n, cap;
    bool oom;
};

static int collect(void *ctx, const struct mc_disk_record_info *ri)
{
    struct recs *r = ctx;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        struct rec *nv = realloc(r->v, cap * sizeof(*nv));
        if (!nv) {
            r->oom = true;
            return 1;
        }
        r->v = nv;
        r->cap = cap;
    }
    char *k = malloc(ri->key_len + 1u);
    if (!k) {
        r->oom = true;
        return 1;
    }
    memcpy(k, ri->key, ri->key_len);
    k[ri->key_len] = '\0';
    r->v[r->n++] = (struct rec){k, ri->version, ri->size, ri->crc};
    return 0;
}

static int mount_tier(struct mc_disk_tier *t)
{
    Mc__Uuid u;
    Mc__MountLocalDiskSegmentRequest req = MC__MOUNT_LOCAL_DISK_SEGMENT_REQUEST__INIT;
    req.client_id = uuid(t->cfg.client_id, &u);
    req.enable_offloading = t->cfg.enable_offloading;
    req.endpoint = t->endpoint;
    req.capacity_bytes = t->cfg.capacity;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(t->cfg.mc, MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, &req.base,
                                 &mc__mount_local_disk_segment_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* Whether a record of version mine that the master refused with status rc goes, the master's
 * version of its key being theirs (0: none) and known when have_theirs: never a record newer
 * than the master's copy (it may be the one to keep), nor on a failure that decided nothing. An
 * older master sends no versions: its refusal decides. */
static bool refused_record_goes(int rc, bool have_theirs, uint64_t theirs, uint64_t mine)
{
    if (rc == MC_ERR_INTERNAL_ERROR)
        return false;
    return !have_theirs || theirs == 0 || theirs >= mine;
}

/* One NotifyOffloadSuccess(reregister) for recs[0..n); refused records are deleted unless newer
 * than the master's copy. complete: the last chunk of the listing (n may be 0). */
static int reregister_chunk(struct mc_disk_tier *t, struct rec *recs, size_t n, bool complete,
                            uint64_t *ok, uint64_t *refused, uint64_t *kept)
{
    Mc__OffloadResult *it = calloc(n ? n : 1, sizeof(*it));
    Mc__OffloadResult **itp = calloc(n ? n : 1, sizeof(*itp));
    ProtobufCMessage *m = NULL;
    int rc = MC_ERR_INTERNAL_ERROR;
    if (!it || !itp)
        goto out;
    for (size_t i = 0; i < n; i++) {
        mc__offload_result__init(&it[i]);
        it[i].key = recs[i].key;
        it[i].size = recs[i].size;
        it[i].version = recs[i].version;
        it[i].crc32c = recs[i].crc;
        it[i].crc_valid = true;
        itp[i] = &it[i];
    }
    Mc__Uuid u;
    Mc__NotifyOffloadSuccessRequest req = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
    req.client_id = uuid(t->cfg.client_id, &u);
    req.n_items = n;
    req.items = itp;
    req.reregister = true;
    req.reregister_complete = complete;
    rc = mc_master_conn_call(t->cfg.mc, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &req.base,
                             &mc__notify_offload_success_response__descriptor, &m);
    if (rc)
        goto out;
    const Mc__NotifyOffloadSuccessResponse *r = (const Mc__NotifyOffloadSuccessResponse *)m;
    if (r->n_statuses != n) {
        mc_error("disk", "re-registration answer without one status per record",
                 "records=%zu statuses=%zu", n, r->n_statuses);
        rc = MC_ERR_RPC_FAIL;
        goto out;
    }
    bool have_versions = r->n_versions == n;
    for (size_t i = 0; i < n; i++) {
        if (r->statuses[i] == 0) {
            (*ok)++;
            continue;
        }
        uint64_t theirs = have_versions ? r->versions[i] : 0;
        if (!refused_record_goes(r->statuses[i], have_versions, theirs, recs[i].version)) {
            (*kept)++;
            mc_warn("disk", "record refused by the master kept: newer than the master's copy",
                    "key=%s version=%llx master_version=%llx rc=%s", recs[i].key,
                    (unsigned long long)recs[i].version, (unsigned long long)theirs,
                    mc_strerror(r->statuses[i]));
            continue;
        }
        (*refused)++;
        mc_debug("disk", "record refused by the master, deleted", "key=%s version=%llx rc=%s",
                 recs[i].key, (unsigned long long)recs[i].version, mc_strerror(r->statuses[i]));
        int x = mc_disk_tier_delete(t, recs[i].key, recs[i].version);
        if (x)
            mc_warn("disk", "cannot delete a refused record", "key=%s rc=%s", recs[i].key,
                    mc_strerror(x));
    }
out:
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    free(it);
    free(itp);
    return rc;
}

int mc_disk_tier_register(struct mc_disk_tier *t)
{
    if (!t->cfg.mc)
        return MC_ERR_INVALID_PARAMS;
    int rc = mount_tier(t);
    if (rc) {
        if (rc != t->last_mount_rc)
            mc_error("disk", "MountLocalDiskSegment failed", "endpoint=%s rc=%s%s", t->endpoint,
                     mc_strerror(rc),
                     mc_disk_tier_master_lacks_tier(rc)
                         ? " hint=start the master with --enable_offload"
                         : "");
        t->last_mount_rc = rc;
        return rc;
    }
    t->last_mount_rc = 0;
    struct recs r = {0};
    rc = mc_disk_store_foreach(t->store, collect, &r);
    if (r.oom)
        rc = MC_ERR_INTERNAL_ERROR;
    uint64_t ok = 0, refused = 0, kept = 0;
    /* the last chunk (an empty one when there are no records) says the listing is complete:
     * the master then drops this holder's copies it did not name (records lost on disk) */
    for (size_t i = 0; rc == 0 && (i < r.n || i == 0); i += REREGISTER_CHUNK) {
        size_t k = r.n - i < REREGISTER_CHUNK ? r.n - i : REREGISTER_CHUNK;
        rc = reregister_chunk(t, r.v + i, k, i + k >= r.n, &ok, &refused, &kept);
    }
    for (size_t i = 0; i < r.n; i++)
        free(r.v[i].key);
    free(r.v);
    tier_lock(t);
    t->st.registrations++;
    t->st.reregistered += ok;
    t->st.refused += refused;
    tier_unlock(t);
    if (rc)
        mc_error("disk", "re-registration of the disk records failed", "rc=%s", mc_strerror(rc));
    else
        mc_info("disk", "LOCAL_DISK tier registered",
                "endpoint=%s records=%zu accepted=%llu "
                "refused_and_deleted=%llu refused_newer_kept=%llu",
                t->endpoint, r.n, (unsigned long long)ok, (unsigned long long)refused,
                (unsigned long long)kept);
    return rc;
}

void mc_disk_tier_want_register(struct mc_disk_tier *t)
{
    atomic_store(&t->want_register, true);
}

bool mc_disk_tier_take_register(struct mc_disk_tier *t)
{
    return atomic_exchange(&t->want_register, false);
}

void mc_disk_tier_unmount(struct mc_disk_tier *t)
{
    if (!t->cfg.mc)
        return;
    Mc__Uuid u;
    Mc__UnmountLocalDiskSegmentRequest req = MC__UNMOUNT_LOCAL_DISK_SEGMENT_REQUEST__INIT;
    req.client_id = uuid(t->cfg.client_id, &u);
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(t->cfg.mc, MC_METHOD_UNMOUNT_LOCAL_DISK_SEGMENT, &req.base,
                                 &mc__unmount_local_disk_segment_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (rc)
        mc_info("disk", "LOCAL_DISK unmount failed (the master expires the client)", "rc=%s",
                mc_strerror(rc));
}

int mc_disk_tier_delete(struct mc_disk_tier *t, const char *key, uint64_t version)
{
    uint32_t kl = (uint32_t)strlen(key);
    struct mc_disk_record_info info;
    int rc = mc_disk_store_lookup(t->store, key, kl, &info);
    if (rc == MC_ERR_OBJECT_NOT_FOUND)
        return 0;
    if (rc)
        return rc;
    if (version && info.version > version)
        return 0; /* a newer record of the key: not the one meant */
    const char *k = key;
    int res = 0;
    rc = mc_disk_store_remove(t->store, &k, &kl, 1, &res);
    return rc ? rc : res;
}

int mc_disk_tier_delete_many(struct mc_disk_tier *t, const char *const *keys,
                             const uint64_t *versions, size_t n, int *rcs)
{
    const char **ks = calloc(n ? n : 1, sizeof(*ks));
    uint32_t *kls = calloc(n ? n : 1, sizeof(*kls));
    size_t *at = calloc(n ? n : 1, sizeof(*at)); /* ks index -> keys index */
    int *res = calloc(n ? n : 1, sizeof(*res));
    int first = 0;
    size_t m = 0;
    if (!ks || !kls || !at || !res) {
        for (size_t i = 0; i < n; i++) /* one at a time */
            rcs[i] = mc_disk_tier_delete(t, keys[i], versions[i]);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t kl = (uint32_t)strlen(keys[i]);
        struct mc_disk_record_info info;
        int rc = mc_disk_store_lookup(t->store, keys[i], kl, &info);
        rcs[i] = rc == MC_ERR_OBJECT_NOT_FOUND ? 0 : rc;
        if (rc != 0 || (versions[i] && info.version > versions[i]))
            continue; /* absent, newer than the one meant, or a lookup error */
        ks[m] = keys[i];
        kls[m] = kl;
        at[m++] = i;
    }
    if (m) {
        (void)mc_disk_store_remove(t->store, ks, kls, m, res); /* per key in res */
        for (size_t j = 0; j < m; j++) /* not found: gone meanwhile, or the same key twice */
            rcs[at[j]] = res[j] == MC_ERR_OBJECT_NOT_FOUND ? 0 : res[j];
    }
out:
    for (size_t i = 0; i < n && !first; i++)
        first = rcs[i];
    free(ks);
    free(kls);
    free(at);
    free(res);
    return first;
}

/* ---- reads ---------------------------------------------------------------------------------- */

/* Reads items from the store, each into its buf (cap = round_up(size) when padded, else
 * size), applying the holder's per-item rules. */
static void store_read(struct mc_disk_tier *t, struct mc_disk_read_item *items, size_t n,
                       bool padded)
{
    struct mc_disk_get *g = calloc(n ? n : 1, sizeof(*g));
    if (!g) {
        for (size_t i = 0; i < n; i++)
            items[i].status = MC_ERR_INTERNAL_ERROR;
        return;
    }
    for (size_t i = 0; i < n; i++)
        g[i] = (struct mc_disk_get){.key = items[i].key,
                                    .key_len = (uint32_t)strlen(items[i].key),
                                    .buf = items[i].buf,
                                    .cap = padded ? round_up(items[i].size) : items[i].size};
    mc_disk_store_read(t->store, g, n);
    for (size_t i = 0; i < n; i++) {
        struct mc_disk_read_item *it = &items[i];
        int st = g[i].result;
        if (st == MC_ERR_OBJECT_NOT_FOUND || st == MC_ERR_BUFFER_OVERFLOW)
            st = MC_ERR_REPLICA_NOT_FOUND; /* no record, or one of another size */
        if (st == 0 && ((it->version && g[i].version != it->version) || g[i].len != it->size))
            st = MC_ERR_REPLICA_NOT_FOUND; /* another version: never served */
        it->status = st;
        it->crc = g[i].crc;
        it->crc_valid = st == 0;
    }
    free(g);
}

void mc_disk_tier_read(struct mc_disk_tier *t, struct mc_disk_read_item *items, size_t n)
{
    store_read(t, items, n, false);
}

struct reply_buf {
    void *mem;
    struct iovec *iov;
};

static void free_reply(void *p)
{
    struct reply_buf *rb = p;
    free(rb->mem);
    free(rb->iov);
    free(rb);
}

#ifdef MC_WITH_RDMA
/* The RDMA push's read of one value into the staging buffer, with the tier's rules: no record
 * or one of another version or size is REPLICA_NOT_FOUND (stale bytes are never served). */
static int rdma_read_value(void *arg, const char *key, uint64_t version, void *buf, uint64_t cap,
                           uint64_t *len, uint32_t *crc)
{
    struct mc_disk_tier *t = arg;
    int rc = mc_rdma_disk_store_read(t->store, key, version, buf, cap, len, crc);
    return rc == MC_ERR_OBJECT_NOT_FOUND ? MC_ERR_REPLICA_NOT_FOUND : rc;
}

/* A PeerDiskRead in RDMA mode: every value is RDMA-written into the reader's buffer before the
 * answer, which then carries statuses, lengths and CRCs only. */
static void serve_rdma(struct mc_disk_tier *t, struct mc_rpc_call *call,
                       const Mc__PeerDiskReadRequest *req)
{
    size_t n = req->n_items;
    int32_t *st = calloc(n ? n : 1, sizeof(*st));
    uint64_t *lens = calloc(n ? n : 1, sizeof(*lens));
    uint32_t *crcs = calloc(n ? n : 1, sizeof(*crcs));
    protobuf_c_boolean *valid = calloc(n ? n : 1, sizeof(*valid));
    if (!st || !lens || !crcs || !valid) {
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
        goto out;
    }
    size_t served = mc_rdma_disk_serve(t->cfg.rdma, req, rdma_read_value, t, st, lens, crcs, valid);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += st[i] == 0 ? lens[i] : 0;
    tier_lock(t);
    t->st.peer_reads += served;
    t->st.peer_bytes += bytes;
    tier_unlock(t);
    Mc__PeerDiskReadResponse resp = MC__PEER_DISK_READ_RESPONSE__INIT;
    resp.n_statuses = resp.n_lengths = resp.n_crc32c = resp.n_crc_valid = n;
    resp.statuses = st;
    resp.lengths = lens;
    resp.crc32c = crcs;
    resp.crc_valid = valid;
    mc_rpc_reply_peer(call, 0, &resp.base, NULL, 0, NULL, NULL);
out:
    free(st);
    free(lens);
    free(crcs);
    free(valid);
}
#endif

static void serve(struct mc_disk_tier *t, struct mc_rpc_call *call)
{
    const uint8_t *payload;
    size_t plen;
    Mc__PeerDiskReadRequest *req = (Mc__PeerDiskReadRequest *)mc_rpc_call_unpack_peer(
        call, &mc__peer_disk_read_request__descriptor, &payload, &plen);
    if (!req)
        return; /* answered DESERIALIZE_FAIL */
    size_t n = req->n_items;
    int rc = 0;
    struct mc_disk_read_item *items = NULL;
    int32_t *st = NULL;
    uint64_t *lens = NULL;
    uint32_t *crcs = NULL;
    protobuf_c_boolean *valid = NULL;
    struct reply_buf *rb = NULL;
    bool rdma = req->rdma_endpoint && *req->rdma_endpoint;
    if (n > SERVE_MAX_ITEMS || (rdma && !t->cfg.rdma)) {
        rc = n > SERVE_MAX_ITEMS ? MC_ERR_INVALID_PARAMS : MC_ERR_NOT_SUPPORTED;
        goto out;
    }
#ifdef MC_WITH_RDMA
    if (rdma) {
        serve_rdma(t, call, req);
        goto out;
    }
#endif
    items = calloc(n ? n : 1, sizeof(*items));
    st = calloc(n ? n : 1, sizeof(*st));
    lens = calloc(n ? n : 1, sizeof(*lens));
    crcs = calloc(n ? n : 1, sizeof(*crcs));
    valid = calloc(n ? n : 1, sizeof(*valid));
    rb = calloc(1, sizeof(*rb));
    if (!items || !st || !lens || !crcs || !valid || !rb) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    rb->iov = calloc(n ? n : 1, sizeof(*rb->iov));
    if (!rb->iov) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    /* which items fit the reply frame, and where each lands in the aligned reply buffer */
    uint64_t total = 0, padded = 0;
    size_t *take = calloc(n ? n : 1, sizeof(*take)), m = 0;
    uint64_t *at = calloc(n ? n : 1, sizeof(*at));
    if (!take || !at) {
        free(take);
        free(at);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const Mc__DiskReadItem *d = req->items[i];
        if (!d->key || !*d->key || strlen(d->key) > MC_DISK_MAX_KEY_LEN ||
            d->size > t->cfg.max_payload - total) {
            st[i] = MC_ERR_INVALID_PARAMS;
            continue;
        }
        total += d->size;
        at[m] = padded;
        padded += round_up(d->size);
        take[m++] = i;
    }
    if (padded && posix_memalign(&rb->mem, MC_DISK_BLOCK, (size_t)padded) != 0) {
        rb->mem = NULL;
        free(take);
        free(at);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t j = 0; j < m; j++) {
        const Mc__DiskReadItem *d = req->items[take[j]];
        items[j] = (struct mc_disk_read_item){.key = d->key,
                                              .size = d->size,
                                              .version = d->version,
                                              /* all sizes 0: nothing allocated */
                                              .buf = rb->mem ? (uint8_t *)rb->mem + at[j] : NULL};
    }
    store_read(t, items, m, true);
    int niov = 0;
    uint64_t served = 0, bytes = 0;
    for (size_t j = 0; j < m; j++) {
        size_t i = take[j];
        st[i] = items[j].status;
        crcs[i] = items[j].crc;
        valid[i] = items[j].crc_valid;
        if (st[i] == 0) {
            lens[i] = items[j].size;
            if (items[j].size)
                rb->iov[niov++] = (struct iovec){items[j].buf, (size_t)items[j].size};
            served++;
            bytes += items[j].size;
        }
    }
    free(take);
    free(at);
    tier_lock(t);
    t->st.peer_reads += served;
    t->st.peer_bytes += bytes;
    tier_unlock(t);
    Mc__PeerDiskReadResponse resp = MC__PEER_DISK_READ_RESPONSE__INIT;
    resp.n_statuses = n;
    resp.statuses = st;
    resp.n_lengths = n;
    resp.lengths = lens;
    resp.n_crc32c = n;
    resp.crc32c = crcs;
    resp.n_crc_valid = n;
    resp.crc_valid = valid;
    mc_rpc_reply_peer(call, 0, &resp.base, rb->iov, niov, free_reply, rb);
    rb = NULL;
out:
    if (rc)
        mc_rpc_reply_status(call, rc);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (rb)
        free_reply(rb);
    free(items);
    free(st);
    free(lens);
    free(crcs);
    free(valid);
}

void mc_disk_tier_on_peer_read(void *arg, struct mc_rpc_call *call)
{
    struct mc_disk_tier *t = arg;
    struct qnode *q = malloc(sizeof(*q));
    if (!q) {
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR);
        return;
    }
    q->call = call;
    q->next = NULL;
    tier_lock(t);
    if (t->stop) {
        tier_unlock(t);
        free(q);
        mc_rpc_reply_status(call, MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
        return;
    }
    if (t->tail)
        t->tail->next = q;
    else
        t->head = q;
    t->tail = q;
    pthread_cond_signal(&t->cv);
    tier_unlock(t);
}

static void *serve_main(void *arg)
{
    struct mc_disk_tier *t = arg;
    mc_log_set_current(t->logger);
    tier_lock(t);
    for (;;) {
        while (!t->head && !t->stop)
            pthread_cond_wait(&t->cv, &t->mu);
        struct qnode *q = t->head;
        if (!q)
            break; /* stopped and drained */
        t->head = q->next;
        if (!t->head)
            t->tail = NULL;
        bool stopping = t->stop;
        tier_unlock(t);
        if (stopping)
            mc_rpc_reply_status(q->call, MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
        else
            serve(t, q->call);
        free(q);
        tier_lock(t);
    }
    tier_unlock(t);
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int mc_disk_tier_open(const struct mc_disk_tier_config *cfg, struct mc_disk_tier **out)
{
    *out = NULL;
    if (!cfg->path || !cfg->capacity || !cfg->endpoint ||
        strlen(cfg->path) >= sizeof(((struct mc_disk_tier *)0)->path) ||
        strlen(cfg->endpoint) >= sizeof(((struct mc_disk_tier *)0)->endpoint))
        return MC_ERR_INVALID_PARAMS;
    struct mc_disk_tier *t = calloc(1, sizeof(*t));
    if (!t)
        return MC_ERR_INTERNAL_ERROR;
    t->cfg = *cfg;
    memcpy(t->path, cfg->path, strlen(cfg->path) + 1);
    memcpy(t->endpoint, cfg->endpoint, strlen(cfg->endpoint) + 1);
    t->cfg.path = t->path;
    t->cfg.endpoint = t->endpoint;
    if (t->cfg.serve_threads <= 0)
        t->cfg.serve_threads = 2;
    if (t->cfg.serve_threads > MAX_SERVE_THREADS)
        t->cfg.serve_threads = MAX_SERVE_THREADS;
    if (!t->cfg.max_payload)
        t->cfg.max_payload = 60u << 20;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->logger = mc_log_current();
    struct mc_disk_store_config sc = {.path = t->path,
                                      .capacity = cfg->capacity,
                                      .evict_cb = on_evict,
                                      .evict_ctx = t,
                                      .drop_cb = on_drop,
                                      .drop_ctx = t};
#ifdef MC_TEST_HOOKS
    sc.extent_size = test_extent_size();
#endif
    char err[256] = "";
    int rc = mc_disk_store_open(&sc, &t->store, err, sizeof(err));
    if (rc) {
        mc_error("disk", "cannot open the LOCAL_DISK store", "path=%s rc=%s reason=\"%s\"", t->path,
                 mc_strerror(rc), err);
        goto fail;
    }
    struct mc_disk_usage u;
    mc_disk_store_usage(t->store, &u);
    mc_info("disk", "LOCAL_DISK store recovered",
            "path=%s records=%llu bytes_used=%llu capacity=%llu dropped_records=%llu", t->path,
            (unsigned long long)u.records, (unsigned long long)u.bytes_used,
            (unsigned long long)u.capacity, (unsigned long long)u.dropped_records_at_recovery);
    for (int i = 0; i < t->cfg.serve_threads; i++) {
        if (pthread_create(&t->threads[i], NULL, serve_main, t) != 0) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto fail;
        }
        t->nthreads++;
    }
    *out = t;
    return 0;
fail:
    mc_disk_tier_close(t);
    return rc;
}

void mc_disk_tier_stop(struct mc_disk_tier *t)
{
    if (!t)
        return;
    tier_lock(t);
    t->stop = true;
    pthread_cond_broadcast(&t->cv);
    tier_unlock(t);
    for (int i = 0; i < t->nthreads; i++)
        pthread_join(t->threads[i], NULL);
    t->nthreads = 0;
}

void mc_disk_tier_close(struct mc_disk_tier *t)
{
    if (!t)
        return;
    mc_disk_tier_stop(t);
    mc_disk_store_close(t->store);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

struct mc_disk_store *mc_disk_tier_store(struct mc_disk_tier *t)
{
    return t->store;
}

void mc_disk_tier_get_stats(struct mc_disk_tier *t, struct mc_disk_tier_stats *st)
{
    tier_lock(t);
    *st = t->st;
    tier_unlock(t);
}
