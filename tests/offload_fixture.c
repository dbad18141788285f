/*
 * offload_fixture.c - see offload_fixture.h.
 */
#include "offload_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "master/lock_order.h"
#include "mooncake/errors.h"
#include "test_master_util.h"

struct mc_master_config of_config(struct mc_fake_clock *fc, struct mc_fake_clock *wall,
                                  uint16_t epoch, uint64_t ttl_ms, uint64_t release_ms)
{
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc->clock;
    if (wall)
        c.wall_clock = &wall->clock;
    c.manual_ticks = true;
    c.epoch = epoch;
    c.eviction_threads = 1;
    c.client_ttl_ms = ttl_ms;
    if (release_ms)
        c.put_start_release_timeout_ms = release_ms;
    c.enable_offload = true;
    return c;
}

struct mc_master *of_master(const struct mc_master_config *c)
{
    struct mc_master *m = NULL;
    assert_int_equal(mc_master_new(c, &m), MC_OK);
    return m;
}

void of_mount_holder(struct mc_master *m, struct mc_id a, uint64_t seg_size, bool disk)
{
    struct mc_segment_desc s1 = tm_seg(1, seg_size);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    if (disk)
        assert_int_equal(mc_master_mount_local_disk(m, a, OF_DISK_EP, 1ull << 30, true), MC_OK);
}

uint64_t of_put(struct mc_master *m, struct mc_id a, const char *key, uint64_t size)
{
    const char *pref[] = {"seg-1"};
    struct mc_master_replicate_config cfg;
    mc_master_replicate_config_init(&cfg);
    cfg.preferred_segments = pref;
    cfg.n_preferred = 1;
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(m, a, key, strlen(key), size, &cfg, &r), MC_OK);
    assert_int_equal(
        mc_master_put_end(m, a, key, strlen(key), r.version, (uint32_t)size ^ 0x5a, true), MC_OK);
    return r.version;
}

struct mc_key_info of_query(struct mc_master *m, const char *key, int want_rc)
{
    struct mc_key_info ki;
    memset(&ki, 0, sizeof(ki));
    assert_int_equal(mc_master_query_key(m, key, strlen(key), &ki), want_rc);
    return ki;
}

struct mc_offload_stats of_stats(struct mc_master *m)
{
    struct mc_offload_stats st;
    mc_master_offload_stats(m, &st);
    return st;
}

void of_free(struct mc_master *m)
{
    mc_master_free(m);
    assert_int_equal(mc_lo_depth(), 0);
}
