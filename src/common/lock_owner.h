/*
 * lock_owner.h - who holds a leaf mutex, for the asserts of `_locked` functions.
 *
 * The lock-order checker (lock_order.h) places a lock among the others; a leaf mutex that is
 * taken under locks of many levels (the holder index under the peer server's segment table, a
 * TLS session under the rpc client's send lock) has no place of its own there. Its owner is kept
 * beside it instead: set after the lock is taken, cleared before it is released, and read only
 * by a thread asserting that it holds the lock (reads by the owner itself are under the lock).
 */
#ifndef MC_COMMON_LOCK_OWNER_H
#define MC_COMMON_LOCK_OWNER_H

#include <pthread.h>
#include <stdbool.h>

struct mc_lock_owner {
    pthread_t tid;
    bool set;
};

static inline void mc_owner_lock(pthread_mutex_t *mu, struct mc_lock_owner *o)
{
    pthread_mutex_lock(mu);
    o->tid = pthread_self();
    o->set = true;
}

static inline void mc_owner_unlock(pthread_mutex_t *mu, struct mc_lock_owner *o)
{
    o->set = false;
    pthread_mutex_unlock(mu);
}

/* True when the calling thread holds the mutex o guards (for MC_ASSERT). */
static inline bool mc_owner_is_me(const struct mc_lock_owner *o)
{
    return o->set && pthread_equal(o->tid, pthread_self());
}

#endif
