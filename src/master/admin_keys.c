/*
 * admin_keys.c - see admin_keys.h.
 *
 * Per shard: under the read lock, copy the keys of complete objects that sort after the cursor
 * (only those, so a shard is copied once however large the page), unlock, sort the copies, and
 * take the smallest until the page is full. A shard that fills the page is left with more = true
 * and the cursor at its last returned key.
 */
#include "master/admin_keys.h"

#include <stdlib.h>
#include <string.h>

#include "master/master_internal.h"
#include "master/objects.h"
#include "master/shard.h"
#include "mooncake/errors.h"

struct kref {
    const char *p;
    size_t len;
};

struct kbuf {
    char *data;
    size_t len, cap;
    struct kref *refs;
    size_t n, ncap;
};

static int key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c)
        return c;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

static int kref_cmp(const void *x, const void *y)
{
    const struct kref *a = x, *b = y;
    return key_cmp(a->p, a->len, b->p, b->len);
}

/* Appends a key as an offset (the buffer may move): refs[].p holds the offset until fixed. */
static int kbuf_add(struct kbuf *b, const char *k, size_t len)
{
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + len)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    if (b->n == b->ncap) {
        size_t ncap = b->ncap ? b->ncap * 2 : 256;
        struct kref *r = realloc(b->refs, ncap * sizeof(*r));
        if (!r)
            return -1;
        b->refs = r;
        b->ncap = ncap;
    }
    memcpy(b->data + b->len, k, len);
    b->refs[b->n].p = (const char *)(uintptr_t)b->len;
    b->refs[b->n].len = len;
    b->n++;
    b->len += len;
    return 0;
}

/* Copies shard s's complete keys after (after, after_len) (all of them when after is NULL). */
static int collect_shard(struct mc_shard *s, const char *after, size_t after_len, struct kbuf *b)
{
    int rc = 0;
    mc_shard_rdlock(s);
    for (uint32_t i = 0; i < s->n && rc == 0; i++) {
        struct mc_object *o = mc_ent_obj(mc_shard_ent(s, i));
        if (!(o->flags & MC_OBJ_COMPLETE))
            continue;
        const char *k = mc_obj_key(o);
        if (after && key_cmp(k, o->key_len, after, after_len) <= 0)
            continue;
        rc = kbuf_add(b, k, o->key_len);
    }
    mc_shard_unlock(s);
    for (size_t i = 0; i < b->n; i++)
        b->refs[i].p = b->data + (uintptr_t)b->refs[i].p;
    if (b->n) /* refs is NULL for an empty shard: qsort's arguments must not be */
        qsort(b->refs, b->n, sizeof(*b->refs), kref_cmp);
    return rc;
}

static int page_add(struct mc_key_page *p, size_t *cap, size_t *bcap, size_t *blen,
                    const struct kref *k)
{
    if (p->n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        size_t *o = realloc(p->keys_off, c * sizeof(*o));
        if (!o)
            return -1;
        p->keys_off = o;
        size_t *l = realloc(p->keys_len, c * sizeof(*l));
        if (!l)
            return -1;
        p->keys_len = l;
        *cap = c;
    }
    if (*blen + k->len + 1 > *bcap) {
        size_t c = *bcap ? *bcap * 2 : 4096;
        while (c < *blen + k->len + 1)
            c *= 2;
        char *d = realloc(p->buf, c);
        if (!d)
            return -1;
        p->buf = d;
        *bcap = c;
    }
    memcpy(p->buf + *blen, k->p, k->len);
    p->buf[*blen + k->len] = '\0';
    p->keys_off[p->n] = *blen;
    p->keys_len[p->n] = k->len;
    p->n++;
    *blen += k->len + 1;
    return 0;
}

int mc_master_list_keys(struct mc_master *m, uint32_t shard, const char *after, size_t after_len,
                        size_t limit, struct mc_key_page *out)
{
    size_t cap = 0, bcap = 0, blen = 0;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (!m || shard >= MC_NSHARDS || limit == 0)
        return MC_ERR_INVALID_PARAMS;
    for (uint32_t si = shard; si < MC_NSHARDS && rc == 0; si++) {
        struct kbuf b = {0};
        bool first = si == shard;
        if (collect_shard(&m->shards[si], first ? after : NULL, first ? after_len : 0, &b) != 0) {
            rc = MC_ERR_INTERNAL_ERROR;
        } else {
            for (size_t i = 0; i < b.n && rc == 0; i++) {
                if (out->n == limit) {
                    out->more = true;
                    break;
                }
                if (page_add(out, &cap, &bcap, &blen, &b.refs[i]) != 0)
                    rc = MC_ERR_INTERNAL_ERROR;
            }
            if (rc == 0 && out->n == limit && !out->more) {
                /* page full at the end of this shard: more iff a later shard has a key */
                out->more = si + 1 < MC_NSHARDS;
            }
            if (rc == 0 && out->n == limit) {
                size_t last = out->n - 1;
                out->next_shard = si;
                out->next_after = malloc(out->keys_len[last] + 1);
                if (!out->next_after) {
                    rc = MC_ERR_INTERNAL_ERROR;
                } else {
                    memcpy(out->next_after, out->buf + out->keys_off[last],
                           out->keys_len[last] + 1);
                    out->next_after_len = out->keys_len[last];
                }
            }
        }
        free(b.data);
        free(b.refs);
        if (out->n == limit)
            break;
    }
    if (rc != 0)
        mc_key_page_free(out);
    return rc;
}

void mc_key_page_free(struct mc_key_page *p)
{
    if (!p)
        return;
    free(p->buf);
    free(p->keys_off);
    free(p->keys_len);
    free(p->next_after);
    memset(p, 0, sizeof(*p));
}

uint32_t mc_master_list_keys_shards(void)
{
    return MC_NSHARDS;
}
