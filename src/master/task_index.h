/*
 * task_index.h - a mailbox's index of its tasks by id (task_index.c): open addressing with
 * linear probing and tombstones, so a report, a cancel or a removal by id costs O(1) however
 * many tasks wait. Not locked: its mailbox's lock guards it (mailbox.c).
 */
#ifndef MC_MASTER_TASK_INDEX_H
#define MC_MASTER_TASK_INDEX_H

#include <stdint.h>

#include "master/mailbox.h"

struct mc_task_index {
    struct mc_task **slot;
    uint32_t cap, live, used; /* slots (a power of two, or 0), tasks, tasks + tombstones */
};

/* Room for one more task: rebuilt (tombstones purged, doubled when half full). -1: no memory,
 * nothing changed. */
int mc_task_index_reserve(struct mc_task_index *ix);
/* Adds x (after a successful reserve). */
void mc_task_index_add(struct mc_task_index *ix, struct mc_task *x);
/* The task of id, or NULL. */
struct mc_task *mc_task_index_find(const struct mc_task_index *ix, uint64_t id);
/* Removes x, which must be in the index. */
void mc_task_index_del(struct mc_task_index *ix, const struct mc_task *x);
/* Frees the slots (not the tasks); the index is empty afterwards. */
void mc_task_index_free(struct mc_task_index *ix);

#endif
