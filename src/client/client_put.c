/*
 * client_put.c - Put and BatchPut (DESIGN.md §8, upstream-client.md §4).
 *
 * A Put is PutStart (the master places PROCESSING replicas, invisible to readers) -> write the
 * bytes to every replica (memcpy when this process serves the segment, else tcp) -> PutEnd with
 * the version and the value's CRC32C. Any failure after PutStart sends PutRevoke, so an object
 * is never half visible. OBJECT_ALREADY_EXISTS counts as success (upstream semantics: a key is
 * written once). NO_AVAILABLE_HANDLE (no space) is retried with exponential back-off (5 ms
 * doubling to 100 ms) for up to put_retry_window_ms, giving the master's eviction time to free
 * space. The CRC is always computed so readers with checksums on, and the disk tier, can verify
 * the bytes; when a replica is remote it is computed during that replica's tcp transfer, slice
 * by slice as the slices leave (transport_tcp.c), so it costs no serial pass of its own (a
 * separate pass was about a third of a 4 MiB Put between processes).
 *
 * BatchPut is one BatchPutStart, the writes (local replicas with memcpy, remote ones as one
 * transport batch: one peer round trip per endpoint), one BatchPutEnd for the keys whose writes
 * all succeeded and one BatchPutRevoke for the rest. Keys the start refused for lack of space
 * (NO_AVAILABLE_HANDLE) are retried together, as a smaller batch, with the same back-off: one
 * retry window for the whole batch, never one per key. In a batch each value's CRC is computed
 * by the transport right after the request carrying it went out (transport_tcp_batch.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/wire.h"

#define BACKOFF_MIN_MS 5u
#define BACKOFF_MAX_MS 100u

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The ReplicateConfig message for rc (NULL = defaults). */
void mc_client_fill_config(Mc__ReplicateConfig *m, const struct mc_replicate_config *rc)
{
    mc__replicate_config__init(m);
    m->replica_num = 1;
    if (!rc)
        return;
    m->replica_num = rc->replica_num; /* check_config refused 0 */
    m->with_soft_pin = rc->with_soft_pin;
    m->soft_pin_ttl_ms = rc->soft_pin_ttl_ms;
    m->with_hard_pin = rc->with_hard_pin;
    m->n_preferred_segments = rc->preferred_segments ? rc->preferred_segments_count : 0;
    m->preferred_segments = (char **)rc->preferred_segments;
    m->group_id = rc->group_id ? (char *)rc->group_id : (char *)"";
}

int mc_client_check_config(const struct mc_replicate_config *rc)
{
    if (!rc)
        return 0;
    /* 0 replicas is a caller's mistake, not "the default": the wire cannot tell it from unset */
    if (rc->replica_num == 0)
        return MC_ERR_INVALID_PARAMS;
    if (rc->preferred_segments_count && !rc->preferred_segments)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < rc->preferred_segments_count; i++)
        if (!rc->preferred_segments[i])
            return MC_ERR_INVALID_PARAMS;
    return 0;
}

/* The first replica that goes over tcp (its write can checksum on the wire's time), or n. An
 * rdma replica's bytes never pass through this CPU, so its CRC is a pass of its own. */
static size_t remote_replica(struct mc_client *c, Mc__ReplicaDescriptor **reps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const Mc__MemoryLocation *m = reps[i]->memory;
        if (reps[i]->type != MC__REPLICA_TYPE__RT_MEMORY || !m || !m->segment_id || !m->endpoint ||
            !*m->endpoint)
            continue;
        struct mc_id sid = {m->segment_id->hi, m->segment_id->lo};
        if (!mc_peer_server_has_segment(c->ps, sid) && !mc_client_replica_is_rdma(c, reps[i]))
            return i;
    }
    return n;
}

/* Writes value to every replica of a PutStart answer and sets *crc to its CRC32C: computed
 * during the first remote replica's transfer when there is one, else during the first
 * replica's copy (mc_client_replica_write_crc). */
int mc_client_write_replicas(struct mc_client *c, Mc__ReplicaDescriptor **reps, size_t n,
                             const void *buf, size_t len, uint32_t *crc)
{
    if (n == 0)
        return MC_ERR_INVALID_REPLICA;
    size_t wire = remote_replica(c, reps, n);
    for (size_t i = 0; i < n; i++) {
        int rc;
        const Mc__MemoryLocation *m = reps[i]->memory;
        if (i == wire && (!m->size || m->size >= len)) {
            struct mc_xfer_loc loc = {.segment_id = {m->segment_id->hi, m->segment_id->lo},
                                      .offset = m->offset,
                                      .endpoint = m->endpoint,
                                      .mount_epoch = m->mount_epoch};
            *crc = 0;
            rc = mc_transport_tcp_write_crc(c->tcp, &loc, buf, len, crc);
        } else if (wire == n && i == 0) {
            rc = mc_client_replica_write_crc(c, reps[i], buf, len, crc);
        } else {
            if (i == wire)
                *crc = mc_crc32c(buf, len);
            rc = mc_client_replica_io(c, reps[i], true, (void *)buf, len);
        }
        if (rc) {
            mc_warn("client", "replica write failed", "replica=%llu rc=%s",
                    (unsigned long long)reps[i]->id, mc_strerror(rc));
            return rc == MC_ERR_INVALID_REPLICA ? rc : MC_ERR_TRANSFER_FAIL;
        }
    }
    return 0;
}

static void revoke(struct mc_client *c, const char *key, uint64_t version)
{
    Mc__Uuid u;
    Mc__PutRevokeRequest req = MC__PUT_REVOKE_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.key = (char *)key;
    req.replica_type = MC__REPLICA_TYPE__RT_ALL;
    req.version = version;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_PUT_REVOKE, &req.base,
                                 &mc__put_revoke_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (rc)
        mc_warn("client", "put revoke failed (the master reaps the put)", "rc=%s", mc_strerror(rc));
}

static int put_one(struct mc_client *c, const char *key, const void *buf, size_t len,
                   const struct mc_replicate_config *rc_user)
{
    if (!c || (len && !buf))
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    struct mc_replicate_config rc_copy;
    const struct mc_replicate_config *rc_in = &rc_copy;
    int rc = mc_replicate_config_copy(rc_user, &rc_copy);
    if (!rc)
        rc = mc_client_check_key(key);
    if (!rc)
        rc = mc_client_check_config(rc_in);
    if (rc)
        return rc;
    uint32_t crc = 0;
    Mc__ReplicateConfig cfg;
    mc_client_fill_config(&cfg, rc_in);
    Mc__Uuid u;
    Mc__PutStartRequest req = MC__PUT_START_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.key = (char *)key;
    req.value_length = len;
    req.config = &cfg;
    uint64_t deadline = mc_now_ms() + c->cfg.put_retry_window_ms;
    uint64_t backoff = BACKOFF_MIN_MS;
    ProtobufCMessage *m = NULL;
    for (;;) {
        rc = mc_master_conn_call(c->mc, MC_METHOD_PUT_START, &req.base,
                                 &mc__put_start_response__descriptor, &m);
        uint64_t now = mc_now_ms();
        if (rc != MC_ERR_NO_AVAILABLE_HANDLE || now >= deadline)
            break;
        sleep_ms(backoff < deadline - now ? backoff : deadline - now);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
    if (rc == MC_ERR_OBJECT_ALREADY_EXISTS)
        return rc_in->report_existing ? rc : 0;
    if (rc)
        return rc;
    Mc__PutStartResponse *r = (Mc__PutStartResponse *)m;
    uint64_t version = r->version;
    rc = mc_client_write_replicas(c, r->replicas, r->n_replicas, buf, len, &crc);
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc) {
        revoke(c, key, version);
        return rc;
    }
    Mc__PutEndRequest end = MC__PUT_END_REQUEST__INIT;
    end.client_id = &u;
    end.key = (char *)key;
    end.replica_type = MC__REPLICA_TYPE__RT_ALL;
    end.version = version;
    end.crc32c = crc;
    end.crc_valid = true;
    m = NULL;
    rc = mc_master_conn_call(c->mc, MC_METHOD_PUT_END, &end.base, &mc__put_end_response__descriptor,
                             &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (rc) {
        mc_warn("client", "put end failed, revoking", "rc=%s", mc_strerror(rc));
        revoke(c, key, version);
    }
    return rc;
}

/* ---- batch ------------------------------------------------------------------------------- */

/* A batch's keys, buffers and results, and the rounds' shared state. */
struct batch {
    struct mc_client *c;
    const char *const *keys;
    const void *const *bufs;
    const size_t *lens;
    Mc__ReplicateConfig *cfg;
    int *results;
};

/* Writes every replica of the started keys (status 0; j indexes idx): local ones with
 * memcpy (the first of a key taking its CRC as it copies, when no remote one does), rdma ones
 * (protocol rdma) as one rdma batch (each holder's keys one stream of WRITEs on one queue pair),
 * the other remote ones as one transport batch (one peer round trip per endpoint). w[j] gets the
 * key's write result, crc[j] its value's CRC32C. */
static int batch_write(const struct batch *b, const size_t *idx, size_t m, Mc__PutStartResult **pr,
                       int *w, uint32_t *crc)
{
    size_t total = 0;
    for (size_t j = 0; j < m; j++)
        if (pr[j]->status == 0)
            total += pr[j]->n_replicas;
    struct mc_xfer_item *items = calloc(total ? total : 1, sizeof(*items));
    size_t *owner = calloc(total ? total : 1, sizeof(*owner));
    struct mc_xfer_item *ritems = calloc(total ? total : 1, sizeof(*ritems));
    size_t *rowner = calloc(total ? total : 1, sizeof(*rowner));
    if (!items || !owner || !ritems || !rowner) {
        free(items);
        free(owner);
        free(ritems);
        free(rowner);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t ni = 0, nr = 0;
    for (size_t j = 0; j < m; j++) {
        w[j] = 0;
        if (pr[j]->status)
            continue;
        size_t i = idx[j];
        bool crc_on_wire = false, crc_copied = false;
        if (pr[j]->n_replicas == 0)
            w[j] = MC_ERR_INVALID_REPLICA;
        for (size_t k = 0; k < pr[j]->n_replicas && !w[j]; k++) {
            struct mc_xfer_loc loc;
            bool local = false;
            int x = mc_client_replica_loc(b->c, pr[j]->replicas[k], b->lens[i], &loc, &local);
            if (x == 0 && local && !crc_on_wire && !crc_copied) {
                /* the first replica in this process's segment checksums the value as it copies */
                x = mc_transport_local_write_crc(b->c->local, &loc, b->bufs[i], b->lens[i],
                                                 &crc[j]);
                crc_copied = true;
            } else if (x == 0 && local)
                x = mc_transport_write(b->c->local, &loc, b->bufs[i], b->lens[i]);
            else if (x == 0 && mc_client_replica_is_rdma(b->c, pr[j]->replicas[k])) {
                ritems[nr] = (struct mc_xfer_item){loc, (void *)b->bufs[i], b->lens[i], 0, NULL};
                rowner[nr++] = j;
            } else if (x == 0) {
                /* the first remote replica's transfer also checksums the value */
                items[ni] = (struct mc_xfer_item){loc, (void *)b->bufs[i], b->lens[i], 0,
                                                  crc_on_wire || crc_copied ? NULL : &crc[j]};
                crc_on_wire = true;
                owner[ni++] = j;
            }
            if (x)
                w[j] = x == MC_ERR_INVALID_REPLICA ? x : MC_ERR_TRANSFER_FAIL;
        }
        if (!crc_on_wire && !crc_copied && !w[j])
            crc[j] = mc_crc32c(b->bufs[i], b->lens[i]);
    }
    int rrc = nr ? mc_transport_batch(b->c->rdma, true, ritems, nr) : 0;
    for (size_t k = 0; k < nr; k++) {
        int x = rrc ? rrc : ritems[k].status;
        if (x && !w[rowner[k]]) {
            mc_warn("client", "replica write failed", "key=%s rc=%s", b->keys[idx[rowner[k]]],
                    mc_strerror(x));
            w[rowner[k]] = x == MC_ERR_INVALID_REPLICA ? x : MC_ERR_TRANSFER_FAIL;
        }
    }
    int rc = ni ? mc_transport_batch(b->c->tcp, true, items, ni) : 0;
    for (size_t k = 0; k < ni; k++) {
        int x = rc ? rc : items[k].status;
        if (x && !w[owner[k]]) {
            mc_warn("client", "replica write failed", "key=%s rc=%s", b->keys[idx[owner[k]]],
                    mc_strerror(x));
            w[owner[k]] = x == MC_ERR_INVALID_REPLICA ? x : MC_ERR_TRANSFER_FAIL;
        }
    }
    free(items);
    free(owner);
    free(ritems);
    free(rowner);
    return 0;
}

/* One round for the keys idx[0..m): BatchPutStart, the writes, one BatchPutEnd for the keys
 * whose writes all succeeded and one BatchPutRevoke for the rest; results[idx[j]] set. Returns
 * 0, or the error of a BatchPutStart that failed as a whole (nothing started then). */
static int batch_round(const struct batch *b, const size_t *idx, size_t m)
{
    struct mc_client *c = b->c;
    int rc = MC_ERR_INTERNAL_ERROR;
    const char **rkeys = calloc(m, sizeof(*rkeys));
    uint64_t *vlens = calloc(m, sizeof(*vlens));
    int *w = calloc(m, sizeof(*w));
    uint32_t *crc = calloc(m, sizeof(*crc));
    Mc__PutEndItem *items = calloc(m, sizeof(*items));
    Mc__PutEndItem **itemp = calloc(m, sizeof(*itemp));
    size_t *endj = calloc(m, sizeof(*endj));
    char **revk = calloc(m, sizeof(*revk));
    uint64_t *revv = calloc(m, sizeof(*revv));
    ProtobufCMessage *sm = NULL;
    if (!rkeys || !vlens || !w || !crc || !items || !itemp || !endj || !revk || !revv)
        goto out;
    for (size_t j = 0; j < m; j++) {
        rkeys[j] = b->keys[idx[j]];
        vlens[j] = b->lens[idx[j]];
    }
    Mc__Uuid u;
    Mc__BatchPutStartRequest req = MC__BATCH_PUT_START_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.n_keys = m;
    req.keys = (char **)rkeys;
    req.n_value_lengths = m;
    req.value_lengths = vlens;
    req.config = b->cfg;
    rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_PUT_START, &req.base,
                             &mc__batch_put_start_response__descriptor, &sm);
    if (rc)
        goto out;
    Mc__BatchPutStartResponse *r = (Mc__BatchPutStartResponse *)sm;
    if (r->n_results != m) {
        rc = MC_ERR_RPC_FAIL;
        goto out;
    }
    rc = batch_write(b, idx, m, r->results, w, crc);
    if (rc)
        for (size_t j = 0; j < m; j++)
            w[j] = rc;
    rc = 0;
    size_t nend = 0, nrev = 0;
    for (size_t j = 0; j < m; j++) {
        Mc__PutStartResult *pr = r->results[j];
        b->results[idx[j]] = pr->status ? pr->status : w[j];
        if (pr->status)
            continue;
        if (w[j]) {
            revk[nrev] = (char *)rkeys[j];
            revv[nrev++] = pr->version;
            continue;
        }
        mc__put_end_item__init(&items[nend]);
        items[nend].key = (char *)rkeys[j];
        items[nend].version = pr->version;
        items[nend].crc32c = crc[j];
        items[nend].crc_valid = true;
        itemp[nend] = &items[nend];
        endj[nend++] = j;
    }
    if (nend) {
        Mc__BatchPutEndRequest er = MC__BATCH_PUT_END_REQUEST__INIT;
        er.client_id = &u;
        er.n_items = nend;
        er.items = itemp;
        er.replica_type = MC__REPLICA_TYPE__RT_ALL;
        ProtobufCMessage *em = NULL;
        int erc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_PUT_END, &er.base,
                                      &mc__batch_put_end_response__descriptor, &em);
        Mc__BatchPutEndResponse *e = (Mc__BatchPutEndResponse *)em;
        for (size_t k = 0; k < nend; k++) {
            int st = erc ? erc : (e && k < e->n_statuses ? e->statuses[k] : MC_ERR_RPC_FAIL);
            if (st) {
                b->results[idx[endj[k]]] = st;
                revk[nrev] = items[k].key;
                revv[nrev++] = items[k].version;
            }
        }
        if (em)
            protobuf_c_message_free_unpacked(em, NULL);
    }
    if (nrev) {
        Mc__BatchPutRevokeRequest rr = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
        rr.client_id = &u;
        rr.n_keys = nrev;
        rr.keys = revk;
        rr.replica_type = MC__REPLICA_TYPE__RT_ALL;
        rr.n_versions = nrev;
        rr.versions = revv;
        ProtobufCMessage *rm = NULL;
        int rrc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_PUT_REVOKE, &rr.base,
                                      &mc__batch_put_revoke_response__descriptor, &rm);
        if (rm)
            protobuf_c_message_free_unpacked(rm, NULL);
        if (rrc)
            mc_warn("client", "batch put revoke failed (the master reaps the puts)", "rc=%s",
                    mc_strerror(rrc));
    }
out:
    if (sm)
        protobuf_c_message_free_unpacked(sm, NULL);
    free(rkeys);
    free(vlens);
    free(w);
    free(crc);
    free(items);
    free(itemp);
    free(endj);
    free(revk);
    free(revv);
    return rc;
}

static int batch_put(struct mc_client *c, size_t n, const char *const *keys,
                     const void *const *bufs, const size_t *lens,
                     const struct mc_replicate_config *rc_user, int *results)
{
    if (!c || (n && (!keys || !bufs || !lens || !results)))
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    if (n == 0)
        return 0;
    struct mc_replicate_config rc_copy;
    int rc = mc_replicate_config_copy(rc_user, &rc_copy);
    if (!rc)
        rc = mc_client_check_config(&rc_copy);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (mc_client_check_key(keys[i]))
            return MC_ERR_INVALID_KEY;
        if (lens[i] && !bufs[i])
            return MC_ERR_INVALID_PARAMS;
    }
    size_t *idx = malloc(n * sizeof(*idx));
    if (!idx)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    Mc__ReplicateConfig cfg;
    mc_client_fill_config(&cfg, &rc_copy);
    struct batch b = {c, keys, bufs, lens, &cfg, results};
    /* keys refused for lack of space are retried together, in one window for the batch */
    uint64_t deadline = mc_now_ms() + c->cfg.put_retry_window_ms;
    uint64_t backoff = BACKOFF_MIN_MS;
    size_t m = n;
    for (int round = 0;; round++) {
        int x = batch_round(&b, idx, m);
        if (x && round == 0) {
            rc = x;
            break;
        }
        if (x) { /* a later round failed as a whole: its keys keep that error */
            for (size_t j = 0; j < m; j++)
                results[idx[j]] = x;
            break;
        }
        size_t again = 0;
        for (size_t j = 0; j < m; j++)
            if (results[idx[j]] == MC_ERR_NO_AVAILABLE_HANDLE)
                idx[again++] = idx[j];
        uint64_t now = mc_now_ms();
        if (again == 0 || now >= deadline)
            break;
        sleep_ms(backoff < deadline - now ? backoff : deadline - now);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
        m = again;
    }
    for (size_t i = 0; !rc && !rc_copy.report_existing && i < n; i++)
        if (results[i] == MC_ERR_OBJECT_ALREADY_EXISTS)
            results[i] = 0;
    free(idx);
    return rc;
}

/* The public forms: the calls above, counted (client_metrics.h). */
int mc_put(struct mc_client *c, const char *key, const void *buf, size_t len,
           const struct mc_replicate_config *rc)
{
    uint64_t t0 = mc_now_ns();
    int r = put_one(c, key, buf, len, rc);
    if (c) {
        mc_cm_put(&c->metrics, r, len);
        mc_cm_latency(&c->metrics, MC_CM_PUT, t0);
    }
    return r;
}

int mc_batch_put(struct mc_client *c, size_t n, const char *const *keys, const void *const *bufs,
                 const size_t *lens, const struct mc_replicate_config *rc, int *results)
{
    uint64_t t0 = mc_now_ns();
    int r = batch_put(c, n, keys, bufs, lens, rc, results);
    if (c && n) {
        for (size_t i = 0; i < n; i++)
            mc_cm_put(&c->metrics, r ? r : results[i], r || !lens ? 0 : lens[i]);
        mc_cm_latency(&c->metrics, MC_CM_BATCH_PUT, t0);
    }
    return r;
}
