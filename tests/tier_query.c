/* tier_query.c - see tier_query.h. */
#include "tier_query.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/wire.h"

double tq_stats_extra(const Mc__GetStatsResponse *r, const char *name)
{
    for (size_t i = 0; i < r->n_extra; i++)
        if (strcmp(r->extra[i]->name, name) == 0)
            return r->extra[i]->value;
    fail_msg("GetStats has no %s", name);
    return 0;
}

bool tq_replicas(struct mc_rpc_client *adm, const char *key, int *mem, int *disk, uint64_t *version)
{
    Mc__QueryKeyRequest req = MC__QUERY_KEY_REQUEST__INIT;
    req.key = (char *)key;
    ProtobufCMessage *m = NULL;
    *mem = *disk = 0;
    if (version)
        *version = 0;
    if (mc_rpc_client_call_msg(adm, MC_METHOD_QUERY_KEY, &req.base,
                               &mc__query_key_response__descriptor, 0, &m) != 0)
        return false;
    const Mc__QueryKeyResponse *q = (const Mc__QueryKeyResponse *)m;
    for (size_t i = 0; i < q->n_replicas; i++) {
        const Mc__ReplicaDescriptor *d = q->replicas[i] ? q->replicas[i]->replica : NULL;
        if (!d || d->status != MC__REPLICA_STATUS__RS_COMPLETE)
            continue;
        if (d->type == MC__REPLICA_TYPE__RT_MEMORY)
            (*mem)++;
        else if (d->type == MC__REPLICA_TYPE__RT_LOCAL_DISK)
            (*disk)++;
    }
    if (version)
        *version = q->version;
    protobuf_c_message_free_unpacked(m, NULL);
    return true;
}
