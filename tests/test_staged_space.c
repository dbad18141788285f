/*
 * test_staged_space.c - a promotion's staged DRAM range under faults, and a holder restarted
 * within its TTL, as separate processes on loopback (DESIGN.md §7 "Staged space"; mailbox.h
 * "Closed connections").
 *
 * Each case starts its own mooncake_master (--enable_offload --offload_on_evict
 * --promotion_on_hit, threshold 2, a 500 ms read lease) and holder daemon H (mooncake_client,
 * a 16 MiB DRAM segment and a --disk_path), and two in-test clients without DRAM or disk: C
 * (checksums on) and N (checksums off), so every byte they move crosses to H. 24 values of
 * 1 MiB are Put: eviction offloads the older ones to H's disk, and a LOCAL_DISK-only key A is
 * read threshold + 1 times, so H's worker stages it (PromotionAllocStart) and then stalls before
 * its write (MC_TEST_PROMOTION_STALL_MS, test builds). While it stalls:
 *
 *   remove_during_stall  A is removed (the task is cancelled);
 *   reaper_during_stall  nothing: the master's reaper (--promotion_task_timeout_sec=1) ends
 *                        the task;
 *   stopped_past_ttl     H is SIGSTOPped past its TTL (3 s; the master expires it and unmounts
 *                        its segment), then SIGCONTed: it mounts its segment again (a new
 *                        epoch) before its stalled write is due.
 *
 * Then new keys are Put (into the range that an immediate free would have handed out again)
 * and, once the stalled write has happened, every key still listed is read through C (bytes
 * compared in full: no CHECKSUM_MISMATCH) and through N (checksums off: no foreign bytes). In
 * the first two cases no new key may be placed on the staged range while the task's range is
 * parked, and the parked gauge returns to 0 after H's report.
 *
 *   holder_restarted     H is SIGKILLed while its polls are parked and, before it is back
 *                        (its mailbox lives until its TTL), a promotion of A is admitted; H
 *                        is restarted with the same client id (its --disk_path keeps it). A
 *                        is promoted and nothing stays in flight (offload or promotion) well
 *                        within the 30 s promotion timeout: the task was not handed to the
 *                        dead connection's parked poll (which would hold it 30 s).
 *
 * Everything is polled with deadlines; every process dies with the test (PR_SET_PDEATHSIG) and
 * is stopped at the end of its case; the temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_data.h"
#include "cluster_util.h"
#include "mooncake/client.h"

#define VLEN (1u << 20)
#define NPUT 24
#define NNEW 6
#define THRESHOLD 2
#define START_MS 20000
#define WAIT_MS 20000

static struct {
    struct cu_cluster cl;
    char disk[160], ep[256];
    struct cu_proc master, h;
    struct mc_client *c; /* checksums on */
    struct mc_client *n; /* checksums off */
    uint8_t *buf, *want;
} g;

static void value_of(const char *key, uint8_t *buf)
{
    uint64_t seed = 1469598103934665603ull;
    for (const char *p = key; *p; p++)
        seed = (seed ^ (uint8_t)*p) * 1099511628211ull;
    cu_fill(buf, VLEN, seed);
}

static int start_master(const char *timeout_flag, const char *ttl_flag)
{
    const char *flags[] = {ttl_flag,
                           "--default_kv_lease_ttl=500",
                           "--enable_offload",
                           "--offload_on_evict",
                           "--promotion_on_hit",
                           "--promotion_admission_threshold=2",
                           timeout_flag,
                           "--log_level=info",
                           NULL};
    return cu_start_master(&g.cl, &g.master, 0, flags, START_MS);
}

static int start_holder(int stall_ms)
{
    const struct cu_holder_opts o = {.segment_size = "16MiB", .stall_ms = stall_ms};
    return cu_start_holder(&g.cl, &g.h, g.disk, &o, g.ep, sizeof(g.ep), START_MS);
}

static int open_client(bool checksums, struct mc_client **out)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.cl.rpc;
    cfg.segment_size = 0;
    cfg.checksums = checksums;
    cfg.put_retry_window_ms = 3000;
    cfg.ping_interval_ms = 200; /* alive through stopped_past_ttl's short TTL on a busy host */
    return mc_client_open(&cfg, out);
}

/* A master metric (no labels); -1 when absent. */
static double metric(const char *name)
{
    return cu_master_metric(&g.cl, name);
}

static bool wait_metric(const char *name, double want, int timeout_ms)
{
    return cu_wait_master_metric(&g.cl, name, want, timeout_ms);
}

static void start_case(const char *timeout_flag, const char *ttl_flag, int stall_ms)
{
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.h.out_fd = -1;
    assert_int_equal(cu_cluster_init(&g.cl, "mc_staged"), 0);
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.cl.dir);
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    assert_non_null(g.buf);
    assert_non_null(g.want);
    assert_int_equal(start_master(timeout_flag, ttl_flag), 0);
    assert_int_equal(start_holder(stall_ms), 0);
    assert_int_equal(open_client(true, &g.c), 0);
    assert_int_equal(open_client(false, &g.n), 0);
}

/* Stops everything the case started (also the teardown after a failed assertion). */
static void end_case(void)
{
    mc_client_close(g.c);
    mc_client_close(g.n);
    g.c = g.n = NULL;
    if (g.h.pid > 0)
        kill(g.h.pid, SIGCONT); /* a case may have failed while H was stopped */
    cu_stop(&g.h, SIGKILL, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    if (g.cl.dir[0])
        cu_cluster_destroy(&g.cl);
    g.cl.dir[0] = '\0';
    free(g.buf);
    free(g.want);
    g.buf = g.want = NULL;
}

static int teardown(void **state)
{
    (void)state;
    end_case();
    return 0;
}

static void put_key(const char *key, const struct mc_replicate_config *rc)
{
    value_of(key, g.want);
    int r = cu_put_retry(g.c, key, g.want, VLEN, rc, WAIT_MS);
    if (r)
        fprintf(stderr, "put %s: %s\n", key, mc_strerror(r));
    assert_int_equal(r, 0);
}

/* Reads key through C (checksums on) and N (checksums off): its own bytes in full, or
 * cleanly gone (OBJECT_NOT_FOUND: evicted without a disk copy). Returns true when read. */
static bool check_key(const char *key)
{
    value_of(key, g.want);
    int64_t n = cu_read(g.c, key, g.buf, VLEN);
    if (n == MC_ERR_OBJECT_NOT_FOUND)
        return false;
    cu_assert_value(key, n, g.buf, g.want, VLEN);
    n = cu_read(g.n, key, g.buf, VLEN);
    if (n == MC_ERR_OBJECT_NOT_FOUND)
        return false;
    cu_assert_value(key, n, g.buf, g.want, VLEN);
    return true;
}

/* The MEMORY replica of key with status st (offset into *off); false when none. */
static bool memory_replica(const char *key, enum mc_replica_status st, uint64_t *off)
{
    struct mc_object_info info;
    bool found = false;
    if (mc_query(g.c, key, &info) != 0)
        return false;
    for (size_t k = 0; k < info.replica_count && !found; k++)
        if (info.replicas[k].type == MC_REPLICA_MEMORY && info.replicas[k].status == st) {
            *off = info.replicas[k].offset;
            found = true;
        }
    mc_object_info_free(&info);
    return found;
}

/* Puts NPUT values; returns a key that lists only a LOCAL_DISK replica (into a). */
static void fill_and_pick(char *a, size_t cap)
{
    char key[32];
    for (int i = 0; i < NPUT; i++) {
        snprintf(key, sizeof(key), "old-%02d", i);
        put_key(key, NULL);
    }
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    for (;;) {
        for (int i = 0; i < NPUT; i++) {
            snprintf(key, sizeof(key), "old-%02d", i);
            if (cu_tiers(g.c, key) == CU_TIER_DISK) {
                snprintf(a, cap, "%s", key);
                return;
            }
        }
        if (cu_now_ms() >= deadline)
            fail_msg("no LOCAL_DISK-only key appeared");
        cu_sleep_ms(100);
    }
}

/* Reads a past the threshold and waits until H staged it (a PROCESSING MEMORY replica); its
 * offset into *off. */
static void stage(const char *a, uint64_t *off)
{
    for (int r = 0; r < THRESHOLD + 1; r++)
        check_key(a);
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    while (!memory_replica(a, MC_REPLICA_PROCESSING, off)) {
        if (cu_now_ms() >= deadline) {
            cu_dump_log(&g.h, "holder");
            fail_msg("%s was never staged", a);
        }
        cu_sleep_ms(10);
    }
}

/* NNEW new keys; with a parked range [lo, lo + VLEN) given (lo != UINT64_MAX), none of them may
 * be placed on it. Returns how many landed on it. */
static int put_new(uint64_t lo)
{
    char key[32];
    int on_range = 0;
    for (int i = 0; i < NNEW; i++) {
        snprintf(key, sizeof(key), "new-%02d", i);
        put_key(key, NULL);
        uint64_t off;
        if (lo != UINT64_MAX && memory_replica(key, MC_REPLICA_COMPLETE, &off) && off < lo + VLEN &&
            off + VLEN > lo)
            on_range++;
    }
    return on_range;
}

/* Every key still listed reads back its own bytes through both clients. */
static void check_all(void)
{
    char key[32];
    int read = 0;
    for (int i = 0; i < NPUT; i++) {
        snprintf(key, sizeof(key), "old-%02d", i);
        read += check_key(key);
    }
    for (int i = 0; i < NNEW; i++) {
        snprintf(key, sizeof(key), "new-%02d", i);
        read += check_key(key);
    }
    fprintf(stderr, "check_all: %d keys read back intact\n", read);
    assert_true(read >= NNEW);
}

/* ---- cases --------------------------------------------------------------------------------- */

enum stall_case { REMOVE, REAPER };

static void stall_case(enum stall_case how)
{
    enum { STALL_MS = 6000 };
    start_case(how == REAPER ? "--promotion_task_timeout_sec=1" : "--promotion_task_timeout_sec=30",
               "--client_ttl=10", STALL_MS);
    char a[32];
    uint64_t lo;
    fill_and_pick(a, sizeof(a));
    stage(a, &lo);
    uint64_t staged_at = cu_now_ms();
    if (how == REMOVE) {
        int rc;
        uint64_t deadline = cu_now_ms() + 3000;
        while ((rc = mc_remove(g.c, a, false)) != 0 && cu_now_ms() < deadline)
            cu_sleep_ms(20); /* the reads' 500 ms leases */
        assert_int_equal(rc, 0);
        assert_true(metric("master_promotion_cancelled_total") >= 1);
    } else {
        assert_true(wait_metric("master_promotion_expired_total", 1, 3000));
    }
    /* the task ended while H may still write: its range is parked, not free */
    assert_true(cu_now_ms() < staged_at + STALL_MS - 500); /* H has not written yet */
    assert_true(metric("master_promotion_parked_ranges") == 1);
    int on_range = put_new(lo);
    fprintf(stderr, "stall_case %d: %d new keys placed on the staged range while parked\n", how,
            on_range);
    assert_int_equal(on_range, 0);
    /* H's late write and its report (NotifyPromotionSuccess on an ended task) free the range */
    assert_true(wait_metric("master_promotion_parked_ranges", 0, STALL_MS + WAIT_MS));
    assert_true(cu_now_ms() >= staged_at + STALL_MS - 1000);
    check_all();
}

static void test_remove_during_stall(void **state)
{
    (void)state;
    stall_case(REMOVE);
}

static void test_reaper_during_stall(void **state)
{
    (void)state;
    stall_case(REAPER);
}

static void test_stopped_past_ttl(void **state)
{
    (void)state;
    enum { STALL_MS = 14000 };
    start_case("--promotion_task_timeout_sec=30", "--client_ttl=3", STALL_MS);
    char a[32];
    uint64_t lo;
    fill_and_pick(a, sizeof(a));
    stage(a, &lo);
    uint64_t staged_at = cu_now_ms();
    assert_int_equal(kill(g.h.pid, SIGSTOP), 0);
    /* the master expires H (its DRAM objects and its mount go) */
    uint64_t deadline = cu_now_ms() + 9000;
    while (metric("master_promotion_in_flight") != 0 && cu_now_ms() < deadline)
        cu_sleep_ms(100);
    bool ended = metric("master_promotion_in_flight") == 0;
    assert_int_equal(kill(g.h.pid, SIGCONT), 0);
    assert_true(ended);
    /* H mounts its segment again (a new epoch); new keys land in the new mount, before H's
     * stalled write is due */
    assert_int_equal(put_new(UINT64_MAX), 0);
    uint64_t now = cu_now_ms();
    fprintf(stderr, "stopped_past_ttl: new keys put %llu ms after the staging\n",
            (unsigned long long)(now - staged_at));
    assert_true(now < staged_at + STALL_MS - 1000);
    /* the stalled write is refused by H itself (another mount): nothing lands */
    cu_sleep_ms((int)(staged_at + STALL_MS + 1500 - now));
    check_all();
    assert_true(metric("master_promotion_parked_ranges") == 0);
    /* and H did try: its worker refused the write for the ended mount */
    char path[300];
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/holder.log", g.cl.dir);
    char *log = cu_slurp(path, &len);
    assert_non_null(log);
    bool refused = strstr(log, "write for an earlier mount of the segment refused") != NULL;
    free(log);
    if (!refused)
        cu_dump_log(&g.h, "holder");
    assert_true(refused);
}

static void test_holder_restarted(void **state)
{
    (void)state;
    start_case("--promotion_task_timeout_sec=30", "--client_ttl=10", 0);
    char a[32];
    fill_and_pick(a, sizeof(a));
    assert_true(wait_metric("master_offload_in_flight", 0, WAIT_MS));
    double done0 = metric("master_promotion_completed_total");
    double off0 = metric("master_offload_completed_total");
    /* H dies with its polls parked; before it is back a promotion of a is admitted (H's
     * mailbox lives until its TTL) */
    assert_int_equal(cu_stop(&g.h, SIGKILL, 5000), 128 + SIGKILL);
    cu_sleep_ms(100);
    for (int r = 0; r < THRESHOLD + 1; r++)
        (void)mc_get(g.c, a, g.buf, VLEN); /* H is down: no bytes, but the Gets count */
    double adm = metric("master_promotion_admitted_total");
    double dead = metric("master_mailbox_dead_polls_total");
    fprintf(stderr,
            "holder_restarted: promotions admitted %.0f, dead polls dropped %.0f while H "
            "was down\n",
            adm, dead);
    assert_true(dead >= 1); /* its parked polls were dropped when the connection closed */
    assert_true(adm >= 1);
    uint64_t t0 = cu_now_ms();
    assert_int_equal(start_holder(0), 0);
    /* a is promoted (read again: a task the dead incarnation took is not coming back) */
    uint64_t off, deadline = t0 + 15000;
    while (!memory_replica(a, MC_REPLICA_COMPLETE, &off) && cu_now_ms() < deadline) {
        (void)mc_get(g.c, a, g.buf, VLEN);
        cu_sleep_ms(100);
    }
    bool promoted = memory_replica(a, MC_REPLICA_COMPLETE, &off);
    bool quiet = wait_metric("master_promotion_in_flight", 0, (int)(deadline - cu_now_ms())) &&
                 wait_metric("master_offload_in_flight", 0, (int)(t0 + 20000 - cu_now_ms()));
    fprintf(stderr,
            "holder_restarted: promoted %d, in flight 0 %d, %llu ms after the restart; "
            "promotions %.0f, offloads %.0f completed since the kill\n",
            promoted, quiet, (unsigned long long)(cu_now_ms() - t0),
            metric("master_promotion_completed_total") - done0,
            metric("master_offload_completed_total") - off0);
    if (!promoted || !quiet)
        cu_dump_log(&g.master, "master");
    assert_true(promoted);
    assert_true(quiet);
    assert_true(metric("master_promotion_completed_total") > done0);
    check_key(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_remove_during_stall, teardown),
        cmocka_unit_test_teardown(test_reaper_during_stall, teardown),
        cmocka_unit_test_teardown(test_stopped_past_ttl, teardown),
        cmocka_unit_test_teardown(test_holder_restarted, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
