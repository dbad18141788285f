/*
 * test_faults_tier.c - connection drops at every step of the LOCAL_DISK tier's work (see
 * docs/testing.md): offload, the disk-only read and promotion, with a real mooncake_master.
 *
 * The tier's worker runs inside the client library, so the holder is a client in this test's
 * process (P: a small DRAM segment and a disk_path); the rpc client's drop hook
 * (common/rpc_client.h, MC_TEST_HOOKS) then fires on the worker's own calls. A second in-test
 * client R has no DRAM and no disk, so every Put lands in P's segment and every Get of R crosses
 * the network (PeerRead / PeerDiskRead to P). The master runs with --offload_on_evict and
 * --promotion_on_hit (threshold 2) and short task timeouts, so a task whose report was lost is
 * reaped within seconds. The steps, each dropped before its request is sent and after its
 * reply arrived:
 *   offload    OffloadObjectHeartbeat, NotifyOffloadSuccess, and the disk append (an injected
 *              EIO: the task is NACKed)
 *   disk read  PeerDiskRead of a disk-only Get
 *   promotion  PromotionObjectHeartbeat (the master stages each task's replica as it hands it
 *              out, and the outcomes ride on the next heartbeat: no AllocStart or Notify of
 *              their own), also while it carries the failure of a task whose record was
 *              removed from P's store
 *   remote     none: with P's segment full of hard-pinned objects and a DRAM-only daemon D, a
 *              promotion is never staged on D (it fails in AllocStart; staged space is the
 *              holder's own)
 *   restart    the master killed and restarted on its port, P's first re-registration chunk
 *              (NotifyOffloadSuccess) dropped before it is sent: P's retried registration
 *              still brings back every disk key (last: the master is a new one afterwards)
 * After each fault:
 *   - the hook fired (the step really ran);
 *   - every object ever put reads back with its bytes, or is cleanly gone (OBJECT_NOT_FOUND:
 *     evicted from DRAM without a disk copy, as a cache may); an object the master still lists
 *     but whose bytes cannot be read is a lost object and fails the test;
 *   - the master's offload tasks in flight (its pins), promotion tasks in flight and Puts in
 *     flight return to 0 within the task timeouts;
 *   - the same work then succeeds (another offload completes, the key is promoted, ...).
 *
 * Every process dies with the test; the temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/worker.h"
#include "cluster_data.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "test_client_util.h"
#include "tier_query.h"

#define VLEN (256u * 1024u)
#define SEG (16u << 20) /* P's DRAM: 64 values */
#define BATCH 24        /* Puts per offload case: enough to push older objects out */
#define MAX_KEYS 4096
#define THRESHOLD 2
#define SETTLE_MS 20000
#define WAIT_MS 20000

static struct {
    char dir[64];
    struct test_master m;
    struct mc_client *p; /* the holder */
    struct mc_client *r; /* the reader / writer: no DRAM, no disk */
    struct mc_rpc_client *adm;
    struct cu_proc d; /* no_remote_staging's DRAM-only daemon */
    char keys[MAX_KEYS][32];
    uint32_t seeds[MAX_KEYS];
    bool gone[MAX_KEYS]; /* its record was removed on purpose: not checked */
    int nkeys;
    int next_seed;
    uint8_t *buf, *want;
} g;

static const char *when_name(int when)
{
    return when == MC_RPC_TEST_DROP_BEFORE_SEND ? "before send" : "after reply";
}

/* ---- the master's figures ------------------------------------------------------------------ */

struct mstats {
    uint64_t offload_in_flight, promo_in_flight, processing;
    double offload_completed, promo_completed, promo_failed, promo_admitted, used_ratio;
};

static void master_stats(struct mstats *s)
{
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(g.adm, MC_METHOD_GET_STATS, NULL,
                                            &mc__get_stats_response__descriptor, 0, &m),
                     0);
    Mc__GetStatsResponse *r = (Mc__GetStatsResponse *)m;
    s->offload_in_flight = r->offload_in_flight;
    s->promo_in_flight = (uint64_t)tq_stats_extra(r, "master_promotion_in_flight");
    s->processing = (uint64_t)tq_stats_extra(r, "master_processing_key_count");
    s->offload_completed = tq_stats_extra(r, "master_offload_completed_total");
    s->promo_completed = tq_stats_extra(r, "master_promotion_completed_total");
    s->promo_failed = tq_stats_extra(r, "master_promotion_failed_total");
    s->promo_admitted = tq_stats_extra(r, "master_promotion_admitted_total");
    s->used_ratio = tq_stats_extra(r, "master_used_ratio");
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Until both clients are connected and the master has no offload task, promotion task or Put
 * in flight (pins and staged replicas released). */
static void settle(const char *what)
{
    uint64_t deadline = mc_now_ms() + SETTLE_MS;
    struct mstats s;
    struct mc_master_conn_stats a, b;
    for (;;) {
        mc_master_conn_get_stats(mc_client_master_conn(g.p), &a);
        mc_master_conn_get_stats(mc_client_master_conn(g.r), &b);
        master_stats(&s);
        if (a.up && b.up && s.offload_in_flight == 0 && s.promo_in_flight == 0 && s.processing == 0)
            return;
        if (mc_now_ms() >= deadline)
            fail_msg("%s: did not settle (offload in flight %llu, promotion in flight %llu, puts "
                     "in flight %llu, holder up %d, reader up %d)",
                     what, (unsigned long long)s.offload_in_flight,
                     (unsigned long long)s.promo_in_flight, (unsigned long long)s.processing, a.up,
                     b.up);
        cu_sleep_ms(50);
    }
}

/* The replicas the master lists for key: *mem / *disk = COMPLETE MEMORY / LOCAL_DISK ones.
 * false when the key is not there. */
static bool replicas(const char *key, int *mem, int *disk)
{
    return tq_replicas(g.adm, key, mem, disk, NULL);
}

/* ---- objects ------------------------------------------------------------------------------- */

static void value_of(uint32_t seed)
{
    tm_fill(g.want, VLEN, seed);
}

/* Puts a new key through R, retrying for up to wait_ms while eviction makes room; a key put
 * joins the checked set. Returns the Put's result. */
static int put_try(const char *tag, uint64_t wait_ms)
{
    assert_true(g.nkeys < MAX_KEYS);
    int k = g.nkeys;
    snprintf(g.keys[k], sizeof(g.keys[0]), "%s-%d", tag, k);
    g.seeds[k] = (uint32_t)(++g.next_seed * 7919u);
    value_of(g.seeds[k]);
    uint64_t deadline = mc_now_ms() + wait_ms;
    int rc;
    while ((rc = mc_put(g.r, g.keys[k], g.want, VLEN, NULL)) != 0 && mc_now_ms() < deadline)
        cu_sleep_ms(20);
    if (rc == 0)
        g.nkeys++;
    return rc;
}

static void put_new(int n, const char *tag)
{
    for (int i = 0; i < n; i++) {
        int rc = put_try(tag, WAIT_MS);
        if (rc)
            fail_msg("put %s: %s", g.keys[g.nkeys], mc_strerror(rc));
    }
}

/* One Get of key k through R: 1 its bytes, 0 cleanly gone, or a negative error. Wrong bytes
 * fail the test at once. */
static int get_one(int k, const char *what)
{
    value_of(g.seeds[k]);
    return cu_get_checked(g.r, g.keys[k], g.buf, g.want, VLEN, what);
}

/* Every object ever put: its bytes, or cleanly gone. A key the master still lists whose Get
 * keeps failing is lost. */
static void check_all(const char *what)
{
    int found = 0, absent = 0;
    for (int k = 0; k < g.nkeys; k++) {
        if (g.gone[k])
            continue;
        int rc = get_one(k, what);
        for (int t = 0; rc < 0 && t < 20; t++) { /* a transient refusal (a replica mid-change) */
            cu_sleep_ms(50);
            rc = get_one(k, what);
        }
        if (rc < 0) {
            int mem, disk;
            bool listed = replicas(g.keys[k], &mem, &disk);
            fail_msg("%s: %s lost: get = %s, master lists it %d (memory %d, disk %d)", what,
                     g.keys[k], mc_strerror(rc), listed, mem, disk);
        }
        if (rc == 0) {
            int mem, disk;
            bool listed = replicas(g.keys[k], &mem, &disk);
            fail_msg("%s: %s lost: not found (master lists it %d)", what, g.keys[k], listed);
        }
        rc ? found++ : absent++;
        /* a LOCAL_DISK replica the master lists must have its record on P's disk: without it
         * the object is lost once its DRAM copy goes */
        int mem, disk;
        struct mc_disk_record_info ri;
        if (replicas(g.keys[k], &mem, &disk) && disk > 0 &&
            mc_disk_store_lookup(mc_disk_tier_store(atomic_load(&g.p->disk)), g.keys[k],
                                 (uint32_t)strlen(g.keys[k]), &ri) != 0)
            fail_msg("%s: %s has a LOCAL_DISK replica at the master but no record on the "
                     "holder's disk (memory replicas %d)",
                     what, g.keys[k], mem);
    }
    assert_true(found > 0);
    (void)absent;
}

/* A key (not gone) whose only COMPLETE replicas are LOCAL_DISK ones; -1 when none. */
static int disk_only_key(void)
{
    for (int k = g.nkeys - 1; k >= 0; k--) {
        int mem, disk;
        if (!g.gone[k] && replicas(g.keys[k], &mem, &disk) && mem == 0 && disk > 0)
            return k;
    }
    return -1;
}

/* Puts until some key is disk-only (eviction offloaded it). */
static int need_disk_only_key(void)
{
    int k = disk_only_key();
    for (int round = 0; k < 0 && round < 8; round++) {
        put_new(BATCH, "fill");
        uint64_t deadline = mc_now_ms() + 3000;
        while ((k = disk_only_key()) < 0 && mc_now_ms() < deadline)
            cu_sleep_ms(100);
    }
    assert_true(k >= 0);
    return k;
}

static void wait_fired(uint64_t before, const char *what)
{
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    while (mc_rpc_test_drops_fired() == before && mc_now_ms() < deadline)
        cu_sleep_ms(10);
    if (mc_rpc_test_drops_fired() == before)
        fail_msg("%s: the drop never fired", what);
}

/* Reads key k THRESHOLD + 1 times through R: each one its bytes, or (allow_fail) an error,
 * never other bytes. */
static void hot_reads(int k, bool allow_fail, const char *what)
{
    for (int i = 0; i < THRESHOLD + 1; i++) {
        int rc = get_one(k, what);
        if (rc != 1 && !allow_fail)
            fail_msg("%s: get %s = %d", what, g.keys[k], rc);
    }
}

/* ---- offload ------------------------------------------------------------------------------- */

/* After a fault: another offload completes (Puts push objects out, the holder copies them). */
static void offload_works(const char *what)
{
    struct mstats s0, s;
    master_stats(&s0);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    do {
        put_new(BATCH / 2, "again");
        master_stats(&s);
    } while (s.offload_completed <= s0.offload_completed && mc_now_ms() < deadline);
    if (s.offload_completed <= s0.offload_completed)
        fail_msg("%s: no offload completed after the fault", what);
    settle(what);
}

static void offload_case(uint16_t method, int when)
{
    char what[160];
    snprintf(what, sizeof(what), "offload, drop %s %s", mc_method_name(method), when_name(when));
    uint64_t fired = mc_rpc_test_drops_fired();
    struct mc_worker_stats w0, w;
    mc_worker_get_stats(g.p->worker, &w0);
    mc_rpc_test_drop_next(method, (enum mc_rpc_test_drop)when);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    while (mc_rpc_test_drops_fired() == fired && mc_now_ms() < deadline)
        put_new(BATCH / 4, "off");
    wait_fired(fired, what);
    if (method == MC_METHOD_NOTIFY_OFFLOAD_SUCCESS) {
        /* the worker has handled the failed report (the hook may hold it up to 2 s) before
         * the records are checked; when another thread's read of the shared connection got
         * the reply first, the report did not fail at all */
        deadline = mc_now_ms() + 3000;
        do {
            mc_worker_get_stats(g.p->worker, &w);
            if (w.errors > w0.errors)
                break;
            cu_sleep_ms(20);
        } while (mc_now_ms() < deadline);
    }
    settle(what);
    mc_worker_get_stats(g.p->worker, &w);
    fprintf(stderr, "%s: tasks %llu offloaded %llu nacked %llu errors %llu\n", what,
            (unsigned long long)(w.tasks - w0.tasks),
            (unsigned long long)(w.offloaded - w0.offloaded),
            (unsigned long long)(w.nacked - w0.nacked), (unsigned long long)(w.errors - w0.errors));
    check_all(what);
    offload_works(what);
    check_all(what);
}

static void test_offload_steps(void **state)
{
    (void)state;
    put_new(BATCH * 2, "base"); /* DRAM full: eviction offloads from here on */
    settle("base");
    const uint16_t steps[] = {MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        offload_case(steps[i], MC_RPC_TEST_DROP_BEFORE_SEND);
        offload_case(steps[i], MC_RPC_TEST_DROP_AFTER_REPLY);
    }
    /* whether the master executed a dropped report before the connection broke is a race of
     * the hook with the worker's other calls on the connection: a few more tries */
    for (int i = 0; i < 3; i++)
        offload_case(MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, MC_RPC_TEST_DROP_AFTER_REPLY);
}

/* The disk append fails (EIO): the tasks are NACKed, the pins released, nothing stored. */
static void test_offload_append_fails(void **state)
{
    (void)state;
    const char *what = "offload, disk append fails";
    struct mc_disk_store *st = mc_disk_tier_store(atomic_load(&g.p->disk));
    struct mc_worker_stats w0, w;
    mc_worker_get_stats(g.p->worker, &w0);
    /* every write fails (a failed merged write is retried record by record) until cleared */
    struct mc_disk_fault f = {.kind = MC_DISK_FAULT_EIO, .ops = MC_DISK_FAULT_WRITE, .count = -1};
    mc_disk_store_test_set_fault(st, &f);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    do {
        /* DRAM cannot be freed while every offload fails: a Put may fail cleanly meanwhile */
        for (int i = 0; i < BATCH / 4; i++)
            put_try("eio", 500);
        mc_worker_get_stats(g.p->worker, &w);
    } while (w.nacked == w0.nacked && mc_now_ms() < deadline && g.nkeys < MAX_KEYS - BATCH);
    struct mc_disk_fault none = {.kind = MC_DISK_FAULT_NONE};
    mc_disk_store_test_set_fault(st, &none);
    if (w.nacked == w0.nacked)
        fail_msg("%s: no task was NACKed (tasks %llu, offloaded %llu, errors %llu)", what,
                 (unsigned long long)(w.tasks - w0.tasks),
                 (unsigned long long)(w.offloaded - w0.offloaded),
                 (unsigned long long)(w.errors - w0.errors));
    settle(what);
    check_all(what);
    offload_works(what);
    check_all(what);
}

/* ---- the disk-only read -------------------------------------------------------------------- */

static void test_disk_read_steps(void **state)
{
    (void)state;
    for (int when = MC_RPC_TEST_DROP_BEFORE_SEND; when <= MC_RPC_TEST_DROP_AFTER_REPLY; when++) {
        char what[96];
        snprintf(what, sizeof(what), "disk-only get, drop PeerDiskRead %s", when_name(when));
        uint64_t fired = mc_rpc_test_drops_fired();
        mc_rpc_test_drop_next(MC_METHOD_PEER_DISK_READ, (enum mc_rpc_test_drop)when);
        int k = -1, rc = 0;
        /* a key may turn DRAM-resident (promoted) before it is read: read another then */
        for (int t = 0; t < 10 && mc_rpc_test_drops_fired() == fired; t++) {
            k = need_disk_only_key();
            rc = get_one(k, what); /* its bytes or an error: never other bytes */
        }
        wait_fired(fired, what);
        fprintf(stderr, "%s: get = %s\n", what, rc == 1 ? "bytes" : mc_strerror(rc));
        settle(what);
        assert_int_equal(get_one(k, what), 1); /* the same read then succeeds */
        settle(what);
        check_all(what);
    }
}

/* ---- promotion ----------------------------------------------------------------------------- */

/* Removes objects that have a DRAM copy (oldest first, not key keep) until DRAM is at most
 * half used, so a promotion is not refused for the high watermark. A removed object's range is
 * not always free at once (an offload task reading it ends first), so it removes as many as the
 * excess needs and then waits for the frees, rather than removing while the ratio lags: under
 * load that removed every object with a DRAM copy, round after round, until the test had no key
 * left to check. */
static void make_room(int keep)
{
    struct mstats s;
    master_stats(&s);
    int need = (int)((s.used_ratio - 0.5) * (double)(SEG / VLEN)) + 1;
    for (int k = 0; k < g.nkeys && s.used_ratio > 0.5 && need > 0; k++) {
        int mem, disk;
        if (k == keep || g.gone[k] || !replicas(g.keys[k], &mem, &disk) || mem == 0)
            continue;
        if (mc_remove(g.r, g.keys[k], true) == 0) {
            g.gone[k] = true;
            need--;
        }
    }
    uint64_t deadline = mc_now_ms() + 3000;
    while (s.used_ratio > 0.5 && mc_now_ms() < deadline) {
        cu_sleep_ms(20);
        master_stats(&s);
    }
}

/* Reads disk-only keys hot (one after another) until the armed drop fired. */
static void hot_until_fired(uint64_t fired, bool allow_fail, const char *what)
{
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    while (mc_rpc_test_drops_fired() == fired && mc_now_ms() < deadline) {
        int k = need_disk_only_key();
        make_room(k);
        hot_reads(k, allow_fail, what);
        uint64_t t = mc_now_ms() + 2000;
        while (mc_rpc_test_drops_fired() == fired && mc_now_ms() < t)
            cu_sleep_ms(20);
    }
    wait_fired(fired, what);
}

/* After a fault: a disk-only key read hot is promoted (the master commits a promotion). */
static void promotion_works(const char *what)
{
    struct mstats s0, s;
    master_stats(&s0);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    do {
        int k = need_disk_only_key();
        make_room(k);
        hot_reads(k, false, what);
        uint64_t t = mc_now_ms() + 2000;
        do {
            master_stats(&s);
            if (s.promo_completed > s0.promo_completed)
                break;
            cu_sleep_ms(20);
        } while (mc_now_ms() < t);
    } while (s.promo_completed <= s0.promo_completed && mc_now_ms() < deadline);
    if (s.promo_completed <= s0.promo_completed)
        fail_msg("%s: no promotion completed after the fault", what);
    settle(what);
}

static void promotion_case(uint16_t method, int when)
{
    char what[160];
    snprintf(what, sizeof(what), "promotion, drop %s %s", mc_method_name(method), when_name(when));
    settle(what);
    uint64_t fired = mc_rpc_test_drops_fired();
    mc_rpc_test_drop_next(method, (enum mc_rpc_test_drop)when);
    hot_until_fired(fired, false, what);
    settle(what);
    check_all(what);
    promotion_works(what);
    check_all(what);
}

static void test_promotion_steps(void **state)
{
    (void)state;
    /* the only RPC of a staged promotion: tasks out, outcomes (success) back */
    const uint16_t steps[] = {MC_METHOD_PROMOTION_OBJECT_HEARTBEAT};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        promotion_case(steps[i], MC_RPC_TEST_DROP_BEFORE_SEND);
        promotion_case(steps[i], MC_RPC_TEST_DROP_AFTER_REPLY);
    }
}

/* Removes key k's record from P's store (the master still lists it): its promotion fails at
 * the holder as a bad source. */
static void drop_record(int k)
{
    struct mc_disk_store *st = mc_disk_tier_store(atomic_load(&g.p->disk));
    const char *kp = g.keys[k];
    uint32_t kl = (uint32_t)strlen(kp);
    assert_int_equal(mc_disk_store_remove(st, &kp, &kl, 1, NULL), 0);
    g.gone[k] = true;
}

/* Reads bad-source keys hot until the master counts a failed promotion, or (fired != NULL)
 * until the armed drop fired. */
static bool bad_sources_until(const uint64_t *fired, const char *what)
{
    struct mstats s0, s;
    master_stats(&s0);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    while (mc_now_ms() < deadline) {
        int k = need_disk_only_key();
        make_room(k);
        drop_record(k);
        hot_reads(k, true, what); /* nothing to read: errors, never bytes of another */
        uint64_t t = mc_now_ms() + 2000;
        do {
            master_stats(&s);
            if (fired ? mc_rpc_test_drops_fired() != *fired : s.promo_failed > s0.promo_failed)
                return true;
            cu_sleep_ms(20);
        } while (mc_now_ms() < t);
    }
    return false;
}

/* A heartbeat dropped while failures ride on it: a disk-only key whose record was removed from
 * P's store is read hot; its task fails at the holder and the heartbeat carrying the report is
 * lost (before sent: P carries it again; after the reply: the master applied it). Then another
 * such key's failure reaches the master. */
static void test_promotion_failure_report(void **state)
{
    (void)state;
    for (int when = MC_RPC_TEST_DROP_BEFORE_SEND; when <= MC_RPC_TEST_DROP_AFTER_REPLY; when++) {
        char what[96];
        snprintf(what, sizeof(what), "promotion failure, drop PromotionObjectHeartbeat %s",
                 when_name(when));
        settle(what);
        uint64_t fired = mc_rpc_test_drops_fired();
        mc_rpc_test_drop_next(MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, (enum mc_rpc_test_drop)when);
        bad_sources_until(&fired, what);
        wait_fired(fired, what);
        settle(what);
        check_all(what);
        /* the same work: another bad source's failure reaches the master */
        if (!bad_sources_until(NULL, what))
            fail_msg("%s: no promotion failure reported afterwards", what);
        settle(what);
    }
}

/* ---- a promotion staged on another client ------------------------------------------------- */

/* Starts D, a mooncake_client daemon with DRAM only: the master stages promotions there once
 * P's segment is full of hard-pinned objects. */
static void start_dram_daemon(void)
{
    char bin[600], master[96], log[128];
    snprintf(bin, sizeof(bin), "%s/mooncake_client", getenv("MC_BIN_DIR"));
    snprintf(master, sizeof(master), "--master=%s", g.m.addr);
    snprintf(log, sizeof(log), "%s/d.log", g.dir);
    const char *argv[] = {
        bin, master, "--host=127.0.0.1", "--segment_size=64MiB", "--log_level=warn", NULL};
    g.d.out_fd = -1;
    assert_int_equal(cu_spawn(&g.d, argv, log), 0);
    struct mc_proc_ready ready;
    if (cu_await_ready(&g.d, MC_PROC_READY_DAEMON, &ready, "daemon D", 20000) != 0)
        fail_msg("daemon D did not start");
}

/* P's segment full of hard-pinned objects and a DRAM-only daemon D with room: a promotion is
 * never staged on D (a range there would outlive P's mount: DESIGN.md §7 "Staged space"). The
 * admitted tasks end in P's failure report (AllocStart finds no room in P's own segment),
 * nothing is written to another client, nothing stays in flight, and every key reads back. */
static void test_no_remote_staging(void **state)
{
    (void)state;
    struct mc_replicate_config pin;
    mc_replicate_config_init(&pin);
    pin.with_hard_pin = true;
    for (int i = 0; i < (int)(SEG / VLEN) + 8; i++) {
        assert_true(g.nkeys < MAX_KEYS);
        int k = g.nkeys;
        snprintf(g.keys[k], sizeof(g.keys[0]), "pin-%d", k);
        g.seeds[k] = (uint32_t)(++g.next_seed * 7919u);
        value_of(g.seeds[k]);
        if (mc_put(g.r, g.keys[k], g.want, VLEN, &pin) != 0)
            break; /* full of pinned objects */
        g.nkeys++;
    }
    settle("pinned fill");
    int list[8], n = 0;
    for (int k = g.nkeys - 1; k >= 0 && n < 8; k--) {
        int mem, disk;
        if (!g.gone[k] && replicas(g.keys[k], &mem, &disk) && mem == 0 && disk > 0)
            list[n++] = k;
    }
    assert_true(n >= 4);
    start_dram_daemon();
    struct mc_worker_stats w0, w;
    mc_worker_get_stats(g.p->worker, &w0);
    struct mstats s0, st;
    master_stats(&s0);
    for (int i = 0; i < n; i++)
        hot_reads(list[i], false, "no remote staging");
    uint64_t t = mc_now_ms() + 10000;
    do {
        master_stats(&st);
        if (st.promo_admitted > s0.promo_admitted && st.promo_in_flight == 0)
            break;
        cu_sleep_ms(20);
    } while (mc_now_ms() < t);
    settle("no remote staging");
    mc_worker_get_stats(g.p->worker, &w);
    fprintf(stderr, "no_remote_staging: admitted %.0f failed %.0f completed %.0f; written %llu\n",
            st.promo_admitted - s0.promo_admitted, st.promo_failed - s0.promo_failed,
            st.promo_completed - s0.promo_completed,
            (unsigned long long)(w.promo_local - w0.promo_local));
    assert_true(st.promo_admitted > s0.promo_admitted);
    assert_true(st.promo_failed - s0.promo_failed == st.promo_admitted - s0.promo_admitted);
    assert_true(st.promo_completed == s0.promo_completed);
    assert_true(w.promo_local == w0.promo_local);
    for (int i = 0; i < n; i++) {
        int mem, disk;
        assert_true(replicas(g.keys[list[i]], &mem, &disk));
        assert_int_equal(mem, 0); /* not on D */
    }
    check_all("no remote staging");
    assert_int_equal(cu_stop(&g.d, SIGTERM, 10000), 0);
}

/* short task timeouts: a task whose report was lost is reaped within seconds */
static const char *const master_flags[] = {"--enable_offload",
                                           "--offload_on_evict",
                                           "--promotion_on_hit",
                                           "--promotion_admission_threshold=2",
                                           "--promotion_task_timeout_sec=2",
                                           "--put_start_discard_timeout_sec=1",
                                           "--put_start_release_timeout_sec=2",
                                           "--default_kv_lease_ttl=200",
                                           "--eviction_ratio=0.3",
                                           "--client_ttl=10",
                                           NULL};

/* ---- a master restart with the re-registration cut ------------------------------------------ */

/* The master is killed (-9) and restarted on its port; P's first re-registration of its disk
 * records is cut (its NotifyOffloadSuccess chunk dropped before it is sent) and P registers
 * again from a new mount. Every key the master listed on LOCAL_DISK before the kill is listed
 * there again, at the same version, and reads back with its bytes: the retried registration
 * still recreates (a cut one used to leave every record refused and deleted by the holder). Keys
 * with only a DRAM copy died with the master. Runs last: the master is a new one afterwards. */
static void test_master_restart_cut_registration(void **state)
{
    (void)state;
    const char *what = "master restart, re-registration cut";
    need_disk_only_key();
    settle(what);
    static uint64_t ver[MAX_KEYS];
    int noted = 0;
    for (int k = 0; k < g.nkeys; k++) {
        int mem, disk;
        ver[k] = 0;
        if (!g.gone[k] && tq_replicas(g.adm, g.keys[k], &mem, &disk, &ver[k]) && disk > 0)
            noted++;
        else
            ver[k] = 0;
    }
    assert_true(noted > 0);
    uint16_t port = g.m.port;
    tm_kill(&g.m);
    uint64_t fired = mc_rpc_test_drops_fired();
    mc_rpc_test_drop_next(MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, MC_RPC_TEST_DROP_BEFORE_SEND);
    uint64_t deadline = mc_now_ms() + WAIT_MS;
    while (tm_start(&g.m, port, master_flags) != 0) {
        if (mc_now_ms() >= deadline)
            fail_msg("%s: the master did not restart on port %u", what, port);
        cu_sleep_ms(200);
    }
    wait_fired(fired, what);
    int back = 0;
    for (int k = 0; k < g.nkeys; k++) {
        if (!ver[k]) {
            g.gone[k] = true; /* its only copy was in the dead master's DRAM view */
            continue;
        }
        int mem = 0, disk = 0;
        uint64_t v = 0;
        deadline = mc_now_ms() + WAIT_MS;
        while (!(tq_replicas(g.adm, g.keys[k], &mem, &disk, &v) && disk > 0 && v == ver[k]) &&
               mc_now_ms() < deadline)
            cu_sleep_ms(50);
        if (disk == 0 || v != ver[k])
            fail_msg("%s: %s was on LOCAL_DISK at version %llu before the kill; now disk %d "
                     "version %llu",
                     what, g.keys[k], (unsigned long long)ver[k], disk, (unsigned long long)v);
        assert_int_equal(get_one(k, what), 1);
        back++;
    }
    fprintf(stderr, "%s: %d of %d disk objects back\n", what, back, noted);
    assert_int_equal(back, noted);
}

/* ---- setup / teardown ---------------------------------------------------------------------- */

static int open_client(uint64_t seg, const char *disk, uint64_t disk_cap, struct mc_client **out)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.m.addr;
    cfg.segment_size = seg;
    cfg.disk_path = disk;
    cfg.disk_capacity = disk_cap;
    cfg.ping_interval_ms = 100;
    cfg.rpc_timeout_ms = 3000;
    cfg.put_retry_window_ms = 3000;
    cfg.log_level = MC_CLIENT_LOG_ERROR;
    return mc_client_open(&cfg, out);
}

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.m.out_fd = -1;
    g.d.out_fd = -1;
    snprintf(g.dir, sizeof(g.dir), "/tmp/mc_faults_tier.XXXXXX");
    if (!mkdtemp(g.dir))
        return -1;
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    if (!g.buf || !g.want)
        return -1;
    if (tm_start(&g.m, 0, master_flags) != 0)
        return -1;
    char disk[128];
    snprintf(disk, sizeof(disk), "%s/p_disk", g.dir);
    if (open_client(SEG, disk, 1ull << 30, &g.p) != 0 || open_client(0, NULL, 0, &g.r) != 0)
        return -1;
    return cu_admin_open(g.m.addr, 5000, &g.adm);
}

static int group_teardown(void **state)
{
    (void)state;
    mc_rpc_test_drop_reset();
    mc_rpc_client_free(g.adm);
    if (g.d.pid > 0)
        cu_stop(&g.d, SIGTERM, 10000);
    mc_client_close(g.r);
    mc_client_close(g.p);
    tm_stop(&g.m);
    free(g.buf);
    free(g.want);
    if (g.dir[0])
        cu_rm_rf(g.dir);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_ERROR); /* the hook's and the reconnects' warnings are expected */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offload_steps),
        cmocka_unit_test(test_offload_append_fails),
        cmocka_unit_test(test_disk_read_steps),
        cmocka_unit_test(test_promotion_steps),
        cmocka_unit_test(test_promotion_failure_report),
        cmocka_unit_test(test_no_remote_staging),
        cmocka_unit_test(test_master_restart_cut_registration),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
