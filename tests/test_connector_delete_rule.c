/*
 * test_connector_delete_rule.c - Upsert and RemoveByRegex under the delete rule (DESIGN.md §7),
 * in the master core with a fake clock: when the old value has a LOCAL_DISK copy, the call
 * answers only once its holder acknowledged the delete (or was fenced), while readers see the
 * new value (Upsert) or nothing (RemoveByRegex) from the call on, and the old disk record cannot
 * be re-registered meanwhile.
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
#include "master/mailbox.h"
#include "master/master.h"
#include "master/remove_regex.h"
#include "master/upsert.h"
#include "mooncake/errors.h"
#include "test_master_util.h"

#define TIMEOUT_MS 2000ull

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id a; /* a client with a DRAM segment and a disk */
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    mc_fake_clock_init(&f->fc, 1000000ull * 1000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &f->fc.clock;
    c.manual_ticks = true;
    c.epoch = 4;
    c.eviction_threads = 1;
    c.client_ttl_ms = 10000;
    c.enable_offload = true; /* an offload task at PutEnd */
    c.holder_delete_timeout_ms = TIMEOUT_MS;
    if (mc_master_new(&c, &f->m) != MC_OK)
        return -1;
    f->a = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    if (mc_master_mount_segment(f->m, f->a, &s1, NULL) != MC_OK ||
        mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18001", 1ull << 30, true) != MC_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    mc_master_free(f->m);
    free(f);
    return 0;
}

struct task {
    char key[64];
    uint64_t id, version, size;
    uint32_t crc;
    bool drop;
};

struct hb {
    size_t n;
    struct task it[16];
};

static void on_hb(void *arg, struct mc_task_list *tasks)
{
    struct hb *h = arg;
    for (struct mc_task *t = tasks->head; t && h->n < 16; t = t->next, h->n++) {
        struct task *x = &h->it[h->n];
        snprintf(x->key, sizeof(x->key), "%s", t->key);
        x->id = t->task_id;
        x->version = t->version;
        x->size = t->size;
        x->crc = t->crc32c;
        x->drop = t->kind == MC_TASK_DELETE;
    }
    mc_task_list_free(tasks);
}

static struct hb pull(struct fx *f)
{
    struct hb h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 16, 0, on_hb, &h), 1);
    return h;
}

/* Puts key and gives it its disk copy at a; returns its version. */
static uint64_t put_offloaded(struct fx *f, const char *key, uint64_t size)
{
    assert_int_equal(tm_put(f->m, f->a, key, size), MC_OK);
    struct hb h = pull(f);
    uint64_t v = 0;
    for (size_t i = 0; i < h.n; i++) {
        assert_false(h.it[i].drop);
        struct mc_offload_result it = {.task_id = h.it[i].id,
                                       .key = h.it[i].key,
                                       .key_len = strlen(h.it[i].key),
                                       .size = h.it[i].size,
                                       .version = h.it[i].version,
                                       .crc32c = h.it[i].crc,
                                       .crc_valid = true};
        int rc = -1;
        assert_int_equal(mc_master_notify_offload(f->m, f->a, &it, 1, false, &rc), MC_OK);
        assert_int_equal(rc, MC_OK);
        if (!strcmp(h.it[i].key, key))
            v = h.it[i].version;
    }
    assert_int_not_equal(v, 0);
    mc_fake_clock_advance_ms(&f->fc, 1);
    return v;
}

static int reregister(struct fx *f, const char *key, uint64_t size, uint64_t version)
{
    struct mc_offload_result it = {
        .key = key, .key_len = strlen(key), .size = size, .version = version, .crc_valid = false};
    int rc = -12345;
    int frame = mc_master_notify_offload(f->m, f->a, &it, 1, true, &rc);
    return frame != MC_OK ? frame : rc;
}

struct done {
    int calls, rc;
};

static void on_done(void *arg, int rc)
{
    struct done *d = arg;
    d->calls++;
    d->rc = rc;
}

/* The delete tasks in h, acknowledged; returns how many. */
static size_t ack_deletes(struct fx *f, const struct hb *h)
{
    size_t n = 0;
    for (size_t i = 0; i < h->n; i++)
        if (h->it[i].drop) {
            assert_int_equal(mc_master_offload_ack_deletes(f->m, f->a, &h->it[i].id, 1), 1);
            n++;
        }
    return n;
}

static void test_upsert_waits_for_the_old_disk_copy(void **state)
{
    struct fx *f = *state;
    uint64_t v_old = put_offloaded(f, "k", 4096);
    struct mc_upsert_start_result us;
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "k", 1, 8192, NULL, &us), MC_OK);
    struct done d = {0};
    uint64_t v_new = 0;
    assert_int_equal(
        mc_master_upsert_end_wait(f->m, f->a, "k", 1, us.token, 77, true, &v_new, on_done, &d),
        MC_MASTER_PENDING);
    assert_true(v_new > v_old);
    assert_int_equal(d.calls, 0);
    /* the swap is done: readers get the new value, and the old disk record cannot return */
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(g.version, v_new);
    assert_int_equal(g.size, 8192);
    assert_int_not_equal(reregister(f, "k", 4096, v_old), MC_OK);
    struct hb h = pull(f); /* the old copy's delete (and the new value's offload) */
    size_t drops = 0;
    for (size_t i = 0; i < h.n; i++)
        if (h.it[i].drop) {
            assert_string_equal(h.it[i].key, "k");
            assert_int_equal(h.it[i].version, v_old);
            drops++;
        }
    assert_int_equal(drops, 1);
    assert_int_equal(d.calls, 0);
    assert_int_equal(ack_deletes(f, &h), 1);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);
}

/* A holder that never acknowledges is fenced after the timeout, and the Upsert completes. */
static void test_upsert_completes_when_the_holder_is_fenced(void **state)
{
    struct fx *f = *state;
    put_offloaded(f, "k", 4096);
    struct mc_upsert_start_result us;
    assert_int_equal(mc_master_upsert_start(f->m, f->a, "k", 1, 100, NULL, &us), MC_OK);
    struct done d = {0};
    assert_int_equal(
        mc_master_upsert_end_wait(f->m, f->a, "k", 1, us.token, 1, true, NULL, on_done, &d),
        MC_MASTER_PENDING);
    mc_fake_clock_advance_ms(&f->fc, TIMEOUT_MS);
    mc_master_tick_offload(f->m);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);
}

static void test_remove_by_regex_waits_for_the_holder(void **state)
{
    struct fx *f = *state;
    put_offloaded(f, "a/1", 100);
    put_offloaded(f, "a/2", 100);
    put_offloaded(f, "b/1", 100);
    struct done d = {0};
    uint64_t n = 0;
    assert_int_equal(mc_master_remove_by_regex_wait(f->m, "a/.*", 4, false, &n, on_done, &d),
                     MC_MASTER_PENDING);
    assert_int_equal(n, 2);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "a/1", 3, &g), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_get_replica_list(f->m, "b/1", 3, &g), MC_OK);
    struct hb h = pull(f);
    assert_int_equal(h.n, 2);
    assert_int_equal(ack_deletes(f, &h), 2);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upsert_waits_for_the_old_disk_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upsert_completes_when_the_holder_is_fenced, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_remove_by_regex_waits_for_the_holder, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
