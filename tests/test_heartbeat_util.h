/*
 * test_heartbeat_util.h - one LOCAL_DISK holder heartbeat, answered at once and recorded, for
 * the master core tests of the offload tier and the delete rule (test_offload.c,
 * test_offload_rereg.c, test_delete_rule.c): the tasks the master handed out (offloads and
 * deletes), copied out of the task list before it is freed, and the report of one of them.
 * Include after <cmocka.h>.
 */
#ifndef MC_TEST_HEARTBEAT_UTIL_H
#define MC_TEST_HEARTBEAT_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "master/mailbox.h"
#include "master/master.h"
#include "mooncake/errors.h"

#define TM_HB_MAX 256

/* A heartbeat's answer: calls made, the list's length and at most TM_HB_MAX tasks. */
struct tm_hb {
    int calls;
    size_t n;
    struct {
        char key[64];
        uint64_t task_id, version, size;
        uint32_t crc;
        bool drop; /* a delete task */
    } it[TM_HB_MAX];
};

static inline void tm_on_hb(void *arg, struct mc_task_list *tasks)
{
    struct tm_hb *h = arg;
    h->calls++;
    h->n = tasks->n;
    size_t i = 0;
    for (struct mc_task *t = tasks->head; t && i < TM_HB_MAX; t = t->next, i++) {
        snprintf(h->it[i].key, sizeof(h->it[i].key), "%s", t->key);
        h->it[i].task_id = t->task_id;
        h->it[i].version = t->version;
        h->it[i].size = t->size;
        h->it[i].crc = t->crc32c;
        h->it[i].drop = t->kind == MC_TASK_DELETE;
    }
    mc_task_list_free(tasks);
}

/* OffloadObjectHeartbeat of who for at most max tasks, answered at once (wait 0). */
static inline struct tm_hb tm_pull(struct mc_master *m, struct mc_id who, uint32_t max)
{
    struct tm_hb h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(m, who, true, max, 0, tm_on_hb, &h), 1);
    assert_int_equal(h.calls, 1);
    return h;
}

/* Reports task i of h as who's (NotifyOffloadSuccess of one item): done (status 0, with the
 * task's CRC) or failed with status; the master must take the report. */
static inline void tm_notify(struct mc_master *m, struct mc_id who, const struct tm_hb *h, size_t i,
                             int status)
{
    struct mc_offload_result it = {.task_id = h->it[i].task_id,
                                   .key = h->it[i].key,
                                   .key_len = strlen(h->it[i].key),
                                   .status = status,
                                   .size = h->it[i].size,
                                   .version = h->it[i].version,
                                   .crc32c = h->it[i].crc,
                                   .crc_valid = status == 0};
    int rc = -1;
    assert_int_equal(mc_master_notify_offload(m, who, &it, 1, false, &rc), MC_OK);
    assert_int_equal(rc, MC_OK);
}

#endif
