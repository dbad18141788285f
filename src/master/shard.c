/*
 * shard.c - mechanics of one object-table shard (layout in master_internal.h) and the group
 * route map.
 *
 * htab slots are 32-bit: the top 8 bits of the key hash (a tag that skips most key compares)
 * and a 24-bit ent index (so at most 16M objects per shard); UINT32_MAX is empty. The home slot
 * is (key_hash >> 10) & mask (the bits above the shard index). Slots are 4 bytes to keep the
 * index small (tens of millions of objects); the price is that growing and backward-shift
 * deletion hash a moved key again to find its home. Load is kept <= 3/4; no tombstones.
 *
 * The route map records, for every grouped key, the shard of its group, keyed by the key's
 * 64-bit hash (a lookup that finds nothing there falls back to the key's own shard, so a hash
 * collision with another key only costs a second probe). 64 stripes, each a mutex and an open
 * addressing table; nothing is locked while a stripe is held.
 */
#include <stdlib.h>
#include <string.h>

#include "master/master_internal.h"

#define SLOT_EMPTY UINT32_MAX
#define SLOT_ENT_BITS 24
#define SLOT_ENT_MASK ((1u << SLOT_ENT_BITS) - 1)
#define HTAB_MIN 64u

static inline uint32_t slot_make(uint64_t key_hash, uint32_t ent)
{
    return ((uint32_t)(key_hash >> 56) << SLOT_ENT_BITS) | ent;
}

static inline uint32_t slot_home(uint64_t key_hash, uint32_t mask)
{
    return (uint32_t)(key_hash >> MC_ENT_SHIFT) & mask;
}

static uint64_t obj_hash(struct mc_object *o)
{
    return mc_hash_key(mc_obj_key(o), o->key_len);
}

/* ---- init / destroy ------------------------------------------------------------------------ */

static int shard_init(struct mc_shard *s, uint32_t index)
{
    memset(s, 0, sizeof(*s));
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    s->index = index;
    return 0;
}

int mc_shards_init(struct mc_master *m)
{
    m->shards = calloc(MC_NSHARDS, sizeof(*m->shards));
    if (!m->shards)
        return -1;
    for (uint32_t i = 0; i < MC_NSHARDS; i++)
        shard_init(&m->shards[i], i);
    return 0;
}

void mc_shards_destroy(struct mc_master *m)
{
    if (!m->shards)
        return;
    for (uint32_t i = 0; i < MC_NSHARDS; i++) {
        struct mc_shard *s = &m->shards[i];
        for (uint32_t c = 0; c < s->nchunks; c++)
            free(s->chunks[c]);
        free(s->chunks);
        free(s->slots);
        free(s->pend);
        for (uint32_t b = 0; s->gbuckets && b <= s->gmask; b++) {
            struct mc_group *g = s->gbuckets[b];
            while (g) {
                struct mc_group *nx = g->next;
                free(g->members);
                free(g);
                g = nx;
            }
        }
        free(s->gbuckets);
        pthread_rwlock_destroy(&s->lock);
    }
    free(m->shards);
    m->shards = NULL;
}

/* ---- htab ---------------------------------------------------------------------------------- */

struct mc_object *mc_shard_find(struct mc_shard *s, uint64_t key_hash, const char *key,
                                size_t key_len)
{
    if (!s->slots)
        return NULL;
    uint32_t tag = (uint32_t)(key_hash >> 56);
    for (uint32_t i = slot_home(key_hash, s->mask);; i = (i + 1) & s->mask) {
        uint32_t v = s->slots[i];
        if (v == SLOT_EMPTY)
            return NULL;
        if ((v >> SLOT_ENT_BITS) != tag)
            continue;
        struct mc_object *o = mc_ent_obj(mc_shard_ent(s, v & SLOT_ENT_MASK));
        if (o->key_len == key_len && memcmp(mc_obj_key(o), key, key_len) == 0)
            return o;
    }
}

struct mc_object *mc_shard_find_version(struct mc_shard *s, uint64_t key_hash, uint64_t version)
{
    if (!s->slots)
        return NULL;
    uint32_t tag = (uint32_t)(key_hash >> 56);
    for (uint32_t i = slot_home(key_hash, s->mask);; i = (i + 1) & s->mask) {
        uint32_t v = s->slots[i];
        if (v == SLOT_EMPTY)
            return NULL;
        if ((v >> SLOT_ENT_BITS) != tag)
            continue;
        struct mc_object *o = mc_ent_obj(mc_shard_ent(s, v & SLOT_ENT_MASK));
        if (o->version == version)
            return o;
    }
}

static void htab_put(uint32_t *slots, uint32_t mask, uint32_t home, uint32_t v)
{
    uint32_t i = home;
    while (slots[i] != SLOT_EMPTY)
        i = (i + 1) & mask;
    slots[i] = v;
}

/* Home slot of an occupied slot value (its key is hashed again: slots keep only 8 hash bits). */
static uint32_t home_of(struct mc_shard *s, uint32_t v, uint32_t mask)
{
    return slot_home(obj_hash(mc_ent_obj(mc_shard_ent(s, v & SLOT_ENT_MASK))), mask);
}

static int htab_reserve(struct mc_shard *s, uint32_t want)
{
    uint32_t cap = s->slots ? s->mask + 1 : 0;
    if ((uint64_t)want * 4 <= (uint64_t)cap * 3)
        return 0;
    uint32_t ncap = cap ? cap * 2 : HTAB_MIN;
    while ((uint64_t)want * 4 > (uint64_t)ncap * 3)
        ncap *= 2;
    uint32_t *ns = malloc((size_t)ncap * sizeof(*ns));
    if (!ns)
        return -1;
    memset(ns, 0xff, (size_t)ncap * sizeof(*ns));
    for (uint32_t i = 0; i < cap; i++)
        if (s->slots[i] != SLOT_EMPTY)
            htab_put(ns, ncap - 1, home_of(s, s->slots[i], ncap - 1), s->slots[i]);
    free(s->slots);
    s->slots = ns;
    s->mask = ncap - 1;
    return 0;
}

/* Index of the slot holding ent (it must be there). */
static uint32_t htab_slot_of(struct mc_shard *s, uint64_t key_hash, uint32_t ent)
{
    uint32_t i = slot_home(key_hash, s->mask);
    while ((s->slots[i] & SLOT_ENT_MASK) != ent || s->slots[i] == SLOT_EMPTY)
        i = (i + 1) & s->mask;
    return i;
}

static void htab_delete_at(struct mc_shard *s, uint32_t i)
{
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & s->mask;
        uint32_t v = s->slots[j];
        if (v == SLOT_EMPTY)
            break;
        uint32_t home = home_of(s, v, s->mask);
        /* v may move into the hole at i unless its home lies cyclically in (i, j]. */
        bool stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (stays)
            continue;
        s->slots[i] = v;
        i = j;
    }
    s->slots[i] = SLOT_EMPTY;
}

/* ---- ents ---------------------------------------------------------------------------------- */

static int ents_reserve(struct mc_shard *s, uint32_t want)
{
    while ((uint64_t)s->nchunks * MC_ENT_CHUNK < want) {
        if (s->nchunks == s->chunks_cap) {
            uint32_t ncap = s->chunks_cap ? s->chunks_cap * 2 : 4;
            struct mc_obj_ent **nc = realloc(s->chunks, (size_t)ncap * sizeof(*nc));
            if (!nc)
                return -1;
            s->chunks = nc;
            s->chunks_cap = ncap;
        }
        struct mc_obj_ent *c = malloc(MC_ENT_CHUNK * sizeof(*c));
        if (!c)
            return -1;
        s->chunks[s->nchunks++] = c;
    }
    return 0;
}

int mc_shard_insert(struct mc_shard *s, uint64_t key_hash, struct mc_object *o)
{
    if (s->n >= SLOT_ENT_MASK || ents_reserve(s, s->n + 1) != 0 || htab_reserve(s, s->n + 1) != 0)
        return -1;
    uint32_t ent = s->n++;
    struct mc_obj_ent *e = mc_shard_ent(s, ent);
    atomic_init(&e->lease_ms, 0);
    e->obj_bits = (uintptr_t)o;
    o->ent = ent;
    htab_put(s->slots, s->mask, slot_home(key_hash, s->mask), slot_make(key_hash, ent));
    mc_shard_refresh_bits(s, o);
    return 0;
}

void mc_shard_refresh_bits(struct mc_shard *s, struct mc_object *o)
{
    unsigned bits = 0;
    if (o->flags & MC_OBJ_COMPLETE) {
        for (uint8_t i = 0; i < o->nrep; i++) {
            if (mc_replica_evictable(&o->rep[i])) {
                bits |= MC_ENT_EVICTABLE;
                break;
            }
        }
    }
    if (o->flags & MC_OBJ_HARD_PIN)
        bits |= MC_ENT_HARD_PIN;
    if (o->flags & MC_OBJ_SOFT_PIN)
        bits |= MC_ENT_SOFT_PIN;
    if (o->group)
        bits |= MC_ENT_GROUPED;
    mc_shard_ent(s, o->ent)->obj_bits = (uintptr_t)o | bits;
}

struct mc_object *mc_shard_revalidate(struct mc_shard *s, uint32_t ent, uint64_t version)
{
    if (ent >= s->n)
        return NULL;
    struct mc_object *o = mc_ent_obj(mc_shard_ent(s, ent));
    return o->version == version ? o : NULL;
}

/* ---- pending puts -------------------------------------------------------------------------- */

int mc_shard_pend_add(struct mc_shard *s, struct mc_object *o, struct mc_id owner,
                      uint64_t start_ms, uint64_t soft_pin_ttl_ms)
{
    if (s->npend == s->pend_cap) {
        uint32_t ncap = s->pend_cap ? s->pend_cap * 2 : 8;
        struct mc_pending *np = realloc(s->pend, (size_t)ncap * sizeof(*np));
        if (!np)
            return -1;
        s->pend = np;
        s->pend_cap = ncap;
    }
    o->flags |= MC_OBJ_PROCESSING;
    s->pend[s->npend++] = (struct mc_pending){
        .obj = o, .owner = owner, .start_ms = start_ms, .soft_pin_ttl_ms = soft_pin_ttl_ms};
    return 0;
}

void mc_shard_pend_remove(struct mc_shard *s, struct mc_object *o)
{
    struct mc_pending *p = mc_obj_pending(s, o);
    if (!p)
        return;
    *p = s->pend[--s->npend];
    o->flags &= ~(uint64_t)MC_OBJ_PROCESSING;
    if (s->npend == 0 && s->pend_cap > 64) {
        free(s->pend);
        s->pend = NULL;
        s->pend_cap = 0;
    }
}

/* ---- groups -------------------------------------------------------------------------------- */

static int groups_reserve(struct mc_shard *s)
{
    uint32_t nb = s->gbuckets ? s->gmask + 1 : 0;
    if (s->ngroups + 1 <= nb)
        return 0;
    uint32_t ncap = nb ? nb * 2 : 16;
    struct mc_group **nbk = calloc(ncap, sizeof(*nbk));
    if (!nbk)
        return -1;
    for (uint32_t b = 0; b < nb; b++) {
        struct mc_group *g = s->gbuckets[b];
        while (g) {
            struct mc_group *nx = g->next;
            uint32_t h = (uint32_t)(g->hash >> MC_ENT_SHIFT) & (ncap - 1);
            g->next = nbk[h];
            nbk[h] = g;
            g = nx;
        }
    }
    free(s->gbuckets);
    s->gbuckets = nbk;
    s->gmask = ncap - 1;
    return 0;
}

int mc_shard_group_join(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                        const char *gid, size_t gid_len, uint64_t key_hash)
{
    uint64_t gh = mc_hash_key(gid, gid_len);
    struct mc_group *g = NULL;
    if (s->gbuckets) {
        for (g = s->gbuckets[(uint32_t)(gh >> MC_ENT_SHIFT) & s->gmask]; g; g = g->next)
            if (g->hash == gh && g->id_len == gid_len && !memcmp(g->id, gid, gid_len))
                break;
    }
    bool created = false;
    if (!g) {
        if (groups_reserve(s) != 0)
            return -1;
        g = calloc(1, sizeof(*g) + gid_len + 1);
        if (!g)
            return -1;
        g->hash = gh;
        g->id_len = (uint16_t)gid_len;
        memcpy(g->id, gid, gid_len);
        created = true;
    }
    if (g->n == g->cap) {
        uint32_t ncap = g->cap ? g->cap * 2 : 4;
        struct mc_object **nm = realloc(g->members, (size_t)ncap * sizeof(*nm));
        if (!nm)
            goto fail;
        g->members = nm;
        g->cap = ncap;
    }
    if (mc_route_add(m, key_hash, s->index) != 0)
        goto fail;
    g->members[g->n++] = o;
    o->group = g;
    if (created) {
        uint32_t b = (uint32_t)(gh >> MC_ENT_SHIFT) & s->gmask;
        g->next = s->gbuckets[b];
        s->gbuckets[b] = g;
        s->ngroups++;
    }
    return 0;
fail:
    if (created) {
        free(g->members);
        free(g);
    }
    return -1;
}

static void group_leave(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    struct mc_group *g = o->group;
    for (uint32_t i = 0; i < g->n; i++) {
        if (g->members[i] == o) {
            g->members[i] = g->members[--g->n];
            break;
        }
    }
    o->group = NULL;
    mc_route_del(m, mc_hash_key(mc_obj_key(o), o->key_len), s->index);
    if (g->n)
        return;
    struct mc_group **pp = &s->gbuckets[(uint32_t)(g->hash >> MC_ENT_SHIFT) & s->gmask];
    while (*pp != g)
        pp = &(*pp)->next;
    *pp = g->next;
    s->ngroups--;
    free(g->members);
    free(g);
}

/* ---- unlink -------------------------------------------------------------------------------- */

void mc_shard_unlink(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    if (o->group)
        group_leave(m, s, o);
    mc_shard_pend_remove(s, o);
    uint32_t ent = o->ent;
    htab_delete_at(s, htab_slot_of(s, obj_hash(o), ent));
    uint32_t last = --s->n;
    if (ent != last) {
        struct mc_obj_ent *from = mc_shard_ent(s, last), *to = mc_shard_ent(s, ent);
        struct mc_object *moved = mc_ent_obj(from);
        uint64_t mh = obj_hash(moved);
        s->slots[htab_slot_of(s, mh, last)] = slot_make(mh, ent);
        atomic_store_explicit(&to->lease_ms,
                              atomic_load_explicit(&from->lease_ms, memory_order_relaxed),
                              memory_order_relaxed);
        to->obj_bits = from->obj_bits;
        moved->ent = ent;
    }
    o->ent = MC_NO_INDEX;
    /* Give memory back when a shard empties out (e.g. after RemoveAll). */
    if (s->n == 0) {
        for (uint32_t c = 0; c < s->nchunks; c++)
            free(s->chunks[c]);
        free(s->chunks);
        free(s->slots);
        s->chunks = NULL;
        s->nchunks = s->chunks_cap = 0;
        s->slots = NULL;
        s->mask = 0;
    } else if (s->nchunks > 1 &&
               (uint64_t)s->n + 2 * MC_ENT_CHUNK <= (uint64_t)s->nchunks * MC_ENT_CHUNK) {
        free(s->chunks[--s->nchunks]);
    }
}

/* ---- group route map ----------------------------------------------------------------------- */

#define ROUTE_STRIPES 64u

struct route_ent {
    uint64_t hash;
    uint32_t shard;
    uint32_t refs; /* 0 = empty */
};

struct mc_route_stripe {
    pthread_mutex_t lock;
    struct route_ent *tab;
    uint32_t mask, n;
    char pad[32];
};

int mc_routes_init(struct mc_master *m)
{
    m->routes = calloc(ROUTE_STRIPES, sizeof(*m->routes));
    if (!m->routes)
        return -1;
    for (uint32_t i = 0; i < ROUTE_STRIPES; i++)
        pthread_mutex_init(&m->routes[i].lock, NULL);
    return 0;
}

void mc_routes_destroy(struct mc_master *m)
{
    if (!m->routes)
        return;
    for (uint32_t i = 0; i < ROUTE_STRIPES; i++) {
        free(m->routes[i].tab);
        pthread_mutex_destroy(&m->routes[i].lock);
    }
    free(m->routes);
    m->routes = NULL;
}

static struct mc_route_stripe *stripe_of(struct mc_master *m, uint64_t h)
{
    return &m->routes[(h >> 58) & (ROUTE_STRIPES - 1)];
}

static void route_put(struct route_ent *tab, uint32_t mask, struct route_ent e)
{
    uint32_t i = (uint32_t)(e.hash >> MC_ENT_SHIFT) & mask;
    while (tab[i].refs)
        i = (i + 1) & mask;
    tab[i] = e;
}

int mc_route_add(struct mc_master *m, uint64_t h, uint32_t shard)
{
    struct mc_route_stripe *st = stripe_of(m, h);
    int rc = 0;
    pthread_mutex_lock(&st->lock);
    if (st->tab) {
        for (uint32_t i = (uint32_t)(h >> MC_ENT_SHIFT) & st->mask; st->tab[i].refs;
             i = (i + 1) & st->mask) {
            if (st->tab[i].hash == h && st->tab[i].shard == shard) {
                st->tab[i].refs++;
                goto out;
            }
        }
    }
    uint32_t cap = st->tab ? st->mask + 1 : 0;
    if ((st->n + 1) * 2 > cap) {
        uint32_t ncap = cap ? cap * 2 : 64;
        struct route_ent *nt = calloc(ncap, sizeof(*nt));
        if (!nt) {
            rc = -1;
            goto out;
        }
        for (uint32_t i = 0; i < cap; i++)
            if (st->tab[i].refs)
                route_put(nt, ncap - 1, st->tab[i]);
        free(st->tab);
        st->tab = nt;
        st->mask = ncap - 1;
    }
    route_put(st->tab, st->mask, (struct route_ent){.hash = h, .shard = shard, .refs = 1});
    st->n++;
    atomic_fetch_add_explicit(&m->grouped_keys, 1, memory_order_relaxed);
out:
    pthread_mutex_unlock(&st->lock);
    return rc;
}

void mc_route_del(struct mc_master *m, uint64_t h, uint32_t shard)
{
    struct mc_route_stripe *st = stripe_of(m, h);
    pthread_mutex_lock(&st->lock);
    if (!st->tab)
        goto out;
    for (uint32_t i = (uint32_t)(h >> MC_ENT_SHIFT) & st->mask; st->tab[i].refs;
         i = (i + 1) & st->mask) {
        if (st->tab[i].hash != h || st->tab[i].shard != shard)
            continue;
        if (--st->tab[i].refs)
            goto out;
        /* Backward-shift deletion, as in the shard htab. */
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & st->mask;
            if (!st->tab[j].refs)
                break;
            uint32_t home = (uint32_t)(st->tab[j].hash >> MC_ENT_SHIFT) & st->mask;
            bool stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
            if (stays)
                continue;
            st->tab[i] = st->tab[j];
            i = j;
        }
        st->tab[i].refs = 0;
        st->n--;
        atomic_fetch_sub_explicit(&m->grouped_keys, 1, memory_order_relaxed);
        break;
    }
out:
    pthread_mutex_unlock(&st->lock);
}

uint32_t mc_master_key_shard(struct mc_master *m, uint64_t h)
{
    uint32_t shard = (uint32_t)h & MC_SHARD_MASK;
    if (atomic_load_explicit(&m->grouped_keys, memory_order_relaxed) == 0)
        return shard;
    struct mc_route_stripe *st = stripe_of(m, h);
    pthread_mutex_lock(&st->lock);
    if (st->tab) {
        for (uint32_t i = (uint32_t)(h >> MC_ENT_SHIFT) & st->mask; st->tab[i].refs;
             i = (i + 1) & st->mask) {
            if (st->tab[i].hash == h) {
                shard = st->tab[i].shard;
                break;
            }
        }
    }
    pthread_mutex_unlock(&st->lock);
    return shard;
}
