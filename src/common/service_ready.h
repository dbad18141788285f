/*
 * service_ready.h - master.proto's ServiceReady, the version handshake: the answer a master
 * gives and the check its callers (the client's master link, the CLI, mooncake_bench) make.
 *
 * The generic RPC layer (rpc_client.h, rpc_server.h) moves frames and knows no method of
 * master.proto: a server answers ServiceReady only when its service registers
 * mc_service_ready_reply (the master does, service_segments.c), and a caller checks the
 * answer with mc_service_ready_check.
 */
#ifndef MC_COMMON_SERVICE_READY_H
#define MC_COMMON_SERVICE_READY_H

#include <stddef.h>

#include "common/rpc_client.h"
#include "common/rpc_server.h"

/* An rpc handler (mc_rpc_server_register with MC_METHOD_SERVICE_READY): answers
 * MC_SERVICE_VERSION and MC_PROTO_VERSION. arg is unused. */
void mc_service_ready_reply(void *arg, struct mc_rpc_call *call);
/* Calls ServiceReady; fails with MC_ERR_INVALID_VERSION (logged) when the server's proto number
 * differs from MC_PROTO_VERSION, with the call's error when it fails (NOT_SUPPORTED: the server
 * is no master). If version/len are given, copies the server's version string. */
int mc_service_ready_check(struct mc_rpc_client *c, char *version, size_t len);

#endif
