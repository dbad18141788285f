/*
 * promotion.h - promotion on hit (DESIGN.md §1.1, §7): hot LOCAL_DISK-only objects copied back
 * into DRAM by the client that holds the disk copy.
 *
 * Trigger. GetReplicaList and BatchGetReplicaList (never ExistKey, never QueryKey), after the
 * Get's own answer is built and its shard lock dropped, when the object had no MEMORY replica of
 * any status and a readable LOCAL_DISK one. Every such Get counts one attempt, then the gates run
 * in order, each with its rejection counter:
 *   1. frequency: the key's estimated read count (sketch.h: a doorkeeper that absorbs a key's
 *      first read of a sample period, then a CountMinSketch with conservative update, aged every
 *      4 x its width reads), this Get included, must reach promotion_admission_threshold, or
 *      promotion_batch_admission_threshold for a key read by a BatchGet of more than one key
 *      (see "Batch reads" below). Gets answered from DRAM are counted too (not gated), so the
 *      estimate is a key's read frequency whichever tier served it, and a key read once
 *      estimates 1 even after a flood of one-shot reads;
 *   2. watermark: DRAM used ratio below eviction_high_watermark_ratio;
 *   3. under the shard's write lock, re-checked: the object is there, not being Put, has no
 *      promotion task, still no MEMORY replica, a readable LOCAL_DISK source whose holder has a
 *      mailbox (not counted as a rejection: the object is simply not eligible any more);
 *   4. cap: tasks in flight (all shards) below promotion_queue_limit (exact, under the funnel
 *      mutex; a lock-free look at it before gate 3 refuses at once while the cap is full, so
 *      hot disk-only reads then never write-lock their shard).
 * Then the source replica is pinned (refcnt + 1), the task {task id, source replica, size,
 * version, holder, start time} is recorded in the shard's promotion table, and, once the shard
 * lock is dropped, pushed to the holder's mailbox (MC_TASK_PROMOTION, mailbox.h).
 *
 * Holder side (the client that holds the source; any other client gets INVALID_PARAMS):
 *   heartbeat   long-poll for tasks: at most min(max_items, promotion_max_per_heartbeat) per
 *               answer (max_items 0 = the latter), leftovers stay queued;
 *   alloc_start one MEMORY replica of the task's size in one of the holder's own segments
 *               only (preferred names are ignored; see "Staged space"); status PROCESSING:
 *               no Get lists it, PutEnd never completes it, eviction never takes it. The task's
 *               reaper window restarts;
 *   success     the staged replica becomes COMPLETE, the source is unpinned, the task erased,
 *               and the object's lease set to now (PutEnd's zero-length lease: the most recent
 *               LRU position, so the promoted object is not the next victim, while eviction and
 *               Remove are not blocked by a full lease);
 *   failure     the staged replica (if any) is freed, the source unpinned, the task erased.
 * A stale task id (reaped, cancelled, or of an object that was removed and Put again) changes
 * nothing: success answers REPLICA_IS_NOT_READY, failure answers OK (idempotent), alloc_start
 * REPLICA_IS_NOT_READY; each also drops the task from the holder's mailbox if it is still there,
 * and a success or failure report frees the task's parked range, if any.
 *
 * Staged space (DESIGN.md §7). The holder writes the staged range whenever it gets to it after
 * AllocStart, so the range is its own until it reports: it is placed only in the holder's own
 * DRAM segments (a holder without a mounted segment is not eligible at admission), and a task
 * that ends without the holder's report (cancel, reap, the holder's re-mount) PARKS its range:
 * the replica leaves the object but the allocation stays, held in the promoter's parked list,
 * until the holder reports on that task id (success or failure) or the segment's mount ends
 * (unmount, client expiry, re-mount with a new epoch: the reaper's pass frees ranges of dead
 * segments). A range whose mount has already ended is freed at once. Parked ranges are counted
 * (master_promotion_parked_ranges / _bytes) and count toward promotion_queue_limit, so they are
 * bounded. The holder copies under its segment's epoch lock, only while the segment's mount is
 * the descriptor's (peer_server.h), so a holder resumed after a stop past its TTL writes
 * nothing into a later mount.
 *
 * Cleanup. Tasks older than promotion_task_timeout (from admission, or from AllocStart) are
 * reaped by mc_master_tick_reaper. Remove / BatchRemove / RemoveAll do not let a promotion block
 * them: the task is cancelled (staged range parked, source unpinned) and the object removed as
 * usual. A holder that mounts its LOCAL_DISK segment again has every task cancelled (its
 * earlier incarnation's work is lost; the keys are admitted again on their next reads). An object
 * erased for any reason (eviction, sweep) cancels its task; so does the loss of its source or of
 * its staged replica (holder expiry, segment unmount: the monitor's sweep), and the disk eviction
 * of the source (mc_promotion_cancel_locked).
 *
 * Retry candidates. A key rejected only for a transient reason (watermark, cap) is remembered
 * (at most MC_PROMO_CANDIDATES_MAX keys, for MC_PROMO_CANDIDATE_TTL_MS, at most
 * MC_PROMO_CANDIDATE_RETRIES retries, backoff 10 ms doubling to 1 s) and retried by the eviction
 * tick, without counting the sketch again (it passed that gate already). A candidate that is
 * admitted (by a retry or a later Get) counts candidate_admitted; one dropped (TTL, retries, the
 * key gone or no longer eligible, the table full) candidate_dropped.
 *
 * Hot beats cold. A watermark rejection also asks the eviction loop for one cycle (the flag a
 * failed PutStart raises), but only when the candidate's estimated frequency exceeds the
 * victims' level: the mean estimate of the objects the last eviction cycle evicted (eviction sums
 * them as it evicts, reading the lock-free sketch; the level is halved with every aging of the
 * sketch since, and is 0 before any cycle evicted anything). Such a cycle evicts the LRU tail,
 * objects like those; a candidate no hotter than they are (room_declined) waits as a retry
 * candidate for room made otherwise, and displaces nothing. At most one request per back-off
 * period (10 ms, doubled up to 1 s while the requested cycles free nothing). Every object such a
 * cycle can evict has an expired lease, so its last access is older than the candidate's, which
 * was read just now: the cycle frees colder objects, and the candidate is retried on the next
 * tick.
 *
 * Batch reads. A BatchGet of several keys is a prefix read (the workload replay: a prefill node
 * reads the longest present prefix of a request's blocks, DESIGN.md §12), and it waits for its
 * slowest block: promoting some disk-only blocks of a prefix does not make that read faster while
 * others still come from the SSD, and every promotion costs the holder an SSD read and DRAM room
 * (another block then goes to disk). Blocks of prefixes read only a few times are mostly evicted
 * from DRAM again before their next read, so at the single-Get threshold (2) most batch
 * promotions bought nothing while their SSD reads slowed the holder's Gets (docs/performance.md,
 * "Promotion off vs on"). Keys read by a BatchGet of more than one key therefore need the higher
 * promotion_batch_admission_threshold (default 12): only prefixes read again and again (shared
 * system prompts, long conversations) come back to DRAM. On the workload replay each promotion
 * costs about the same whatever the threshold, and a higher one buys more DRAM hits with each
 * (1.8 at 8, 2.6 at 10, 3-4.6 at 12): 12 buys about a third of the extra DRAM hits of 8 with a
 * sixth of its promotions, and promotion no longer costs the median Get a measurable amount
 * (docs/performance.md, "A higher batch threshold"). A single-key BatchGet counts as a Get.
 * Both thresholds count the same sketch, so a key read by both kinds of Get adds up.
 *
 * Funnel. All counters change together under one mutex, and a metrics scrape reads one
 * snapshot, so admitted = completed + failed + expired + cancelled + in_flight holds in every
 * scrape and in mc_master_promotion_stats. The rejection and room counters count decisions, one
 * per Get that reached that gate; the eviction tick's retries of a recorded candidate are counted
 * in candidate_retried only.
 *
 * Lock order: shard (write) → mailbox table → one mailbox; the funnel and candidate mutexes are
 * leaves. Parked heartbeats are answered outside every master lock (mailbox.h).
 */
#ifndef MC_MASTER_PROMOTION_H
#define MC_MASTER_PROMOTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "master/mailbox.h"
#include "master/master.h"

#define MC_PROMO_CANDIDATES_MAX 50000u
#define MC_PROMO_CANDIDATE_TTL_MS 60000u
#define MC_PROMO_CANDIDATE_RETRIES 8u
#define MC_PROMO_BACKOFF_MIN_MS 10u
#define MC_PROMO_BACKOFF_MAX_MS 1000u
#define MC_PROMO_RETRY_BATCH 128u /* candidates retried per eviction tick at most */

/* The funnel counters: field, metric name suffix (master_promotion_<name>_total), help. */
#define MC_PROMOTION_COUNTERS(X)                                                                   \
    X(attempts, "Gets that found an object with a LOCAL_DISK replica and no MEMORY one")           \
    X(admitted, "promotion tasks admitted")                                                        \
    X(completed, "promotion tasks committed (NotifyPromotionSuccess)")                             \
    X(completed_bytes, "value bytes of the committed promotions")                                  \
    X(failed, "promotion tasks failed by their holder (NotifyPromotionFailure)")                   \
    X(expired, "promotion tasks reaped after promotion_task_timeout")                              \
    X(cancelled, "promotion tasks cancelled (object removed, evicted or its source lost)")         \
    X(rejected_frequency,                                                                          \
      "Gets whose key's estimated frequency was below the admission threshold (one per Get)")      \
    X(rejected_watermark, "Gets refused because DRAM was at or above the high watermark (one per " \
                          "Get; retries of a recorded candidate are not counted)")                 \
    X(rejected_cap, "Gets refused because promotion_queue_limit tasks were in flight (one per "    \
                    "Get; retries of a recorded candidate are not counted)")                       \
    X(room_asked, "watermark refusals whose key's estimated frequency exceeded the last "          \
                  "eviction victims' mean: eviction asked for room (hot beats cold; one per Get)") \
    X(room_declined, "watermark refusals whose key was no hotter than the last eviction "          \
                     "victims: no eviction asked (one per Get)")                                   \
    X(candidate_recorded, "keys recorded as retry candidates")                                     \
    X(candidate_admitted, "retry candidates admitted")                                             \
    X(candidate_retried, "admission retries of recorded candidates by the eviction tick (each "    \
                         "retry once; its refusals are not counted as rejections)")                \
    X(candidate_dropped, "retry candidates dropped (TTL, retries, gone, not eligible, full)")

struct mc_promotion_stats {
#define MC_PROMO_FIELD(f, h) uint64_t f;
    MC_PROMOTION_COUNTERS(MC_PROMO_FIELD)
#undef MC_PROMO_FIELD
    uint64_t in_flight;    /* tasks admitted and not ended */
    uint64_t candidates;   /* retry candidates remembered now */
    uint64_t parked;       /* staged ranges of ended tasks, parked (see "Staged space") */
    uint64_t parked_bytes; /* their value bytes */
};

/* One consistent snapshot of the funnel (taken under its mutex). */
void mc_master_promotion_stats(struct mc_master *m, struct mc_promotion_stats *out);

/* Real state, for tests (walks every shard; slow): what the funnel's in_flight must equal. */
struct mc_promotion_debug {
    uint64_t in_flight;     /* the funnel's gauge */
    uint64_t tasks;         /* task records in the shards' promotion tables */
    uint64_t pins;          /* refcnt summed over every LOCAL_DISK replica */
    uint64_t staged;        /* PROCESSING MEMORY replicas of complete objects */
    uint64_t mailbox_tasks; /* MC_TASK_PROMOTION tasks queued or in flight in the mailboxes */
    uint64_t candidates;
    uint64_t parked; /* parked staged ranges */
};
void mc_master_promotion_debug_counts(struct mc_master *m, struct mc_promotion_debug *out);

/* PromotionObjectHeartbeat: answers at once (returns 1: reply already called) when tasks are
 * queued or wait_ms is 0, else parks reply until a task arrives or wait_ms passes (returns 0;
 * the eviction tick answers expired polls). reply gets the tasks (mailbox.h: task_id, key,
 * size, version, crc), is called exactly once and never under a master lock. Errors (reply not
 * called): INVALID_PARAMS (zero id, no reply), SEGMENT_NOT_FOUND (the client has no LOCAL_DISK
 * registration, i.e. no mailbox: it must mount its LOCAL_DISK segment again). */
int mc_master_promotion_heartbeat(struct mc_master *m, struct mc_id holder, uint32_t max_items,
                                  uint32_t wait_ms, mc_mailbox_reply_fn reply, void *arg);

/* PromotionAllocStart: stages one MEMORY replica for task_id (status PROCESSING) in one of the
 * holder's own segments and fills *out with its descriptor (the holder writes the value there).
 * preferred may be NULL and is not followed (wire compatibility only). Errors: INVALID_KEY;
 * OBJECT_NOT_FOUND (key absent); REPLICA_IS_NOT_READY (no such task: reaped, cancelled or
 * stale; or already staged); INVALID_PARAMS (caller is not the task's holder, size or version
 * differ from the task's); NO_AVAILABLE_HANDLE (no room in the holder's own DRAM: the task
 * stays, the holder should report failure). */
int mc_master_promotion_alloc_start(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                                    const char *key, size_t key_len, uint64_t size,
                                    const char *const *preferred, size_t npreferred,
                                    struct mc_replica_desc *out);

/* A Get handler brackets its core call and reply with these: admissions made in between push
 * their task quietly, and _wake_after (called once the reply is sent, no master lock held)
 * answers the holder's parked poll, so the holder's work never delays the Get's answer. Per
 * thread; without the bracket an admission answers the poll at once. */
void mc_master_promotion_defer_wake(void);
void mc_master_promotion_wake_after(struct mc_master *m);

/* The staged replica of task task_id (key's), placed when the task is handed out to a holder
 * that asked for it (PromotionObjectHeartbeat's stage): as AllocStart, for the task's own holder
 * and size; a task staged already (handed out again) gets its existing range. No master lock
 * may be held. Errors: INVALID_KEY; OBJECT_NOT_FOUND, REPLICA_IS_NOT_READY (no such task: stale;
 * the staged replica gone); NO_AVAILABLE_HANDLE (no room in the holder's own DRAM: the holder
 * may still ask AllocStart, or report failure). */
int mc_master_promotion_stage(struct mc_master *m, uint64_t task_id, const char *key,
                              size_t key_len, struct mc_replica_desc *out);

/* NotifyPromotionSuccess: commits the staged replica. Errors: INVALID_KEY; REPLICA_IS_NOT_READY
 * (no such task or object: stale; not staged yet — the task stays; the staged replica's segment
 * is gone — the task is cancelled); INVALID_PARAMS (not the holder). */
int mc_master_promotion_success(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                                const char *key, size_t key_len);

/* NotifyPromotionFailure: ends the task at once (staged replica freed, source unpinned). OK for
 * an unknown task (idempotent; frees its parked range, if any). Errors: INVALID_KEY; INVALID_PARAMS
 * (not the holder). reason is logged. */
int mc_master_promotion_failure(struct mc_master *m, struct mc_id holder, uint64_t task_id,
                                const char *key, size_t key_len, int reason);

/* Retry candidates and expired heartbeats; called by mc_master_tick_eviction after its cycle.
 * Returns the candidates admitted. */
int mc_master_promotion_tick(struct mc_master *m);

#endif
