/*
 * task_index.c - a mailbox's index of its tasks by id (see task_index.h).
 */
#include "master/task_index.h"

#include <stdlib.h>

#define TOMB ((struct mc_task *)(uintptr_t)1)

static inline uint32_t home(uint64_t id, uint32_t cap)
{
    return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

int mc_task_index_reserve(struct mc_task_index *ix)
{
    if ((uint64_t)(ix->used + 1) * 4 <= (uint64_t)ix->cap * 3)
        return 0;
    uint32_t cap = ix->cap ? ix->cap : 16;
    while ((uint64_t)(ix->live + 1) * 2 > cap)
        cap *= 2;
    struct mc_task **nv = calloc(cap, sizeof(*nv));
    if (!nv)
        return -1;
    for (uint32_t i = 0; i < ix->cap; i++) {
        struct mc_task *x = ix->slot[i];
        if (!x || x == TOMB)
            continue;
        uint32_t j = home(x->task_id, cap);
        while (nv[j])
            j = (j + 1) & (cap - 1);
        nv[j] = x;
    }
    free(ix->slot);
    ix->slot = nv;
    ix->cap = cap;
    ix->used = ix->live;
    return 0;
}

void mc_task_index_add(struct mc_task_index *ix, struct mc_task *x)
{
    uint32_t j = home(x->task_id, ix->cap);
    while (ix->slot[j] && ix->slot[j] != TOMB)
        j = (j + 1) & (ix->cap - 1);
    if (!ix->slot[j])
        ix->used++;
    ix->slot[j] = x;
    ix->live++;
}

struct mc_task *mc_task_index_find(const struct mc_task_index *ix, uint64_t id)
{
    if (!ix->cap)
        return NULL;
    for (uint32_t j = home(id, ix->cap);; j = (j + 1) & (ix->cap - 1)) {
        struct mc_task *x = ix->slot[j];
        if (!x)
            return NULL;
        if (x != TOMB && x->task_id == id)
            return x;
    }
}

void mc_task_index_del(struct mc_task_index *ix, const struct mc_task *x)
{
    for (uint32_t j = home(x->task_id, ix->cap);; j = (j + 1) & (ix->cap - 1)) {
        if (ix->slot[j] == x) {
            ix->slot[j] = TOMB;
            ix->live--;
            return;
        }
    }
}

void mc_task_index_free(struct mc_task_index *ix)
{
    free(ix->slot);
    ix->slot = NULL;
    ix->cap = ix->live = ix->used = 0;
}
