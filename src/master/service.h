/*
 * service.h - the master's RPC adapters: one thin handler per method of proto/master.proto.
 *
 * Each handler decodes the request (protobuf-c), calls one mc_master_* function and encodes the
 * result (DESIGN.md §5): no policy lives here. The core returns results in caller-owned structs
 * after dropping its locks, so replies are always encoded outside master locks. Batch replies
 * carry one status per item; a non-zero frame status means the whole call failed (empty body).
 *
 * Client binding. A connection is bound to the first non-zero client id a request on it names
 * (whatever the method: one that has not pinged or mounted yet cannot act for one client and
 * then another); from then on a request on that connection naming another (non-zero) client id
 * is answered ILLEGAL_CLIENT. The binding lives in the rpc_server's
 * per-connection context and is freed by mc_master_service_on_close, which the daemon must
 * install as the server's on_close callback (with the service as its argument).
 *
 * Bounds on untrusted input that are not the core's business: a batch of more than
 * MC_SERVICE_MAX_BATCH items, strings longer than the fixed fields of master_types.h, or a
 * missing required sub-message give INVALID_PARAMS. The two heartbeats (OffloadObjectHeartbeat,
 * PromotionObjectHeartbeat) are long-polls the core may answer later (service_disk.c).
 *
 * Files: service.c holds the method table; the adapters live by concern in service_*.c, with
 * what they share in service_internal.h (which lists them).
 *
 * The service owns no thread and installs no signal handler; it is part of mc_master_core so
 * tests can serve a master in-process.
 */
#ifndef MC_MASTER_SERVICE_H
#define MC_MASTER_SERVICE_H

#include <stdint.h>

struct mc_master;
struct mc_rpc_server;
struct mc_master_service;

#define MC_SERVICE_MAX_BATCH 8192u

/* Creates the adapter set for master m (not owned; must outlive the service). Returns 0 or
 * MC_ERR_INTERNAL_ERROR. */
int mc_master_service_new(struct mc_master *m, struct mc_master_service **out);
/* Registers every master method on srv (before mc_rpc_server_start). Returns 0 or the first
 * mc_rpc_server_register error. */
int mc_master_service_register(struct mc_master_service *svc, struct mc_rpc_server *srv);
/* High availability: every method but ServiceReady and GetLeader passes ha's gate first (a
 * standby, or a leader outside its lease, answers NOT_LEADER). Call before
 * mc_master_service_register; ha (not owned) must outlive the server. */
struct mc_ha;
void mc_master_service_set_ha(struct mc_master_service *svc, struct mc_ha *ha);
/* rpc_server on_close callback: frees the connection's client binding. arg = the service. */
void mc_master_service_on_close(void *arg, uint64_t conn_id, void *conn_ctx);
/* The port the daemon serves HTTP (/metrics, the admin API) on: GetStats reports it as
 * extra "master_http_port", so tools find it without being told. */
void mc_master_service_set_http_port(struct mc_master_service *svc, uint16_t port);
/* Frees the service. Stop (or free) the RPC server first. NULL is a no-op. */
void mc_master_service_free(struct mc_master_service *svc);
/* At most n segments mounted per client over RPC (0 = no cap; --max_segments_per_client): a
 * further MountSegment of a new segment id is INVALID_PARAMS. Call before serving. */
void mc_master_service_set_segment_cap(struct mc_master_service *svc, uint32_t n);

#endif
