/*
 * delwait.h - deletes waiting for their holders' acknowledgement (DESIGN.md §7 "The delete
 * rule"; delwait.c). No master knowledge: offload.c pushes the delete tasks, fences holders
 * and drops them; this module only remembers what is outstanding.
 *
 * An entry is one delete task pushed to one holder: {task id, holder, key, version, deadline}.
 * It belongs to an operation (a Remove, BatchRemove or RemoveAll the caller answers once every
 * entry of it is settled), or to none (an erasure nobody waits for). An entry is settled by the
 * holder's acknowledgement (the dead mark is on its disk) or by the holder's fence (the master
 * voided its copies). While an entry is outstanding its key is a tombstone: a disk record of
 * that key at or below the entry's version is not re-registered (mc_delwait_blocks).
 *
 * Deadlines are now + a fixed timeout, so entries are kept in deadline order (a FIFO) and the
 * overdue ones are found from the front. Tasks are found by id (acks) and by key (tombstones)
 * through two chained hash tables.
 *
 * Locking: one mutex, a leaf of the lock order (adds happen under a shard lock). An operation's
 * completion callback runs outside it, from whichever thread settled its last entry (an ack's,
 * the tick's, or the adder's at seal).
 */
#ifndef MC_MASTER_DELWAIT_H
#define MC_MASTER_DELWAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"

struct mc_delwait;
struct mc_delop;

/* Called once when every entry of an operation is settled; rc is the operation's status (MC_OK,
 * or what mc_delop_seal was given). No master lock is held. */
typedef void (*mc_delop_done_fn)(void *arg, int rc);

struct mc_delwait *mc_delwait_new(void);
/* Settles every entry (their operations complete with UNAVAILABLE_IN_CURRENT_STATUS: the master
 * is going away) and frees the table. */
void mc_delwait_free(struct mc_delwait *w);

/* A new operation (NULL out of memory). done is called once, after mc_delop_seal. */
struct mc_delop *mc_delop_new(mc_delop_done_fn done, void *arg);
/* The caller added every entry of op (or gave up): returns 1 and frees op when nothing is
 * outstanding (done is not called: the caller answers now), else 0 (done(arg, rc) is called
 * later). */
int mc_delop_seal(struct mc_delwait *w, struct mc_delop *op, int rc);

/* Records a delete task pushed to holder (op may be NULL: nobody waits). -1 out of memory. */
int mc_delwait_add(struct mc_delwait *w, struct mc_delop *op, uint64_t task_id, struct mc_id holder,
                   const char *key, size_t key_len, uint64_t version, uint64_t deadline_ms);

/* Forgets the entry task_id of holder (its push failed), completing nothing: call it only
 * before its operation is sealed. */
void mc_delwait_forget(struct mc_delwait *w, struct mc_id holder, uint64_t task_id);

/* holder acknowledged task ids (unknown ids, or another holder's, are ignored). Settled
 * operations complete before this returns. Returns how many entries were settled. */
size_t mc_delwait_ack(struct mc_delwait *w, struct mc_id holder, const uint64_t *ids, size_t n);

/* A holder to fence: the highest version among its outstanding entries. */
struct mc_delwait_overdue {
    struct mc_id holder;
    uint64_t version;
};
/* Holders with an entry whose deadline is <= now, each once, with the highest version of all
 * their outstanding entries, into a malloc'd *out (free it). Returns how many (0: *out NULL). */
size_t mc_delwait_overdue(struct mc_delwait *w, uint64_t now_ms, struct mc_delwait_overdue **out);
/* holder was fenced at version: its entries at or below it are settled (operations complete
 * before this returns). Returns how many. */
size_t mc_delwait_settle_holder(struct mc_delwait *w, struct mc_id holder, uint64_t version);
/* The highest version among holder's outstanding entries (0: none). */
uint64_t mc_delwait_holder_version(struct mc_delwait *w, struct mc_id holder);

/* A delete handed out whose ack has not come: its answer may have been lost with a dropped
 * connection (a mailbox forgets a delete once it handed it out), so it is pushed again. */
struct mc_delwait_resend {
    uint64_t task_id, version;
    struct mc_id holder;
    size_t key_len;
    char *key; /* malloc'd */
};
/* Entries still outstanding: first when their deadline is within horizon_ms of now (with
 * horizon = timeout - interval: interval_ms after they were added), then every interval_ms; at
 * most max, into a malloc'd *out (free with mc_delwait_resend_free). */
size_t mc_delwait_due_resend(struct mc_delwait *w, uint64_t now_ms, uint64_t interval_ms,
                             uint64_t horizon_ms, size_t max, struct mc_delwait_resend **out);
void mc_delwait_resend_free(struct mc_delwait_resend *v, size_t n);

/* Whether an outstanding delete of key covers version (an entry of the key at or above it). */
bool mc_delwait_blocks(struct mc_delwait *w, const char *key, size_t key_len, uint64_t version);
/* Outstanding entries (cheap: an atomic). */
size_t mc_delwait_outstanding(struct mc_delwait *w);

#endif
