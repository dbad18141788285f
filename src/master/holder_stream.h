/*
 * holder_stream.h - the per-holder stream of the DRAM tier (DESIGN.md §7 "Holder index").
 *
 * Every process that mounts a DRAM segment long-polls HolderIndexHeartbeat; the stream answers
 * it with what happened to the replicas in that process's segments, in order: a commit at
 * PutEnd (key, version, segment, mount epoch, offset, size, CRC32C), and a drop when the object
 * is erased (no acknowledgement awaited). The holder files commits in its index
 * (client/holder_index.h), which it re-registers after a master restart.
 *
 * Batching: commits are pushed quietly under the shard lock into the holder's mailbox (its own
 * table, kind MC_TASK_DELETE: fire and forget, a pull hands the items out and forgets them);
 * parked polls are woken at most every holder_index_flush_ms (on the UNLOCKED event once that
 * much time passed since the last wake, and from the eviction tick), so one answer carries a
 * flush interval's commits. A crash loses at most the last interval: misses, never wrong bytes.
 * A drop wakes the holder at the next unlock.
 *
 * The delete rule (DESIGN.md §7): a Remove's BEFORE_REMOVE queues, per owner of a MEMORY
 * replica, a drop with a task id recorded in m->delwait (shared with the disk deletes, one id
 * space; the stream creates the table when there is no LOCAL_DISK tier); the holder drops the
 * entries and acks the id in its next poll, sent at once. A holder silent past
 * holder_delete_timeout_ms is fenced (its index voided as above) and the Remove completes.
 *
 * Backlog: at most holder_backlog_limit items wait per holder. A push past it fences the
 * holder's index: its mailbox is closed (the backlog dropped), and its next poll is answered
 * REPLICA_IS_GONE, on which the holder drops its whole index (nothing it holds can come back
 * after a restart) and polls again into a fresh mailbox.
 *
 * A subscriber of the object events (the last in the table); off with holder_stream = false.
 */
#ifndef MC_MASTER_HOLDER_STREAM_H
#define MC_MASTER_HOLDER_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/id.h"
#include "master/mailbox.h"

struct mc_master;

struct mc_holder_stream_stats {
    uint64_t commits; /* items queued (commits and drops) */
    uint64_t dropped; /* items for a holder that never polled (no mailbox) */
    uint64_t fenced;  /* holders whose backlog passed the limit */
    uint64_t polls;
    uint64_t reregistered, rereg_refused; /* DRAM replicas re-registered / refused */
    uint64_t unlisted;                    /* DRAM replicas a complete listing left out, dropped */
};

int mc_holder_stream_init(struct mc_master *m);
void mc_holder_stream_destroy(struct mc_master *m);
int mc_holder_stream_subscribe(struct mc_master *m);
/* Wakes the holders the last flush interval's commits fed (the eviction loop's tick). */
void mc_holder_stream_tick(struct mc_master *m);
void mc_holder_stream_stats(struct mc_master *m, struct mc_holder_stream_stats *st);
/* The acknowledgements of a HolderIndexHeartbeat (drops the holder applied): the Removes that
 * waited for them complete. Returns how many settled, or NOT_SUPPORTED / INVALID_PARAMS. */
int mc_master_holder_ack(struct mc_master *m, struct mc_id client, const uint64_t *ids, size_t n);
/* The stream's mailbox table (NULL with the stream off), for the RPC layer's poll checks. */
struct mc_mailboxes *mc_holder_stream_mailboxes(struct mc_master *m);

/* HolderIndexHeartbeat: opens client's stream on its first poll, then answers (reply, arg) with
 * up to max items, at once when some are queued, else when some arrive or wait_ms passes.
 * Negative: the error, reply not called: NOT_SUPPORTED with the stream off, REPLICA_IS_GONE
 * once after a fence (the holder drops its index). */
int mc_master_holder_heartbeat(struct mc_master *m, struct mc_id client, uint32_t max,
                               uint32_t wait_ms, mc_mailbox_reply_fn reply, void *arg);

/* One replica a holder re-registers (holder_rereg.c). */
struct mc_hrereg_item {
    const char *key;
    size_t key_len;
    uint64_t version, offset, size;
    uint32_t crc32c;
    bool crc_valid;
};
/* One HolderReregister batch: whose segment, its mount, and the listing it belongs to. */
struct mc_hrereg_batch {
    struct mc_id client, segment;
    uint64_t mount_epoch;
    uint64_t listing; /* the holder's number for this listing of the segment (0: untracked) */
    bool complete;    /* the listing's last batch: its segment's copies it left out go */
};
/* HolderReregister: items[0..n) of b->client's segment, mounted now with b->mount_epoch; one
 * status per item in statuses (0: the object is back, or still there, with that MEMORY replica;
 * otherwise the holder drops the entry). A listing is authoritative for its segment's mount:
 * when it completes, the replicas on that mount that an earlier listing brought back and this
 * one did not list are dropped (their ranges freed); Puts since the restart are untouched. MC_OK,
 * NOT_SUPPORTED (stream off) or INVALID_PARAMS. */
int mc_master_holder_reregister_batch(struct mc_master *m, const struct mc_hrereg_batch *b,
                                      const struct mc_hrereg_item *items, size_t n, int *statuses);
/* The same, untracked (listing 0). */
int mc_master_holder_reregister(struct mc_master *m, struct mc_id client, struct mc_id seg_id,
                                uint64_t mount_epoch, const struct mc_hrereg_item *items, size_t n,
                                int *statuses);
void mc_holder_stream_count_rereg(struct mc_master *m, uint64_t ok, uint64_t refused);
void mc_holder_stream_count_unlisted(struct mc_master *m, uint64_t n);

/* Where a segment's listing stands (holder_rereg.c keeps it in the stream, under its leaf
 * lock): replicas with ids from start_rid on were made or confirmed by the current listing;
 * prior: an earlier listing of the same mount began (it may have brought copies back). */
struct mc_hlisting {
    struct mc_id segment;
    uint64_t mount_epoch, listing;
    uint32_t start_rid;
    bool prior;
};
/* Notes a batch of (segment, mount_epoch, listing): a new listing starts at replica id
 * next_rid. Its state in *out. */
void mc_holder_stream_listing_note(struct mc_master *m, struct mc_id segment, uint64_t mount_epoch,
                                   uint64_t listing, uint32_t next_rid, struct mc_hlisting *out);

#endif
