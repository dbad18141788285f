/*
 * test_master_util.h - fixture helpers shared by the master core tests (test_master_*.c):
 * a master on a fake clock with manual ticks, segment descriptions, one-call Put.
 */
#ifndef MC_TEST_MASTER_UTIL_H
#define MC_TEST_MASTER_UTIL_H

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "master/master.h"
#include "mooncake/errors.h"

#define MIB (1ull << 20)

static inline struct mc_id tm_id(uint64_t n)
{
    return (struct mc_id){0xc11e47, n};
}

static inline struct mc_segment_desc tm_seg(uint64_t n, uint64_t size)
{
    struct mc_segment_desc d;
    memset(&d, 0, sizeof(d));
    d.id = (struct mc_id){0x5e6, n};
    snprintf(d.name, sizeof(d.name), "seg-%llu", (unsigned long long)n);
    d.base = 0x7f0000000000ull + n * 0x100000000ull;
    d.size = size;
    snprintf(d.endpoint, sizeof(d.endpoint), "10.0.0.%llu:17%03llu", (unsigned long long)n,
             (unsigned long long)n);
    snprintf(d.protocol, sizeof(d.protocol), "tcp");
    snprintf(d.transport_meta, sizeof(d.transport_meta), "meta-%llu", (unsigned long long)n);
    return d;
}

static inline struct mc_master *tm_master(struct mc_fake_clock *fc, uint16_t epoch)
{
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc->clock;
    c.manual_ticks = true;
    c.epoch = epoch;
    struct mc_master *m = NULL;
    if (mc_master_new(&c, &m) != MC_OK)
        return NULL;
    return m;
}

/* PutStart + PutEnd with the default config; crc = len ^ size. */
static inline int tm_put(struct mc_master *m, struct mc_id client, const char *key, uint64_t size)
{
    struct mc_put_start_result r;
    int rc = mc_master_put_start(m, client, key, strlen(key), size, NULL, &r);
    if (rc != MC_OK)
        return rc;
    return mc_master_put_end(m, client, key, strlen(key), r.version, (uint32_t)(strlen(key) ^ size),
                             true);
}

#endif
