/*
 * eviction_moves.h - finding a round's candidates again when their entries moved (write lock
 * held): along the moves this cycle's own unlinks made (struct ev_fwd), or, for what a Remove or
 * a Put moved between rounds, by version in one walk over the shard (eviction_moves.c).
 */
#ifndef MC_MASTER_EVICTION_MOVES_H
#define MC_MASTER_EVICTION_MOVES_H

#include <stddef.h>
#include <stdint.h>

#include "master/eviction_internal.h"

/* Where this cycle's unlinks moved one shard's entries: an unlink fills the holes it leaves with
 * entries from the shard's tail, so a candidate of a later round may no longer be at its
 * census position. fwd[top - 1 - j] is where the entry at position j went (NONE: not moved);
 * top is the shard's entry count when the cycle first locked it, so every census position
 * below it has a slot, and the array only spans the positions the unlinks emptied (the tail).
 * A candidate is followed along these moves (an entry moved twice is a chain); what a Remove or
 * a Put moved between rounds is not here and costs a walk over the shard (ev_find_moved). */
#define EV_FWD_NONE UINT32_MAX
#define EV_FWD_HOPS 64
struct ev_fwd {
    uint32_t *v;
    size_t cap;
    uint32_t len, top; /* len: slots set (NONE or a position); top 0: not locked this cycle */
};

/* Records that the entry at position from moved to position to (write lock held). A move the
 * array cannot take (a position a Put added after the cycle began, or no memory) is simply not
 * followed: its candidate is then found by the walk. */
void ev_fwd_set(struct ev_fwd *f, uint32_t from, uint32_t to);

/* The candidate c of s (write lock) where this cycle's unlinks moved it, or NULL. */
struct mc_object *ev_follow_moves(struct mc_shard *s, const struct ev_fwd *f,
                                  const struct ev_cand *c);

/* ev_find_moved's scratch (one per worker, kept across rounds). */
struct ev_moved;
struct ev_moved_scratch {
    struct ev_moved *v;
    size_t cap;
};

/* Candidates c[i] of s with objs[i] NULL (nmoved of them: their entry no longer holds them and
 * their moves did not lead to them; or they are gone): found by version in one walk over the
 * shard's entries (write lock), whose objects are mostly cold, and set in objs. Few: compared
 * directly; many: sorted and searched. Gone: stay NULL. */
void ev_find_moved(struct mc_shard *s, const struct ev_cand *c, size_t cnt, struct mc_object **objs,
                   struct ev_moved_scratch *scratch, size_t nmoved);

#endif
