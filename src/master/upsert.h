/*
 * upsert.h - Upsert: replacing a key's value atomically (upsert.c).
 *
 * UpsertStart places the new value's replicas (as PutStart would) without touching the key: the
 * space is held in a reservation, named by a token, that only the starting client can finish.
 * The client writes the bytes, then UpsertEnd swaps, under the key's shard locks in one step:
 * the old record is removed by the Remove rules, forced (a reader holding a lease keeps reading
 * the old bytes, whose space is freed only when its lease ends; the old disk copies are deleted
 * under the delete rule, DESIGN §7) and the new record, COMPLETE, takes its place with a fresh
 * version. A reader therefore gets the old value or the new one, whole, never a mix and never a
 * miss; versions only grow. A key with a Put in flight is not replaced (REPLICA_IS_NOT_READY).
 * Grouped upserts (group_id) are refused with INVALID_PARAMS.
 *
 * A reservation not ended within put_start_release_timeout (its client died) is released by the
 * reaper tick (mc_upserts_reap) or the next Upsert call, whichever comes first; mc_upserts_free
 * releases the rest with the master.
 */
#ifndef MC_MASTER_UPSERT_H
#define MC_MASTER_UPSERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

/* Reservations in flight at once, over all clients; beyond it UpsertStart answers
 * TASK_PENDING_LIMIT_EXCEEDED. */
#define MC_UPSERT_MAX_PENDING 65536u

struct mc_upsert_start_result {
    uint64_t token; /* names the reservation in UpsertEnd / UpsertRevoke */
    uint32_t nreplicas;
    struct mc_replica_desc replicas[MC_MAX_REPLICAS]; /* where to write, status PROCESSING */
};

/* Errors as PutStart's, except that an existing key is no error. */
int mc_master_upsert_start(struct mc_master *m, struct mc_id client, const char *key,
                           size_t key_len, uint64_t size,
                           const struct mc_master_replicate_config *cfg,
                           struct mc_upsert_start_result *out);
/* Swaps the written value in (see above); *version gets its version. Errors: INVALID_PARAMS
 * (no such reservation for this client and key: ended, revoked or expired), REPLICA_IS_NOT_READY
 * (a Put of the key is in flight; the reservation is released), OBJECT_NOT_FOUND (every segment
 * it was written to is gone). Returns MC_MASTER_PENDING while the old disk copies' holders are
 * awaited (done(arg, rc) then), as mc_master_remove_wait. */
int mc_master_upsert_end_wait(struct mc_master *m, struct mc_id client, const char *key,
                              size_t key_len, uint64_t token, uint32_t crc32c, bool has_crc,
                              uint64_t *version, mc_master_done_fn done, void *arg);
/* The same without waiting for the holders (their deletes are still queued). */
int mc_master_upsert_end(struct mc_master *m, struct mc_id client, const char *key, size_t key_len,
                         uint64_t token, uint32_t crc32c, bool has_crc, uint64_t *version);
/* Gives a reservation's space back (the client could not write it). */
int mc_master_upsert_revoke(struct mc_master *m, struct mc_id client, const char *key,
                            size_t key_len, uint64_t token);
/* One key of a batch UpsertEnd: swap (revoke false) or give the space back. */
struct mc_upsert_end_item {
    uint64_t token;
    uint32_t crc32c;
    bool has_crc;
    bool revoke;
};
/* n UpsertEnds (or revokes) as one operation: rcs[i] per key; the call waits, like
 * mc_master_upsert_end_wait, for the holders of every replaced key's old disk copies. */
int mc_master_batch_upsert_end_wait(struct mc_master *m, struct mc_id client,
                                    const struct mc_key_ref *keys, size_t n,
                                    const struct mc_upsert_end_item *items, int *rcs,
                                    mc_master_done_fn done, void *arg);
/* Reservations in flight (tests, stats). */
size_t mc_master_upsert_pending(struct mc_master *m);
/* Releases the reservations past put_start_release_timeout (mc_master_tick_reaper); returns
 * how many. */
int mc_upserts_reap(struct mc_master *m);
/* Releases every reservation and the table (mc_master_free). */
void mc_upserts_free(struct mc_master *m);

#endif
