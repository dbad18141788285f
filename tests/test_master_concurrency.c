/*
 * test_master_concurrency.c - 8 threads doing random Put/Get/Remove/Revoke on 10k keys against a
 * model of the expected state (also run under TSan).
 *
 * Key k belongs to thread k % 8, which alone writes it, so each thread's model of its own keys
 * is exact: a Put of a present key must fail with OBJECT_ALREADY_EXISTS, a Get must return the
 * version the thread's PutStart got, a Remove of an absent key OBJECT_NOT_FOUND. Threads also
 * read each other's keys: any successful Get must be internally consistent (the CRC the writer
 * stored is a function of key and size, COMPLETE replicas only). The lease TTL is 0 so reads do
 * not block the owner's removals. At the end the table must hold exactly the keys the models
 * say, with exactly their bytes allocated.
 *
 * A second case races a grouped and an ungrouped PutStart of every key: one record per key.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "test_master_util.h"

#define NTHREADS 8
#define NKEYS 10000
#define OPS_PER_THREAD 12000

struct model {
    uint64_t version; /* 0 = absent */
    uint64_t size;
};

struct shared {
    struct mc_master *m;
    struct model models[NKEYS]; /* entry k written only by thread k % NTHREADS */
    _Atomic int failures;
};

struct targ {
    struct shared *sh;
    int t;
};

static uint32_t crc_of(int k, uint64_t size)
{
    return (uint32_t)(k * 2654435761u) ^ (uint32_t)size;
}

static uint64_t xs(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "check failed line %d: %s\n", __LINE__, #cond);                        \
            atomic_fetch_add(&sh->failures, 1);                                                    \
        }                                                                                          \
    } while (0)

static void *worker(void *p)
{
    struct targ *a = p;
    struct shared *sh = a->sh;
    struct mc_master *m = sh->m;
    struct mc_id me = tm_id((uint64_t)a->t + 1);
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(a->t + 1);
    char key[32];
    struct mc_get_result *g = malloc(sizeof(*g));
    struct mc_put_start_result *ps = malloc(sizeof(*ps));
    for (int op = 0; op < OPS_PER_THREAD; op++) {
        uint64_t r = xs(&rng);
        int dice = (int)(r % 100);
        if (dice < 30) { /* read any key */
            int k = (int)((r >> 8) % NKEYS);
            snprintf(key, sizeof(key), "key-%05d", k);
            int rc = mc_master_get_replica_list(m, key, strlen(key), g);
            if (rc == MC_OK) {
                CHECK(g->nreplicas >= 1);
                CHECK(g->replicas[0].status == MC_REPLICA_STATUS_COMPLETE);
                CHECK(g->has_crc && g->crc32c == crc_of(k, g->size));
                if (k % NTHREADS == a->t)
                    CHECK(sh->models[k].version == g->version);
            } else {
                CHECK(rc == MC_ERR_OBJECT_NOT_FOUND || rc == MC_ERR_REPLICA_IS_NOT_READY);
                if (k % NTHREADS == a->t)
                    CHECK(sh->models[k].version == 0 && rc == MC_ERR_OBJECT_NOT_FOUND);
            }
            continue;
        }
        /* own key */
        int k = (int)((r >> 8) % (NKEYS / NTHREADS)) * NTHREADS + a->t;
        snprintf(key, sizeof(key), "key-%05d", k);
        struct model *md = &sh->models[k];
        if (dice < 70) { /* put */
            uint64_t size = 1 + (r >> 24) % 8192;
            int rc = mc_master_put_start(m, me, key, strlen(key), size, NULL, ps);
            if (md->version) {
                CHECK(rc == MC_ERR_OBJECT_ALREADY_EXISTS);
                continue;
            }
            CHECK(rc == MC_OK);
            if (rc != MC_OK)
                continue;
            if ((r >> 40) % 10 == 0) {
                CHECK(mc_master_put_revoke(m, me, key, strlen(key), 0) == MC_OK);
                continue;
            }
            CHECK(mc_master_put_end(m, me, key, strlen(key), 0, crc_of(k, size), true) == MC_OK);
            md->version = ps->version;
            md->size = size;
        } else if (dice < 90) { /* remove */
            int rc = mc_master_remove(m, key, strlen(key), false);
            CHECK(rc == (md->version ? MC_OK : MC_ERR_OBJECT_NOT_FOUND));
            md->version = 0;
        } else { /* exist */
            bool ex = false;
            CHECK(mc_master_exist_key(m, key, strlen(key), &ex) == MC_OK);
            CHECK(ex == (md->version != 0));
        }
    }
    free(g);
    free(ps);
    return NULL;
}

static void test_threads_against_model(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc.clock;
    c.manual_ticks = true;
    c.default_kv_lease_ttl_ms = 0;
    struct shared *sh = calloc(1, sizeof(*sh));
    assert_int_equal(mc_master_new(&c, &sh->m), MC_OK);
    for (uint64_t i = 0; i < 4; i++) {
        struct mc_segment_desc d = tm_seg(i, 64 * MIB);
        assert_int_equal(mc_master_mount_segment(sh->m, tm_id(100 + i), &d, NULL), MC_OK);
    }
    pthread_t th[NTHREADS];
    struct targ args[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        args[t] = (struct targ){sh, t};
        assert_int_equal(pthread_create(&th[t], NULL, worker, &args[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    assert_int_equal(atomic_load(&sh->failures), 0);

    uint64_t present = 0, bytes = 0;
    char key[32];
    for (int k = 0; k < NKEYS; k++) {
        snprintf(key, sizeof(key), "key-%05d", k);
        struct mc_key_info ki;
        int rc = mc_master_query_key(sh->m, key, strlen(key), &ki);
        if (sh->models[k].version) {
            assert_int_equal(rc, MC_OK);
            assert_int_equal(ki.version, sh->models[k].version);
            assert_int_equal(ki.size, sh->models[k].size);
            assert_int_equal(ki.nreplicas, 1);
            present++;
            bytes += sh->models[k].size;
        } else {
            assert_int_equal(rc, MC_ERR_OBJECT_NOT_FOUND);
        }
    }
    struct mc_master_stats st;
    mc_master_get_stats(sh->m, &st);
    assert_int_equal(st.key_count, present);
    assert_int_equal(st.allocated_bytes, bytes);
    assert_int_equal(st.processing_count, 0);
    uint64_t removed = 0;
    assert_int_equal(mc_master_remove_all(sh->m, false, &removed), MC_OK);
    assert_int_equal(removed, present);
    mc_master_get_stats(sh->m, &st);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.key_count, 0);
    mc_master_free(sh->m);
    free(sh);
}

/* ---- one record per key: PutStart with and without a group, racing ------------------------ */

#define RACE_KEYS 20000

struct race {
    struct mc_master *m;
    _Atomic int step[2]; /* key index each thread is about to start */
    int rc[2][RACE_KEYS];
};

struct race_arg {
    struct race *r;
    int t; /* 0: no group, 1: grouped */
};

/* Both threads PutStart the same key at (nearly) the same moment, key after key: thread 1 with a
 * group id (its record goes to the group's shard), thread 0 without (the key's home shard). */
static void *race_worker(void *p)
{
    struct race_arg *a = p;
    struct race *r = a->r;
    struct mc_id me = tm_id(50 + (uint64_t)a->t);
    struct mc_put_start_result *ps = malloc(sizeof(*ps));
    char key[32], grp[32];
    uint64_t rng = 0x2545f4914f6cdd1dull + (uint64_t)a->t;
    for (int i = 0; i < RACE_KEYS; i++) {
        atomic_store(&r->step[a->t], i);
        /* wait for the other thread to reach key i too: spin (lockstep while both run), then
         * yield (a 2-core machine may run only one of them) */
        for (int spin = 0; atomic_load(&r->step[!a->t]) < i; spin++)
            if (spin > 2000)
                sched_yield();
        /* a small random head start for either thread sweeps the overlap of the two calls */
        for (volatile uint64_t j = xs(&rng) % 512; j > 0; j--)
            ;
        snprintf(key, sizeof(key), "race-%05d", i);
        struct mc_master_replicate_config cfg;
        mc_master_replicate_config_init(&cfg);
        if (a->t) {
            snprintf(grp, sizeof(grp), "grp-%d", i % 61);
            cfg.group_id = grp;
            cfg.group_id_len = strlen(grp);
        }
        r->rc[a->t][i] = mc_master_put_start(r->m, me, key, strlen(key), 64, &cfg, ps);
    }
    atomic_store(&r->step[a->t], RACE_KEYS);
    free(ps);
    return NULL;
}

/* Exactly one of the two PutStarts of each key succeeds, and the table holds one record per key.
 * Before the check and the insert were one step under both shards' locks, both could succeed
 * (the ungrouped check ran in the home shard while the grouped insert went to the group's). */
static void test_put_start_one_record_per_key(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc.clock;
    c.manual_ticks = true;
    struct race *r = calloc(1, sizeof(*r));
    assert_int_equal(mc_master_new(&c, &r->m), MC_OK);
    struct mc_segment_desc d = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(r->m, tm_id(50), &d, NULL), MC_OK);
    pthread_t th[2];
    struct race_arg args[2] = {{r, 0}, {r, 1}};
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&th[t], NULL, race_worker, &args[t]), 0);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    int both = 0, grouped_won = 0;
    for (int i = 0; i < RACE_KEYS; i++) {
        int ok = (r->rc[0][i] == MC_OK) + (r->rc[1][i] == MC_OK);
        both += ok == 2;
        grouped_won += r->rc[1][i] == MC_OK;
        if (ok == 1) {
            int loser = r->rc[0][i] == MC_OK ? r->rc[1][i] : r->rc[0][i];
            assert_int_equal(loser, MC_ERR_OBJECT_ALREADY_EXISTS);
        }
    }
    print_message("%d of %d keys started twice; the grouped PutStart won %d\n", both, RACE_KEYS,
                  grouped_won);
    assert_int_equal(both, 0);
    struct mc_master_stats st;
    mc_master_get_stats(r->m, &st);
    assert_int_equal(st.key_count, RACE_KEYS);
    assert_int_equal(st.processing_count, RACE_KEYS);
    assert_int_equal(st.allocated_bytes, 64ull * RACE_KEYS);
    mc_master_free(r->m);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_against_model),
        cmocka_unit_test(test_put_start_one_record_per_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
