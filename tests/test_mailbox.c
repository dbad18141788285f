/*
 * test_mailbox.c - the holders' task mailboxes (src/master/mailbox.h), fake clock, no sleeps.
 *
 * Covers the mailbox half of the LOCAL_DISK offload scenarios: a long-poll is answered when a
 * task arrives and, with nothing, at its deadline (never before); max_items bounds an answer;
 * the per-holder queue limit counts queued and in-flight offloads; a Remove before the holder
 * pulls leaves nothing behind (cancel by key); a completion after cancel/expiry finds nothing;
 * tasks expire at their deadline; closing a holder's mailbox (holder expiry) hands back its
 * tasks and answers its poll; delete and promotion tasks share the mailbox without mixing
 * with offload pulls; a bare push whose id comes from another table draws it only for a mailbox
 * it finds. A threaded case (TSan label) pushes while another thread parks polls.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "master/lock_order.h"
#include "master/mailbox.h"
#include "mooncake/errors.h"

struct poll_rec {
    int calls;
    size_t n;
    char keys[8][32];
    uint64_t ids[8];
};

static void on_reply(void *arg, struct mc_task_list *tasks)
{
    struct poll_rec *r = arg;
    r->calls++;
    r->n = tasks->n;
    size_t i = 0;
    for (struct mc_task *t = tasks->head; t && i < 8; t = t->next, i++) {
        snprintf(r->keys[i], sizeof(r->keys[i]), "%s", t->key);
        r->ids[i] = t->task_id;
    }
    mc_task_list_free(tasks);
}

struct fx {
    struct mc_fake_clock clk;
    struct mc_mailboxes *t;
    struct mc_id a, b;
};

static int setup_limit(void **state, uint32_t limit)
{
    struct fx *f = calloc(1, sizeof(*f));
    mc_fake_clock_init(&f->clk, 1000ull * 1000000ull);
    f->t = mc_mailboxes_new(&f->clk.clock, limit);
    f->a = (struct mc_id){.hi = 1, .lo = 1};
    f->b = (struct mc_id){.hi = 2, .lo = 2};
    assert_int_equal(mc_mailbox_open(f->t, f->a), MC_OK);
    assert_int_equal(mc_mailbox_open(f->t, f->b), MC_OK);
    *state = f;
    return 0;
}
static int setup(void **state)
{
    return setup_limit(state, 0);
}
static int setup_limit3(void **state)
{
    return setup_limit(state, 3);
}
static int teardown(void **state)
{
    struct fx *f = *state;
    mc_mailboxes_free(f->t);
    free(f);
    assert_int_equal(mc_lo_depth(), 0);
    return 0;
}

static int push(struct fx *f, struct mc_id h, enum mc_task_kind k, const char *key,
                uint64_t deadline_ms, uint64_t *id)
{
    return mc_mailbox_push(f->t, h, k, key, strlen(key), 7, 100, 0xabc, true, deadline_ms, id);
}

static uint64_t now_ms(struct fx *f)
{
    return mc_clock_now_ms(&f->clk.clock);
}

/* Nothing queued: the poll parks; a push answers it at once with the task. */
static void test_longpoll_answered_on_arrival(void **state)
{
    struct fx *f = *state;
    struct poll_rec r = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 5000, on_reply, &r), 0);
    assert_int_equal(r.calls, 0);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.parked, 1);
    uint64_t id = 0;
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "k1", now_ms(f) + 60000, &id), MC_OK);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.keys[0], "k1");
    assert_int_equal(r.ids[0], id);
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.parked, 0);
    assert_int_equal(st.in_mailboxes, 1); /* in flight until reported */
    /* a push to another holder does not answer this holder's poll */
    struct poll_rec r2 = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 5000, on_reply, &r2), 0);
    assert_int_equal(push(f, f->b, MC_TASK_OFFLOAD, "kb", 0, NULL), MC_OK);
    assert_int_equal(r2.calls, 0);
    mc_mailboxes_tick(f->t, &(struct mc_task_list){0});
    assert_int_equal(r2.calls, 0);
    /* the parked poll must not outlive this frame: closing the mailbox answers it empty */
    struct mc_task_list c = {0};
    assert_int_equal(mc_mailbox_close(f->t, f->a, &c), MC_OK);
    assert_int_equal(c.n, 1); /* k1, in flight */
    mc_task_list_free(&c);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r2.n, 0);
}

/* ---- closed connections and re-mounts ------------------------------------------------------ */

/* A poll whose connection can close: alive_calls counts the predicate's questions; after
 * die_after of them it answers "closed" (die_after 0: closed from the start). */
struct conn_poll {
    struct poll_rec r; /* first: on_reply takes the struct as a poll_rec */
    int alive_calls;
    int die_after;
    bool closed;
};

static bool conn_alive(void *arg)
{
    struct conn_poll *p = arg;
    p->alive_calls++;
    if (p->die_after && p->alive_calls > p->die_after)
        p->closed = true;
    return !p->closed;
}

/* The holder was killed while its poll was parked: a push never hands the task to the dead
 * poll (it stays queued, the poll is dropped), and the restarted holder's poll gets it. */
static void test_push_skips_closed_poll(void **state)
{
    struct fx *f = *state;
    mc_mailboxes_set_alive(f->t, conn_alive);
    struct conn_poll dead = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_PROMOTION, 0, 30000, on_reply, &dead), 0);
    dead.closed = true; /* the connection closes while the poll is parked */
    uint64_t id = 0;
    assert_int_equal(push(f, f->a, MC_TASK_PROMOTION, "p1", 0, &id), MC_OK);
    assert_int_equal(dead.r.calls, 1); /* dropped: answered with nothing */
    assert_int_equal(dead.r.n, 0);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.parked, 0);
    assert_int_equal(st.dead_polls, 1);
    assert_int_equal(mc_mailbox_count_kind(f->t, MC_TASK_PROMOTION), 1);
    struct conn_poll live = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_PROMOTION, 0, 30000, on_reply, &live),
                     1); /* queued: answered at once */
    assert_int_equal(live.r.n, 1);
    assert_int_equal(live.r.ids[0], id);
    /* the same through a quiet push and its wake */
    struct conn_poll dead2 = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 30000, on_reply, &dead2), 0);
    dead2.closed = true;
    assert_int_equal(mc_mailbox_push_quiet(f->t, f->a, MC_TASK_OFFLOAD, "o1", 2, 7, 100, 0, false,
                                           0, NULL, NULL),
                     MC_OK);
    mc_mailboxes_wake(f->t);
    assert_int_equal(dead2.r.calls, 1);
    assert_int_equal(dead2.r.n, 0);
    struct mc_task_list got = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), 0, &got),
                     MC_OK);
    assert_int_equal(got.n, 1); /* still queued */
    mc_task_list_free(&got);
}

/* A connection closes: mc_mailboxes_drop_dead_polls drops its parked poll at once (a live
 * poll of another holder stays parked). */
static void test_drop_dead_polls_at_close(void **state)
{
    struct fx *f = *state;
    mc_mailboxes_set_alive(f->t, conn_alive);
    struct conn_poll pa = {0}, pb = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 30000, on_reply, &pa), 0);
    assert_int_equal(mc_mailbox_park(f->t, f->b, MC_TASK_OFFLOAD, 0, 30000, on_reply, &pb), 0);
    pa.closed = true;
    mc_mailboxes_drop_dead_polls(f->t);
    assert_int_equal(pa.r.calls, 1);
    assert_int_equal(pb.r.calls, 0);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.parked, 1);
    assert_int_equal(st.dead_polls, 1);
    mc_mailboxes_tick_polls(f->t); /* (not before its deadline) */
    assert_int_equal(pb.r.calls, 0);
    pb.closed = true; /* the poll must not outlive this frame */
    mc_mailboxes_drop_dead_polls(f->t);
    assert_int_equal(pb.r.calls, 1);
}

/* The connection closes between the take and the reply: the tasks go back to the front of the
 * queue, in order, and the reply gets nothing. */
static void test_tasks_taken_for_closed_poll_requeued(void **state)
{
    struct fx *f = *state;
    mc_mailboxes_set_alive(f->t, conn_alive);
    uint64_t id1 = 0, id2 = 0;
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o1", 0, &id1), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o2", 0, &id2), MC_OK);
    struct conn_poll p = {.die_after = 0};
    /* queued tasks answer a park at once, without asking the predicate under the lock; the
     * reply path asks it once: closed by then */
    p.closed = true;
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 30000, on_reply, &p), 1);
    assert_int_equal(p.r.calls, 1);
    assert_int_equal(p.r.n, 0);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.requeued, 2);
    struct conn_poll live = {0}; /* (every arg is a conn_poll once the predicate is set) */
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 30000, on_reply, &live), 1);
    assert_int_equal(live.r.n, 2);
    assert_int_equal(live.r.ids[0], id1);
    assert_int_equal(live.r.ids[1], id2);
    /* a push answering a parked poll that closes after the check, before the reply */
    struct conn_poll q = {.die_after = 1};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 30000, on_reply, &q), 0);
    uint64_t id3 = 0;
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o3", 0, &id3), MC_OK);
    assert_int_equal(q.r.calls, 1);
    assert_int_equal(q.r.n, 0);
    memset(&live, 0, sizeof(live));
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 30000, on_reply, &live), 1);
    assert_int_equal(live.r.n, 1);
    assert_int_equal(live.r.ids[0], id3);
}

/* A re-mount puts the holder's in-flight tasks of the asked kinds back, oldest first, and
 * answers a parked poll with them; other kinds stay in flight. */
static void test_requeue_in_flight_on_remount(void **state)
{
    struct fx *f = *state;
    uint64_t id[3];
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o1", 0, &id[0]), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o2", 0, &id[1]), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_PROMOTION, "p1", 0, &id[2]), MC_OK);
    struct mc_task_list got = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, 0xffu, 0, &got), MC_OK);
    assert_int_equal(got.n, 3);
    mc_task_list_free(&got);
    struct poll_rec r = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 30000, on_reply, &r), 0);
    assert_int_equal(mc_mailbox_requeue_in_flight(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD)),
                     2);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.ids[0], id[0]);
    assert_int_equal(r.ids[1], id[1]);
    /* the promotion task stays in flight: its report still completes it */
    struct mc_task *x = mc_mailbox_complete(f->t, f->a, id[2], false);
    assert_non_null(x);
    free(x);
    assert_int_equal(mc_mailbox_requeue_in_flight(f->t, f->b, 0xffu), 0);
}

/* Nothing arrives: the poll is answered empty by the first tick at or after its deadline. */
static void test_longpoll_answered_at_deadline(void **state)
{
    struct fx *f = *state;
    struct poll_rec r = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 2000, on_reply, &r), 0);
    struct mc_task_list ex = {0};
    mc_fake_clock_advance_ms(&f->clk, 1999);
    mc_mailboxes_tick(f->t, &ex);
    assert_int_equal(r.calls, 0);
    mc_fake_clock_advance_ms(&f->clk, 1);
    mc_mailboxes_tick(f->t, &ex);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.n, 0);
    mc_mailboxes_tick(f->t, &ex);
    assert_int_equal(r.calls, 1); /* exactly once */
    /* wait_ms 0 answers at once, even when empty */
    struct poll_rec z = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 0, on_reply, &z), 1);
    assert_int_equal(z.calls, 1);
    assert_int_equal(z.n, 0);
    /* a second poll replaces the first, which is answered empty */
    struct poll_rec p1 = {0}, p2 = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 9000, on_reply, &p1), 0);
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 9000, on_reply, &p2), 0);
    assert_int_equal(p1.calls, 1);
    assert_int_equal(p2.calls, 0);
    mc_fake_clock_advance_ms(&f->clk, 9000);
    mc_mailboxes_tick(f->t, &ex);
    assert_int_equal(p2.calls, 1);
}

/* Queued tasks answer a poll at once, oldest first, at most max_items. */
static void test_queued_answer_bounded_by_max_items(void **state)
{
    struct fx *f = *state;
    const char *keys[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, keys[i], 0, NULL), MC_OK);
    struct poll_rec r = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 2, 5000, on_reply, &r), 1);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.keys[0], "a");
    assert_string_equal(r.keys[1], "b");
    struct mc_task_list l = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), 0, &l), MC_OK);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.head->key, "c");
    mc_task_list_free(&l);
}

/* --offloading_queue_limit: queued + in-flight offloads per holder; a completion frees room. */
static void test_queue_limit_counts_in_flight(void **state)
{
    struct fx *f = *state;
    uint64_t id1 = 0;
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "x1", 0, &id1), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "x2", 0, NULL), MC_OK);
    struct mc_task_list l = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), 0, &l), MC_OK);
    assert_int_equal(l.n, 2);
    mc_task_list_free(&l);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "x3", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "x4", 0, NULL),
                     MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    /* the limit is per holder */
    assert_int_equal(push(f, f->b, MC_TASK_OFFLOAD, "y1", 0, NULL), MC_OK);
    struct mc_task *done = mc_mailbox_complete(f->t, f->a, id1, false);
    assert_non_null(done);
    assert_string_equal(done->key, "x1");
    assert_int_equal(done->version, 7);
    free(done);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "x4", 0, NULL), MC_OK);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.refused, 1);
    assert_int_equal(st.completed, 1);
}

/* Each kind has its own bound: the offload limit (3 here) refuses offloads only; delete and
 * promotion pushes are bounded by their own limits (none by default, then as set), and each
 * refusal is counted once, under its kind. */
static void test_queue_limit_per_kind(void **state)
{
    struct fx *f = *state;
    char k[16];
    for (int i = 0; i < 3; i++) {
        snprintf(k, sizeof(k), "o%d", i);
        assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, k, 0, NULL), MC_OK);
    }
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o3", 0, NULL),
                     MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    /* the offload limit is full: deletes and promotions still go in, past 3 */
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof(k), "d%d", i);
        assert_int_equal(push(f, f->a, MC_TASK_DELETE, k, 0, NULL), MC_OK);
        snprintf(k, sizeof(k), "p%d", i);
        assert_int_equal(push(f, f->a, MC_TASK_PROMOTION, k, 0, NULL), MC_OK);
    }
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.refused, 1);
    assert_int_equal(st.refused_kind[MC_TASK_OFFLOAD], 1);
    assert_int_equal(st.refused_kind[MC_TASK_DELETE], 0);
    assert_int_equal(st.refused_kind[MC_TASK_PROMOTION], 0);
    /* their own limits: deletes at 12 (10 queued), promotions at 10 (full) */
    mc_mailboxes_set_limit(f->t, MC_TASK_DELETE, 12);
    mc_mailboxes_set_limit(f->t, MC_TASK_PROMOTION, 10);
    assert_int_equal(push(f, f->a, MC_TASK_PROMOTION, "p10", 0, NULL),
                     MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "d10", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "d11", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "d12", 0, NULL),
                     MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    /* per holder: b takes all of them */
    assert_int_equal(push(f, f->b, MC_TASK_DELETE, "d12", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->b, MC_TASK_PROMOTION, "p10", 0, NULL), MC_OK);
    /* a pulled delete is forgotten: room for one more */
    struct mc_task_list l = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_DELETE), 1, &l), MC_OK);
    assert_int_equal(l.n, 1);
    mc_task_list_free(&l);
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "d12", 0, NULL), MC_OK);
    /* the offload limit did not move */
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o3", 0, NULL),
                     MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.refused, 4);
    assert_int_equal(st.refused_kind[MC_TASK_OFFLOAD], 2);
    assert_int_equal(st.refused_kind[MC_TASK_DELETE], 1);
    assert_int_equal(st.refused_kind[MC_TASK_PROMOTION], 1);
}

/* BatchRemove before the holder pulls: the task is cancelled, the poll then gets nothing, and
 * nothing stays in any mailbox. After a pull, a cancel makes the late report find nothing. */
static void test_cancel_key_before_pull_leaves_no_orphan(void **state)
{
    struct fx *f = *state;
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "gone", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->b, MC_TASK_OFFLOAD, "gone", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "kept", 0, NULL), MC_OK);
    struct mc_task_list c = {0};
    assert_int_equal(mc_mailboxes_cancel_key(f->t, "gone", 4, &c), 2);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.head->key, "gone");
    mc_task_list_free(&c);
    struct mc_task_list l = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), 0, &l), MC_OK);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.head->key, "kept");
    uint64_t kept_id = l.head->task_id;
    mc_task_list_free(&l);
    /* in flight now: a cancel still finds it, and the late completion is refused (NULL) */
    assert_int_equal(mc_mailboxes_cancel_key(f->t, "kept", 4, &c), 1);
    mc_task_list_free(&c);
    assert_null(mc_mailbox_complete(f->t, f->a, kept_id, false));
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.in_mailboxes, 0);
    assert_int_equal(st.cancelled, 3);
    /* a key that is a prefix of another is not cancelled with it */
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "gone2", 0, NULL), MC_OK);
    assert_int_equal(mc_mailboxes_cancel_key(f->t, "gone", 4, &c), 0);
}

/* --put_start_release_timeout_sec: queued and in-flight offloads expire at their deadline and
 * are handed back (the caller unpins); a report after expiry finds nothing. */
static void test_offload_task_expires_at_deadline(void **state)
{
    struct fx *f = *state;
    uint64_t id1 = 0;
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "e1", now_ms(f) + 1000, &id1), MC_OK);
    struct mc_task_list l = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), 0, &l), MC_OK);
    mc_task_list_free(&l);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "e2", now_ms(f) + 1500, NULL), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "d", now_ms(f) + 1, NULL), MC_OK);
    struct mc_task_list ex = {0};
    mc_fake_clock_advance_ms(&f->clk, 999);
    assert_int_equal(mc_mailboxes_tick(f->t, &ex), 0);
    mc_fake_clock_advance_ms(&f->clk, 1);
    assert_int_equal(mc_mailboxes_tick(f->t, &ex), 1);
    assert_string_equal(ex.head->key, "e1");
    assert_null(mc_mailbox_complete(f->t, f->a, id1, false));
    mc_fake_clock_advance_ms(&f->clk, 500);
    assert_int_equal(mc_mailboxes_tick(f->t, &ex), 1);
    assert_int_equal(ex.n, 2);
    mc_task_list_free(&ex);
    /* the delete task never expires: the holder still gets it */
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_DELETE), 0, &l), MC_OK);
    assert_int_equal(l.n, 1);
    mc_task_list_free(&l);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.expired, 2);
    assert_int_equal(st.in_mailboxes, 0);
}

/* Holder expiry: closing its mailbox hands back queued and in-flight offloads, answers its
 * parked poll empty, and further pushes/polls for it fail with CLIENT_NOT_FOUND. */
static void test_holder_close_drops_tasks_and_answers_poll(void **state)
{
    struct fx *f = *state;
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "h1", 0, NULL), MC_OK);
    struct mc_task_list l = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), 0, &l), MC_OK);
    mc_task_list_free(&l);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "h2", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "hd", 0, NULL), MC_OK);
    struct poll_rec r = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_PROMOTION, 0, 5000, on_reply, &r), 0);
    struct mc_task_list c = {0};
    assert_int_equal(mc_mailbox_close(f->t, f->a, &c), MC_OK);
    assert_int_equal(c.n, 2); /* the two offloads; the delete is simply dropped */
    mc_task_list_free(&c);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.n, 0);
    assert_false(mc_mailbox_exists(f->t, f->a));
    assert_true(mc_mailbox_exists(f->t, f->b));
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "h3", 0, NULL), MC_ERR_CLIENT_NOT_FOUND);
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 10, on_reply, &r),
                     MC_ERR_CLIENT_NOT_FOUND);
    assert_int_equal(mc_mailbox_close(f->t, f->a, &c), MC_ERR_CLIENT_NOT_FOUND);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.in_mailboxes, 0);
    assert_int_equal(st.parked, 0);
}

/* One mailbox carries several kinds: a promotion push answers only the promotion poll, a delete
 * push wakes the offload poll (the holder's deletes go out on it, ahead of offloads: the delete
 * rule), a completion names the holder that owns the task. */
static void test_kinds_share_mailbox_without_mixing(void **state)
{
    struct fx *f = *state;
    struct poll_rec off = {0}, pro = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 5000, on_reply, &off), 0);
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_PROMOTION, 0, 5000, on_reply, &pro), 0);
    uint64_t pid = 0;
    assert_int_equal(push(f, f->a, MC_TASK_PROMOTION, "p", 0, &pid), MC_OK);
    assert_int_equal(pro.calls, 1);
    assert_int_equal(pro.n, 1);
    assert_int_equal(off.calls, 0);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o", 0, NULL), MC_OK); /* answers off */
    assert_int_equal(off.calls, 1);
    assert_int_equal(off.n, 1);
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 5000, on_reply, &off), 0);
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "d", 0, NULL), MC_OK);
    assert_int_equal(off.calls, 2); /* woken by the delete, given the delete alone */
    assert_int_equal(off.n, 1);
    assert_string_equal(off.keys[0], "d");
    assert_int_equal(push(f, f->a, MC_TASK_DELETE, "d2", 0, NULL), MC_OK);
    assert_int_equal(push(f, f->a, MC_TASK_OFFLOAD, "o2", 0, NULL), MC_OK);
    struct poll_rec off2 = {0}; /* deletes queued: answered at once with the deletes only */
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 5000, on_reply, &off2), 1);
    assert_int_equal(off2.n, 1);
    assert_string_equal(off2.keys[0], "d2");
    assert_null(mc_mailbox_complete(f->t, f->b, pid, false)); /* not b's task */
    struct mc_task *x = mc_mailbox_complete(f->t, f->a, pid, true);
    assert_non_null(x);
    assert_int_equal(x->kind, MC_TASK_PROMOTION);
    free(x);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.nacked, 1);
    assert_int_equal(st.in_mailboxes, 2); /* o in flight, o2 queued */
    assert_int_equal(
        mc_mailbox_push(f->t, f->a, (enum mc_task_kind)9, "k", 1, 0, 0, 0, false, 0, NULL),
        MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_mailbox_push(f->t, f->a, MC_TASK_OFFLOAD, "k", 0, 0, 0, 0, false, 0, NULL),
                     MC_ERR_INVALID_PARAMS);
}

/* Threads: one pushes, one parks polls and completes what it gets; every task is delivered
 * exactly once and nothing is left (TSan checks the locking). */
struct thr {
    struct fx *f;
    _Atomic int got;
};
static void thr_reply(void *arg, struct mc_task_list *tasks)
{
    struct thr *th = arg;
    for (struct mc_task *t = tasks->head; t; t = t->next) {
        struct mc_task *x = mc_mailbox_complete(th->f->t, th->f->a, t->task_id, false);
        assert_non_null(x);
        free(x);
        atomic_fetch_add(&th->got, 1);
    }
    mc_task_list_free(tasks);
}
static void *pusher(void *arg)
{
    struct thr *th = arg;
    char key[16];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "t%d", i);
        while (push(th->f, th->f->a, MC_TASK_OFFLOAD, key, 0, NULL) != MC_OK) {
        }
    }
    return NULL;
}
static void test_threads_push_while_polling(void **state)
{
    struct fx *f = *state;
    struct thr th = {.f = f};
    pthread_t p;
    assert_int_equal(pthread_create(&p, NULL, pusher, &th), 0);
    while (atomic_load(&th.got) < 2000) {
        int rc = mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 16, 1000, thr_reply, &th);
        assert_true(rc >= 0);
        mc_mailboxes_tick(f->t, &(struct mc_task_list){0});
    }
    pthread_join(p, NULL);
    mc_fake_clock_advance_ms(&f->clk, 1000); /* the last poll may still be parked on &th */
    mc_mailboxes_tick(f->t, &(struct mc_task_list){0});
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.completed, 2000);
    assert_int_equal(st.in_mailboxes, 0);
    assert_int_equal(st.parked, 0);
}

/* A source replica named at a quiet push (offload tasks) travels with the task to the puller;
 * a task pushed without one has none. */
static void test_task_source_travels(void **state)
{
    struct fx *f = *state;
    struct mc_task_src src = {.segment = {.hi = 5, .lo = 6}, .mount_epoch = 9, .offset = 4096};
    assert_int_equal(mc_mailbox_push_quiet(f->t, f->b, MC_TASK_OFFLOAD, "s", 1, 7, 100, 0, false,
                                           now_ms(f) + 1000, &src, NULL),
                     MC_OK);
    assert_int_equal(push(f, f->b, MC_TASK_OFFLOAD, "n", now_ms(f) + 1000, NULL), MC_OK);
    struct mc_task_list sl = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->b, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), 0, &sl), MC_OK);
    assert_int_equal(sl.n, 2);
    for (struct mc_task *x = sl.head; x; x = x->next) {
        if (x->key[0] == 'n') {
            assert_false(x->has_src);
            continue;
        }
        assert_true(x->has_src);
        assert_int_equal(x->src.segment.hi, 5);
        assert_int_equal(x->src.segment.lo, 6);
        assert_int_equal(x->src.mount_epoch, 9);
        assert_int_equal(x->src.offset, 4096);
    }
    mc_task_list_free(&sl);
}

/* A quiet push (made under a master lock) queues at once but answers the parked poll only at
 * mc_mailboxes_wake; polls are answered at their deadline by mc_mailboxes_tick_polls, which
 * expires no task; kind-limited completion, cancel and expiry leave other kinds alone. */
/* A bare push whose id comes from another table (holder_stream's drops draw from offload's id
 * space): no id is drawn for a holder with no mailbox; a found one gets the other table's next
 * id. mc_mailboxes_any follows opens and closes. */
static void test_push_from_draws_id_only_when_found(void **state)
{
    struct fx *f = *state;
    struct mc_mailboxes *ids = mc_mailboxes_new(&f->clk.clock, 0);
    assert_non_null(ids);
    assert_false(mc_mailboxes_any(ids));
    assert_true(mc_mailboxes_any(f->t));
    uint64_t id0 = mc_mailboxes_reserve_id(ids);
    uint64_t own0 = mc_mailboxes_reserve_id(f->t);
    const struct mc_id nobody = {.hi = 9, .lo = 9};
    assert_int_equal(mc_mailbox_push_quiet_from(f->t, nobody, MC_TASK_DELETE, "x", 1, 5, ids),
                     MC_ERR_CLIENT_NOT_FOUND);
    assert_int_equal(mc_mailbox_push_quiet_from(f->t, f->a, MC_TASK_DELETE, "d", 1, 6, ids), MC_OK);
    struct mc_task_list got = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_DELETE), 0, &got), MC_OK);
    assert_int_equal(got.n, 1);
    assert_string_equal(got.head->key, "d");
    assert_int_equal(got.head->version, 6);
    assert_int_equal(got.head->task_id, id0 + 1); /* the failed push drew nothing */
    mc_task_list_free(&got);
    assert_int_equal(mc_mailboxes_reserve_id(ids), id0 + 2);
    assert_int_equal(mc_mailboxes_reserve_id(f->t), own0 + 1); /* its own space untouched */
    struct mc_task_list l = {0};
    (void)mc_mailbox_close(f->t, f->a, &l);
    mc_task_list_free(&l);
    assert_true(mc_mailboxes_any(f->t));
    (void)mc_mailbox_close(f->t, f->b, &l);
    mc_task_list_free(&l);
    assert_false(mc_mailboxes_any(f->t));
    assert_int_equal(mc_mailbox_open(f->t, f->a), MC_OK);
    assert_true(mc_mailboxes_any(f->t));
    mc_mailboxes_free(ids);
}

static void test_quiet_push_wake_and_kinds(void **state)
{
    struct fx *f = *state;
    struct poll_rec r = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 5000, on_reply, &r), 0);
    assert_int_equal(mc_mailbox_push_quiet(f->t, f->a, MC_TASK_OFFLOAD, "q", 1, 7, 100, 0, false,
                                           now_ms(f) + 1000, NULL, NULL),
                     MC_OK);
    assert_int_equal(r.calls, 0);
    mc_mailboxes_wake(f->t);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.keys[0], "q");
    mc_mailboxes_wake(f->t); /* nothing due: a no-op */
    assert_int_equal(r.calls, 1);
    /* deadlines: tick_polls answers the poll and leaves the task (expired at 1000) alone */
    struct poll_rec r2 = {0};
    assert_int_equal(mc_mailbox_park(f->t, f->a, MC_TASK_OFFLOAD, 0, 2000, on_reply, &r2), 0);
    mc_fake_clock_advance_ms(&f->clk, 2000);
    mc_mailboxes_tick_polls(f->t);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r2.n, 0);
    struct mc_mailbox_stats st;
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.in_mailboxes, 1);
    /* a promotion task is not completed, cancelled or expired by offload-only calls */
    uint64_t pid = 0;
    assert_int_equal(push(f, f->a, MC_TASK_PROMOTION, "p", now_ms(f) + 1, &pid), MC_OK);
    struct mc_task_list got = {0};
    assert_int_equal(mc_mailbox_pull(f->t, f->a, MC_TASK_KIND_BIT(MC_TASK_PROMOTION), 0, &got),
                     MC_OK);
    assert_int_equal(got.n, 1);
    mc_task_list_free(&got);
    assert_null(
        mc_mailbox_complete_kind(f->t, f->a, pid, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), false));
    struct mc_task_list l = {0};
    assert_int_equal(
        mc_mailboxes_cancel_key_kinds(f->t, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), "p", 1, &l), 0);
    mc_fake_clock_advance_ms(&f->clk, 10);
    assert_int_equal(mc_mailboxes_tick_kinds(f->t, MC_TASK_KIND_BIT(MC_TASK_OFFLOAD), &l), 1);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.head->key, "q"); /* the offload task expired, the promotion one stays */
    mc_task_list_free(&l);
    struct mc_task *t =
        mc_mailbox_complete_kind(f->t, f->a, pid, MC_TASK_KIND_BIT(MC_TASK_PROMOTION), false);
    assert_non_null(t);
    assert_string_equal(t->key, "p");
    free(t);
    mc_mailboxes_stats(f->t, &st);
    assert_int_equal(st.in_mailboxes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_longpoll_answered_on_arrival, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_source_travels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quiet_push_wake_and_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_from_draws_id_only_when_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_longpoll_answered_at_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_answer_bounded_by_max_items, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_limit_counts_in_flight, setup_limit3, teardown),
        cmocka_unit_test_setup_teardown(test_queue_limit_per_kind, setup_limit3, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_key_before_pull_leaves_no_orphan, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_offload_task_expires_at_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holder_close_drops_tasks_and_answers_poll, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kinds_share_mailbox_without_mixing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_push_while_polling, setup_limit3, teardown),
        cmocka_unit_test_setup_teardown(test_push_skips_closed_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drop_dead_polls_at_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tasks_taken_for_closed_poll_requeued, setup, teardown),
        cmocka_unit_test_setup_teardown(test_requeue_in_flight_on_remount, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
