/*
 * test_object_events.c - the object events of the master core (src/master/object_events.h):
 * the subscriber table mc_master_new registers for each configuration (order: promotion, then
 * offload), and what a recording subscriber sees from the real operations on a fake clock:
 * which events, in which order, with which lock held, and what its answers do (a refused
 * Remove, an eviction taken over).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/eviction.h"
#include "master/lock_order.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/objects.h"
#include "master/shard.h"
#include "mooncake/errors.h"
#include "master_fixture.h"

/* ---- the table mc_master_new registers ------------------------------------------------------ */

static struct mc_master *new_master(struct mc_fake_clock *fc, bool offload, bool on_evict,
                                    bool promote)
{
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc->clock;
    c.manual_ticks = true;
    c.epoch = 3;
    c.enable_offload = offload;
    c.offload_on_evict = on_evict;
    c.promotion_on_hit = promote;
    c.holder_stream = false; /* the tables below without the DRAM holder stream */
    struct mc_master *m = NULL;
    assert_int_equal(mc_master_new(&c, &m), MC_OK);
    return m;
}

static const char *sub_name(const struct mc_master *m, enum mc_obj_event ev, unsigned i)
{
    return i < m->events.n[ev] ? m->events.sub[ev][i]->name : "(none)";
}

static void test_table_per_config(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);

    /* No tier: promotion follows only its (absent) tasks, nobody reads or takes evictions. */
    struct mc_master *m = new_master(&fc, false, false, false);
    assert_int_equal(m->events.n[MC_OBJ_EV_READ], 0);
    assert_int_equal(m->events.n[MC_OBJ_EV_PUT_END], 0);
    assert_int_equal(m->events.n[MC_OBJ_EV_EVICT_CHOSEN], 0);
    assert_int_equal(m->events.n[MC_OBJ_EV_CLIENT_EXPIRED], 0);
    assert_int_equal(m->events.n[MC_OBJ_EV_ERASED], 1);
    assert_string_equal(sub_name(m, MC_OBJ_EV_ERASED, 0), "promotion");
    mc_master_free(m);

    /* The DRAM holder stream (on by default) subscribes last: commits at PutEnd, drops at
     * erasure, its holders' mailboxes at expiry, its wakes once unlocked. */
    struct mc_master_config hc;
    mc_master_config_init(&hc);
    hc.clock = &fc.clock;
    hc.manual_ticks = true;
    assert_true(hc.holder_stream);
    assert_int_equal(mc_master_new(&hc, &m), MC_OK);
    assert_int_equal(m->events.n[MC_OBJ_EV_PUT_END], 1);
    assert_string_equal(sub_name(m, MC_OBJ_EV_PUT_END, 0), "holder_stream");
    assert_int_equal(m->events.n[MC_OBJ_EV_ERASED], 2);
    assert_string_equal(sub_name(m, MC_OBJ_EV_ERASED, 1), "holder_stream");
    assert_string_equal(sub_name(m, MC_OBJ_EV_CLIENT_EXPIRED, 0), "holder_stream");
    mc_master_free(m);

    /* Mode A with promotion on hit: promotion first, then offload, wherever both listen. */
    m = new_master(&fc, true, false, true);
    assert_int_equal(m->events.n[MC_OBJ_EV_ERASED], 2);
    assert_string_equal(sub_name(m, MC_OBJ_EV_ERASED, 0), "promotion");
    assert_string_equal(sub_name(m, MC_OBJ_EV_ERASED, 1), "offload");
    assert_int_equal(m->events.n[MC_OBJ_EV_READ], 1);
    assert_string_equal(sub_name(m, MC_OBJ_EV_READ, 0), "promotion");
    assert_int_equal(m->events.n[MC_OBJ_EV_PUT_END], 1);
    assert_string_equal(sub_name(m, MC_OBJ_EV_PUT_END, 0), "offload");
    assert_int_equal(m->events.n[MC_OBJ_EV_EVICT_CHOSEN], 1); /* promotion's estimate only */
    assert_string_equal(sub_name(m, MC_OBJ_EV_EVICT_CHOSEN, 0), "promotion");
    assert_string_equal(sub_name(m, MC_OBJ_EV_REMOVE_CLAIM, 0), "promotion");
    assert_string_equal(sub_name(m, MC_OBJ_EV_BEFORE_REMOVE, 0), "offload");
    assert_string_equal(sub_name(m, MC_OBJ_EV_CLIENT_EXPIRED, 0), "offload");
    assert_string_equal(sub_name(m, MC_OBJ_EV_HOLDER_REMOUNTED, 0), "promotion");
    assert_string_equal(sub_name(m, MC_OBJ_EV_UNLOCKED, 0), "offload");
    mc_master_free(m);

    /* Offload on evict: nothing at PutEnd; eviction is estimated, then taken over. */
    m = new_master(&fc, true, true, true);
    assert_int_equal(m->events.n[MC_OBJ_EV_PUT_END], 0);
    assert_int_equal(m->events.n[MC_OBJ_EV_EVICT_CHOSEN], 2);
    assert_string_equal(sub_name(m, MC_OBJ_EV_EVICT_CHOSEN, 0), "promotion");
    assert_string_equal(sub_name(m, MC_OBJ_EV_EVICT_CHOSEN, 1), "offload");
    mc_master_free(m);

    /* Promotion on hit without the disk tier is turned off: no read subscriber. */
    m = new_master(&fc, false, false, true);
    assert_int_equal(m->events.n[MC_OBJ_EV_READ], 0);
    mc_master_free(m);
}

/* ---- a recording subscriber ------------------------------------------------------------------ */

#define LOG_MAX 64
struct rec {
    enum mc_obj_event ev[LOG_MAX];
    unsigned found[LOG_MAX];
    size_t batch_keys[LOG_MAX];
    unsigned n;
    bool lock_ok; /* every locked event came with its shard write-locked, the others unlocked */
    int refuse_remove;
    bool take_evictions;
    uint64_t cycle_evicted;
    struct mc_id expired;
    bool storage_lost;
};
static struct rec R;

static void note(enum mc_obj_event ev, struct mc_shard *s)
{
    if (R.n < LOG_MAX)
        R.ev[R.n++] = ev;
#ifdef MC_LOCK_ORDER_CHECK
    if (s ? !mc_lo_holds(MC_LO_SHARD, s->index, true) : mc_lo_depth() != 0)
        R.lock_ok = false;
#else
    (void)s;
#endif
}

static void r_put_end(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    (void)m;
    (void)o;
    note(MC_OBJ_EV_PUT_END, s);
}
static void r_read(struct mc_master *m, const struct mc_obj_read_ev *ev)
{
    (void)m;
    if (R.n < LOG_MAX) {
        R.found[R.n] = ev->found;
        R.batch_keys[R.n] = ev->batch_keys;
    }
    note(MC_OBJ_EV_READ, NULL);
}
static int r_remove_claim(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                          const struct mc_obj_remove_ev *ev)
{
    (void)m;
    (void)o;
    (void)ev;
    note(MC_OBJ_EV_REMOVE_CLAIM, s);
    return R.refuse_remove;
}
static int r_before_remove(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                           const struct mc_obj_remove_ev *ev)
{
    (void)m;
    (void)o;
    (void)ev;
    note(MC_OBJ_EV_BEFORE_REMOVE, s);
    return MC_OK;
}
static void r_erased(struct mc_master *m, struct mc_shard *s, struct mc_object *o)
{
    (void)m;
    (void)o;
    note(MC_OBJ_EV_ERASED, s);
}
static void r_evict_chosen(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                           struct mc_obj_evict_ev *ev)
{
    (void)m;
    (void)o;
    note(MC_OBJ_EV_EVICT_CHOSEN, s);
    ev->victim_freq = 7;
    if (R.take_evictions) { /* keeps the object: nothing freed */
        ev->taken = true;
        ev->freed = 0;
    }
}
static void r_cycle_begin(struct mc_master *m)
{
    (void)m;
    if (R.n < LOG_MAX)
        R.ev[R.n++] = MC_OBJ_EV_EVICT_CYCLE_BEGIN;
}
static void r_cycle_end(struct mc_master *m, const struct mc_obj_cycle_ev *ev)
{
    (void)m;
    if (R.n < LOG_MAX)
        R.ev[R.n++] = MC_OBJ_EV_EVICT_CYCLE_END;
    R.cycle_evicted = ev->evicted;
    if (ev->victim_freq_sum != 7 * ev->evicted) /* the sum of what EVICT_CHOSEN estimated */
        R.lock_ok = false;
}
static void r_replica_dropping(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                               const struct mc_obj_drop_ev *ev)
{
    (void)m;
    (void)o;
    R.storage_lost = ev->storage_lost;
    note(MC_OBJ_EV_REPLICA_DROPPING, s);
}
static void r_client_expired(struct mc_master *m, struct mc_id client)
{
    (void)m;
    R.expired = client;
    note(MC_OBJ_EV_CLIENT_EXPIRED, NULL);
}
static void r_unlocked(struct mc_master *m)
{
    (void)m;
    note(MC_OBJ_EV_UNLOCKED, NULL);
}

static const struct mc_obj_subscriber recorder = {
    .name = "recorder",
    .put_end = r_put_end,
    .read = r_read,
    .remove_claim = r_remove_claim,
    .before_remove = r_before_remove,
    .erased = r_erased,
    .evict_chosen = r_evict_chosen,
    .evict_cycle_begin = r_cycle_begin,
    .evict_cycle_end = r_cycle_end,
    .replica_dropping = r_replica_dropping,
    .client_expired = r_client_expired,
    .unlocked = r_unlocked,
};

static int setup(void **state)
{
    struct fx *f = mfx_new(7, 64 * MIB, 0);
    if (!f)
        return -1;
    *state = f;
    /* a test registers after mc_master_new, single-threaded, as mc_master_new itself does */
    if (mc_obj_events_register(f->m, &recorder) != 0)
        return -1;
    memset(&R, 0, sizeof(R));
    R.lock_ok = true;
    return 0;
}

static bool logged(enum mc_obj_event ev)
{
    for (unsigned i = 0; i < R.n; i++)
        if (R.ev[i] == ev)
            return true;
    return false;
}

static void test_put_read_remove(void **state)
{
    struct fx *f = *state;
    assert_int_equal(tm_put(f->m, f->a, "k1", 100), MC_OK);
    /* PutEnd: announced under the write lock, then UNLOCKED once it is dropped */
    assert_int_equal(R.n, 2);
    assert_int_equal(R.ev[0], MC_OBJ_EV_PUT_END);
    assert_int_equal(R.ev[1], MC_OBJ_EV_UNLOCKED);

    R.n = 0;
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k1", 2, &g), MC_OK);
    assert_int_equal(R.n, 1);
    assert_int_equal(R.ev[0], MC_OBJ_EV_READ);
    assert_int_equal(R.found[0], MC_READ_FOUND_MEMORY);
    assert_int_equal(R.batch_keys[0], 1);
    /* a miss is no read */
    assert_int_equal(mc_master_get_replica_list(f->m, "nope", 4, &g), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(R.n, 1);

    assert_int_equal(tm_put(f->m, f->a, "k2", 100), MC_OK);
    R.n = 0;
    struct mc_key_ref keys[3] = {{"k1", 2}, {"k2", 2}, {"absent", 6}};
    struct mc_get_result out[3];
    int rcs[3];
    assert_int_equal(mc_master_batch_get_replica_list(f->m, keys, 3, out, rcs), MC_OK);
    assert_int_equal(R.n, 2); /* the two keys found */
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(R.ev[i], MC_OBJ_EV_READ);
        assert_int_equal(R.batch_keys[i], 3);
        assert_int_equal(R.found[i], MC_READ_FOUND_MEMORY);
    }

    /* Remove: the claims, then (the core's rules passed) the delete rule, then the erasure */
    mc_fake_clock_advance_ms(&f->fc, 20000); /* past the read lease */
    R.n = 0;
    assert_int_equal(mc_master_remove(f->m, "k1", 2, false), MC_OK);
    assert_int_equal(R.ev[0], MC_OBJ_EV_REMOVE_CLAIM);
    assert_int_equal(R.ev[1], MC_OBJ_EV_BEFORE_REMOVE);
    assert_int_equal(R.ev[2], MC_OBJ_EV_ERASED);
    assert_int_equal(R.ev[3], MC_OBJ_EV_UNLOCKED);

    /* A claim's refusal fails the Remove with its code; the object stays and is not erased */
    R.n = 0;
    R.refuse_remove = MC_ERR_OBJECT_HAS_REPLICATION_TASK;
    assert_int_equal(mc_master_remove(f->m, "k2", 2, false), MC_ERR_OBJECT_HAS_REPLICATION_TASK);
    assert_false(logged(MC_OBJ_EV_BEFORE_REMOVE));
    assert_false(logged(MC_OBJ_EV_ERASED));
    assert_int_equal(mc_master_get_replica_list(f->m, "k2", 2, &g), MC_OK);
    assert_true(R.lock_ok);
}

static void test_eviction_events(void **state)
{
    struct fx *f = *state;
    char k[16];
    for (int i = 0; i < 8; i++) {
        snprintf(k, sizeof(k), "e%d", i);
        assert_int_equal(tm_put(f->m, f->a, k, 1 * MIB), MC_OK);
    }
    mc_fake_clock_advance_ms(&f->fc, 20000); /* leases over */

    /* Taken over by the subscriber (as offload on evict keeps a pinned copy): nothing goes */
    R.n = 0;
    R.take_evictions = true;
    struct mc_evict_stats st;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &st), MC_OK);
    assert_int_equal(R.ev[0], MC_OBJ_EV_EVICT_CYCLE_BEGIN);
    assert_true(logged(MC_OBJ_EV_EVICT_CHOSEN));
    assert_false(logged(MC_OBJ_EV_ERASED));
    assert_int_equal(st.evicted, 0);
    assert_int_equal(R.cycle_evicted, 0);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.key_count, 8);

    /* Not taken: the object layer evicts; the cycle's end sees the victims and their estimates */
    R.n = 0;
    R.take_evictions = false;
    assert_int_equal(mc_master_batch_evict(f->m, 0.5, 0.5, &st), MC_OK);
    assert_true(st.evicted > 0);
    assert_int_equal(R.cycle_evicted, st.evicted);
    assert_true(logged(MC_OBJ_EV_ERASED));
    assert_int_equal(R.ev[R.n - 1], MC_OBJ_EV_UNLOCKED);
    assert_int_equal(R.ev[R.n - 2], MC_OBJ_EV_EVICT_CYCLE_END);
    assert_true(R.lock_ok);
}

static void test_client_expiry_events(void **state)
{
    struct fx *f = *state;
    assert_int_equal(tm_put(f->m, f->a, "gone", 100), MC_OK);
    R.n = 0;
    mc_fake_clock_advance_ms(&f->fc, 60000); /* past client_ttl: the client expires */
    assert_int_equal(mc_master_tick_monitor(f->m), 1);
    assert_true(mc_id_eq(R.expired, f->a));
    /* the sweep drops the replica on the dead segment: announced first, then the erasure */
    unsigned i = 0;
    while (i < R.n && R.ev[i] != MC_OBJ_EV_REPLICA_DROPPING)
        i++;
    assert_true(i < R.n);
    assert_true(R.storage_lost);
    assert_true(i + 1 < R.n && R.ev[i + 1] == MC_OBJ_EV_ERASED);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "gone", 4, &g), MC_ERR_OBJECT_NOT_FOUND);
    assert_true(R.lock_ok);
}

static void test_table_full(void **state)
{
    struct fx *f = *state;
    /* promotion, the holder stream and the recorder hold three of the four places of ERASED */
    assert_int_equal(mc_obj_events_register(f->m, &recorder), 0);
    uint8_t before = f->m->events.n[MC_OBJ_EV_PUT_END];
    assert_int_equal(mc_obj_events_register(f->m, &recorder), -1);
    assert_int_equal(f->m->events.n[MC_OBJ_EV_PUT_END], before); /* all or nothing */
    memset(&f->m->events, 0, sizeof(f->m->events)); /* the recorder's copies would log thrice */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_per_config),
        cmocka_unit_test_setup_teardown(test_put_read_remove, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_eviction_events, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_client_expiry_events, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_table_full, setup, mfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
