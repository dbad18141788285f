/*
 * cluster_data.h - checked reads and retried writes of the cluster tests (test_cluster.c,
 * test_disk_tier.c, test_promotion_cluster.c; their client opener also test_client.c,
 * test_client_epoch.c and test_holder_stream.c): the part of their shared fixture that talks to
 * the store through libmooncake_client, so it lives apart from cluster_util.c, which tests
 * without the client library link too.
 *
 * A read that outlasts its lease on a loaded machine answers LEASE_EXPIRED (the bytes were not
 * trusted); these helpers read again, a few times, before reporting. A checked value is compared
 * in full against the bytes the test wrote (cu_fill of the same seed), never by a prefix.
 */
#ifndef MC_TESTS_CLUSTER_DATA_H
#define MC_TESTS_CLUSTER_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_util.h"
#include "mooncake/client.h"

#define CU_TIER_MEMORY 1 /* a COMPLETE MEMORY replica */
#define CU_TIER_DISK 2   /* a COMPLETE LOCAL_DISK replica */

/* Opens an in-test client of cl's master: segment_size bytes of DRAM (0: none, so every byte
 * it moves crosses to a daemon), a LOCAL_DISK store at disk_path of disk_capacity bytes (NULL:
 * none), put_retry_window_ms (0: the library's default). Returns mc_client_open's result. */
int cu_open_client(const struct cu_cluster *cl, uint64_t segment_size, const char *disk_path,
                   uint64_t disk_capacity, uint32_t put_retry_window_ms, struct mc_client **out);
/* A client of the master at addr ("HOST:PORT") with seg bytes of DRAM (0: none), checksums on
 * or off, a Ping every 100 ms and 2 s calls; fails the test when it does not open. */
struct mc_client *cu_open_client_at(const char *addr, uint64_t seg, bool checksums);
/* mc_put, again every 20 ms while it fails (eviction and offload make room) within
 * timeout_ms. Returns the last result. */
int cu_put_retry(struct mc_client *c, const char *key, const void *buf, size_t len,
                 const struct mc_replicate_config *rc, int timeout_ms);
/* Which tiers key lists (CU_TIER_* bits) by the lease-free admin query; 0 when none. */
int cu_tiers(struct mc_client *c, const char *key);
/* mc_get of key into buf (zeroed first), read again on LEASE_EXPIRED (at most 5 more times).
 * Returns the bytes read or the error. */
int64_t cu_read(struct mc_client *c, const char *key, void *buf, size_t cap);
/* The same through mc_batch_get_tiers (asserted to succeed as a call), at most 5 reads in all;
 * the tier that served it into *tier and the reads made into *reads (either may be NULL). */
int64_t cu_read_tier(struct mc_client *c, const char *key, void *buf, size_t cap, int *tier,
                     int *reads);
/* A checked read of key (cu_read) against want[0..len): 1 when it returned those bytes, 0 when
 * OBJECT_NOT_FOUND, else the negative error. Other bytes or another length fail the test at
 * once, the message headed by what. */
int cu_get_checked(struct mc_client *c, const char *key, void *buf, const void *want, size_t len,
                   const char *what);
/* Asserts got == len and buf[0..len) == want[0..len) (says which key and why first). */
void cu_assert_value(const char *key, int64_t got, const void *buf, const void *want, size_t len);

#endif
