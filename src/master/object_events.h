/*
 * object_events.h - the moments the object layer announces, and the ordered table of the tier
 * policies that subscribe to them (DESIGN.md §7 "Object events").
 *
 * The object operations (objects.c, objects_batch.c), the client sweep and eviction never call a
 * tier policy by name: at each moment below they dispatch to the subscribers registered for it,
 * in the order they were registered. mc_master_new registers the table once, after every module
 * is initialised and before the master is shared: promotion, then offload (later the holder
 * stream); it never changes afterwards, so dispatch reads it without a lock. A policy registers
 * only the events its configuration needs (offload's PutEnd handler only in mode A, promotion's
 * read handler only with promotion_on_hit), so an event nobody listens to costs one load.
 *
 * Each event says which lock is held when it is announced and what a subscriber may do under
 * it; the dispatchers assert the lock in checking builds (MC_CHECKS, lock_order.h). "Quiet"
 * below means a mailbox push that does not wake the holder: the object layer announces
 * MC_OBJ_EV_UNLOCKED once the shard lock is dropped, and the subscribers wake their holders
 * then.
 *
 *  event                 lock held                 a subscriber may
 *  PUT_END               o's shard, write          queue work for o (quiet push), pin a replica
 *  READ                  none                      count the read, admit a task (takes locks)
 *  REMOVE_CLAIM          o's shard, write          fail the Remove (an error code), or end its
 *                                                  own task on o (its staged replica to fl)
 *  BEFORE_REMOVE         o's shard, write          park the Remove on ev->op until the copies'
 *                        (the core's rules passed)   holders confirm (the delete rule), take
 *                                                  those copies off o, or fail it
 *  ERASED                o's shard, write          end its tasks on o; o leaves its shard next
 *  EVICT_CHOSEN          o's shard, write          estimate o's frequency; take the eviction
 *                                                  over (keep a replica pinned, queue an offload)
 *  EVICT_CYCLE_BEGIN     eviction's cycle lock     reset per-cycle state
 *  EVICT_CYCLE_END       eviction's cycle lock     read the cycle's victims' summary
 *  REPLICA_DROPPING      o's shard, write          end a task whose replica is about to go
 *  CLIENT_EXPIRED        none                      drop the client's registrations and tasks
 *  HOLDER_REMOUNTED      none                      end the tasks the holder's last run took
 *  UNLOCKED              none                      wake the holders its quiet pushes fed
 *
 * A subscriber never takes another shard's lock while o's is held and never calls back into the
 * operation announcing the event. It does not erase o, except the one that takes an eviction
 * over: it evicts through mc_master_evict_memory, which erases o when no valid replica is left,
 * as the object layer itself would. The eviction cycle's lock is eviction.c's own mutex, outside
 * the lock-order checker: those two events are not asserted.
 */
#ifndef MC_MASTER_OBJECT_EVENTS_H
#define MC_MASTER_OBJECT_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "common/mc_assert.h"
#include "master/lock_order.h"
#include "master/master_state.h"
#include "master/shard.h"

struct mc_object;
struct mc_freelist;
struct mc_unlink_batch;
struct mc_delop;

enum mc_obj_event {
    MC_OBJ_EV_PUT_END,
    MC_OBJ_EV_READ,
    MC_OBJ_EV_REMOVE_CLAIM,
    MC_OBJ_EV_BEFORE_REMOVE,
    MC_OBJ_EV_ERASED,
    MC_OBJ_EV_EVICT_CHOSEN,
    MC_OBJ_EV_EVICT_CYCLE_BEGIN,
    MC_OBJ_EV_EVICT_CYCLE_END,
    MC_OBJ_EV_REPLICA_DROPPING,
    MC_OBJ_EV_CLIENT_EXPIRED,
    MC_OBJ_EV_HOLDER_REMOUNTED,
    MC_OBJ_EV_UNLOCKED,
    MC_OBJ_EV_COUNT
};
_Static_assert(MC_OBJ_EV_COUNT <= MC_OBJ_EV_SLOTS, "master_state.h has a slot per event");

/* READ: the tiers the read found (computed under the shard lock, announced after it). */
enum {
    MC_READ_FOUND_MEMORY = 1u << 0, /* a MEMORY replica of any status */
    MC_READ_FOUND_DISK = 1u << 1,   /* a readable LOCAL_DISK replica */
};
struct mc_obj_read_ev {
    const char *key;
    size_t key_len;
    uint64_t key_hash;
    size_t batch_keys; /* keys in the request: 1 for GetReplicaList, n for a BatchGet */
    unsigned found;    /* MC_READ_FOUND_* */
};

/* REMOVE_CLAIM and BEFORE_REMOVE. */
struct mc_obj_remove_ev {
    bool force;
    struct mc_freelist *fl; /* buffers leave through it, released once unlocked */
    struct mc_delop *op;    /* the waiting Remove (NULL: nobody waits) */
};

/* EVICT_CHOSEN: every subscriber sees it in order; the first to set taken decides the eviction
 * (freed: the DRAM bytes it freed, as mc_master_evict_object returns), and the later ones only
 * look. Nobody taking it: the object layer evicts o's MEMORY replicas itself. */
struct mc_obj_evict_ev {
    struct mc_freelist *fl;
    struct mc_unlink_batch *ub;
    uint32_t victim_freq; /* out: o's estimated read frequency (hot beats cold), 0 unknown */
    bool taken;           /* out */
    uint64_t freed;       /* out, with taken */
};

/* EVICT_CYCLE_BEGIN and EVICT_CYCLE_END (the sums are 0 at the beginning). */
struct mc_obj_cycle_ev {
    uint64_t victim_freq_sum; /* of the evicted objects' victim_freq */
    uint64_t evicted;
};

/* REPLICA_DROPPING: replicas of o are about to be taken off it. */
struct mc_obj_drop_ev {
    struct mc_freelist *fl;
    /* true: the replicas whose storage is gone (a dead segment or holder; the sweep); false: a
     * LOCAL_DISK copy of o is dropped by its holder or by its re-registration, still valid now */
    bool storage_lost;
};

struct mc_obj_subscriber {
    const char *name;
    void (*put_end)(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
    void (*read)(struct mc_master *m, const struct mc_obj_read_ev *ev);
    int (*remove_claim)(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                        const struct mc_obj_remove_ev *ev);
    int (*before_remove)(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                         const struct mc_obj_remove_ev *ev);
    void (*erased)(struct mc_master *m, struct mc_shard *s, struct mc_object *o);
    void (*evict_chosen)(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                         struct mc_obj_evict_ev *ev);
    void (*evict_cycle_begin)(struct mc_master *m);
    void (*evict_cycle_end)(struct mc_master *m, const struct mc_obj_cycle_ev *ev);
    void (*replica_dropping)(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                             const struct mc_obj_drop_ev *ev);
    void (*client_expired)(struct mc_master *m, struct mc_id client);
    void (*holder_remounted)(struct mc_master *m, struct mc_id holder);
    void (*unlocked)(struct mc_master *m);
};

/* Registers sub for every event it has a handler for, after the subscribers registered before
 * it (mc_master_new only, before the master is shared). sub must outlive the master. 0, or -1
 * when an event already has MC_OBJ_SUBS_MAX subscribers. */
int mc_obj_events_register(struct mc_master *m, const struct mc_obj_subscriber *sub);

/* Whether anybody listens to ev (the announcer may then skip preparing it). */
static inline bool mc_obj_events_wanted(const struct mc_master *m, enum mc_obj_event ev)
{
    return m->events.n[ev] != 0;
}

/* The subscribers of ev, in order: for (i < n) t->sub[ev][i]. */
#define MC_OBJ_EV_N(m, ev) ((m)->events.n[ev])
#define MC_OBJ_EV_SUB(m, ev, i) ((m)->events.sub[ev][i])

/* The shard lock of an event announced under it: held by this thread (checking builds). */
#define MC_OBJ_EV_ASSERT_SHARD(s) MC_ASSERT(mc_lo_holds(MC_LO_SHARD, (s)->index, true))
/* An event announced with no lock held. */
#define MC_OBJ_EV_ASSERT_UNLOCKED() MC_ASSERT(mc_lo_depth() == 0)

static inline void mc_obj_ev_put_end(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    MC_OBJ_EV_ASSERT_SHARD(s);
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_PUT_END); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_PUT_END, i)->put_end(m, s, o);
}

static inline void mc_obj_ev_read(struct mc_master *m, const struct mc_obj_read_ev *ev)
{
    MC_OBJ_EV_ASSERT_UNLOCKED();
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_READ); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_READ, i)->read(m, ev);
}

/* The first refusal stops the dispatch and fails the Remove. */
static inline int mc_obj_ev_remove_claim(struct mc_master *m, struct mc_shard *s,
                                         struct mc_object *o, const struct mc_obj_remove_ev *ev)
{
    MC_OBJ_EV_ASSERT_SHARD(s);
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_REMOVE_CLAIM); i++) {
        const struct mc_obj_subscriber *sub = MC_OBJ_EV_SUB(m, MC_OBJ_EV_REMOVE_CLAIM, i);
        int rc = sub->remove_claim(m, s, o, ev);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static inline int mc_obj_ev_before_remove(struct mc_master *m, struct mc_shard *s,
                                          struct mc_object *o, const struct mc_obj_remove_ev *ev)
{
    MC_OBJ_EV_ASSERT_SHARD(s);
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_BEFORE_REMOVE); i++) {
        const struct mc_obj_subscriber *sub = MC_OBJ_EV_SUB(m, MC_OBJ_EV_BEFORE_REMOVE, i);
        int rc = sub->before_remove(m, s, o, ev);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static inline void mc_obj_ev_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    MC_OBJ_EV_ASSERT_SHARD(s);
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_ERASED); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_ERASED, i)->erased(m, s, o);
}

static inline void mc_obj_ev_evict_chosen(struct mc_master *m, struct mc_shard *s,
                                          struct mc_object *o, struct mc_obj_evict_ev *ev)
{
    MC_OBJ_EV_ASSERT_SHARD(s);
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_EVICT_CHOSEN); i++) {
        const struct mc_obj_subscriber *sub = MC_OBJ_EV_SUB(m, MC_OBJ_EV_EVICT_CHOSEN, i);
        if (ev->taken)
            break;
        sub->evict_chosen(m, s, o, ev);
    }
}

static inline void mc_obj_ev_evict_cycle_begin(struct mc_master *m)
{
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_EVICT_CYCLE_BEGIN); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_EVICT_CYCLE_BEGIN, i)->evict_cycle_begin(m);
}

static inline void mc_obj_ev_evict_cycle_end(struct mc_master *m, const struct mc_obj_cycle_ev *ev)
{
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_EVICT_CYCLE_END); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_EVICT_CYCLE_END, i)->evict_cycle_end(m, ev);
}

static inline void mc_obj_ev_replica_dropping(struct mc_master *m, struct mc_shard *s,
                                              struct mc_object *o, const struct mc_obj_drop_ev *ev)
{
    MC_OBJ_EV_ASSERT_SHARD(s);
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_REPLICA_DROPPING); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_REPLICA_DROPPING, i)->replica_dropping(m, s, o, ev);
}

static inline void mc_obj_ev_client_expired(struct mc_master *m, struct mc_id client)
{
    MC_OBJ_EV_ASSERT_UNLOCKED();
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_CLIENT_EXPIRED); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_CLIENT_EXPIRED, i)->client_expired(m, client);
}

static inline void mc_obj_ev_holder_remounted(struct mc_master *m, struct mc_id holder)
{
    MC_OBJ_EV_ASSERT_UNLOCKED();
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_HOLDER_REMOUNTED); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_HOLDER_REMOUNTED, i)->holder_remounted(m, holder);
}

static inline void mc_obj_ev_unlocked(struct mc_master *m)
{
    MC_OBJ_EV_ASSERT_UNLOCKED();
    for (unsigned i = 0; i < MC_OBJ_EV_N(m, MC_OBJ_EV_UNLOCKED); i++)
        MC_OBJ_EV_SUB(m, MC_OBJ_EV_UNLOCKED, i)->unlocked(m);
}

#endif
