/*
 * master_service_fixture.h - the master core with its RPC service on a real RPC server in this
 * process (no mooncake_master binary): what the in-process security tests start from. The
 * server may stay unstarted (requests fed with mc_rpc_server_test_feed) or listen on an
 * ephemeral port for clients made here.
 */
#ifndef MC_TESTS_MASTER_SERVICE_FIXTURE_H
#define MC_TESTS_MASTER_SERVICE_FIXTURE_H

#include <stdint.h>

#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "master/master.h"
#include "master/service.h"

struct msf {
    struct mc_master *m;
    struct mc_master_service *svc;
    struct mc_rpc_server *srv;
};

/* The master config to start from: defaults with one eviction thread. */
struct mc_master_config msf_master_config(void);
/* The server config to start from: one I/O thread, bound to bind_addr (NULL: the default). */
struct mc_rpc_server_config msf_server_config(const char *bind_addr);
/* A master from mc, its service, and a server from rc that carries the service (its on_close
 * hooked, its methods registered); each step must succeed. The server is not started. */
void msf_open(struct msf *x, const struct mc_master_config *mc, struct mc_rpc_server_config rc);
/* Starts the server, which must start; returns its port. */
uint16_t msf_start(struct msf *x);
/* A client of the started server from host, with key's handshake (NULL: none). */
struct mc_rpc_client *msf_client(struct msf *x, const char *host, const struct mc_auth_key *key);
/* Stops the server and frees what msf_open made. */
void msf_close(struct msf *x);

#endif
