/*
 * client_batch.c - the batch calls engine connectors make (client.h "calls for engine
 * connectors"): multi-part puts and gets, reads into library-owned buffers, byte ranges of
 * values, replica descriptors and removal, each one master round trip per batch.
 *
 * Multi-part values travel as one value: a value of one part goes straight from or into the
 * caller's memory (mc_batch_put / mc_batch_get); a value of several parts is gathered into, or
 * read into, one staging buffer and copied from there, since the transports move one contiguous
 * range per replica. Reads that must learn the sizes first (mc_batch_get_alloc, and through it
 * mc_batch_get_ranges) take them from the one BatchGetReplicaList answer and read with the same
 * batch reader as mc_batch_get (client_get.c).
 */
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/wire.h"

/* Sum of k sizes, or SIZE_MAX when it would wrap. */
static size_t sum_sizes(const size_t *v, size_t k)
{
    size_t t = 0;
    for (size_t j = 0; j < k; j++) {
        if (v[j] > SIZE_MAX - t)
            return SIZE_MAX;
        t += v[j];
    }
    return t;
}

int mc_batch_put_parts(struct mc_client *c, size_t n, const char *const *keys,
                       const void *const *const *parts, const size_t *const *part_lens,
                       const size_t *nparts, const struct mc_replicate_config *rc, int *results)
{
    if (!c || (n && (!keys || !parts || !part_lens || !nparts || !results)))
        return MC_ERR_INVALID_PARAMS;
    if (n == 0)
        return 0;
    mc_log_scope(&c->logger);
    const void **bufs = calloc(n, sizeof(*bufs));
    size_t *lens = calloc(n, sizeof(*lens));
    void **staged = calloc(n, sizeof(*staged));
    int rc_all = 0;
    if (!bufs || !lens || !staged) {
        rc_all = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (nparts[i] && (!parts[i] || !part_lens[i])) {
            rc_all = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        lens[i] = sum_sizes(part_lens[i], nparts[i]);
        if (lens[i] == SIZE_MAX) {
            rc_all = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        if (nparts[i] == 1) {
            bufs[i] = parts[i][0];
            continue;
        }
        if (lens[i] == 0)
            continue;
        uint8_t *p = malloc(lens[i]);
        if (!p) {
            mc_warn("client", "cannot allocate a staging buffer for a multi-part put",
                    "key=%s size=%zu", keys[i], lens[i]);
            rc_all = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        staged[i] = p;
        bufs[i] = p;
        for (size_t j = 0, off = 0; j < nparts[i]; off += part_lens[i][j], j++) {
            if (part_lens[i][j] && !parts[i][j]) {
                rc_all = MC_ERR_INVALID_PARAMS;
                goto out;
            }
            if (part_lens[i][j])
                memcpy(p + off, parts[i][j], part_lens[i][j]);
        }
    }
    rc_all = mc_batch_put(c, n, keys, bufs, lens, rc, results);
out:
    for (size_t i = 0; staged && i < n; i++)
        free(staged[i]);
    free(staged);
    free(bufs);
    free(lens);
    return rc_all;
}

int mc_batch_get_parts(struct mc_client *c, size_t n, const char *const *keys,
                       void *const *const *parts, const size_t *const *part_caps,
                       const size_t *nparts, int64_t *results)
{
    if (!c || (n && (!keys || !parts || !part_caps || !nparts || !results)))
        return MC_ERR_INVALID_PARAMS;
    if (n == 0)
        return 0;
    mc_log_scope(&c->logger);
    void **bufs = calloc(n, sizeof(*bufs));
    size_t *caps = calloc(n, sizeof(*caps));
    void **staged = calloc(n, sizeof(*staged));
    int rc_all = 0;
    if (!bufs || !caps || !staged) {
        rc_all = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (nparts[i] && (!parts[i] || !part_caps[i])) {
            rc_all = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        caps[i] = sum_sizes(part_caps[i], nparts[i]);
        if (caps[i] == SIZE_MAX) {
            rc_all = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        if (nparts[i] == 1) {
            bufs[i] = parts[i][0];
        } else if (caps[i]) {
            staged[i] = malloc(caps[i]);
            if (!staged[i]) {
                rc_all = MC_ERR_INTERNAL_ERROR;
                goto out;
            }
            bufs[i] = staged[i];
        }
    }
    rc_all = mc_batch_get(c, n, keys, bufs, caps, results);
    if (rc_all)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (!staged[i] || results[i] <= 0)
            continue;
        size_t left = (size_t)results[i], off = 0;
        for (size_t j = 0; j < nparts[i] && left; j++) {
            size_t k = part_caps[i][j] < left ? part_caps[i][j] : left;
            if (k)
                memcpy(parts[i][j], (uint8_t *)staged[i] + off, k);
            off += k;
            left -= k;
        }
    }
out:
    for (size_t i = 0; staged && i < n; i++)
        free(staged[i]);
    free(staged);
    free(bufs);
    free(caps);
    return rc_all;
}

/* The value size a GetReplicaList answer states (as client_get.c reads it). */
static uint64_t stated_size(const Mc__GetReplicaListResponse *r)
{
    uint64_t size = r->size;
    if (size == 0 && r->n_replicas && r->replicas[0]->memory)
        size = r->replicas[0]->memory->size;
    return size;
}

/* One BatchGetReplicaList for n checked keys; *out owns the answer. */
static int replica_lists(struct mc_client *c, size_t n, const char *const *keys,
                         Mc__BatchGetReplicaListResponse **out)
{
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (mc_client_check_key(keys[i]))
            return MC_ERR_INVALID_KEY;
    Mc__Uuid u;
    Mc__BatchGetReplicaListRequest req = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    req.n_keys = n;
    req.keys = (char **)keys;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_GET_REPLICA_LIST, &req.base,
                                 &mc__batch_get_replica_list_response__descriptor, &m);
    if (rc)
        return rc;
    Mc__BatchGetReplicaListResponse *r = (Mc__BatchGetReplicaListResponse *)m;
    if (r->n_results != n) {
        protobuf_c_message_free_unpacked(m, NULL);
        return MC_ERR_RPC_FAIL;
    }
    *out = r;
    return 0;
}

int mc_batch_get_alloc(struct mc_client *c, size_t n, const char *const *keys, size_t max_size,
                       void **outs, int64_t *results)
{
    if (!c || (n && (!keys || !outs || !results)))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++)
        outs[i] = NULL;
    if (n == 0)
        return 0;
    mc_log_scope(&c->logger);
    uint64_t t0 = mc_now_ms();
    Mc__BatchGetReplicaListResponse *r = NULL;
    size_t *caps = calloc(n, sizeof(*caps));
    int *tiers = calloc(n, sizeof(*tiers));
    int rc = caps && tiers ? replica_lists(c, n, keys, &r) : MC_ERR_INTERNAL_ERROR;
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const Mc__GetReplicaListResponse *ri = r->results[i];
        uint64_t size = ri->status ? 0 : stated_size(ri);
        if (ri->status || size == 0)
            continue;
        if (size > INT64_MAX || size > SIZE_MAX || (max_size && size > max_size))
            continue; /* caps[i] 0 < size: the reader reports BUFFER_OVERFLOW */
        outs[i] = malloc((size_t)size);
        if (!outs[i]) {
            mc_warn("client", "cannot allocate a buffer for the value", "key=%s size=%llu", keys[i],
                    (unsigned long long)size);
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        caps[i] = (size_t)size;
    }
    rc = mc_client_batch_read(c, keys, r->results, n, outs, caps, results, tiers, t0);
out:
    for (size_t i = 0; i < n; i++)
        if (rc || results[i] < 0) {
            free(outs[i]);
            outs[i] = NULL;
        }
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    free(caps);
    free(tiers);
    return rc;
}

int mc_batch_get_ranges(struct mc_client *c, size_t nkeys, const char *const *keys, size_t nranges,
                        const size_t *key_index, const uint64_t *src_offsets, void *const *dsts,
                        const size_t *lens, int64_t *results)
{
    if (!c || (nkeys && !keys) ||
        (nranges && (!key_index || !src_offsets || !dsts || !lens || !results)))
        return MC_ERR_INVALID_PARAMS;
    for (size_t r = 0; r < nranges; r++)
        if (key_index[r] >= nkeys || (lens[r] && !dsts[r]))
            return MC_ERR_INVALID_PARAMS;
    if (nranges == 0)
        return 0;
    void **vals = calloc(nkeys, sizeof(*vals));
    int64_t *sizes = calloc(nkeys, sizeof(*sizes));
    int rc =
        vals && sizes ? mc_batch_get_alloc(c, nkeys, keys, 0, vals, sizes) : MC_ERR_INTERNAL_ERROR;
    if (rc)
        goto out;
    for (size_t r = 0; r < nranges; r++) {
        int64_t size = sizes[key_index[r]];
        if (size < 0) {
            results[r] = size;
            continue;
        }
        if (src_offsets[r] > (uint64_t)size || lens[r] > (uint64_t)size - src_offsets[r]) {
            results[r] = MC_ERR_INVALID_PARAMS;
            continue;
        }
        if (lens[r])
            memcpy(dsts[r], (uint8_t *)vals[key_index[r]] + src_offsets[r], lens[r]);
        results[r] = (int64_t)lens[r];
    }
out:
    for (size_t i = 0; vals && i < nkeys; i++)
        free(vals[i]);
    free(vals);
    free(sizes);
    return rc;
}

int mc_batch_query(struct mc_client *c, size_t n, const char *const *keys,
                   struct mc_object_info *outs, int *results)
{
    if (!c || (n && (!keys || !outs || !results)))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++)
        memset(&outs[i], 0, sizeof(outs[i]));
    if (n == 0)
        return 0;
    mc_log_scope(&c->logger);
    Mc__BatchGetReplicaListResponse *r = NULL;
    int rc = replica_lists(c, n, keys, &r);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const Mc__GetReplicaListResponse *ri = r->results[i];
        results[i] = ri->status;
        if (ri->status)
            continue;
        struct mc_object_info *o = &outs[i];
        o->size = stated_size(ri);
        o->version = ri->version;
        o->crc32c = ri->crc32c;
        o->lease_ms_left = ri->lease_ttl_ms;
        if (!ri->n_replicas)
            continue;
        o->replicas = calloc(ri->n_replicas, sizeof(*o->replicas));
        if (!o->replicas) {
            results[i] = MC_ERR_INTERNAL_ERROR;
            continue;
        }
        for (size_t j = 0; j < ri->n_replicas; j++)
            mc_client_fill_replica(&o->replicas[o->replica_count++], ri->replicas[j]);
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

int mc_batch_remove(struct mc_client *c, size_t n, const char *const *keys, bool force,
                    int *results)
{
    if (!c || (n && (!keys || !results)))
        return MC_ERR_INVALID_PARAMS;
    if (n == 0)
        return 0;
    mc_log_scope(&c->logger);
    for (size_t i = 0; i < n; i++)
        if (mc_client_check_key(keys[i]))
            return MC_ERR_INVALID_KEY;
    Mc__Uuid u;
    Mc__BatchRemoveRequest req = MC__BATCH_REMOVE_REQUEST__INIT;
    req.n_keys = n;
    req.keys = (char **)keys;
    req.force = force;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_REMOVE, &req.base,
                                 &mc__batch_remove_response__descriptor, &m);
    if (rc)
        return rc;
    Mc__BatchRemoveResponse *r = (Mc__BatchRemoveResponse *)m;
    if (r->n_statuses != n)
        rc = MC_ERR_RPC_FAIL;
    for (size_t i = 0; rc == 0 && i < n; i++)
        results[i] = r->statuses[i];
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int64_t mc_remove_by_regex(struct mc_client *c, const char *pattern, bool force)
{
    if (!c || !pattern || !*pattern)
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    Mc__Uuid u;
    Mc__RemoveByRegexRequest req = MC__REMOVE_BY_REGEX_REQUEST__INIT;
    req.pattern = (char *)pattern;
    req.force = force;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_REMOVE_BY_REGEX, &req.base,
                                 &mc__remove_by_regex_response__descriptor, &m);
    if (rc)
        return rc;
    uint64_t n = ((Mc__RemoveByRegexResponse *)m)->removed;
    protobuf_c_message_free_unpacked(m, NULL);
    return n > INT64_MAX ? INT64_MAX : (int64_t)n;
}
