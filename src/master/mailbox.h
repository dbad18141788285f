/*
 * mailbox.h - the holders' task mailboxes (DESIGN.md §7), separate from the client registry.
 *
 * A holder (a client that mounted a LOCAL_DISK segment) owns one mailbox. The master pushes
 * tasks into it (offload a key, delete a stale disk record, and later promotion); the holder
 * pulls them with a long-poll heartbeat. A task has a kind so one mailbox carries every kind:
 * a pull takes only the kinds it asks for, and each kind has its own parked poll.
 *
 * Task life: push (queued) -> pull (in flight, kept until the holder reports) -> complete /
 * cancel / expire, each of which hands the task back to the caller (who unpins the source
 * replica) and forgets it. Nothing outlives its mailbox: closing a mailbox (holder expiry,
 * unmount) hands back every task it had. Delete tasks are fire-and-forget: a pull hands them
 * out and forgets them.
 *
 * Long-poll: mc_mailbox_park answers at once when tasks of the kind are queued; otherwise it
 * keeps the reply callback until a push of that kind arrives (answered by the pushing thread,
 * after it dropped the mailbox locks) or until mc_mailboxes_tick sees its deadline (answered
 * with no tasks). A second park of the same kind on one mailbox answers the first one empty.
 * A reply is called exactly once, never under a mailbox lock.
 *
 * Closed connections. A poll's arg may outlive the connection it came on (a holder killed while
 * its poll is parked, and restarted). With an alive predicate set (mc_mailboxes_set_alive), a
 * poll whose connection closed is never handed a task: a push leaves the task queued and drops
 * the poll (its reply gets nothing), mc_mailboxes_drop_dead_polls (called when a connection
 * closes) drops such polls at once, and tasks taken for a poll whose connection closed between
 * the take and the reply go back to the front of their queue. What a closed connection took
 * before that (an answer already written to a dying socket) comes back when the holder mounts
 * again: mc_mailbox_requeue_in_flight.
 *
 * Lock order: mailbox table (MC_LO_MAILBOX_TABLE) → one mailbox (MC_LO_MAILBOX); both are taken
 * after any shard or segment lock the caller holds, and nothing is taken under them.
 */
#ifndef MC_MASTER_MAILBOX_H
#define MC_MASTER_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/id.h"

enum mc_task_kind {
    MC_TASK_OFFLOAD = 0,   /* copy key from DRAM to the holder's disk */
    MC_TASK_DELETE = 1,    /* drop the holder's disk record of key (any version <= version) */
    MC_TASK_PROMOTION = 2, /* copy key from the holder's disk into DRAM (promotion.c) */
    MC_TASK_NKINDS = 3,
};
#define MC_TASK_KIND_BIT(k) (1u << (k))

/* Where an offload task's source bytes are: one MEMORY replica of the holder's own segment
 * (the task pins it). The holder copies them out with no lookup of its own. */
struct mc_task_src {
    struct mc_id segment;
    uint64_t mount_epoch; /* the segment's mount the replica was allocated under */
    uint64_t offset;      /* inside the segment */
};

struct mc_task {
    struct mc_task *next, *prev; /* owned by the mailbox while queued / in flight */
    uint64_t task_id;            /* unique per table, never 0 */
    uint64_t version;
    uint64_t size;
    uint64_t deadline_ms; /* expiry (0: never); ignored for delete tasks */
    uint32_t crc32c;
    bool crc_valid;
    uint8_t kind;      /* enum mc_task_kind */
    uint8_t in_flight; /* mailbox.c: pulled, awaiting its report */
    bool has_src;      /* src is set (offload tasks) */
    struct mc_task_src src;
    uint16_t key_len;
    char key[]; /* key_len bytes, then a NUL */
};

/* A singly linked list of tasks handed to the caller (linked through next; free with
 * mc_task_list_free). */
struct mc_task_list {
    struct mc_task *head;
    size_t n;
};
void mc_task_list_free(struct mc_task_list *l);

/* A parked poll's answer: tasks (copies the callee owns: free with mc_task_list_free), in push
 * order. Called exactly once per park, outside every mailbox lock. */
typedef void (*mc_mailbox_reply_fn)(void *arg, struct mc_task_list *tasks);
/* Whether a parked poll (its reply's arg) can still be answered; false once its connection
 * closed. Called under mailbox locks: it must take no lock. */
typedef bool (*mc_mailbox_alive_fn)(void *arg);

struct mc_mailbox_stats {
    uint64_t queued, pulled, completed, nacked, expired, cancelled;
    uint64_t refused;                      /* pushes refused at a kind's limit, every kind */
    uint64_t refused_kind[MC_TASK_NKINDS]; /* the same by kind */
    uint64_t in_mailboxes;                 /* queued + in flight, every kind, every mailbox */
    uint64_t parked;                       /* polls waiting now */
    uint64_t dead_polls;                   /* polls dropped because their connection closed */
    uint64_t requeued; /* tasks put back in their queue (closed connection, re-mount) */
};

struct mc_mailboxes;

/* queue_limit: the most offload tasks (queued + in flight) one mailbox holds (0: no limit); the
 * other kinds have no limit until mc_mailboxes_set_limit gives them one. */
struct mc_mailboxes *mc_mailboxes_new(const struct mc_clock *clock, uint32_t queue_limit);
/* Each kind has its own bound, per mailbox, on its tasks queued + in flight (0: none): a push of
 * that kind past it is refused (TASK_PENDING_LIMIT_EXCEEDED) and counted in refused_kind[kind];
 * the other kinds are not affected. */
void mc_mailboxes_set_limit(struct mc_mailboxes *t, enum mc_task_kind kind, uint32_t limit);
/* Answers every parked poll empty and frees every task. */
void mc_mailboxes_free(struct mc_mailboxes *t);

/* Creates holder's mailbox (MC_OK; an existing one is kept: also MC_OK). */
int mc_mailbox_open(struct mc_mailboxes *t, struct mc_id holder);
/* Removes holder's mailbox: its parked polls are answered empty, its offload/promotion tasks
 * (queued and in flight) are appended to *cancelled (counted as cancelled), delete tasks freed.
 * MC_ERR_CLIENT_NOT_FOUND without a mailbox. */
int mc_mailbox_close(struct mc_mailboxes *t, struct mc_id holder, struct mc_task_list *cancelled);
bool mc_mailbox_exists(struct mc_mailboxes *t, struct mc_id holder);

/* Queues a task (key is copied). MC_ERR_CLIENT_NOT_FOUND without a mailbox,
 * MC_ERR_TASK_PENDING_LIMIT_EXCEEDED when the task would pass its kind's limit,
 * MC_ERR_INVALID_PARAMS for a bad kind or key. *task_id (may be NULL) gets the new id. A poll
 * parked for this kind is answered before this returns. */
int mc_mailbox_push(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                    const char *key, size_t key_len, uint64_t version, uint64_t size, uint32_t crc,
                    bool crc_valid, uint64_t deadline_ms, uint64_t *task_id);

/* The same, for callers that hold master locks (a shard's): the task is queued at once (the
 * result says whether it was accepted) but a poll parked for this kind is not answered here —
 * mc_mailboxes_wake, called once the caller dropped its locks, answers it (so a reply is never
 * encoded under a master lock). src (NULL: none) names the task's source replica. */
int mc_mailbox_push_quiet(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                          const char *key, size_t key_len, uint64_t version, uint64_t size,
                          uint32_t crc, bool crc_valid, uint64_t deadline_ms,
                          const struct mc_task_src *src, uint64_t *task_id);
/* Answers the parked polls that quiet pushes gave work since the last call (one atomic load
 * when there were none). Call with no master lock held. */
void mc_mailboxes_wake(struct mc_mailboxes *t);
/* A task id for mc_mailbox_push_id, reserved now (a caller records it before the push). */
uint64_t mc_mailboxes_reserve_id(struct mc_mailboxes *t);
/* mc_mailbox_push with the id task_id from mc_mailboxes_reserve_id (INVALID_PARAMS for 0). */
int mc_mailbox_push_id(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                       const char *key, size_t key_len, uint64_t version, uint64_t size,
                       uint32_t crc, bool crc_valid, uint64_t deadline_ms, uint64_t task_id);

/* mc_mailbox_push_quiet with the id task_id from mc_mailboxes_reserve_id (INVALID_PARAMS for 0):
 * a caller that must record the id before the holder can see the task. */
int mc_mailbox_push_quiet_id(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                             const char *key, size_t key_len, uint64_t version, uint64_t size,
                             uint32_t crc, bool crc_valid, uint64_t deadline_ms, uint64_t task_id);
/* mc_mailbox_push_quiet of a bare item (no size, checksum, deadline or source) whose id is drawn
 * from ids (another table's id space) only once the mailbox is found: a push for a holder with
 * no mailbox draws no id. */
int mc_mailbox_push_quiet_from(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                               const char *key, size_t key_len, uint64_t version,
                               struct mc_mailboxes *ids);
/* Whether any mailbox is open, read without the table's lock (a mailbox opened concurrently may
 * or may not be seen, as a push racing the open may or may not find it). */
bool mc_mailboxes_any(struct mc_mailboxes *t);

/* Takes up to max (0: all) queued tasks whose kind bit is in kinds, oldest first, into *out
 * (copies). Offload/promotion tasks stay in flight until completed, cancelled or expired.
 * MC_ERR_CLIENT_NOT_FOUND without a mailbox. */
int mc_mailbox_pull(struct mc_mailboxes *t, struct mc_id holder, uint32_t kinds, uint32_t max,
                    struct mc_task_list *out);

/* A long-poll for one kind: answers at once (returns 1) when tasks are queued or wait_ms is 0,
 * else parks reply until tasks arrive or now + wait_ms passes (returns 0). Negative: error, reply
 * not called (MC_ERR_CLIENT_NOT_FOUND without a mailbox). */
int mc_mailbox_park(struct mc_mailboxes *t, struct mc_id holder, enum mc_task_kind kind,
                    uint32_t max, uint32_t wait_ms, mc_mailbox_reply_fn reply, void *arg);

/* The holder reported task_id: removes the in-flight task and returns it (the caller checks key
 * and version and frees it with free()); NULL when unknown (expired, cancelled, never pulled,
 * or another holder's). nack selects which counter the report goes to. */
struct mc_task *mc_mailbox_complete(struct mc_mailboxes *t, struct mc_id holder, uint64_t task_id,
                                    bool nack);
/* The same, for a task whose kind bit is in kinds only (NULL for another kind, left in flight). */
struct mc_task *mc_mailbox_complete_kind(struct mc_mailboxes *t, struct mc_id holder,
                                         uint64_t task_id, uint32_t kinds, bool nack);

/* Removes every offload/promotion task of key (queued or in flight, any mailbox) into
 * *cancelled. Returns how many. Cheap when no task exists. */
size_t mc_mailboxes_cancel_key(struct mc_mailboxes *t, const char *key, size_t key_len,
                               struct mc_task_list *cancelled);

/* The same for the kinds whose bit is in kinds only (another module's tasks stay). */
size_t mc_mailboxes_cancel_key_kinds(struct mc_mailboxes *t, uint32_t kinds, const char *key,
                                     size_t key_len, struct mc_task_list *cancelled);

/* Answers parked polls whose deadline passed (empty), and moves tasks whose deadline passed
 * into *expired. Returns how many tasks expired. */
size_t mc_mailboxes_tick(struct mc_mailboxes *t, struct mc_task_list *expired);
/* The same, expiring only tasks of the kinds in kinds. */
size_t mc_mailboxes_tick_kinds(struct mc_mailboxes *t, uint32_t kinds,
                               struct mc_task_list *expired);
/* Only answers parked polls whose deadline passed (empty); walks no task (cheap enough for a
 * tick every few tens of ms). */
void mc_mailboxes_tick_polls(struct mc_mailboxes *t);

void mc_mailboxes_stats(struct mc_mailboxes *t, struct mc_mailbox_stats *st);

/* Sets the predicate that tells a poll whose connection closed (NULL: every poll is alive). Set
 * it before polls park (the RPC adapter's, once). */
void mc_mailboxes_set_alive(struct mc_mailboxes *t, mc_mailbox_alive_fn alive);
/* Answers (with nothing) every parked poll the predicate says is gone; call when a connection
 * closes. Cheap when no poll is parked. */
void mc_mailboxes_drop_dead_polls(struct mc_mailboxes *t);
/* holder mounted again: its in-flight tasks of kinds (its earlier incarnation took them and will
 * never report) go back to the front of its queue, oldest first, and a poll parked for them is
 * answered. Returns how many. */
size_t mc_mailbox_requeue_in_flight(struct mc_mailboxes *t, struct mc_id holder, uint32_t kinds);

/* Removes one offload/promotion task of holder by id (and key, unless key is NULL), queued or in
 * flight, and returns it (free() it; counted as cancelled); NULL when there is no such task. */
struct mc_task *mc_mailbox_remove(struct mc_mailboxes *t, struct mc_id holder, uint64_t task_id,
                                  const char *key, size_t key_len);
/* Tasks of one kind, queued and in flight, in every mailbox (tests, debug counts). */
size_t mc_mailbox_count_kind(struct mc_mailboxes *t, enum mc_task_kind kind);

#endif
