/*
 * service_ha.c - the RPC side of high availability (master/ha.h): GetLeader, which every master
 * answers, and the gate every other method passes on a master started with HA: a standby, or a
 * leader outside its lease, answers NOT_LEADER without running the method. ServiceReady stays
 * open too, so a client can check the protocol of a standby it was pointed at.
 */
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master/ha.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

bool mc_svc_ha_gated(uint16_t method)
{
    return method != MC_METHOD_SERVICE_READY && method != MC_METHOD_GET_LEADER;
}

void mc_svc_ha_gate(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    if (mc_ha_gate(svc->ha) != 0) {
        mc_rpc_reply_status(call, MC_ERR_NOT_LEADER);
        return;
    }
    svc->fns[mc_rpc_call_method(call)](svc, call);
}

void mc_master_service_set_ha(struct mc_master_service *svc, struct mc_ha *ha)
{
    svc->ha = ha;
}

void mc_svc_get_leader(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(GetLeaderRequest, get_leader_request, req);
    FREE_REQ(req);
    Mc__GetLeaderResponse r = MC__GET_LEADER_RESPONSE__INIT;
    struct mc_ha_view v = {0};
    if (svc->ha) {
        mc_ha_view(svc->ha, &v);
        r.role = (char *)(mc_ha_gate(svc->ha) == 0 ? "leader" : "standby");
        r.epoch = v.epoch;
    } else {
        r.role = (char *)"leader";
        r.epoch = mc_master_epoch(svc->m);
    }
    r.leader_address = v.leader_addr;
    mc_rpc_reply_msg(call, 0, &r.base);
}
