/*
 * service.c - the master's RPC method table and the service's lifetime (see service.h).
 *
 * The dispatch table is made from MC_METHODS (common/wire.h), which names each method's adapter;
 * the adapters live by concern in the service_*.c files (service_internal.h lists them). A
 * handler runs on the connection's I/O thread and answers at once, except the two heartbeats,
 * which the core may park (service_disk.c, service_promotion.c).
 */
#include "master/service.h"

#include <stdlib.h>

#include "common/clock.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

#define HANDLER_MASTER(id, num, name, handler) {MC_METHOD_##id, mc_svc_##handler},
#define HANDLER_OTHER(id, num, name)
static const struct {
    uint16_t method;
    mc_rpc_handler_fn fn;
} g_handlers[] = {MC_METHODS(HANDLER_MASTER, HANDLER_OTHER)};
#undef HANDLER_MASTER
#undef HANDLER_OTHER

int mc_master_service_new(struct mc_master *m, struct mc_master_service **out)
{
    *out = NULL;
    if (!m)
        return MC_ERR_INVALID_PARAMS;
    struct mc_master_service *svc = calloc(1, sizeof(*svc));
    if (!svc)
        return MC_ERR_INTERNAL_ERROR;
    svc->m = m;
    svc->start_ms = mc_now_ms();
    mc_svc_watch_polls(m);
    *out = svc;
    return 0;
}

int mc_master_service_register(struct mc_master_service *svc, struct mc_rpc_server *srv)
{
    for (size_t i = 0; i < sizeof(g_handlers) / sizeof(g_handlers[0]); i++) {
        mc_rpc_handler_fn fn = g_handlers[i].fn;
        if (svc->ha && mc_svc_ha_gated(g_handlers[i].method)) { /* service_ha.c */
            svc->fns[g_handlers[i].method] = fn;
            fn = mc_svc_ha_gate;
        }
        int rc = mc_rpc_server_register(srv, g_handlers[i].method, fn, svc);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void mc_master_service_set_segment_cap(struct mc_master_service *svc, uint32_t n)
{
    svc->max_segments_per_client = n;
}

void mc_master_service_free(struct mc_master_service *svc)
{
    free(svc);
}
