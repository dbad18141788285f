/*
 * worker.h - the client's background work for the master (DESIGN.md §8 "Worker"): the offload
 * and promotion loops of the LOCAL_DISK tier.
 *
 * Each kind of work is a loop on its own thread (a table in worker.c): offload and promotion
 * side by side, so a slow disk batch of one never delays the other's long-poll and neither
 * starves the other when both have work queued. A loop
 * long-polls the master: the heartbeat RPC carries wait_ms and the master parks it until work
 * arrives or wait_ms passes, so work starts as soon as it is queued (no busy polling, no
 * multi-second heartbeat period) and an idle client sends one heartbeat per wait_ms per loop
 * (1 s by default: two loops, at most 2 control RPCs a second besides Ping).
 *
 * Offload (OffloadObjectHeartbeat -> NotifyOffloadSuccess): each task names its source, the
 * MEMORY replica in this client's own segment that the master pinned for it (segment, offset,
 * mount epoch; from a master that names none the worker asks QueryKey: no lease, no access
 * counted); the worker copies the bytes out of the segment under that mount epoch (another
 * mount here: a NACK), checks them against
 * the task's CRC, and appends the batch to the disk store in one call (io_uring, O_DIRECT).
 * Then one NotifyOffloadSuccess reports every task: stored, with version and CRC, or a NACK
 * with the reason (no replica here, another version, a CRC mismatch, a full disk), which
 * releases the master's pin. A stored record the master refuses (its object changed meanwhile)
 * is deleted from the disk at once. When the report's answer is lost (a broken connection), the
 * master may have taken it anyway: each stored record is checked with QueryKey and kept when
 * the master lists it as this holder's LOCAL_DISK replica (or cannot be asked), deleted
 * otherwise. Delete requests from the master (removed or dropped keys)
 * delete the named record when its version matches.
 *
 * Promotion (PromotionObjectHeartbeat -> PromotionAllocStart -> NotifyPromotionSuccess, DESIGN.md
 * §1.1; worker_promote.c): the tasks of one heartbeat are read from the disk store in batches
 * (one io_uring batch of up to batch_bytes, straight into 4 KiB-aligned buffers, the records
 * pinned in the store meanwhile) and checked: a record that is gone, of another version or
 * size, or whose bytes fail the task's CRC ends its task with NotifyPromotionFailure at once
 * (never retried: the master drops the task and its pin). The tasks whose bytes are good run
 * on promote_threads task threads at once: PromotionAllocStart stages a PROCESSING replica
 * (always in this client's own segment: DESIGN.md §7 "Staged space"), the bytes are copied in
 * under the segment's epoch lock, only while its mount is the descriptor's (a holder resumed
 * after a stop past its TTL writes nothing), then NotifyPromotionSuccess; any
 * error after AllocStart is NotifyPromotionFailure, so the staged DRAM and the pin are
 * released at once rather than by the master's reaper.
 *
 * Faults: the master unreachable (calls fail fast) -> the loop waits 200 ms between tries; a
 * heartbeat refused because the master does not know this holder (it restarted or expired the
 * client) -> the LOCAL_DISK tier is registered again (disk_tier.h) before the next poll.
 */
#ifndef MC_CLIENT_WORKER_H
#define MC_CLIENT_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "common/id.h"
#include "proto/master.pb-c.h"

struct mc_worker;
struct mc_master_conn;
struct mc_disk_tier;
struct mc_peer_server;

struct mc_worker_config {
    struct mc_master_conn *mc;
    struct mc_id client_id;
    struct mc_disk_tier *tier;
    struct mc_peer_server *ps; /* this client's segments (the offload source) */
    uint32_t wait_ms;          /* long-poll wait; 0 = 1000 */
    uint32_t max_items;        /* tasks per heartbeat; 0 = 256 */
    uint64_t batch_bytes;      /* bytes per disk append / promotion read batch; 0 = 64 MiB */
    /* promotion: tasks asked per heartbeat (0 = the master's --promotion_max_per_heartbeat),
     * tasks run at once (0 = 4) */
    uint32_t promote_max_items;
    uint32_t promote_threads;
    /* this client's DRAM holder index (NULL: none): a delete drops the key's entries there too
     * before it is acknowledged, so a removed key is not re-registered from DRAM either */
    struct mc_holder_index *hidx;
};

int mc_worker_start(const struct mc_worker_config *cfg, struct mc_worker **out);
/* Stops every loop (a parked heartbeat ends within wait_ms) and frees. NULL is a no-op. */
void mc_worker_stop(struct mc_worker *w);

struct mc_worker_stats {
    uint64_t heartbeats; /* offload heartbeats answered */
    uint64_t tasks;      /* offload tasks received */
    uint64_t offloaded;  /* records stored and accepted */
    uint64_t nacked;     /* tasks reported as not stored */
    uint64_t refused;    /* stored records the master refused (deleted) */
    uint64_t deleted;    /* records deleted on the master's request */
    uint64_t bytes;      /* bytes appended to the disk */
    uint64_t errors;     /* heartbeats or notifications that failed */
    /* promotion */
    uint64_t promo_heartbeats; /* promotion heartbeats answered */
    uint64_t promo_tasks;      /* promotion tasks received */
    uint64_t promoted;         /* committed, or (staged) written and reported on the heartbeat */
    uint64_t promo_failed;     /* ended with NotifyPromotionFailure */
    uint64_t promo_bad_source; /* of those: record gone, other version/size, CRC failure */
    uint64_t promo_local;      /* staged replicas written (memcpy into this process's segment) */
    uint64_t promo_stale;      /* staged replicas not written: their mount had ended */
    uint64_t promo_bytes;      /* bytes of the committed promotions */
    uint64_t promo_errors;     /* promotion heartbeats or notifications that failed */
};
void mc_worker_get_stats(struct mc_worker *w, struct mc_worker_stats *st);

#endif
