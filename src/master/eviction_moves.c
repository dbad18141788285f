/*
 * eviction_moves.c - a round's candidates found again after their entries moved (see
 * eviction_moves.h).
 */
#include <stdlib.h>

#include "master/eviction_moves.h"

/* A candidate whose entry moved: its version and index in the shard's candidates. */
struct ev_moved {
    uint64_t version;
    size_t idx;
};

void ev_fwd_set(struct ev_fwd *f, uint32_t from, uint32_t to)
{
    if (from >= f->top)
        return;
    uint32_t i = f->top - 1 - from;
    if (i >= f->len) {
        if (i >= f->cap && !ev_reserve((void **)&f->v, &f->cap, (size_t)i + 1, sizeof(*f->v)))
            return;
        for (uint32_t k = f->len; k <= i; k++)
            f->v[k] = EV_FWD_NONE;
        f->len = i + 1;
    }
    f->v[i] = to;
}

/* Where the entry at position e went in this cycle's last move from e, or NONE. */
static uint32_t fwd_follow(const struct ev_fwd *f, uint32_t e)
{
    if (e >= f->top || f->top - 1 - e >= f->len)
        return EV_FWD_NONE;
    return f->v[f->top - 1 - e];
}

static int cmp_moved(const void *a, const void *b)
{
    const struct ev_moved *x = a, *y = b;
    return x->version < y->version ? -1 : x->version > y->version;
}

void ev_find_moved(struct mc_shard *s, const struct ev_cand *c, size_t cnt, struct mc_object **objs,
                   struct ev_moved_scratch *scratch, size_t nmoved)
{
    struct ev_moved *mv = NULL;
    if (nmoved > 8 && (nmoved <= scratch->cap || ev_reserve((void **)&scratch->v, &scratch->cap,
                                                            nmoved, sizeof(*scratch->v)))) {
        mv = scratch->v;
        size_t k = 0;
        for (size_t i = 0; i < cnt; i++)
            if (!objs[i])
                mv[k++] = (struct ev_moved){.version = c[i].version, .idx = i};
        qsort(mv, nmoved, sizeof(*mv), cmp_moved);
    }
    size_t found = 0;
    for (uint32_t j = 0; j < s->n && found < nmoved; j++) {
        struct mc_object *o = mc_ent_obj(mc_shard_ent(s, j));
        uint64_t v = o->version;
        if (mv) {
            size_t lo = 0, hi = nmoved;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (mv[mid].version < v)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < nmoved && mv[lo].version == v) {
                objs[mv[lo].idx] = o;
                found++;
            }
            continue;
        }
        for (size_t i = 0; i < cnt; i++) {
            if (!objs[i] && c[i].version == v) {
                objs[i] = o;
                found++;
                break;
            }
        }
    }
}

struct mc_object *ev_follow_moves(struct mc_shard *s, const struct ev_fwd *f,
                                  const struct ev_cand *c)
{
    uint32_t e = c->ent;
    for (uint32_t hop = 0; hop < EV_FWD_HOPS; hop++) {
        e = fwd_follow(f, e);
        if (e == EV_FWD_NONE)
            return NULL;
        struct mc_object *o = mc_shard_revalidate(s, e, c->version);
        if (o)
            return o;
    }
    return NULL;
}
