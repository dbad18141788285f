/*
 * cluster_data.c - checked reads and retried writes of the cluster tests. See cluster_data.h.
 */
#include "cluster_data.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_util.h"

#define READS 5 /* reads of one value while it answers LEASE_EXPIRED */

int cu_open_client(const struct cu_cluster *cl, uint64_t segment_size, const char *disk_path,
                   uint64_t disk_capacity, uint32_t put_retry_window_ms, struct mc_client **out)
{
    struct mc_client_config cfg;

    mc_client_config_init(&cfg);
    cfg.master_address = cl->rpc;
    cfg.segment_size = segment_size;
    if (disk_path) {
        cfg.disk_path = disk_path;
        cfg.disk_capacity = disk_capacity;
    }
    if (put_retry_window_ms)
        cfg.put_retry_window_ms = put_retry_window_ms;
    return mc_client_open(&cfg, out);
}

struct mc_client *cu_open_client_at(const char *addr, uint64_t seg, bool checksums)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = addr;
    cfg.segment_size = seg;
    cfg.checksums = checksums;
    cfg.ping_interval_ms = 100;
    cfg.rpc_timeout_ms = 2000;
    struct mc_client *c = NULL;
    int rc = mc_client_open(&cfg, &c);
    if (rc)
        fail_msg("mc_client_open: %s", mc_strerror(rc));
    return c;
}

int cu_put_retry(struct mc_client *c, const char *key, const void *buf, size_t len,
                 const struct mc_replicate_config *rc, int timeout_ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)timeout_ms;
    int r;

    while ((r = mc_put(c, key, buf, len, rc)) != 0 && cu_now_ms() < deadline)
        cu_sleep_ms(20);
    return r;
}

int cu_tiers(struct mc_client *c, const char *key)
{
    struct mc_object_info info;
    int t = 0;

    if (mc_query(c, key, &info) != 0)
        return 0;
    for (size_t k = 0; k < info.replica_count; k++)
        if (info.replicas[k].status == MC_REPLICA_COMPLETE)
            t |= info.replicas[k].type == MC_REPLICA_LOCAL_DISK ? CU_TIER_DISK : CU_TIER_MEMORY;
    mc_object_info_free(&info);
    return t;
}

int64_t cu_read(struct mc_client *c, const char *key, void *buf, size_t cap)
{
    int64_t n;

    memset(buf, 0, cap);
    n = mc_get(c, key, buf, cap);
    for (int t = 0; t < READS && n == MC_ERR_LEASE_EXPIRED; t++)
        n = mc_get(c, key, buf, cap);
    return n;
}

int64_t cu_read_tier(struct mc_client *c, const char *key, void *buf, size_t cap, int *tier,
                     int *reads)
{
    const char *kp = key;
    void *bp = buf;
    int64_t res = 0;
    int t = -1, n = 0;

    for (; n < READS && (n == 0 || res == MC_ERR_LEASE_EXPIRED); n++) {
        memset(buf, 0, cap);
        assert_int_equal(mc_batch_get_tiers(c, 1, &kp, &bp, &cap, &res, &t), 0);
    }
    if (tier)
        *tier = t;
    if (reads)
        *reads = n;
    return res;
}

int cu_get_checked(struct mc_client *c, const char *key, void *buf, const void *want, size_t len,
                   const char *what)
{
    int64_t n = cu_read(c, key, buf, len);

    if (n == (int64_t)len) {
        if (memcmp(buf, want, len) != 0)
            fail_msg("%s: get %s returned other bytes", what, key);
        return 1;
    }
    if (n >= 0)
        fail_msg("%s: get %s returned %lld bytes", what, key, (long long)n);
    return n == MC_ERR_OBJECT_NOT_FOUND ? 0 : (int)n;
}

void cu_assert_value(const char *key, int64_t got, const void *buf, const void *want, size_t len)
{
    if (got != (int64_t)len)
        fprintf(stderr, "get %s: %lld (%s)\n", key, (long long)got,
                got < 0 ? mc_strerror((int)got) : "wrong length");
    assert_int_equal(got, (int64_t)len);
    assert_memory_equal(buf, want, len);
}
