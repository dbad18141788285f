/* locked_wb_upsert.c - upsert.c's `_locked` function for test_locked_asserts (locked_wb.h). */
#include "master/upsert.c"

#include <unistd.h>

#include "locked_wb.h"

void wb_upsert_take_unlocked(void)
{
    struct reservation v[1] = {{.token = 7}};
    struct mc_upserts t = {.v = v, .n = 1, .cap = 1};
    struct reservation r;
    take_locked(&t, 0, &r);
}

/* With the table's lock: the entry comes out whole and the table is empty. */
void wb_upsert_take_locked(void)
{
    struct reservation v[2] = {{.token = 7}, {.token = 8}};
    struct mc_upserts t = {.v = v, .n = 2, .cap = 2};
    pthread_mutex_init(&t.lock, NULL);
    struct reservation r;
    table_lock(&t);
    take_locked(&t, 0, &r);
    table_unlock(&t);
    pthread_mutex_destroy(&t.lock);
    if (r.token != 7 || t.n != 1 || t.v[0].token != 8 || mc_lo_depth() != 0)
        _exit(3);
}
