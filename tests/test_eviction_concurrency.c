/*
 * test_eviction_concurrency.c - eviction cycles (3 census/eviction workers, selective and bypass
 * paths) running while 4 threads Put/Get/Remove (also run under TSan). The workers keep going
 * until at least MIN_CYCLES cycles ran beside them.
 *
 * The fake clock does not move during the run, so a Get leases its key for the whole test (and a
 * forced removal of a read key parks its space until the end): eviction must never
 * take a key a thread has read. Each thread owns its keys and tracks them as ABSENT (never Put,
 * or force-removed), PRESENT (Put, maybe evicted since) or LEASED (read: must still exist).
 * At the end: LEASED keys exist with their value's CRC and size, ABSENT keys do not, the
 * preloaded keys read before the run all survived, and the whole table is consistent — the keys
 * found account for exactly the allocated bytes and the key count, and no two MEMORY replicas
 * overlap in a segment.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/hash.h"
#include "master/eviction.h"
#include "test_master_util.h"

#define NWORKERS 4
#define NPRELOAD 20000
#define NPROTECTED 1000
#define RUN_DEADLINE_MS 90000 /* far above a normal run (~1 s) */
#define MIN_CYCLES 40         /* workers keep going until this many cycles overlapped them */
#define KEYS_PER_WORKER 4000
#define OPS_PER_WORKER 12000
#define OSIZE 1024u

enum { ABSENT = 0, PRESENT = 1, LEASED = 2 };

struct shared {
    struct mc_master *m;
    struct mc_id client;
    _Atomic int workers_left;
    _Atomic int failures;
    _Atomic uint64_t cycles;
    uint64_t evicted;
};

struct worker {
    struct shared *sh;
    int id;
    uint64_t rng;
    unsigned char state[KEYS_PER_WORKER];
};

static uint64_t xrand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void wkey(char *b, int w, int i)
{
    snprintf(b, 32, "w%d-%05d", w, i);
}

static uint32_t crc_of(const char *k)
{
    return (uint32_t)mc_hash_key(k, strlen(k));
}

#define CHECK(sh, cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            atomic_fetch_add(&(sh)->failures, 1);                                                  \
            fprintf(stderr, "check failed at line %d: %s\n", __LINE__, #cond);                     \
        }                                                                                          \
    } while (0)

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    char k[32];
    /* At least OPS_PER_WORKER operations, then on until MIN_CYCLES cycles have overlapped the
     * workers: bounded by a wall-clock deadline, not an operation count, so a loaded machine
     * (slower cycles) lengthens the run instead of failing it. */
    uint64_t deadline = mc_now_ms() + RUN_DEADLINE_MS;
    for (int op = 0;
         op < OPS_PER_WORKER || (atomic_load(&sh->cycles) < MIN_CYCLES && mc_now_ms() < deadline);
         op++) {
        int i = (int)(xrand(&w->rng) % KEYS_PER_WORKER);
        wkey(k, w->id, i);
        size_t kl = strlen(k);
        unsigned r = (unsigned)(xrand(&w->rng) % 10);
        if (r < 5) { /* Put */
            struct mc_put_start_result pr;
            int rc = mc_master_put_start(sh->m, sh->client, k, kl, OSIZE, NULL, &pr);
            if (w->state[i] == LEASED) {
                CHECK(sh, rc == MC_ERR_OBJECT_ALREADY_EXISTS);
            } else if (rc == MC_OK) {
                CHECK(sh, mc_master_put_end(sh->m, sh->client, k, kl, 0, crc_of(k), true) == MC_OK);
                w->state[i] = PRESENT;
            } else {
                /* PRESENT and not evicted yet */
                CHECK(sh, rc == MC_ERR_OBJECT_ALREADY_EXISTS && w->state[i] == PRESENT);
            }
        } else if (r < 8) { /* Get */
            struct mc_get_result g;
            int rc = mc_master_get_replica_list(sh->m, k, kl, &g);
            if (w->state[i] == LEASED)
                CHECK(sh, rc == MC_OK);
            if (w->state[i] == ABSENT)
                CHECK(sh, rc == MC_ERR_OBJECT_NOT_FOUND);
            if (rc == MC_OK) {
                CHECK(sh, g.size == OSIZE && g.has_crc && g.crc32c == crc_of(k));
                CHECK(sh, g.nreplicas == 1 && g.replicas[0].type == MC_REPLICA_TYPE_MEMORY);
                w->state[i] = LEASED;
            } else {
                CHECK(sh, rc == MC_ERR_OBJECT_NOT_FOUND);
                if (w->state[i] == PRESENT)
                    w->state[i] = ABSENT; /* it was evicted */
            }
        } else { /* forced Remove */
            int rc = mc_master_remove(sh->m, k, kl, true);
            if (w->state[i] == LEASED)
                CHECK(sh, rc == MC_OK);
            if (w->state[i] == ABSENT)
                CHECK(sh, rc == MC_ERR_OBJECT_NOT_FOUND);
            CHECK(sh, rc == MC_OK || rc == MC_ERR_OBJECT_NOT_FOUND);
            w->state[i] = ABSENT;
        }
    }
    atomic_fetch_sub(&sh->workers_left, 1);
    return NULL;
}

static void *evictor_main(void *arg)
{
    struct shared *sh = arg;
    uint64_t i = 0;
    while (atomic_load(&sh->workers_left) > 0) {
        double t = (i % 5 == 4) ? 0.25 : 0.02;
        struct mc_evict_stats st;
        if (mc_master_batch_evict(sh->m, t, t / 2, &st) != MC_OK)
            atomic_fetch_add(&sh->failures, 1);
        sh->evicted += st.evicted;
        i++;
        atomic_store(&sh->cycles, i);
    }
    return NULL;
}

struct span {
    struct mc_id seg;
    uint64_t off, len;
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    int c = memcmp(&x->seg, &y->seg, sizeof(x->seg));
    if (c)
        return c;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Adds k's replicas to the spans; returns 1 when k exists. */
static int collect(struct mc_master *m, const char *k, struct span *spans, size_t *n,
                   uint64_t *bytes)
{
    struct mc_key_info ki;
    if (mc_master_query_key(m, k, strlen(k), &ki) != MC_OK)
        return 0;
    for (uint32_t r = 0; r < ki.nreplicas; r++) {
        assert_int_equal(ki.replicas[r].type, MC_REPLICA_TYPE_MEMORY);
        spans[*n].seg = ki.replicas[r].u.mem.segment_id;
        spans[*n].off = ki.replicas[r].u.mem.offset;
        spans[*n].len = ki.size;
        (*n)++;
        *bytes += ki.size;
    }
    return 1;
}

static void test_cycles_under_load(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 5000ull * 1000000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc.clock;
    c.manual_ticks = true;
    c.epoch = 11;
    c.eviction_threads = 3;
    c.eviction_reserve_min = 64;
    c.eviction_frontier_min = 256;
    static struct shared sh;
    memset(&sh, 0, sizeof(sh));
    assert_int_equal(mc_master_new(&c, &sh.m), MC_OK);
    struct mc_evict_test_opts eo = {.parallel_min_objects = 1}; /* 3 workers on any table */
    mc_master_evict_set_test_opts(sh.m, &eo);
    sh.client = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 96 * MIB), s2 = tm_seg(2, 96 * MIB);
    assert_int_equal(mc_master_mount_segment(sh.m, sh.client, &s1, NULL), MC_OK);
    assert_int_equal(mc_master_mount_segment(sh.m, sh.client, &s2, NULL), MC_OK);
    char k[32];
    for (int i = 0; i < NPRELOAD; i++) {
        snprintf(k, sizeof(k), "pre-%06d", i);
        struct mc_put_start_result pr;
        assert_int_equal(mc_master_put_start(sh.m, sh.client, k, strlen(k), OSIZE, NULL, &pr),
                         MC_OK);
        assert_int_equal(mc_master_put_end(sh.m, sh.client, k, strlen(k), 0, crc_of(k), true),
                         MC_OK);
    }
    for (int i = 0; i < NPROTECTED; i++) { /* leased for the whole run */
        snprintf(k, sizeof(k), "pre-%06d", i * (NPRELOAD / NPROTECTED));
        bool ex;
        assert_int_equal(mc_master_exist_key(sh.m, k, strlen(k), &ex), MC_OK);
        assert_true(ex);
    }

    static struct worker ws[NWORKERS];
    pthread_t th[NWORKERS], ev;
    atomic_store(&sh.workers_left, NWORKERS);
    for (int i = 0; i < NWORKERS; i++) {
        memset(&ws[i], 0, sizeof(ws[i]));
        ws[i].sh = &sh;
        ws[i].id = i;
        ws[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &ws[i]), 0);
    }
    assert_int_equal(pthread_create(&ev, NULL, evictor_main, &sh), 0);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    pthread_join(ev, NULL);
    assert_int_equal(atomic_load(&sh.failures), 0);
    assert_true(atomic_load(&sh.cycles) >= MIN_CYCLES);
    assert_true(sh.evicted > 0);

    /* Every key, once more, single-threaded. */
    size_t cap = NPRELOAD + NWORKERS * KEYS_PER_WORKER, n = 0;
    struct span *spans = calloc(cap, sizeof(*spans));
    assert_non_null(spans);
    uint64_t bytes = 0, keys = 0;
    for (int i = 0; i < NPRELOAD; i++) {
        snprintf(k, sizeof(k), "pre-%06d", i);
        int found = collect(sh.m, k, spans, &n, &bytes);
        keys += (uint64_t)found;
        if (i % (NPRELOAD / NPROTECTED) == 0 && i / (NPRELOAD / NPROTECTED) < NPROTECTED)
            assert_int_equal(found, 1);
    }
    for (int w = 0; w < NWORKERS; w++) {
        for (int i = 0; i < KEYS_PER_WORKER; i++) {
            wkey(k, w, i);
            int found = collect(sh.m, k, spans, &n, &bytes);
            keys += (uint64_t)found;
            if (ws[w].state[i] == LEASED) {
                assert_int_equal(found, 1);
                struct mc_key_info ki;
                assert_int_equal(mc_master_query_key(sh.m, k, strlen(k), &ki), MC_OK);
                assert_int_equal(ki.crc32c, crc_of(k));
            } else if (ws[w].state[i] == ABSENT) {
                assert_int_equal(found, 0);
            }
        }
    }
    /* Keys force-removed while leased keep their space until the lease ends: let every lease
     * end and the reaper release them before the accounting. */
    mc_fake_clock_advance_ms(&fc, c.default_kv_lease_ttl_ms);
    mc_master_tick_reaper(sh.m);
    struct mc_master_stats ms;
    mc_master_get_stats(sh.m, &ms);
    assert_int_equal(ms.key_count, keys);
    assert_int_equal(ms.allocated_bytes, bytes);
    assert_int_equal(ms.evicted_key_count, sh.evicted);
    qsort(spans, n, sizeof(*spans), cmp_span);
    for (size_t i = 1; i < n; i++)
        if (mc_id_eq(spans[i].seg, spans[i - 1].seg))
            assert_true(spans[i - 1].off + spans[i - 1].len <= spans[i].off);
    free(spans);
    mc_master_free(sh.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cycles_under_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
