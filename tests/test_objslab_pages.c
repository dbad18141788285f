/*
 * test_objslab_pages.c - the object records' slab arenas and transparent huge pages
 * (mc_master_config.object_huge_pages, the daemon's --object_huge_pages): an arena mapped while
 * the setting is off is left in 4 KiB pages, one mapped while it is on carries the kernel's
 * huge-page advice (VmFlags "hg" in /proc/self/smaps). The pool
 * is process-wide, so the cases run in order in this one process: off first (the pool is empty,
 * every arena is mapped then), then on, with the earlier records still held so that new slabs
 * come from a fresh arena.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "master/master_internal.h"
#include "master/objslab.h"
#include "master/shard.h"
#include "mooncake/errors.h"
#include "test_skip.h"

#define REC 512u          /* the largest slab class: 15 records a slab */
#define RECS (600u * 15u) /* 600 slabs: more than one 4 MiB arena */

/* The VmFlags of the mapping that holds p: whether it has "hg" (MADV_HUGEPAGE); -1 when p is
 * in no mapping or smaps cannot be read. */
static int vma_hg(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    bool inside = false;
    int found = -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && strchr(line, '-') &&
            line[0] != 'V') {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

static struct mc_master *new_master(bool huge)
{
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.manual_ticks = true;
    c.object_huge_pages = huge;
    struct mc_master *m = NULL;
    assert_int_equal(mc_master_new(&c, &m), MC_OK);
    return m;
}

/* RECS records of REC bytes in shard 7 of m (write-locked); returns the last one allocated. */
static struct mc_object *fill(struct mc_master *m, struct mc_object **v)
{
    struct mc_shard *s = &m->shards[7];
    mc_shard_wrlock(s);
    for (unsigned i = 0; i < RECS; i++) {
        v[i] = mc_obj_alloc(s, REC);
        assert_non_null(v[i]);
        assert_false(v[i]->flags & MC_OBJ_HEAP);
    }
    mc_shard_unlock(s);
    return v[RECS - 1];
}

static void release(struct mc_master *m, struct mc_object **v)
{
    struct mc_shard *s = &m->shards[7];
    mc_shard_wrlock(s);
    for (unsigned i = 0; i < RECS; i++)
        mc_obj_free_locked(s, v[i]);
    mc_shard_unlock(s);
}

static void test_arenas_follow_the_setting(void **state)
{
    (void)state;
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) != 0)
        MC_SKIP("this kernel has no transparent huge pages");
    struct mc_object **off = calloc(RECS, sizeof(*off)), **on = calloc(RECS, sizeof(*on));
    assert_non_null(off);
    assert_non_null(on);
    struct mc_master *m_off = new_master(false);
    const struct mc_object *last = fill(m_off, off);
    assert_int_equal(vma_hg(off[0]), 0);
    assert_int_equal(vma_hg(last), 0);
    /* the setting is the last master's; off's records stay, so on's slabs are carved anew */
    struct mc_master *m_on = new_master(true);
    last = fill(m_on, on);
    assert_int_equal(vma_hg(last), 1);
    release(m_on, on);
    release(m_off, off);
    mc_master_free(m_on);
    mc_master_free(m_off);
    free(on);
    free(off);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arenas_follow_the_setting),
    };
    return MC_RUN_TESTS(tests, NULL, NULL);
}
