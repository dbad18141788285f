/*
 * put_end_diff.c - the in-place PutEnd/PutRevoke decoder against protobuf-c on one body
 * (put_end_diff.h).
 */
#include <string.h>

#include "common/pb_budget.h"
#include "master/service_internal.h"
#include "master/service_wire.h"
#include "proto/master.pb-c.h"
#include "put_end_diff.h"

enum put_end_verdict put_end_diff(const uint8_t *b, size_t len, bool end, const char **why)
{
    struct mc_pb_limits lim = {0};
    ProtobufCMessage *m = mc_pb_unpack_bounded(end ? &mc__put_end_request__descriptor
                                                   : &mc__put_revoke_request__descriptor,
                                               b, len, &lim, NULL);
    struct mc_svc_put_end_req r;
    const char *refused = mc_svc_decode_put_end(b, len, end, &r);
    if (why)
        *why = refused;
    if (!m)
        return refused ? PUT_END_REFUSED : PUT_END_ONLY_PB_REFUSES;
    if (refused) {
        protobuf_c_message_free_unpacked(m, NULL);
        return PUT_END_ONLY_OURS_REFUSES;
    }
    const char *k;
    struct mc_id id;
    int32_t type;
    uint64_t version;
    uint32_t crc = 0;
    bool crc_valid = false;
    if (end) {
        const Mc__PutEndRequest *q = (const void *)m;
        k = q->key;
        id = mc_svc_id_from_pb(q->client_id);
        type = q->replica_type;
        version = q->version;
        crc = q->crc32c;
        crc_valid = q->crc_valid;
    } else {
        const Mc__PutRevokeRequest *q = (const void *)m;
        k = q->key;
        id = mc_svc_id_from_pb(q->client_id);
        type = q->replica_type;
        version = q->version;
    }
    /* protobuf-c's key stops at its first NUL, the in-place decoder's reads as empty when it
     * holds one: protobuf-c's gets the same mark before the two are compared */
    struct mc_key_ref ref = {.data = k ? k : "", .len = k ? strlen(k) : 0};
    mc_svc_mark_nul_strings(b, len, MC_SVC_PUT_END_KEY_FIELD, 0, true, &ref, 1);
    bool same = r.key.len == ref.len && memcmp(r.key.data, ref.data, ref.len) == 0 &&
                r.client.hi == id.hi && r.client.lo == id.lo && r.replica_type == type &&
                r.version == version && r.crc32c == crc && r.crc_valid == crc_valid;
    protobuf_c_message_free_unpacked(m, NULL);
    return same ? PUT_END_SAME : PUT_END_DIFFERENT;
}

const char *put_end_verdict_name(enum put_end_verdict v)
{
    switch (v) {
    case PUT_END_REFUSED:
        return "both refuse it";
    case PUT_END_SAME:
        return "both read the same fields";
    case PUT_END_ONLY_PB_REFUSES:
        return "accepted a body protobuf-c refuses";
    case PUT_END_ONLY_OURS_REFUSES:
        return "refused a body protobuf-c accepts";
    case PUT_END_DIFFERENT:
        return "decoded otherwise than protobuf-c";
    }
    return "unknown verdict";
}
