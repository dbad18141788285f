/*
 * test_master_scale.c - what the master keeps so that its cost does not grow with the object
 * count, driven through master.h with a fake clock and manual ticks, no sleeps:
 *   - master_disk_only_key_count is a census (one shard per eviction tick), not a walk of every
 *     object at scrape time: a scrape between ticks reads the last census, and one round of
 *     ticks later the figure is exact again through Put, offload, eviction and Remove;
 *   - master_offload_reregistered_total counts each re-registered copy once: a second listing
 *     of the same records by one holder confirms them and leaves it equal to the key count;
 *   - a PutStart refused for space wakes the eviction loop at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/metrics.h"
#include "master/eviction.h"
#include "master/lock_order.h"
#include "master/master.h"
#include "mooncake/errors.h"
#include "offload_fixture.h"
#include "test_master_util.h"

#define NSHARDS 1024 /* MC_NSHARDS: one census round */

struct fx {
    struct mc_fake_clock fc, wall;
    struct mc_master *m;
    struct mc_id a; /* a client with a DRAM segment and a LOCAL_DISK mount */
};

static struct mc_master *master_new(struct fx *f, uint16_t epoch)
{
    struct mc_master_config c = of_config(&f->fc, &f->wall, epoch, 10000, 600000);
    return of_master(&c);
}

static void mount(struct fx *f)
{
    of_mount_holder(f->m, f->a, 64 * MIB, true);
}

static int fx_setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, OF_T0_MS * 1000000ull);
    mc_fake_clock_init(&f->wall, OF_WALL0_NS);
    f->a = tm_id(1);
    f->m = master_new(f, 1);
    mount(f);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    of_free(f->m);
    free(f);
    return 0;
}

static uint64_t put(struct fx *f, const char *key, uint64_t size)
{
    return of_put(f->m, f->a, key, size);
}

struct hb {
    size_t n;
    struct {
        char key[32];
        uint64_t task_id, version, size;
        uint32_t crc;
        int kind;
    } it[64];
};

static void on_hb(void *arg, struct mc_task_list *tasks)
{
    struct hb *h = arg;
    h->n = 0;
    for (struct mc_task *t = tasks->head; t && h->n < 64; t = t->next, h->n++) {
        snprintf(h->it[h->n].key, sizeof(h->it[h->n].key), "%s", t->key);
        h->it[h->n].task_id = t->task_id;
        h->it[h->n].version = t->version;
        h->it[h->n].size = t->size;
        h->it[h->n].crc = t->crc32c;
        h->it[h->n].kind = t->kind;
    }
    mc_task_list_free(tasks);
}

/* Pulls a's tasks and completes its offload tasks of the keys listed in only (NULL: all). */
static void offload(struct fx *f, const char *const *only, size_t nonly)
{
    struct hb h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 64, 0, on_hb, &h), 1);
    for (size_t i = 0; i < h.n; i++) {
        if (h.it[i].kind != MC_TASK_OFFLOAD)
            continue;
        bool want = !only;
        for (size_t k = 0; k < nonly && !want; k++)
            want = strcmp(only[k], h.it[i].key) == 0;
        struct mc_offload_result it = {.task_id = h.it[i].task_id,
                                       .key = h.it[i].key,
                                       .key_len = strlen(h.it[i].key),
                                       .status = want ? 0 : MC_ERR_INTERNAL_ERROR,
                                       .size = h.it[i].size,
                                       .version = h.it[i].version,
                                       .crc32c = h.it[i].crc,
                                       .crc_valid = true};
        int rc = -1;
        assert_int_equal(mc_master_notify_offload(f->m, f->a, &it, 1, false, &rc), MC_OK);
        assert_int_equal(rc, MC_OK);
    }
}

/* The figure a scrape of /metrics shows (rendered as Prometheus text). */
static uint64_t scraped(struct fx *f, const char *name)
{
    struct mc_textbuf tb;
    mc_textbuf_init(&tb);
    assert_int_equal(mc_metrics_render(mc_master_metrics(f->m), &tb), 0);
    size_t len = 0;
    char *txt = mc_textbuf_steal(&tb, &len);
    assert_non_null(txt);
    char pat[128];
    snprintf(pat, sizeof(pat), "\n%s ", name);
    const char *p = strstr(txt, pat);
    assert_non_null(p);
    uint64_t v = strtoull(p + strlen(pat), NULL, 10);
    free(txt);
    mc_textbuf_destroy(&tb);
    return v;
}

/* One census round: every shard recounted once. */
static void census_round(struct fx *f)
{
    for (int i = 0; i < NSHARDS; i++)
        mc_master_tick_eviction(f->m);
}

static uint64_t disk_only(struct fx *f)
{
    return scraped(f, "master_disk_only_key_count");
}

static void test_disk_only_count_is_a_census_exact_after_a_round(void **state)
{
    struct fx *f = *state;
    char key[8][8];
    for (int i = 0; i < 8; i++) {
        snprintf(key[i], sizeof(key[i]), "k%d", i);
        put(f, key[i], 4096);
    }
    const char *disk[] = {key[0], key[1], key[2], key[3], key[4]};
    offload(f, disk, 5); /* k0..k4 gain a disk copy, k5..k7 stay DRAM only */
    census_round(f);
    assert_int_equal(disk_only(f), 0); /* every disk copy has a DRAM copy beside it */

    /* eviction drops the DRAM copies: k0..k4 disk-only, k5..k7 gone */
    mc_fake_clock_advance_ms(&f->fc, 1);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    assert_int_equal(es.evicted, 8);
    /* a scrape before the census has looked reads the last census, not the objects */
    assert_int_equal(disk_only(f), 0);
    census_round(f);
    assert_int_equal(disk_only(f), 5);
    struct mc_offload_stats st;
    mc_master_offload_stats(f->m, &st);
    assert_int_equal(st.disk_only_keys, 5);

    /* a Remove and a disk-copy eviction by the holder: 3 left */
    assert_int_equal(mc_master_remove(f->m, key[0], 2, false), MC_OK);
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->a, key[1], 2, 0), MC_OK);
    census_round(f);
    assert_int_equal(disk_only(f), 3);

    /* a new Put beside them: DRAM only, the figure unchanged */
    put(f, "n0", 4096);
    census_round(f);
    assert_int_equal(disk_only(f), 3);

    /* every disk copy gone: 0 at once (nothing to count) */
    assert_int_equal(mc_master_remove_all(f->m, true, NULL), MC_OK);
    assert_int_equal(disk_only(f), 0);
}

/* The master restarts: n records re-registered by a; a second listing of the same records
 * (the holder's next round) confirms them without counting them again. */
static void test_reregistered_counts_each_copy_once(void **state)
{
    struct fx *f = *state;
    enum { N = 20 };
    uint64_t ver[N];
    char key[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(key[i], sizeof(key[i]), "r%d", i);
        ver[i] = put(f, key[i], 4096);
    }
    offload(f, NULL, 0);
    mc_master_free(f->m);
    mc_fake_clock_advance_ms(&f->wall, 5000);
    f->m = master_new(f, 2);
    mount(f);
    struct mc_offload_result it[N];
    int rcs[N];
    uint64_t mv[N];
    for (int i = 0; i < N; i++)
        it[i] = (struct mc_offload_result){.key = key[i],
                                           .key_len = strlen(key[i]),
                                           .size = 4096,
                                           .version = ver[i],
                                           .crc32c = 4096 ^ 0x5a,
                                           .crc_valid = true};
    for (int round = 0; round < 2; round++) {
        assert_int_equal(mc_master_reregister_disk(f->m, f->a, it, N, true, rcs, mv), MC_OK);
        for (int i = 0; i < N; i++) {
            assert_int_equal(rcs[i], MC_OK);
            assert_int_equal(mv[i], ver[i]);
        }
    }
    struct mc_offload_stats st;
    mc_master_offload_stats(f->m, &st);
    assert_int_equal(st.reregistered, N);
    assert_int_equal(st.reregister_confirmed, N);
    assert_int_equal(st.disk_replicas, N);
    assert_int_equal(scraped(f, "master_key_count"), N);
    assert_int_equal(scraped(f, "master_offload_reregistered_total"), N);
}

static int put_start(struct fx *f, const char *key, uint64_t size)
{
    struct mc_master_replicate_config cfg;
    mc_master_replicate_config_init(&cfg);
    struct mc_put_start_result r;
    return mc_master_put_start(f->m, f->a, key, strlen(key), size, &cfg, &r);
}

/* A PutStart refused for space wakes the eviction loop's wait at once (not at its next tick);
 * one wake per request: refusals while the request is armed do not wake it again, a refusal
 * after the cycle took the request does. */
static void test_refused_put_start_wakes_eviction(void **state)
{
    struct fx *f = *state;
    char key[16];
    for (int i = 0; i < 16; i++) { /* the 64 MiB segment full */
        snprintf(key, sizeof(key), "big%d", i);
        put(f, key, 4 * MIB);
    }
    assert_int_equal(mc_master_eviction_wait(f->m, 0), 0); /* nothing asked */
    assert_int_equal(put_start(f, "more", 4 * MIB), MC_ERR_NO_AVAILABLE_HANDLE);
    /* a loop waiting up to a minute is answered at once */
    assert_int_equal(mc_master_eviction_wait(f->m, 60000), 1);
    assert_int_equal(put_start(f, "more", 4 * MIB), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_master_eviction_wait(f->m, 0), 0); /* still armed: no second wake */
    mc_master_tick_eviction(f->m);                         /* the cycle takes the request */
    assert_int_equal(put_start(f, "more", 4 * MIB), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_master_eviction_wait(f->m, 60000), 1);
    /* a value larger than any segment could never fit: no wake */
    mc_master_tick_eviction(f->m);
    assert_int_equal(put_start(f, "huge", 128 * MIB), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_master_eviction_wait(f->m, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_disk_only_count_is_a_census_exact_after_a_round,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reregistered_counts_each_copy_once, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_refused_put_start_wakes_eviction, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
