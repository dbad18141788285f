/*
 * test_ha_dram.c - DRAM objects survive a high-availability fail-over: one etcd member, two
 * mooncake_master processes (--enable_ha, lease TTL 2 s, no disk tier anywhere), a
 * mooncake_client holder daemon with a DRAM segment only, and an in-test library client W
 * without DRAM, both given the cluster as --master=etcd://127.0.0.1:P/t_had.
 *
 *   W puts N objects (they land in the holder's DRAM; the holder stream files them in the
 *   holder's index), waits past the index's flush interval, removes a few of them, removes one
 *   more while the holder is SIGSTOPped (answered once the holder is fenced), and the leader is
 *   SIGKILLed; the holder is continued. The standby takes over with a higher epoch, the holder
 * finds it through etcd, re-mounts its segment with the same range and re-registers its index:
 * every object that was not removed reads back through W with its exact bytes (content hash and
 * full compare), every removed one stays removed, and a new Put lands beside them. Deadlines are
 * generous liveness bounds. Exit 77 when etcd is not installed.
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

#include "cluster_data.h"
#include "ha_fixture.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "test_skip.h"

#define N 32
#define NREMOVED 4           /* dram-0..3: removed just before the kill */
#define STOPPED_KEY NREMOVED /* dram-4: removed while the holder is SIGSTOPped */
#define FIRST_KEPT (NREMOVED + 1)
#define VLEN (64u * 1024u)
#define WAIT_MS 30000

static struct hx g;

static void value_of(int i, uint8_t *buf)
{
    cu_fill(buf, VLEN, 0xd7a40000u + (uint64_t)i);
}

/* FNV-1a 64 of the bytes: the content hash compared first, the full compare after it. */
static uint64_t content_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void check_key(struct mc_client *w, int i, uint8_t *want, uint8_t *buf, int wait_ms)
{
    char key[32];
    snprintf(key, sizeof(key), "dram-%d", i);
    value_of(i, want);
    memset(buf, 0, VLEN);
    uint64_t deadline = cu_now_ms() + (uint64_t)wait_ms;
    int64_t r;
    while ((r = cu_read(w, key, buf, VLEN)) < 0 && cu_now_ms() < deadline)
        cu_sleep_ms(50);
    if (r != (int64_t)VLEN)
        fail_msg("%s: read returned %lld (%s) after the fail-over", key, (long long)r,
                 r < 0 ? mc_strerror((int)r) : "short");
    assert_true(content_hash(buf, VLEN) == content_hash(want, VLEN));
    cu_assert_value(key, r, buf, want, VLEN);
}

static int setup(void **state)
{
    (void)state;
    return hx_setup(&g, "mc-had", "t_had");
}

static int teardown(void **state)
{
    (void)state;
    hx_teardown(&g);
    return 0;
}

static void test_dram_survives_failover(void **state)
{
    (void)state;
    if (g.etcd_rc == 77)
        MC_SKIP("etcd is not installed");
    assert_int_equal(g.etcd_rc, 0);
    const char *mflags[] = {"--holder_delete_timeout_ms=500", NULL};
    uint64_t e1 = hx_start_pair(&g, mflags, WAIT_MS); /* the daemon and W name the cluster */

    char ep[256];
    const char *hflags[] = {"--segment_size=16MiB", "--master_wait=20s", NULL};
    assert_int_equal(cu_start_daemon(&g.c, &g.holder, "holder", hflags, ep, sizeof(ep), 20000), 0);
    struct mc_client *w = NULL;
    assert_int_equal(cu_open_client(&g.c, 0, NULL, 0, 0, &w), 0);

    uint8_t *want = malloc(VLEN), *buf = malloc(VLEN);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        value_of(i, want);
        assert_int_equal(cu_put_retry(w, key, want, VLEN, NULL, WAIT_MS), 0);
    }
    /* the holder index files commits every --holder_index_flush_ms (10 ms): objects put well
     * before the kill are in it */
    cu_sleep_ms(300);
    /* removed immediately before the kill: answered once the holder dropped them (the delete
     * rule), so the re-registration cannot bring them back */
    for (int i = 0; i < NREMOVED; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        assert_int_equal(mc_remove(w, key, false), 0);
    }

    /* removed while the holder is stopped: answered after --holder_delete_timeout_ms (the
     * holder's index fenced), then the leader dies before the holder runs again */
    assert_int_equal(cu_freeze(g.holder.pid), 0); /* every thread stopped, not just signalled */
    snprintf(key, sizeof(key), "dram-%d", STOPPED_KEY);
    int stopped_rm = mc_remove(w, key, false);
    assert_int_equal(cu_stop(&g.ma, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(kill(g.holder.pid, SIGCONT), 0);
    assert_int_equal(stopped_rm, 0);
    uint64_t e2 = hx_wait_leads(g.rpc_b, WAIT_MS);
    assert_true(e2 > e1);

    /* every object not removed reads back, exact bytes, through the new leader (misses while
     * the holder re-mounts and re-registers) */
    for (int i = FIRST_KEPT; i < N; i++)
        check_key(w, i, want, buf, WAIT_MS);
    /* the re-registration has been applied (it is one batch): the removed keys stay removed */
    for (int i = 0; i < FIRST_KEPT; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        assert_int_equal(mc_get(w, key, buf, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    }
    /* a new Put lands beside the re-registered ranges, never on them */
    for (int i = N; i < 2 * N; i++) {
        snprintf(key, sizeof(key), "dram-%d", i);
        value_of(i, want);
        assert_int_equal(cu_put_retry(w, key, want, VLEN, NULL, WAIT_MS), 0);
    }
    for (int i = FIRST_KEPT; i < 2 * N; i++)
        check_key(w, i, want, buf, 0);

    mc_client_close(w);
    free(want);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dram_survives_failover),
    };
    return MC_RUN_TESTS(tests, setup, teardown);
}
