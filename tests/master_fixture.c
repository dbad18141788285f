/*
 * master_fixture.c - see master_fixture.h.
 */
#include "master_fixture.h"

#include <stdlib.h>

struct fx *mfx_new(uint16_t epoch, uint64_t seg_a, uint64_t seg_b)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    mc_fake_clock_init(&f->fc, 1000ull * 1000000000ull);
    f->a = tm_id(1);
    f->b = tm_id(2);
    struct mc_segment_desc s1 = tm_seg(1, seg_a), s2 = tm_seg(2, seg_b);
    f->m = tm_master(&f->fc, epoch);
    if (!f->m || mc_master_mount_segment(f->m, f->a, &s1, NULL) != MC_OK ||
        (seg_b && mc_master_mount_segment(f->m, f->b, &s2, NULL) != MC_OK)) {
        mfx_free(f);
        return NULL;
    }
    return f;
}

void mfx_free(struct fx *f)
{
    if (!f)
        return;
    mc_master_free(f->m);
    free(f);
}

int mfx_teardown(void **state)
{
    mfx_free(*state);
    *state = NULL;
    return 0;
}
