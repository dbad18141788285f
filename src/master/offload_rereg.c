/*
 * offload_rereg.c - re-registration of a holder's disk records (see offload.h, offload.c):
 * each record checked by version, attached, recreated or refused, a holder's complete listing
 * dropping the copies it left out, and the removals noted in the recovery window (tombstone.h).
 *
 * Versions (DESIGN.md §11): a LOCAL_DISK replica is attached only to the version it holds; a
 * re-registered record of an absent object recreates it only if its version predates this
 * incarnation (<= version_base), and only during the holder's first registration with this
 * incarnation: from its first LOCAL_DISK mount until its first offload heartbeat (a holder
 * re-registers before it polls). After that, an absent object was erased by this incarnation
 * (Remove, the holder's expiry, eviction), so a record of it is stale however old it is: a holder
 * that restarts, or comes back after its expiry, never resurrects what this master dropped. The
 * holders seen are remembered for the incarnation's life (one id per distinct holder). Where a
 * re-registered record and the object differ in version, the higher one wins, never the first
 * registrant's: a record newer than an object that is itself a copy from before this incarnation
 * (version <= version_base: recreated from another holder's older record) replaces it in the
 * holder's first registration (the object is erased, so its holders get deletes, and recreated
 * from the record); an older record is refused. Every re-registration answer carries the
 * master's version of the key (0: none), and a holder deletes a refused record only when that
 * version is 0 or not below the record's.
 *
 * Listings (DESIGN §7 "Holder index"). A holder's re-registration is authoritative for that
 * holder. Every LOCAL_DISK mount starts a new listing generation (holder_rec.list_gen, distinct
 * across the incarnation); every replica the holder's re-registration confirms or attaches, and
 * every replica a completed offload attaches, carries it (struct mc_replica.handle, unused by
 * LOCAL_DISK otherwise). A re-registration request marked complete ends the listing: the
 * holder's replicas carrying another generation — records it no longer has, e.g. dropped by its
 * recovery — are dropped, and objects left with none erased. A listing cut by another mount
 * drops nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "master/freelist.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/offload_internal.h"
#include "master/object_events.h"
#include "master/shard.h"
#include "master/tombstone.h"
#include "mooncake/errors.h"

#define COMP "offload"

/* ---- the recovery window ------------------------------------------------------------------- */

/* A removal of o while the window is open (tombstone.h): a slower holder's record of it at or
 * below this version must not bring it back. */
void mc_offload_recovery_note_removal(struct mc_master *m, struct mc_object *o)
{
    mc_recovery_note_removal(m->offload->recovery, mc_master_now_ms(m),
                             mc_hash_key(mc_obj_key(o), o->key_len), o->version);
}

/* ---- re-registration ----------------------------------------------------------------------- */

/* Creates the absent object of a disk record, disk-only, with the record's version, size and
 * CRC and no lease (s write-locked, hk = the key's hash). */
static int create_from_record(struct mc_master *m, struct mc_shard *s, uint64_t hk,
                              struct mc_holder *h, uint32_t gen, const struct mc_offload_result *it)
{
    const struct mc_restored c = {.key = it->key,
                                  .key_len = it->key_len,
                                  .version = it->version,
                                  .size = it->size,
                                  .crc32c = it->crc32c,
                                  .crc_valid = it->crc_valid,
                                  .type = MC_REPLICA_TYPE_LOCAL_DISK};
    struct mc_object *o = mc_obj_new_restored(m, s, &c);
    if (!o)
        return MC_ERR_INTERNAL_ERROR;
    o->rep[0].handle = gen;
    o->rep[0].u.holder = h;
    int rc = mc_obj_insert_restored(m, s, hk, o);
    if (rc != MC_OK)
        return rc;
    atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->nreplicas, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->bytes, (int64_t)o->size, memory_order_relaxed);
    return MC_OK;
}

/* Whether a re-registered record of a higher version may take o's place (write lock): o is
 * itself a copy from before this incarnation (recreated from a record, never written here) and
 * no Put of it is in flight. */
static bool replaceable(const struct mc_master *m, const struct mc_object *o)
{
    return o->version <= m->version_base && (o->flags & MC_OBJ_COMPLETE) &&
           !(o->flags & MC_OBJ_PROCESSING);
}

/* The checks of one re-registered record that need no object: MC_OK, or the refusal. Every
 * per-record rule that refuses a record of this holder by what it is (its version, say) goes
 * here. Called with no shard lock held. */
static int record_admissible(struct mc_master *m, struct mc_holder *h,
                             const struct mc_offload_result *it)
{
    if (it->status != 0 || it->size == 0 || it->size > MC_OBJECT_SIZE_MAX || it->version == 0)
        return MC_ERR_INVALID_PARAMS;
    /* the delete rule: a fenced holder's copy, or a key whose Remove is still outstanding (it
     * may look the key up: called with no shard lock held) */
    return mc_offload_rereg_check(m, h->id, it->key, it->key_len, it->version);
}

/* One re-registered record of holder h, listing gen (no lock held). Where the record and the
 * master's object differ in version, the higher version wins (DESIGN §4): a record newer than a
 * copy from before this incarnation replaces it (its holders are told to delete theirs by the
 * erase hook); an older one is refused. *master_version: the key's version at the master
 * afterwards (0: none), which the holder compares with its record before deleting it. */
static int reregister(struct mc_master *m, struct mc_holder *h, uint32_t gen, bool may_recreate,
                      const struct mc_offload_result *it, uint64_t *master_version, bool *added)
{
    struct mc_offload *off = m->offload;
    uint64_t hk = mc_hash_key(it->key, it->key_len);
    struct mc_shard *s = &m->shards[mc_master_key_shard(m, hk)];
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    int rc = record_admissible(m, h, it);
    mc_shard_wrlock(s);
    struct mc_object *o = mc_shard_find(s, hk, it->key, it->key_len);
    if (rc != MC_OK) {
    } else if (o && o->version == it->version) {
        if (!(o->flags & MC_OBJ_COMPLETE))
            rc = MC_ERR_INVALID_VERSION;
        else if (it->size != o->size)
            rc = MC_ERR_INVALID_PARAMS;
        else if (!same_bytes(o, it))
            rc = MC_ERR_CHECKSUM_MISMATCH;
        else {
            uint8_t had = o->nrep;
            rc = mc_offload_attach_disk(m, s, &o, h, gen);
            *added = rc == MC_OK && o->nrep > had; /* not a copy it listed before */
        }
    } else if (o && (it->version < o->version || !replaceable(m, o))) {
        rc = MC_ERR_INVALID_VERSION; /* the master's is newer, or written by this incarnation */
    } else if (it->version > m->version_base) {
        rc = MC_ERR_OBJECT_NOT_FOUND; /* written by this incarnation, removed since */
    } else if (!may_recreate ||
               !mc_recovery_may_recreate(off->recovery, mc_master_now_ms(m), hk, it->version)) {
        /* this incarnation dropped it since it saw the holder, removed it while recovering, or
         * the recovery window is over: never resurrected */
        rc = o ? MC_ERR_INVALID_VERSION : MC_ERR_OBJECT_NOT_FOUND;
    } else {
        if (o) {
            /* a newer copy than the one recreated first: that one goes, its holders are told
             * to delete it (the erase hook), and the newer one takes the key */
            mc_master_erase_object(m, s, o, &fl);
            INC(off, rereg_replaced);
        }
        rc = create_from_record(m, s, hk, h, gen, it);
        *added = rc == MC_OK;
    }
    o = mc_shard_find(s, hk, it->key, it->key_len);
    *master_version = o ? o->version : 0;
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    return rc;
}

/* ---- a holder's complete listing ----------------------------------------------------------- */

struct unlisted {
    struct mc_id holder;
    uint32_t gen; /* its listing: replicas carrying another generation were left out */
};

/* Whether replica r of o is a->holder's LOCAL_DISK copy that its listing left out. */
static bool is_unlisted(const struct mc_master *m, const struct mc_object *o,
                        const struct mc_replica *r, const void *arg)
{
    (void)m;
    (void)o;
    const struct unlisted *a = arg;
    return r->type == MC_REPLICA_TYPE_LOCAL_DISK && mc_id_eq(r->u.holder->id, a->holder) &&
           r->handle != a->gen;
}

/* Drops o's LOCAL_DISK replica of a->holder that its listing left out (write lock): a promotion
 * reading it is cancelled first, and o is erased when no valid replica is left and no Put is in
 * flight. True when one was dropped. */
static bool drop_unlisted(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                          struct mc_freelist *fl, void *arg)
{
    return mc_obj_drop_picked(m, s, o, fl, is_unlisted, arg, true) > 0;
}

/* The holder's listing gen is complete: its copies the listing did not confirm are dropped (a
 * record lost on its disk is no longer listed as a readable replica). */
static void listing_complete(struct mc_master *m, struct mc_id client, uint32_t gen)
{
    struct mc_offload *off = m->offload;
    if (gen == 0 || holder_gen(off, client) != gen)
        return; /* not mounted, or mounted again since: a new listing runs */
    struct unlisted a = {.holder = client, .gen = gen};
    uint64_t n = mc_master_each_object(m, drop_unlisted, &a);
    if (n == 0)
        return;
    atomic_fetch_add_explicit(&off->unlisted, n, memory_order_relaxed);
    char buf[MC_ID_STRLEN];
    mc_warn(COMP, "holder's listing left out copies the master had: dropped",
            "client=%s copies=%llu", mc_id_format(client, buf), (unsigned long long)n);
}

int mc_master_reregister_disk(struct mc_master *m, struct mc_id client,
                              const struct mc_offload_result *items, size_t n, bool complete,
                              int *rcs, uint64_t *versions)
{
    struct mc_offload *off = m->offload;
    if (!off)
        return MC_ERR_UNABLE_OFFLOAD;
    if (mc_id_is_zero(client) || (n && (!items || !rcs)))
        return MC_ERR_INVALID_PARAMS;
    struct mc_holder *h = holder_get(off, client);
    if (!h)
        return MC_ERR_SEGMENT_NOT_FOUND;
    uint32_t gen = holder_gen(off, client);
    bool may_recreate = holder_flag(off, client, HF_MAY_RECREATE, 0);
    for (size_t i = 0; i < n; i++) {
        const struct mc_offload_result *it = &items[i];
        uint64_t mv = 0;
        bool added = false;
        int rc = mc_master_check_key(m, it->key, it->key_len);
        if (rc == MC_OK)
            rc = reregister(m, h, gen, may_recreate, it, &mv, &added);
        if (rc != MC_OK)
            INC(off, rereg_refused);
        else if (added)
            INC(off, rereg_ok); /* a copy counts once: listing it again confirms it */
        else
            INC(off, rereg_confirmed);
        rcs[i] = rc;
        if (versions)
            versions[i] = mv;
    }
    if (complete)
        listing_complete(m, client, gen);
    mc_holder_unref(h);
    return MC_OK;
}
