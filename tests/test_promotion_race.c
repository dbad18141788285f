/*
 * test_promotion_race.c - promotion on hit (src/master/promotion.h) through the core API on a fake
 * clock with manual ticks (promotion_fixture.h): racing readers with threads (TSan label): one task
 * however many readers race, and readers, the holder and a remover at once. After every scenario
 * the funnel invariant is checked against the real state (check_funnel).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "promotion_fixture.h"

/* ---- racing readers ------------------------------------------------------------------------ */

struct racer {
    struct fx *f;
    pthread_barrier_t *bar;
    int rounds;
};

static void *race_main(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(r->bar);
    struct mc_get_result g;
    for (int i = 0; i < r->rounds; i++) {
        int rc = mc_master_get_replica_list(r->f->m, "hot", 3, &g);
        if (rc != MC_OK)
            abort();
        struct mc_key_ref k = {"hot", 3};
        int rcs;
        if (mc_master_batch_get_replica_list(r->f->m, &k, 1, &g, &rcs) != MC_OK || rcs != MC_OK)
            abort();
    }
    return NULL;
}

static void test_racing_readers_one_task(void **state)
{
    struct fx *f = *state;
    disk_only(f, "hot", OBJ);
    enum { NT = 4 };
    pthread_t th[NT];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    struct racer r = {.f = f, .bar = &bar, .rounds = 200};
    for (int i = 0; i < NT; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_main, &r), 0);
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.attempts, NT * 200 * 2);
    assert_int_equal(st.admitted, 1);
    struct mc_promotion_debug dbg;
    mc_master_promotion_debug_counts(f->m, &dbg);
    assert_int_equal(dbg.tasks, 1);
    assert_int_equal(dbg.pins, 1);
    check_funnel(f);
    assert_int_equal(promote_all(f), 1);
    check_funnel(f);
}

/* Readers, the holder's worker and a remover at once (TSan): every task ends exactly once and
 * the funnel matches the state afterwards. The overlap is made, not hoped for: the readers keep
 * reading until the holder has ended CHURN_OVERLAP tasks (a bound on rounds only stops a stuck
 * holder from hanging the test), whatever the machine's speed. */
#define CHURN_OVERLAP 10
#define CHURN_MAX_ROUNDS 200000

struct churn {
    struct fx *f;
    _Atomic bool stop;
    _Atomic int done;
    _Atomic int ended;        /* tasks the holder reported (success or failure) */
    _Atomic int ended_by_end; /* ended while a reader still read (seen by the last reader) */
};

static void *churn_reader(void *arg)
{
    struct churn *c = arg;
    struct mc_get_result g;
    for (int r = 0; r < CHURN_MAX_ROUNDS && atomic_load(&c->ended) < CHURN_OVERLAP; r++)
        for (int i = 0; i < 40; i++) {
            const char *k = key("c", i);
            (void)mc_master_get_replica_list(c->f->m, k, strlen(k), &g);
        }
    int seen = atomic_load(&c->ended);
    if (atomic_fetch_add(&c->done, 1) == 0)
        atomic_store(&c->ended_by_end, seen); /* the first reader to finish */
    return NULL;
}

static void *churn_holder(void *arg)
{
    struct churn *c = arg;
    struct fx *f = c->f;
    struct hb h;
    while (!atomic_load(&c->stop)) {
        memset(&h, 0, sizeof(h));
        if (mc_master_promotion_heartbeat(f->m, f->holder, 8, 0, on_hb, &h) != 1)
            abort();
        for (size_t i = 0; i < h.n; i++) {
            struct mc_replica_desc d;
            int rc = mc_master_promotion_alloc_start(f->m, f->holder, h.ids[i], h.keys[i],
                                                     strlen(h.keys[i]), h.sizes[i], NULL, 0, &d);
            if (rc == MC_OK && (h.ids[i] & 1))
                rc = mc_master_promotion_success(f->m, f->holder, h.ids[i], h.keys[i],
                                                 strlen(h.keys[i]));
            else
                rc = mc_master_promotion_failure(f->m, f->holder, h.ids[i], h.keys[i],
                                                 strlen(h.keys[i]), rc);
            (void)rc;
            atomic_fetch_add(&c->ended, 1);
        }
    }
    return NULL;
}

static void *churn_remover(void *arg)
{
    struct churn *c = arg;
    for (int i = 0; i < 40; i += 3) {
        const char *k = key("c", i);
        (void)mc_master_remove(c->f->m, k, strlen(k), true);
    }
    return NULL;
}

static void test_concurrent_churn(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 40; i++)
        disk_only(f, key("c", i), OBJ);
    struct churn c = {.f = f};
    pthread_t rd[3], ho, rm;
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&rd[i], NULL, churn_reader, &c), 0);
    assert_int_equal(pthread_create(&ho, NULL, churn_holder, &c), 0);
    assert_int_equal(pthread_create(&rm, NULL, churn_remover, &c), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(rd[i], NULL);
    pthread_join(rm, NULL);
    atomic_store(&c.stop, true);
    pthread_join(ho, NULL);
    /* the holder ended tasks while every reader was still reading */
    assert_true(atomic_load(&c.ended_by_end) >= CHURN_OVERLAP);
    /* what is left: failed by the holder */
    struct hb h;
    while (pull(f, 0, &h) > 0)
        for (size_t i = 0; i < h.n; i++)
            assert_int_equal(failure(f, f->holder, h.ids[i], h.keys[i]), MC_OK);
    struct mc_promotion_stats st = stats(f);
    assert_true(st.admitted > 0);
    assert_int_equal(st.in_flight, 0);
    check_funnel(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_racing_readers_one_task, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_churn, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
