/*
 * discard.h - the deferred-free list (discard.c; private to the master core).
 *
 * Objects already unlinked from their shard whose buffers someone may still be using wait here
 * until their release time: a taken-over Put (its writer may still write, until
 * put_start_release_timeout after its start) and an object force-removed under a read lease (a
 * reader may still read, until the lease ends). The reaper tick releases the due ones. The list's
 * mutex is a leaf of the lock order: pushes happen under a shard lock.
 */
#ifndef MC_MASTER_DISCARD_H
#define MC_MASTER_DISCARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_object;
struct mc_freelist;

struct mc_discarded {
    struct mc_object *obj; /* unlinked from its shard, still owning its buffers */
    uint64_t release_ms;
    bool put; /* a taken-over Put (counted by put_start_release_cnt) */
};

struct mc_discard_list {
    pthread_mutex_t lock;
    struct mc_discarded *v;
    size_t n, cap;
};

void mc_discard_init(struct mc_discard_list *d);
/* Moves every parked object to fl (the master is being freed) and frees the list. */
void mc_discard_destroy(struct mc_discard_list *d, struct mc_freelist *fl);
/* Parks o (detached from its shard, its replicas still attached) until release_ms; put: a
 * taken-over Put, else a forced removal under a read lease. When the list cannot grow, o goes
 * to fl at once (a warning is logged). */
void mc_discard_push(struct mc_discard_list *d, struct mc_object *o, uint64_t release_ms, bool put,
                     struct mc_freelist *fl);
/* Moves the objects whose release time came (release_ms <= now) to fl (to flush once the caller
 * holds no lock). Returns how many; *puts = how many of them were taken-over Puts. */
int mc_discard_reap(struct mc_discard_list *d, uint64_t now, struct mc_freelist *fl, int *puts);

#endif
