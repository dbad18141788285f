/*
 * client_upsert.c - Upsert (client.h): UpsertStart (the master reserves placed space; the key
 * is untouched) -> write the bytes to every reserved replica, as a Put does -> UpsertEnd with the
 * value's CRC32C, which swaps the old value for the new in one step on the master
 * (src/master/upsert.h). Any failure after the start gives the space back (UpsertEnd with
 * revoke), so nothing is half visible: readers see the old value until the swap and the new
 * one after it. NO_AVAILABLE_HANDLE at the start is retried for put_retry_window_ms, as Put's.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/clock.h"
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

int mc_batch_upsert(struct mc_client *c, size_t n, const char *const *keys, const void *const *bufs,
                    const size_t *lens, const struct mc_replicate_config *rc, int *results)
{
    if (!c || (n && (!keys || !bufs || !lens || !results)))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++)
        results[i] = mc_upsert(c, keys[i], bufs[i], lens[i], rc);
    return 0;
}
