/*
 * test_offload_rereg.c - the master's LOCAL_DISK re-registration rules and its answer to a full
 * disk (src/master/offload.c), driven through master.h with a fake clock, no sleeps:
 *   - where two holders' records of a key meet after a master restart, the higher version wins
 *     whichever registers first; the lower copy is dropped and its holder told to delete it, and
 *     every refusal carries the master's version;
 *   - a holder's complete listing is authoritative: its copies the listing left out are dropped
 *     (a record lost on its disk is no phantom replica), after a master restart and for a holder
 *     that restarts while the master lives;
 *   - a holder that answers UNABLE_OFFLOAD (disk full) gets offload tasks backing off, not one
 *     per eviction cycle; each object is offered a bounded number of times; log lines bounded.
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
#include "common/log.h"
#include "master/eviction.h"
#include "master/lock_order.h"
#include "master/master.h"
#include "mooncake/errors.h"
#include "offload_fixture.h"
#include "test_heartbeat_util.h"
#include "test_master_util.h"

#define TTL_MS 10000ull

struct fx {
    struct mc_fake_clock fc, wall;
    struct mc_master *m;
    struct mc_id h1, h2; /* two holders */
};

enum mode { PUT_END, ON_EVICT, FORCE }; /* named by their flags in the tests */

static struct mc_master *master_new(struct fx *f, uint16_t epoch, enum mode mode)
{
    struct mc_master_config c = of_config(&f->fc, &f->wall, epoch, TTL_MS, 600000);
    c.offload_on_evict = mode != PUT_END;
    c.offload_force_evict = mode == FORCE;
    return of_master(&c);
}

static struct fx *fx_new(enum mode mode)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, OF_T0_MS * 1000000ull);
    mc_fake_clock_init(&f->wall, OF_WALL0_NS);
    f->h1 = tm_id(1);
    f->h2 = tm_id(2);
    f->m = master_new(f, 1, mode);
    return f;
}

/* The master restarts (a later wall clock): a new incarnation, nothing registered. */
static void restart(struct fx *f)
{
    mc_master_free(f->m);
    mc_fake_clock_advance_ms(&f->wall, 5000);
    f->m = master_new(f, 2, PUT_END);
}

static void fx_free(struct fx *f)
{
    of_free(f->m);
    free(f);
}

static void mount_disk(struct fx *f, struct mc_id who, const char *endpoint)
{
    assert_int_equal(mc_master_mount_local_disk(f->m, who, endpoint, 1ull << 30, true), MC_OK);
}

/* One record per call of a listing; *mv: the master's version in the answer. */
static int rereg(struct fx *f, struct mc_id who, const char *key, uint64_t size, uint64_t version,
                 uint32_t crc, bool complete, uint64_t *mv)
{
    struct mc_offload_result it = {.key = key,
                                   .key_len = strlen(key),
                                   .size = size,
                                   .version = version,
                                   .crc32c = crc,
                                   .crc_valid = true};
    int rc = -12345;
    uint64_t v = 0xdeadbeef;
    int frame = mc_master_reregister_disk(f->m, who, &it, 1, complete, &rc, &v);
    if (mv)
        *mv = v;
    return frame != MC_OK ? frame : rc;
}

static int complete_listing(struct fx *f, struct mc_id who)
{
    return mc_master_reregister_disk(f->m, who, NULL, 0, true, NULL, NULL);
}

static struct tm_hb pull(struct fx *f, struct mc_id who)
{
    return tm_pull(f->m, who, 64);
}

static struct mc_key_info query(struct fx *f, const char *key, int want_rc)
{
    return of_query(f->m, key, want_rc);
}

static struct mc_offload_stats ostats(struct fx *f)
{
    return of_stats(f->m);
}

/* Whether key's replicas include a LOCAL_DISK one of who. */
static bool has_disk_of(const struct mc_key_info *ki, struct mc_id who)
{
    for (uint32_t i = 0; i < ki->nreplicas; i++)
        if (ki->replicas[i].type == MC_REPLICA_TYPE_LOCAL_DISK &&
            mc_id_eq(ki->replicas[i].u.disk.holder, who))
            return true;
    return false;
}

/* ---- the higher version wins ----------------------------------------------------------------- */

/* K v1 on H1, K v2 on H2, the master restarted; H1 registers first. v2 takes the key, v1 is
 * dropped and H1 gets a delete of it; H1 sending v1 again is refused with the master's v2. */
static void test_rereg_lower_first_higher_replaces(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    restart(f);
    uint64_t base = mc_master_version_base(f->m);
    uint64_t v1 = base - 20, v2 = base - 10, mv = 0;
    mount_disk(f, f->h1, "10.0.0.1:18001");
    mount_disk(f, f->h2, "10.0.0.2:18002");
    assert_int_equal(rereg(f, f->h1, "K", 100, v1, 11, false, &mv), MC_OK);
    assert_int_equal(mv, v1);
    assert_int_equal(rereg(f, f->h2, "K", 200, v2, 22, false, &mv), MC_OK);
    assert_int_equal(mv, v2);
    struct mc_key_info ki = query(f, "K", MC_OK);
    assert_int_equal(ki.version, v2);
    assert_int_equal(ki.size, 200);
    assert_int_equal(ki.nreplicas, 1);
    assert_true(has_disk_of(&ki, f->h2));
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "K", 1, &g), MC_OK);
    assert_int_equal(g.version, v2);
    assert_int_equal(g.crc32c, 22);
    /* H1 is told to delete its v1 record; H2 is told nothing */
    struct tm_hb h = pull(f, f->h1);
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_string_equal(h.it[0].key, "K");
    assert_int_equal(h.it[0].version, v1);
    assert_int_equal(pull(f, f->h2).n, 0);
    /* v1 again (a retry): refused, with the master's newer version, so H1 deletes it */
    assert_int_equal(rereg(f, f->h1, "K", 100, v1, 11, false, &mv), MC_ERR_INVALID_VERSION);
    assert_int_equal(mv, v2);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.reregister_replaced, 1);
    assert_int_equal(st.disk_replicas, 1);
    assert_int_equal(st.file_allocated_bytes, 200);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.key_count, 1);
    fx_free(f);
}

/* The reverse order: v2 first; v1 is refused with v2 and nothing of H2 is touched. */
static void test_rereg_higher_first_lower_refused(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    restart(f);
    uint64_t base = mc_master_version_base(f->m);
    uint64_t v1 = base - 20, v2 = base - 10, mv = 0;
    mount_disk(f, f->h1, "10.0.0.1:18001");
    mount_disk(f, f->h2, "10.0.0.2:18002");
    assert_int_equal(rereg(f, f->h2, "K", 200, v2, 22, false, &mv), MC_OK);
    assert_int_equal(rereg(f, f->h1, "K", 100, v1, 11, false, &mv), MC_ERR_INVALID_VERSION);
    assert_int_equal(mv, v2);
    struct mc_key_info ki = query(f, "K", MC_OK);
    assert_int_equal(ki.version, v2);
    assert_int_equal(ki.nreplicas, 1);
    assert_true(has_disk_of(&ki, f->h2));
    assert_int_equal(pull(f, f->h2).n, 0);
    assert_int_equal(pull(f, f->h1).n, 0);
    assert_int_equal(ostats(f).reregister_replaced, 0);
    fx_free(f);
}

/* Equal versions: both copies attach; the same version with other bytes is refused with the
 * (equal) master version, which tells that holder to delete it. */
static void test_rereg_equal_versions_both_attach(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    restart(f);
    uint64_t v = mc_master_version_base(f->m) - 5, mv = 0;
    struct mc_id h3 = tm_id(3);
    mount_disk(f, f->h1, "10.0.0.1:18001");
    mount_disk(f, f->h2, "10.0.0.2:18002");
    mount_disk(f, h3, "10.0.0.3:18003");
    assert_int_equal(rereg(f, f->h1, "K", 100, v, 11, false, &mv), MC_OK);
    assert_int_equal(rereg(f, f->h2, "K", 100, v, 11, false, &mv), MC_OK);
    assert_int_equal(mv, v);
    assert_int_equal(rereg(f, h3, "K", 100, v, 99, false, &mv), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(mv, v);
    struct mc_key_info ki = query(f, "K", MC_OK);
    assert_int_equal(ki.nreplicas, 2);
    assert_true(has_disk_of(&ki, f->h1));
    assert_true(has_disk_of(&ki, f->h2));
    assert_int_equal(pull(f, f->h1).n, 0);
    fx_free(f);
}

/* After its first registration is over (its first heartbeat), a holder's higher version does
 * not replace: this incarnation may have dropped it since. The refusal carries the lower
 * master version (the holder keeps its newer record). An object written by this incarnation is
 * never replaced by a record. */
static void test_rereg_higher_after_first_registration_refused_with_version(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    restart(f);
    uint64_t base = mc_master_version_base(f->m);
    uint64_t v1 = base - 20, v2 = base - 10, mv = 0;
    mount_disk(f, f->h1, "10.0.0.1:18001");
    mount_disk(f, f->h2, "10.0.0.2:18002");
    assert_int_equal(rereg(f, f->h1, "K", 100, v1, 11, false, &mv), MC_OK);
    assert_int_equal(pull(f, f->h2).n, 0); /* H2's first registration ends */
    assert_int_equal(rereg(f, f->h2, "K", 200, v2, 22, false, &mv), MC_ERR_INVALID_VERSION);
    assert_int_equal(mv, v1);
    assert_true(mv < v2);
    assert_int_equal(query(f, "K", MC_OK).version, v1);
    /* absent and not recreatable: version 0 (the holder deletes) */
    assert_int_equal(rereg(f, f->h2, "gone", 200, v2, 22, false, &mv), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mv, 0);
    /* a Put of this incarnation is never replaced by an older-incarnation record */
    struct mc_id c = tm_id(9);
    struct mc_segment_desc sd = tm_seg(9, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, c, &sd, NULL), MC_OK);
    assert_int_equal(tm_put(f->m, c, "P", 300), MC_OK);
    struct mc_id h4 = tm_id(4);
    mount_disk(f, h4, "10.0.0.4:18004");
    uint64_t vp = query(f, "P", MC_OK).version;
    assert_int_equal(rereg(f, h4, "P", 300, base - 1, 1, false, &mv), MC_ERR_INVALID_VERSION);
    assert_int_equal(mv, vp);
    fx_free(f);
}

/* ---- a complete listing is authoritative ---------------------------------------------------- */

/* A restarted master recovers: H2 lists K (newer), K is removed (H2 acknowledges the delete),
 * then H1, slower, lists its older record of K in its first registration. K stays removed: the
 * removal is remembered for the recovery window. The same for a key Put by this master and
 * removed. After the window nothing unknown is recreated at all. */
static void test_removed_in_recovery_stays_removed(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    restart(f);
    uint64_t base = mc_master_version_base(f->m), mv = 0;
    mount_disk(f, f->h2, "10.0.0.2:18002");
    assert_int_equal(rereg(f, f->h2, "K", 200, base - 10, 22, false, &mv), MC_OK);
    assert_int_equal(mc_master_remove(f->m, "K", 1, false), MC_OK);
    struct tm_hb h = pull(f, f->h2);
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_int_equal(mc_master_offload_ack_deletes(f->m, f->h2, &h.it[0].task_id, 1), 1);
    /* H1 comes later with an older record of K: refused, K stays removed */
    mount_disk(f, f->h1, "10.0.0.1:18001");
    assert_int_equal(rereg(f, f->h1, "K", 100, base - 20, 11, false, &mv), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mv, 0);
    query(f, "K", MC_ERR_OBJECT_NOT_FOUND);
    /* a record of a key this master never saw is still recovered inside the window */
    assert_int_equal(rereg(f, f->h1, "L", 100, base - 20, 11, false, &mv), MC_OK);
    query(f, "L", MC_OK);
    /* past the window: no record recreates anything */
    mc_fake_clock_advance_ms(&f->fc, 61000);
    mc_master_tick_offload(f->m);
    assert_int_equal(rereg(f, f->h1, "M", 100, base - 20, 11, false, &mv), MC_ERR_OBJECT_NOT_FOUND);
    query(f, "M", MC_ERR_OBJECT_NOT_FOUND);
    fx_free(f);
}

/* A holder restarts while the master lives (same id, within its TTL): its listing leaves out a
 * record lost at recovery. Until the listing is complete nothing goes; then the unlisted copy
 * goes, the disk-only object with it, and the key can be Put again. */
static void test_listing_drops_unlisted_holder_restart(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    struct mc_segment_desc sd = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->h1, &sd, NULL), MC_OK);
    mount_disk(f, f->h1, "10.0.0.1:18001");
    const char *keys[] = {"p", "q", "r"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(tm_put(f->m, f->h1, keys[i], 4096), MC_OK);
    struct tm_hb h = pull(f, f->h1);
    assert_int_equal(h.n, 3);
    struct mc_offload_result res[3];
    int rcs[3];
    for (size_t i = 0; i < 3; i++)
        res[i] = (struct mc_offload_result){.task_id = h.it[i].task_id,
                                            .key = h.it[i].key,
                                            .key_len = strlen(h.it[i].key),
                                            .size = h.it[i].size,
                                            .version = h.it[i].version,
                                            .crc32c = h.it[i].crc,
                                            .crc_valid = true};
    assert_int_equal(mc_master_notify_offload(f->m, f->h1, res, 3, false, rcs), MC_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rcs[i], MC_OK);
    /* all three leave DRAM (disk-only); s is Put and stays in DRAM (its offload pending) */
    mc_fake_clock_advance_ms(&f->fc, 1000);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    assert_int_equal(es.evicted, 3);
    assert_int_equal(tm_put(f->m, f->h1, "s", 4096), MC_OK);
    struct mc_key_info kp = query(f, "p", MC_OK);
    assert_int_equal(kp.nreplicas, 1);
    assert_int_equal(query(f, "q", MC_OK).nreplicas, 1);
    /* the phantom's symptom: a Put of q is refused while the master lists its disk copy */
    struct mc_put_start_result pr;
    assert_int_equal(mc_master_put_start(f->m, f->h1, "q", 1, 4096, NULL, &pr),
                     MC_ERR_OBJECT_ALREADY_EXISTS);

    /* the holder restarts: mounts again, lists p (first chunk), then an empty final chunk; q's
     * and r's records were lost at recovery */
    mount_disk(f, f->h1, "10.0.0.1:18011");
    uint64_t mv;
    assert_int_equal(rereg(f, f->h1, "p", 4096, kp.version, 4096 ^ 1, false, &mv), MC_OK);
    query(f, "q", MC_OK); /* the listing is not complete yet: nothing dropped */
    assert_int_equal(ostats(f).unlisted_dropped, 0);
    assert_int_equal(complete_listing(f, f->h1), MC_OK);
    query(f, "q", MC_ERR_OBJECT_NOT_FOUND);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.key_count, 2); /* q and r erased with their last copy: p and s are left */
    kp = query(f, "p", MC_OK);
    assert_int_equal(kp.nreplicas, 1);
    assert_true(has_disk_of(&kp, f->h1));
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.unlisted_dropped, 2); /* q's and r's */
    assert_int_equal(st.disk_replicas, 1);
    query(f, "r", MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(query(f, "s", MC_OK).nreplicas, 1); /* DRAM copies are not the listing's */
    /* q can be Put again: no phantom copy blocks it */
    assert_int_equal(tm_put(f->m, f->h1, "q", 4096), MC_OK);
    fx_free(f);
}

/* After a master restart: each holder's complete listing drops only its own unlisted copies
 * (none here), never another holder's; an empty complete listing drops all of the holder's. A
 * listing cut by a new mount (another registration started) drops nothing. */
static void test_listing_after_restart_per_holder(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    restart(f);
    uint64_t base = mc_master_version_base(f->m), mv;
    mount_disk(f, f->h1, "10.0.0.1:18001");
    mount_disk(f, f->h2, "10.0.0.2:18002");
    assert_int_equal(rereg(f, f->h1, "a", 100, base - 3, 1, false, &mv), MC_OK);
    assert_int_equal(rereg(f, f->h1, "b", 100, base - 2, 1, true, &mv), MC_OK);
    assert_int_equal(rereg(f, f->h2, "c", 100, base - 1, 1, true, &mv), MC_OK);
    query(f, "a", MC_OK);
    query(f, "b", MC_OK);
    query(f, "c", MC_OK);
    assert_int_equal(ostats(f).unlisted_dropped, 0);
    /* H1 mounts again and its listing is cut by yet another mount: nothing dropped */
    mount_disk(f, f->h1, "10.0.0.1:18001");
    assert_int_equal(rereg(f, f->h1, "a", 100, base - 3, 1, false, &mv), MC_OK);
    mount_disk(f, f->h1, "10.0.0.1:18001");
    assert_int_equal(rereg(f, f->h1, "b", 100, base - 2, 1, true, &mv), MC_OK);
    query(f, "b", MC_OK);
    /* ...the listing of the last mount named only b: a goes */
    query(f, "a", MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(ostats(f).unlisted_dropped, 1);
    /* H2 restarts with nothing on disk: its empty complete listing drops c, not H1's b */
    mount_disk(f, f->h2, "10.0.0.2:18002");
    assert_int_equal(complete_listing(f, f->h2), MC_OK);
    query(f, "c", MC_ERR_OBJECT_NOT_FOUND);
    query(f, "b", MC_OK);
    assert_int_equal(ostats(f).unlisted_dropped, 2);
    /* the old form (no complete marker) never drops anything */
    mount_disk(f, f->h1, "10.0.0.1:18001");
    int rc;
    struct mc_offload_result none = {.key = "zz", .key_len = 2, .size = 1, .version = 1};
    assert_int_equal(mc_master_notify_offload(f->m, f->h1, &none, 1, true, &rc), MC_OK);
    query(f, "b", MC_OK);
    fx_free(f);
}

/* A restarted master; H1's first registration is cut after its first chunk (the connection
 * broke, a call timed out under load) and H1 mounts again to retry, without ever having
 * polled. The retry is still its first registration: the records the cut left out are
 * recreated, not refused with version 0 (which makes the holder delete them: every disk copy
 * after the cut would be lost). A key removed between the cut and the retry stays removed (its
 * tombstone), and once H1 has polled, a later mount recreates nothing. */
static void test_cut_registration_retried_still_recovers(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    restart(f);
    uint64_t base = mc_master_version_base(f->m), mv = 1;
    mount_disk(f, f->h1, "10.0.0.1:18001");
    assert_int_equal(rereg(f, f->h1, "a", 100, base - 4, 1, false, &mv), MC_OK);
    assert_int_equal(rereg(f, f->h1, "r", 100, base - 3, 1, false, &mv), MC_OK);
    assert_int_equal(mc_master_remove(f->m, "r", 1, false), MC_OK); /* between cut and retry */
    /* the cut: H1 mounts again and lists everything from the start */
    mount_disk(f, f->h1, "10.0.0.1:18001");
    assert_int_equal(rereg(f, f->h1, "a", 100, base - 4, 1, false, &mv), MC_OK);
    assert_int_equal(rereg(f, f->h1, "r", 100, base - 3, 1, false, &mv), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mv, 0);
    assert_int_equal(rereg(f, f->h1, "b", 100, base - 2, 1, true, &mv), MC_OK);
    assert_int_equal(mv, base - 2);
    struct mc_key_info ka = query(f, "a", MC_OK), kb = query(f, "b", MC_OK);
    assert_true(has_disk_of(&ka, f->h1));
    assert_true(has_disk_of(&kb, f->h1));
    query(f, "r", MC_ERR_OBJECT_NOT_FOUND);
    /* H1 polls (its first registration is over); another mount recreates nothing */
    (void)pull(f, f->h1);
    mount_disk(f, f->h1, "10.0.0.1:18001");
    assert_int_equal(rereg(f, f->h1, "c", 100, base - 1, 1, false, &mv), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mv, 0);
    query(f, "c", MC_ERR_OBJECT_NOT_FOUND);
    fx_free(f);
}

/* ---- a full disk backs off ------------------------------------------------------------------ */

struct log_count {
    struct mc_logger lg;
    int backoff_lines;
    int lines;
};

static void count_sink(void *arg, enum mc_log_level level, const char *line, size_t len)
{
    (void)level;
    (void)len;
    struct log_count *c = arg;
    c->lines++;
    if (strstr(line, "disk full"))
        c->backoff_lines++;
}

/* offload_on_evict (and with offload_force_evict), DRAM over its watermark, the only holder
 * NACKs every offload with UNABLE_OFFLOAD. Over 10 simulated minutes of eviction cycles (6,000
 * of 100 ms), the holder gets a bounded number of tasks (each object at most 3 times), not one
 * per object per cycle; objects given up stay in DRAM (offload_on_evict: nothing dropped without a
 * disk copy) or are evicted without offload (offload_force_evict); log lines stay few; the
 * back-off decisions are counted. */
static void full_disk_backs_off(enum mode mode)
{
    /* static: a failed assertion leaves the scope by longjmp, the thread keeps pointing here */
    static struct log_count lc;
    lc = (struct log_count){.lg = {.level = MC_LOG_DEBUG, .sink = count_sink}};
    lc.lg.arg = &lc;
    mc_log_scope(&lc.lg);
    struct fx *f = fx_new(mode);
    struct mc_segment_desc sd = tm_seg(1, 1 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->h1, &sd, NULL), MC_OK);
    mount_disk(f, f->h1, "10.0.0.1:18001");
    enum { N = 16 };
    char k[16];
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "o%d", i);
        assert_int_equal(tm_put(f->m, f->h1, k, 60 * 1024), MC_OK); /* 960 KiB of 1 MiB */
    }
    lc.lines = 0;
    uint64_t tasks = 0;
    for (int cycle = 0; cycle < 6000; cycle++) {
        mc_fake_clock_advance_ms(&f->fc, 100);
        mc_master_tick_eviction(f->m);
        if (cycle % 10 == 0) { /* keep the holder alive */
            struct mc_ping_result pr;
            assert_int_equal(mc_master_ping(f->m, f->h1, &pr), MC_OK);
        }
        struct tm_hb h = pull(f, f->h1);
        for (size_t i = 0; i < h.n; i++) {
            if (h.it[i].drop)
                continue;
            tasks++;
            tm_notify(f->m, f->h1, &h, i, MC_ERR_UNABLE_OFFLOAD);
        }
    }
    struct mc_offload_stats st = ostats(f);
    assert_true(tasks > 0);
    assert_true(tasks <= 3 * N); /* each object offered 3 times at most */
    assert_int_equal(st.nacked, tasks);
    /* offload_on_evict: the objects are offered until given up; with offload_force_evict they
     * are evicted without offload while the holder backs off */
    assert_true(mode == FORCE || st.given_up >= 1);
    assert_true(st.holder_backoffs >= 1);
    assert_true(st.holder_backoffs <= 3 * N);
    assert_int_equal(st.in_flight, 0);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    if (mode == ON_EVICT) { /* nothing without a disk copy is dropped */
        assert_int_equal(ms.evicted_key_count, 0);
        assert_int_equal(ms.key_count, N);
    } else { /* given up objects were evicted without offload: the watermark holds again */
        assert_true(ms.evicted_key_count >= 1);
        assert_int_equal(st.forced_evictions, ms.evicted_key_count);
        assert_int_equal(ms.key_count, N - ms.evicted_key_count);
    }
    /* log lines: a handful, not one per cycle or per task */
    assert_true(lc.backoff_lines >= 1);
    assert_true(lc.backoff_lines <= 10);
    assert_true(lc.lines < 200);
    print_message("mode=%d tasks=%llu backoffs=%llu given_up=%llu log_lines=%d\n", (int)mode,
                  (unsigned long long)tasks, (unsigned long long)st.holder_backoffs,
                  (unsigned long long)st.given_up, lc.backoff_lines);
    fx_free(f);
}

static void test_full_disk_backs_off_on_evict(void **state)
{
    (void)state;
    full_disk_backs_off(ON_EVICT);
}

static void test_full_disk_backs_off_force_evict(void **state)
{
    (void)state;
    full_disk_backs_off(FORCE);
}

/* Puts one more object of h1 and pulls: want_tasks tasks (0 or 1); the task is answered with
 * status (0: stored). */
static void put_answer(struct fx *f, int *seq, int status, size_t want_tasks)
{
    char k[16];
    snprintf(k, sizeof(k), "b%d", (*seq)++);
    assert_int_equal(tm_put(f->m, f->h1, k, 4096), MC_OK);
    struct tm_hb h = pull(f, f->h1);
    assert_int_equal(h.n, want_tasks);
    if (!h.n)
        return;
    tm_notify(f->m, f->h1, &h, 0, status);
}

/* Offload at PutEnd: a holder that NACKs with UNABLE_OFFLOAD gets no task for 500 ms, then 1 s
 * after the next NACK; a stored offload ends the back-off (the next NACK pauses 500 ms again).
 * Other NACKs do not back off. */
static void test_backoff_doubles_and_ends_on_success(void **state)
{
    (void)state;
    struct fx *f = fx_new(PUT_END);
    struct mc_segment_desc sd = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->h1, &sd, NULL), MC_OK);
    mount_disk(f, f->h1, "10.0.0.1:18001");
    int seq = 0;
    put_answer(f, &seq, MC_ERR_INTERNAL_ERROR, 1); /* another failure: no back-off */
    put_answer(f, &seq, MC_ERR_UNABLE_OFFLOAD, 1);
    assert_int_equal(ostats(f).holder_backoffs, 1);
    put_answer(f, &seq, 0, 0); /* paused */
    mc_fake_clock_advance_ms(&f->fc, 499);
    put_answer(f, &seq, 0, 0);
    mc_fake_clock_advance_ms(&f->fc, 1);
    put_answer(f, &seq, MC_ERR_UNABLE_OFFLOAD, 1); /* the pause is over; this NACK doubles it */
    assert_int_equal(ostats(f).holder_backoffs, 2);
    mc_fake_clock_advance_ms(&f->fc, 999);
    put_answer(f, &seq, 0, 0);
    mc_fake_clock_advance_ms(&f->fc, 1);
    put_answer(f, &seq, 0, 1); /* stored: the back-off ends */
    put_answer(f, &seq, MC_ERR_UNABLE_OFFLOAD, 1);
    mc_fake_clock_advance_ms(&f->fc, 500); /* 500 ms again, not 2 s */
    put_answer(f, &seq, 0, 1);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.holder_backoffs, 3);
    assert_int_equal(st.completed, 2);
    assert_int_equal(st.nacked, 4);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rereg_lower_first_higher_replaces),
        cmocka_unit_test(test_rereg_higher_first_lower_refused),
        cmocka_unit_test(test_rereg_equal_versions_both_attach),
        cmocka_unit_test(test_rereg_higher_after_first_registration_refused_with_version),
        cmocka_unit_test(test_removed_in_recovery_stays_removed),
        cmocka_unit_test(test_listing_drops_unlisted_holder_restart),
        cmocka_unit_test(test_listing_after_restart_per_holder),
        cmocka_unit_test(test_cut_registration_retried_still_recovers),
        cmocka_unit_test(test_full_disk_backs_off_on_evict),
        cmocka_unit_test(test_full_disk_backs_off_force_evict),
        cmocka_unit_test(test_backoff_doubles_and_ends_on_success),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
