/*
 * client_upsert.c - Upsert (client.h): UpsertStart (the master reserves placed space; the key
 * is untouched) -> write the bytes to every reserved replica, as a Put does -> UpsertEnd with the
 * value's CRC32C, which swaps the old value for the new in one step on the master
 * (src/master/upsert.h). Any failure after the start gives the space back (UpsertEnd with
 * revoke), so nothing is half visible: readers see the old value until the swap and the new
 * one after it. NO_AVAILABLE_HANDLE at the start is retried for put_retry_window_ms, as Put's.
 * A batch is one BatchUpsertStart, the writes as one transport batch (one peer round trip per
 * endpoint), and one BatchUpsertEnd (every key its own swap).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/wire.h"

static void pause_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* UpsertEnd: swap (revoke false) or give the space back (revoke true). */
static int upsert_end(struct mc_client *c, const char *key, uint64_t token, uint32_t crc,
                      bool revoke)
{
    Mc__Uuid u;
    Mc__UpsertEndRequest req = MC__UPSERT_END_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.key = (char *)key;
    req.token = token;
    req.crc32c = crc;
    req.crc_valid = !revoke;
    req.revoke = revoke;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(c->mc, MC_METHOD_UPSERT_END, &req.base,
                                 &mc__upsert_end_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int mc_upsert(struct mc_client *c, const char *key, const void *buf, size_t len,
              const struct mc_replicate_config *rc_user)
{
    if (!c || (len && !buf))
        return MC_ERR_INVALID_PARAMS;
    mc_log_scope(&c->logger);
    struct mc_replicate_config rc_copy;
    int rc = mc_replicate_config_copy(rc_user, &rc_copy);
    if (!rc)
        rc = mc_client_check_key(key);
    if (!rc)
        rc = mc_client_check_config(&rc_copy);
    if (rc)
        return rc;
    Mc__ReplicateConfig cfg;
    mc_client_fill_config(&cfg, &rc_copy);
    Mc__Uuid u;
    Mc__UpsertStartRequest req = MC__UPSERT_START_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.key = (char *)key;
    req.value_length = len;
    req.config = &cfg;
    uint64_t deadline = mc_now_ms() + c->cfg.put_retry_window_ms;
    uint64_t backoff = 5;
    ProtobufCMessage *m = NULL;
    for (;;) {
        rc = mc_master_conn_call(c->mc, MC_METHOD_UPSERT_START, &req.base,
                                 &mc__upsert_start_response__descriptor, &m);
        uint64_t now = mc_now_ms();
        if (rc != MC_ERR_NO_AVAILABLE_HANDLE || now >= deadline)
            break;
        pause_ms(backoff < deadline - now ? backoff : deadline - now);
        backoff = backoff * 2 > 100 ? 100 : backoff * 2;
    }
    if (rc)
        return rc;
    Mc__UpsertStartResponse *r = (Mc__UpsertStartResponse *)m;
    uint64_t token = r->token;
    uint32_t crc = 0;
    rc = mc_client_write_replicas(c, r->replicas, r->n_replicas, buf, len, &crc);
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc) {
        int x = upsert_end(c, key, token, 0, true);
        if (x)
            mc_warn("client", "upsert revoke failed (the master expires the reservation)", "rc=%s",
                    mc_strerror(x));
        return rc;
    }
    rc = upsert_end(c, key, token, crc, false);
    if (rc)
        mc_warn("client", "upsert end failed", "key=%s rc=%s", key, mc_strerror(rc));
    return rc;
}

/* BatchUpsertEnd for the keys whose reservation exists (tokens[i] != 0): swap the ones written
 * (wrc[i] 0), give back the others; results[i] gets each key's answer. */
static int batch_end(struct mc_client *c, size_t n, const char *const *keys, const uint64_t *tokens,
                     const uint32_t *crcs, const int *wrc, int *results)
{
    Mc__UpsertEndItem *items = calloc(n, sizeof(*items));
    Mc__UpsertEndItem **ptrs = calloc(n, sizeof(*ptrs));
    size_t *idx = calloc(n, sizeof(*idx));
    int rc = 0;
    if (!items || !ptrs || !idx) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tokens[i])
            continue;
        mc__upsert_end_item__init(&items[m]);
        items[m].key = (char *)keys[i];
        items[m].token = tokens[i];
        items[m].crc32c = crcs[i];
        items[m].crc_valid = wrc[i] == 0;
        items[m].revoke = wrc[i] != 0;
        ptrs[m] = &items[m];
        idx[m++] = i;
    }
    if (m == 0)
        goto out;
    Mc__Uuid u;
    Mc__BatchUpsertEndRequest req = MC__BATCH_UPSERT_END_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.n_items = m;
    req.items = ptrs;
    ProtobufCMessage *msg = NULL;
    rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_UPSERT_END, &req.base,
                             &mc__batch_upsert_end_response__descriptor, &msg);
    if (rc)
        goto out;
    const Mc__BatchUpsertEndResponse *r = (const Mc__BatchUpsertEndResponse *)msg;
    if (r->n_statuses != m)
        rc = MC_ERR_RPC_FAIL;
    for (size_t j = 0; rc == 0 && j < m; j++)
        results[idx[j]] = wrc[idx[j]] ? wrc[idx[j]] : r->statuses[j];
    protobuf_c_message_free_unpacked(msg, NULL);
out:
    free(items);
    free(ptrs);
    free(idx);
    return rc;
}

/* The writes of a batch's reserved keys (r[i] with status 0): replicas in this process's
 * segment with memcpy, rdma ones one by one, the other remote ones as one transport batch (one
 * peer round trip per endpoint), the first of them also computing the value's CRC on the wire.
 * wrc[i] gets key i's write result, crcs[i] its CRC32C. */
static int write_all(struct mc_client *c, size_t n, Mc__UpsertStartResult *const *r,
                     const void *const *bufs, const size_t *lens, int *wrc, uint32_t *crcs)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += r[i]->status ? 0 : r[i]->n_replicas;
    struct mc_xfer_item *items = calloc(total ? total : 1, sizeof(*items));
    size_t *owner = calloc(total ? total : 1, sizeof(*owner));
    if (!items || !owner) {
        free(items);
        free(owner);
        return MC_ERR_INTERNAL_ERROR;
    }
    size_t ni = 0;
    for (size_t i = 0; i < n; i++) {
        wrc[i] = 0;
        if (r[i]->status)
            continue;
        bool on_wire = false;
        if (r[i]->n_replicas == 0)
            wrc[i] = MC_ERR_INVALID_REPLICA;
        for (size_t k = 0; k < r[i]->n_replicas && !wrc[i]; k++) {
            struct mc_xfer_loc loc;
            bool local = false;
            int x = mc_client_replica_loc(c, r[i]->replicas[k], lens[i], &loc, &local);
            if (x == 0 && local) {
                x = mc_transport_write(c->local, &loc, bufs[i], lens[i]);
            } else if (x == 0 && mc_client_replica_is_rdma(c, r[i]->replicas[k])) {
                x = mc_transport_write(c->rdma, &loc, bufs[i], lens[i]);
            } else if (x == 0) {
                items[ni] = (struct mc_xfer_item){loc, (void *)bufs[i], lens[i], 0,
                                                  on_wire ? NULL : &crcs[i]};
                on_wire = true;
                owner[ni++] = i;
            }
            if (x)
                wrc[i] = x == MC_ERR_INVALID_REPLICA ? x : MC_ERR_TRANSFER_FAIL;
        }
        if (!on_wire && !wrc[i])
            crcs[i] = mc_crc32c(bufs[i], lens[i]);
    }
    int rc = ni ? mc_transport_batch(c->tcp, true, items, ni) : 0;
    for (size_t k = 0; k < ni; k++) {
        int x = rc ? rc : items[k].status;
        if (x && !wrc[owner[k]]) {
            mc_warn("client", "upsert replica write failed", "rc=%s", mc_strerror(x));
            wrc[owner[k]] = x == MC_ERR_INVALID_REPLICA ? x : MC_ERR_TRANSFER_FAIL;
        }
    }
    free(items);
    free(owner);
    return 0;
}

/* One BatchUpsertStart, the writes (write_all), one BatchUpsertEnd. Keys the start refused for
 * lack of space go the single way (which retries for put_retry_window_ms). */
int mc_batch_upsert(struct mc_client *c, size_t n, const char *const *keys, const void *const *bufs,
                    const size_t *lens, const struct mc_replicate_config *rc_user, int *results)
{
    if (!c || (n && (!keys || !bufs || !lens || !results)))
        return MC_ERR_INVALID_PARAMS;
    if (n == 0)
        return 0;
    mc_log_scope(&c->logger);
    struct mc_replicate_config rc_copy;
    int rc = mc_replicate_config_copy(rc_user, &rc_copy);
    if (!rc)
        rc = mc_client_check_config(&rc_copy);
    for (size_t i = 0; !rc && i < n; i++)
        if ((rc = mc_client_check_key(keys[i])) == 0 && lens[i] && !bufs[i])
            rc = MC_ERR_INVALID_PARAMS;
    if (rc)
        return rc;
    uint64_t *vals = calloc(n, sizeof(*vals));
    uint64_t *tokens = calloc(n, sizeof(*tokens));
    uint32_t *crcs = calloc(n, sizeof(*crcs));
    int *wrc = calloc(n, sizeof(*wrc));
    ProtobufCMessage *msg = NULL;
    if (!vals || !tokens || !crcs || !wrc) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        vals[i] = lens[i];
    Mc__ReplicateConfig cfg;
    mc_client_fill_config(&cfg, &rc_copy);
    Mc__Uuid u;
    Mc__BatchUpsertStartRequest req = MC__BATCH_UPSERT_START_REQUEST__INIT;
    req.client_id = mc_client_uuid(c, &u);
    req.n_keys = n;
    req.keys = (char **)keys;
    req.n_value_lengths = n;
    req.value_lengths = vals;
    req.config = &cfg;
    rc = mc_master_conn_call(c->mc, MC_METHOD_BATCH_UPSERT_START, &req.base,
                             &mc__batch_upsert_start_response__descriptor, &msg);
    if (rc)
        goto out;
    const Mc__BatchUpsertStartResponse *r = (const Mc__BatchUpsertStartResponse *)msg;
    if (r->n_results != n) {
        rc = MC_ERR_RPC_FAIL;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        results[i] = r->results[i]->status;
        tokens[i] = r->results[i]->status ? 0 : r->results[i]->token;
    }
    rc = write_all(c, n, r->results, bufs, lens, wrc, crcs);
    if (rc == 0)
        rc = batch_end(c, n, keys, tokens, crcs, wrc, results);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (results[i] == MC_ERR_NO_AVAILABLE_HANDLE)
            results[i] = mc_upsert(c, keys[i], bufs[i], lens[i], &rc_copy);
out:
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
    free(vals);
    free(tokens);
    free(crcs);
    free(wrc);
    return rc;
}
