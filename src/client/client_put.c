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
 * BatchPut is one BatchPutStart, the writes, one BatchPutEnd for the keys whose writes all
 * succeeded and one BatchPutRevoke for the rest; keys the batch start refused for lack of space
 * fall back to the single Put path and its retry window.
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
static void fill_config(Mc__ReplicateConfig *m, const struct mc_replicate_config *rc)
{
    mc__replicate_config__init(m);
    m->replica_num = 1;
    if (!rc)
        return;
    m->replica_num = rc->replica_num ? rc->replica_num : 1;
    m->with_soft_pin = rc->with_soft_pin;
    m->soft_pin_ttl_ms = rc->soft_pin_ttl_ms;
    m->with_hard_pin = rc->with_hard_pin;
    m->n_preferred_segments = rc->preferred_segments ? rc->preferred_segments_count : 0;
    m->preferred_segments = (char **)rc->preferred_segments;
    m->group_id = rc->group_id ? (char *)rc->group_id : (char *)"";
}

static int check_config(const struct mc_replicate_config *rc)
{
    if (!rc)
        return 0;
    if (rc->preferred_segments_count && !rc->preferred_segments)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < rc->preferred_segments_count; i++)
        if (!rc->preferred_segments[i])
            return MC_ERR_INVALID_PARAMS;
    return 0;
}

/* The first replica that goes over tcp (its write can checksum on the wire's time), or n. */
static size_t remote_replica(struct mc_client *c, Mc__ReplicaDescriptor **reps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const Mc__MemoryLocation *m = reps[i]->memory;
        if (reps[i]->type != MC__REPLICA_TYPE__RT_MEMORY || !m || !m->segment_id || !m->endpoint ||
            !*m->endpoint)
            continue;
        struct mc_id sid = {m->segment_id->hi, m->segment_id->lo};
        if (!mc_peer_server_has_segment(c->ps, sid))
            return i;
    }
    return n;
}

/* Writes value to every replica of a PutStart answer and sets *crc to its CRC32C: computed
 * during the first remote replica's transfer when there is one, else in a pass of its own. */
static int write_replicas(struct mc_client *c, Mc__ReplicaDescriptor **reps, size_t n,
                          const void *buf, size_t len, uint32_t *crc)
{
    if (n == 0)
        return MC_ERR_INVALID_REPLICA;
    size_t wire = remote_replica(c, reps, n);
    if (wire == n)
        *crc = mc_crc32c(buf, len);
    for (size_t i = 0; i < n; i++) {
        int rc;
        const Mc__MemoryLocation *m = reps[i]->memory;
        if (i == wire && (!m->size || m->size >= len)) {
            struct mc_xfer_loc loc = {
                {m->segment_id->hi, m->segment_id->lo}, m->offset, m->endpoint, m->mount_epoch};
            *crc = 0;
            rc = mc_transport_tcp_write_crc(c->tcp, &loc, buf, len, crc);
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

int mc_put(struct mc_client *c, const char *key, const void *buf, size_t len,
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
        rc = check_config(rc_in);
    if (rc)
        return rc;
    uint32_t crc = 0;
    Mc__ReplicateConfig cfg;
    fill_config(&cfg, rc_in);
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
        return 0;
    if (rc)
        return rc;
    Mc__PutStartResponse *r = (Mc__PutStartResponse *)m;
    uint64_t version = r->version;
    rc = write_replicas(c, r->replicas, r->n_replicas, buf, len, &crc);
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

int mc_batch_put(struct mc_client *c, size_t n, const char *const *keys, const void *const *bufs,
                 const size_t *lens, const struct mc_replicate_config *rc_user, int *results)
{
    if (!c || (n && (!keys || !bufs || !lens || !results)))
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    if (n == 0)
        return 0;
    struct mc_replicate_config rc_copy;
    const struct mc_replicate_config *rc_in = &rc_copy;
    int rc = mc_replicate_config_copy(rc_user, &rc_copy);
    if (!rc)
        rc = check_config(rc_in);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (mc_client_check_key(keys[i]))
            return MC_ERR_INVALID_KEY;
        if (lens[i] && !bufs[i])
            return MC_ERR_INVALID_PARAMS;
    }
    uint64_t *vlens = calloc(n, sizeof(*vlens));
    uint64_t *versions = calloc(n, sizeof(*versions));
    Mc__PutEndItem *items = calloc(n, sizeof(*items));
    Mc__PutEndItem **itemp = calloc(n, sizeof(*itemp));
    char **rkeys = calloc(n, sizeof(*rkeys));
    uint64_t *rvers = calloc(n, sizeof(*rvers));
    ProtobufCMessage *m = NULL;
    if (!vlens || !versions || !items || !itemp || !rkeys || !rvers) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        vlens[i] = lens[i];
    Mc__ReplicateConfig cfg;
    fill_config(&cfg, rc_in);
    Mc__Uuid u;
    Mc__BatchPutStartRequest req = MC__BATCH_PUT_START_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.n_keys = n;
    req.keys = (char **)keys;
    req.n_value_lengths = n;
    req.value_lengths = vlens;
    req.config = &cfg;
    rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_PUT_START, &req.base,
                             &mc__batch_put_start_response__descriptor, &m);
    if (rc)
        goto out;
    Mc__BatchPutStartResponse *r = (Mc__BatchPutStartResponse *)m;
    if (r->n_results != n) {
        rc = MC_ERR_RPC_FAIL;
        goto out;
    }
    size_t nend = 0, nrev = 0;
    for (size_t i = 0; i < n; i++) {
        Mc__PutStartResult *pr = r->results[i];
        results[i] = pr->status;
        if (pr->status)
            continue;
        versions[i] = pr->version;
        uint32_t crc = 0;
        int w = write_replicas(c, pr->replicas, pr->n_replicas, bufs[i], lens[i], &crc);
        if (w) {
            results[i] = w;
            rkeys[nrev] = (char *)keys[i];
            rvers[nrev++] = pr->version;
            continue;
        }
        mc__put_end_item__init(&items[nend]);
        items[nend].key = (char *)keys[i];
        items[nend].version = pr->version;
        items[nend].crc32c = crc;
        items[nend].crc_valid = true;
        itemp[nend] = &items[nend];
        nend++;
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
        for (size_t j = 0, k = 0; j < n && k < nend; j++) {
            if (results[j] != 0 || keys[j] != items[k].key)
                continue;
            int st = erc ? erc : (e && k < e->n_statuses ? e->statuses[k] : MC_ERR_RPC_FAIL);
            if (st) {
                results[j] = st;
                rkeys[nrev] = (char *)keys[j];
                rvers[nrev++] = items[k].version;
            }
            k++;
        }
        if (em)
            protobuf_c_message_free_unpacked(em, NULL);
    }
    if (nrev) {
        Mc__BatchPutRevokeRequest rr = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
        rr.client_id = &u;
        rr.n_keys = nrev;
        rr.keys = rkeys;
        rr.replica_type = MC__REPLICA_TYPE__RT_ALL;
        rr.n_versions = nrev;
        rr.versions = rvers;
        ProtobufCMessage *rm = NULL;
        int rrc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_PUT_REVOKE, &rr.base,
                                      &mc__batch_put_revoke_response__descriptor, &rm);
        if (rm)
            protobuf_c_message_free_unpacked(rm, NULL);
        if (rrc)
            mc_warn("client", "batch put revoke failed (the master reaps the puts)", "rc=%s",
                    mc_strerror(rrc));
    }
    for (size_t i = 0; i < n; i++) {
        if (results[i] == MC_ERR_OBJECT_ALREADY_EXISTS)
            results[i] = 0;
        else if (results[i] == MC_ERR_NO_AVAILABLE_HANDLE)
            results[i] = mc_put(c, keys[i], bufs[i], lens[i], rc_in); /* retry window */
    }
out:
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    free(vlens);
    free(versions);
    free(items);
    free(itemp);
    free(rkeys);
    free(rvers);
    return rc;
}
