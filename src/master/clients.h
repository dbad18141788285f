/*
 * clients.h - the client registry (clients.c; private to the master core).
 *
 * The registry owns every known client's liveness: a chained hash of {client id, liveness
 * deadline, status} under one mutex, the first lock of the lock order (nothing takes it while
 * holding a shard lock). It lives inside struct mc_master; only clients.c reads or changes it.
 * The public calls (Ping, Mount/ReMount/UnmountSegment, the monitor tick) are in master.h.
 */
#ifndef MC_MASTER_CLIENTS_H
#define MC_MASTER_CLIENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/id.h"
#include "master/master.h"

struct mc_client_rec {
    struct mc_client_rec *next;
    struct mc_id id;
    uint64_t deadline_ms;
    enum mc_client_status status;
};

struct mc_clients {
    pthread_mutex_t lock;
    struct mc_client_rec **buckets;
    uint32_t mask, n;
};

/* 0, or -1 when out of memory (mc_clients_destroy then undoes what was done). */
int mc_clients_init(struct mc_master *m);
void mc_clients_destroy(struct mc_master *m);
/* Registers id if unknown (NEED_REMOUNT, as a Ping does) and refreshes its liveness: for
 * MountLocalDiskSegment (offload.c). MC_OK or INTERNAL_ERROR (out of memory). */
int mc_clients_touch(struct mc_master *m, struct mc_id id);
/* Registered clients (GetStats, metrics). */
uint64_t mc_master_active_clients(struct mc_master *m);

#endif
