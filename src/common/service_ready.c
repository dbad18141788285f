/*
 * service_ready.c - master.proto's ServiceReady answer and check (service_ready.h).
 */
#include "common/service_ready.h"

#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

void mc_service_ready_reply(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    Mc__ServiceReadyResponse r = MC__SERVICE_READY_RESPONSE__INIT;
    r.version = (char *)MC_SERVICE_VERSION;
    r.proto_version = MC_PROTO_VERSION;
    mc_rpc_reply_msg(call, 0, &r.base);
}

int mc_service_ready_check(struct mc_rpc_client *c, char *version, size_t len)
{
    Mc__ServiceReadyRequest req = MC__SERVICE_READY_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_SERVICE_READY, &req.base,
                                    &mc__service_ready_response__descriptor, 0, &m);
    if (rc)
        return rc;
    Mc__ServiceReadyResponse *r = (Mc__ServiceReadyResponse *)m;
    uint32_t proto = r->proto_version;
    if (!proto && mc_wire_parse_proto_version(r->version, &proto) != 0)
        proto = 0;
    if (version && len)
        snprintf(version, len, "%s", r->version ? r->version : "");
    if (proto != MC_PROTO_VERSION) {
        mc_error(mc_rpc_client_name(c), "server speaks another protocol version",
                 "server=\"%s\" ours=%u", r->version ? r->version : "", (unsigned)MC_PROTO_VERSION);
        rc = MC_ERR_INVALID_VERSION;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}
