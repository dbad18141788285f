/*
 * worker_internal.h - what the worker's files share (worker.c: the loops and offload;
 * worker_promote.c: promotion). Private to the worker.
 */
#ifndef MC_CLIENT_WORKER_INTERNAL_H
#define MC_CLIENT_WORKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/worker.h"
#include "common/lock_order.h"
#include "common/log.h"
#include "proto/master.pb-c.h"

#define MC_WORKER_RETRY_MS 200u /* between tries while the master is unreachable */
#define MC_WORKER_LOOPS 2       /* offload, promotion (the table in worker.c) */

struct mc_promote_pool; /* worker_promote.c */

struct mc_worker {
    struct mc_worker_config cfg;
    pthread_t threads[MC_WORKER_LOOPS];
    bool started[MC_WORKER_LOOPS];
    pthread_mutex_t mu; /* st, and the cv of mc_worker_pause_ms */
    pthread_cond_t cv;
    _Atomic bool stop;
    const struct mc_logger *logger;
    struct mc_worker_stats st;
    struct mc_promote_pool *pool;
    bool promote_ready;
#ifdef MC_TEST_HOOKS
    uint32_t test_promote_stall_ms; /* env MC_TEST_PROMOTION_STALL_MS: see worker_promote.c */
#endif
};

Mc__Uuid *mc_worker_uuid(struct mc_id id, Mc__Uuid *u);
/* Sleeps ms, or less when the worker stops. */
void mc_worker_pause_ms(struct mc_worker *w, uint32_t ms);
/* *field += n under w->mu (field is one of w->st's). */
void mc_worker_count(struct mc_worker *w, uint64_t *field, uint64_t n);

/* The promotion loop's step, and its task threads (started before the loops, stopped after). */
void mc_worker_promote_step(struct mc_worker *w);
int mc_worker_promote_init(struct mc_worker *w);
void mc_worker_promote_destroy(struct mc_worker *w);

/* w->mu goes through these: a leaf of the lock order (common/lock_order.h). */
static inline void worker_lock(struct mc_worker *w)
{
    mc_lo_acquire(MC_LO_WORKER, 0);
    pthread_mutex_lock(&w->mu);
}

static inline void worker_unlock(struct mc_worker *w)
{
    pthread_mutex_unlock(&w->mu);
    mc_lo_release(MC_LO_WORKER, 0);
}

#endif
