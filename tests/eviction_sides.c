/*
 * eviction_sides.c - the two-master helpers of eviction_sides.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"
#include "eviction_sides.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/segments.h"
#include "master/shard.h"

void es_side_init(struct side *s, uint32_t threads, const struct mc_evict_test_opts *o)
{
    mc_fake_clock_init(&s->fc, ES_T0_MS * 1000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &s->fc.clock;
    c.manual_ticks = true;
    c.epoch = 3;
    c.default_kv_lease_ttl_ms = ES_TTL_MS;
    c.allow_evict_soft_pinned_objects = true;
    c.eviction_threads = threads;
    c.eviction_reserve_min = 4;
    assert_int_equal(mc_master_new(&c, &s->m), MC_OK);
    s->client = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 256 * MIB), s2 = tm_seg(2, 256 * MIB);
    assert_int_equal(mc_master_mount_segment(s->m, s->client, &s1, NULL), MC_OK);
    assert_int_equal(mc_master_mount_segment(s->m, s->client, &s2, NULL), MC_OK);
    if (o)
        mc_master_evict_set_test_opts(s->m, o);
}

uint64_t es_rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

void es_read_times(uint32_t *when, int n, uint32_t per, uint64_t *seed)
{
    for (int i = 0; i < n; i++)
        when[i] = (uint32_t)i / per;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(es_rnd(seed) % (uint64_t)(i + 1));
        uint32_t t = when[i];
        when[i] = when[j];
        when[j] = t;
    }
}

const char *es_key(int i)
{
    static char buf[4][32];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, 32, "k-%06d", i);
    return b;
}

void es_set_now(struct side *s, uint64_t ms)
{
    mc_fake_clock_set_ns(&s->fc, ms * 1000000ull);
}

void es_make_disk_copy(struct mc_master *m, const char *k)
{
    struct mc_shard *sh;
    struct mc_object *o =
        mc_master_lock_find(m, mc_hash_key(k, strlen(k)), k, strlen(k), true, &sh);
    assert_non_null(o);
    assert_int_equal(o->nrep, 2);
    struct mc_replica *r = &o->rep[1];
    mc_segment_release(r->u.seg, r->handle, o->size);
    struct mc_holder *h = calloc(1, sizeof(*h));
    assert_non_null(h);
    atomic_init(&h->refs, 1);
    atomic_init(&h->dead, false);
    h->id = tm_id(9);
    snprintf(h->endpoint, sizeof(h->endpoint), "10.0.0.9:17009");
    r->u.holder = h;
    r->type = MC_REPLICA_TYPE_LOCAL_DISK;
    r->status = MC_REPLICA_STATUS_COMPLETE;
    r->handle = 0;
    r->offset = 0;
    mc_shard_refresh_bits(sh, o);
    mc_shard_unlock(sh);
}

void es_check_floors_and_counts(struct side *s)
{
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *sh = &s->m->shards[si];
        mc_shard_rdlock(sh);
        uint32_t pop = 0;
        for (uint32_t e = 0; e < sh->n; e++) {
            struct mc_obj_ent *en = mc_shard_ent(sh, e);
            uint64_t lease = atomic_load(&en->lease_ms);
            pop += mc_ent_in_pop(en->obj_bits);
            if (*mc_shard_floor(sh, e) > lease)
                fail_msg("shard %u entry %u: floor %llu above deadline %llu", si, e,
                         (unsigned long long)*mc_shard_floor(sh, e), (unsigned long long)lease);
        }
        if (pop != sh->npop)
            fail_msg("shard %u: npop %u, entries in the population %u", si, sh->npop, pop);
        mc_shard_unlock(sh);
    }
}

void es_put_kind(struct side *s, int i, enum es_kind kd)
{
    const char *k = es_key(i);
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.with_hard_pin = kd == K_HARD;
    c.with_soft_pin = kd == K_SOFT;
    if (kd == K_TWO || kd == K_DISK)
        c.replica_num = 2;
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(s->m, s->client, k, strlen(k), ES_OBJ_SIZE, &c, &r),
                     MC_OK);
    if (kd == K_INFLIGHT)
        return;
    assert_int_equal(mc_master_put_end(s->m, s->client, k, strlen(k), 0, 7, true), MC_OK);
    if (kd == K_DISK)
        es_make_disk_copy(s->m, k);
}

void es_read_at(struct side *s, int i, uint64_t ms)
{
    es_set_now(s, ms);
    struct mc_get_result g;
    const char *k = es_key(i);
    (void)mc_master_get_replica_list(s->m, k, strlen(k), &g); /* in-flight ones fail: fine */
}

int es_state_of(struct side *s, int i)
{
    struct mc_key_info ki;
    const char *k = es_key(i);
    if (mc_master_query_key(s->m, k, strlen(k), &ki) != MC_OK)
        return -1;
    int mem = 0, disk = 0;
    for (uint32_t r = 0; r < ki.nreplicas; r++) {
        mem += ki.replicas[r].type == MC_REPLICA_TYPE_MEMORY;
        disk += ki.replicas[r].type == MC_REPLICA_TYPE_LOCAL_DISK;
    }
    return mem * 8 + disk;
}

void es_random_kinds(enum es_kind *kinds, int n, uint64_t *seed)
{
    for (int i = 0; i < n; i++) {
        uint64_t x = es_rnd(seed) % 100;
        kinds[i] = x < 70   ? K_PLAIN
                   : x < 75 ? K_HARD
                   : x < 80 ? K_SOFT
                   : x < 88 ? K_TWO
                   : x < 96 ? K_DISK
                            : K_INFLIGHT;
    }
}

void es_fill(struct side *s, int n, const enum es_kind *kinds, const uint32_t *when)
{
    for (int i = 0; i < n; i++)
        es_put_kind(s, i, kinds ? kinds[i] : K_PLAIN);
    for (int i = 0; i < n; i++)
        es_read_at(s, i, ES_T0_MS + when[i]);
}

int es_churn(struct side sides[2], int nkeys, enum es_kind *kinds, uint64_t now, uint32_t per,
             uint64_t *seed, int *nread)
{
    int nrm = 100 + (int)(es_rnd(seed) % 200), nput = 60 + (int)(es_rnd(seed) % 80);
    int nrd = 200 + (int)(es_rnd(seed) % 200);
    int rm[300], rd[400];
    for (int j = 0; j < nrm; j++)
        rm[j] = (int)(es_rnd(seed) % (uint64_t)nkeys);
    for (int j = 0; j < nrd; j++)
        rd[j] = (int)(es_rnd(seed) % (uint64_t)(nkeys + nput));
    for (int j = 0; j < nput; j++)
        kinds[nkeys + j] = es_rnd(seed) % 4 == 0 ? K_DISK : K_PLAIN;
    for (int sd = 0; sd < 2; sd++) {
        struct side *s = &sides[sd];
        es_set_now(s, now);
        for (int j = 0; j < nrm; j++) {
            const char *k = es_key(rm[j]);
            (void)mc_master_remove(s->m, k, strlen(k), true);
        }
        for (int j = 0; j < nput; j++)
            es_put_kind(s, nkeys + j, kinds[nkeys + j]);
        for (int j = 0; j < nrd; j++)
            es_read_at(s, rd[j], now + 1 + (uint64_t)j / per);
    }
    *nread = nrd;
    return nput;
}

void es_churn_hook(struct mc_master *m, void *arg)
{
    struct es_churn *c = arg;
    (void)m;
    for (int i = c->rm_from; c->rm_every > 0 && i < c->nkeys; i += c->rm_every) {
        const char *k = es_key(i);
        (void)mc_master_remove(c->s->m, k, strlen(k), true);
    }
    struct mc_get_result g;
    for (int i = 0; c->read_every > 0 && i < c->read_below; i += c->read_every) {
        const char *k = es_key(i);
        (void)mc_master_get_replica_list(c->s->m, k, strlen(k), &g);
    }
}
