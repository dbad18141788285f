/*
 * objects_batch.c - the batch forms of the object operations: BatchPutStart / PutEnd /
 * PutRevoke, BatchRemove, BatchGetReplicaList (whole and windowed) and BatchExistKey, with
 * upstream's master_batch_<op>_* counters. The single-key forms are in objects.c.
 *
 * BatchGetReplicaList / BatchExistKey sort the keys by shard and work in windows of 16 keys: the
 * window's shards are read-locked together in ascending order (DESIGN.md §7 lock order), the
 * keys' home slots, entries and objects are prefetched one stage at a time for all of them (so
 * the three dependent cache misses of each lookup overlap across keys instead of adding up),
 * then each key is looked up and answered; a grouped key that moved between the route lookup and
 * the lock is retried on its own. Put and Remove batches are per-key loops (each key may need a
 * different shard, and they take write locks briefly).
 */
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/objects.h"
#include "master/shard.h"
#include "mooncake/errors.h"

#define CNT_ADD(m, field, v) atomic_fetch_add_explicit(&(m)->c.field, (v), memory_order_relaxed)

static void batch_account_failed(struct mc_master *m, enum mc_batch_op op, size_t n, size_t failed,
                                 int rc);

/* master_batch_<op>_*: one call of n items (rc: the call's own result); returns the items that
 * failed (all n when rc failed). */
static size_t batch_account(struct mc_master *m, enum mc_batch_op op, size_t n, const int *rcs,
                            int rc)
{
    size_t failed = n;
    if (rc == MC_OK) {
        failed = 0;
        for (size_t i = 0; i < n; i++)
            failed += rcs[i] != MC_OK;
    }
    batch_account_failed(m, op, n, failed, rc);
    return failed;
}

/* The same with the failed count known (all n when rc failed). */
static void batch_account_failed(struct mc_master *m, enum mc_batch_op op, size_t n, size_t failed,
                                 int rc)
{
    _Atomic uint64_t *c = m->c.batch[op];
    if (rc != MC_OK)
        failed = n;
    atomic_fetch_add_explicit(&c[MC_BF_REQUESTS], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c[MC_BF_ITEMS], n, memory_order_relaxed);
    atomic_fetch_add_explicit(&c[MC_BF_FAILED_ITEMS], failed, memory_order_relaxed);
    if (rc != MC_OK || (n && failed == n))
        atomic_fetch_add_explicit(&c[MC_BF_FAILURES], 1, memory_order_relaxed);
    else if (failed)
        atomic_fetch_add_explicit(&c[MC_BF_PARTIAL], 1, memory_order_relaxed);
}

int mc_master_batch_put_start(struct mc_master *m, struct mc_id client,
                              const struct mc_key_ref *keys, const uint64_t *sizes, size_t n,
                              const struct mc_master_replicate_config *cfg,
                              struct mc_put_start_result *out, int *rcs)
{
    if (n && (!keys || !sizes || !out || !rcs)) {
        batch_account(m, MC_BATCH_PUT_START, n, NULL, MC_ERR_INVALID_PARAMS);
        return MC_ERR_INVALID_PARAMS;
    }
    for (size_t i = 0; i < n; i++)
        rcs[i] = mc_master_put_start(m, client, keys[i].data, keys[i].len, sizes[i], cfg, &out[i]);
    batch_account(m, MC_BATCH_PUT_START, n, rcs, MC_OK);
    return MC_OK;
}

int mc_master_batch_put_end(struct mc_master *m, struct mc_id client, const struct mc_key_ref *keys,
                            const uint64_t *versions, const uint32_t *crcs, size_t n, int *rcs)
{
    if (n && (!keys || !rcs)) {
        batch_account(m, MC_BATCH_PUT_END, n, NULL, MC_ERR_INVALID_PARAMS);
        return MC_ERR_INVALID_PARAMS;
    }
    for (size_t i = 0; i < n; i++)
        rcs[i] = mc_master_put_end(m, client, keys[i].data, keys[i].len, versions ? versions[i] : 0,
                                   crcs ? crcs[i] : 0, crcs != NULL);
    batch_account(m, MC_BATCH_PUT_END, n, rcs, MC_OK);
    return MC_OK;
}

int mc_master_batch_put_revoke(struct mc_master *m, struct mc_id client,
                               const struct mc_key_ref *keys, const uint64_t *versions, size_t n,
                               int *rcs)
{
    if (n && (!keys || !rcs)) {
        batch_account(m, MC_BATCH_PUT_REVOKE, n, NULL, MC_ERR_INVALID_PARAMS);
        return MC_ERR_INVALID_PARAMS;
    }
    for (size_t i = 0; i < n; i++)
        rcs[i] =
            mc_master_put_revoke(m, client, keys[i].data, keys[i].len, versions ? versions[i] : 0);
    batch_account(m, MC_BATCH_PUT_REVOKE, n, rcs, MC_OK);
    return MC_OK;
}

int mc_master_batch_remove(struct mc_master *m, const struct mc_key_ref *keys, size_t n, bool force,
                           int *rcs)
{
    if (n && (!keys || !rcs))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++)
        rcs[i] = mc_master_remove(m, keys[i].data, keys[i].len, force);
    return MC_OK;
}

/* ---- shard-grouped reads ------------------------------------------------------------------- */

struct bitem {
    uint64_t h;
    uint32_t shard;
    uint32_t idx;
};

/* Sorts it[0..k) by (shard, idx) with tmp[0..k) as scratch: the items arrive in idx order, so a
 * stable sort by shard is enough, done as two counting passes of 5 bits each (no allocation
 * and no comparison calls, where qsort's merge sort took a malloc for a batch of 128). */
_Static_assert(MC_NSHARDS <= 1024, "two 5-bit radix passes cover every shard number");
static void sort_by_shard(struct bitem *it, struct bitem *tmp, size_t k)
{
    for (unsigned pass = 0; pass < 2; pass++) {
        const struct bitem *src = pass ? tmp : it;
        struct bitem *dst = pass ? it : tmp;
        unsigned shift = pass * 5;
        size_t pos[33] = {0};
        for (size_t i = 0; i < k; i++)
            pos[((src[i].shard >> shift) & 31) + 1]++;
        for (unsigned b = 1; b < 33; b++)
            pos[b] += pos[b - 1];
        for (size_t i = 0; i < k; i++)
            dst[pos[(src[i].shard >> shift) & 31]++] = src[i];
    }
}

enum bop { BOP_GET, BOP_EXIST };

#define WINDOW 16 /* keys whose lookups overlap (their shards locked together) */

/* Runs op for every valid key, windows of keys under shared locks. Keys not found in a routed
 * (group) shard are retried with a full lookup. batch_keys: the keys of the whole request (a
 * windowed Get calls this once per window), for the promotion trigger. */
static int batch_read(struct mc_master *m, const struct mc_key_ref *keys, size_t n, enum bop op,
                      size_t batch_keys, struct mc_get_result *gout, bool *eout, int *rcs)
{
    struct bitem stackv[2 * 64]; /* the items, then the sort's scratch */
    struct bitem *it = n <= 64 ? stackv : malloc(2 * n * sizeof(*it));
    if (!it)
        return MC_ERR_INTERNAL_ERROR;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        rcs[i] = mc_master_check_key(m, keys[i].data, keys[i].len);
        if (op == BOP_GET)
            gout[i].nreplicas = 0;
        else
            eout[i] = false;
        if (rcs[i] != MC_OK)
            continue;
        uint64_t h = mc_hash_key(keys[i].data, keys[i].len);
        it[k++] = (struct bitem){.h = h, .shard = mc_master_key_shard(m, h), .idx = (uint32_t)i};
    }
    sort_by_shard(it, it + (it == stackv ? 64 : n), k);
    uint64_t now = mc_master_now_ms(m);
    const bool announce = op == BOP_GET && mc_obj_events_wanted(m, MC_OBJ_EV_READ);
    /* The window's reads, announced after the unlock: first those that found only a readable
     * disk copy (a promotion may follow), then the others. */
    uint32_t cand[WINDOW], mem[WINDOW];
    uint8_t mem_found[WINDOW];
    for (size_t a = 0; a < k;) {
        /* A window of up to WINDOW keys: its shards read-locked together in ascending order (the
         * lock order), the lookups' cache misses overlapped stage by stage, then each key's
         * lookup and reply as usual. */
        size_t e = a + WINDOW < k ? a + WINDOW : k;
        uint32_t ncand = 0, nmem = 0;
        for (size_t j = a; j < e; j++)
            __builtin_prefetch(&m->shards[it[j].shard]);
        for (size_t j = a; j < e; j++)
            if (j == a || it[j].shard != it[j - 1].shard)
                mc_shard_rdlock(&m->shards[it[j].shard]);
        for (int stage = 0; stage < 3; stage++)
            for (size_t j = a; j < e; j++)
                mc_shard_prefetch(&m->shards[it[j].shard], it[j].h, stage);
        for (size_t j = a; j < e; j++) {
            struct mc_shard *s = &m->shards[it[j].shard];
            uint32_t i = it[j].idx;
            struct mc_object *o = mc_shard_find(s, it[j].h, keys[i].data, keys[i].len);
            if (!o) {
                /* Routed elsewhere than its home shard: retried below. */
                rcs[i] = ((uint32_t)it[j].h & MC_SHARD_MASK) != it[j].shard
                             ? 1
                             : MC_ERR_OBJECT_NOT_FOUND;
                continue;
            }
            if (op == BOP_GET) {
                rcs[i] = mc_master_get_locked(m, s, o, now, &gout[i]);
                if (announce && rcs[i] == MC_OK) {
                    unsigned found = mc_obj_found_tiers(o);
                    if (found == MC_READ_FOUND_DISK) {
                        cand[ncand++] = (uint32_t)j;
                    } else {
                        mem_found[nmem] = (uint8_t)found;
                        mem[nmem++] = (uint32_t)j;
                    }
                }
            } else {
                eout[i] = mc_master_exist_locked(m, s, o, now);
            }
        }
        for (size_t j = a; j < e; j++)
            if (j == a || it[j].shard != it[j - 1].shard)
                mc_shard_unlock(&m->shards[it[j].shard]);
        for (uint32_t c = 0; c < ncand; c++) {
            const struct bitem *b = &it[cand[c]];
            struct mc_obj_read_ev ev = {.key = keys[b->idx].data,
                                        .key_len = keys[b->idx].len,
                                        .key_hash = b->h,
                                        .batch_keys = batch_keys,
                                        .found = MC_READ_FOUND_DISK};
            mc_obj_ev_read(m, &ev);
        }
        for (uint32_t c = 0; c < nmem; c++) {
            const struct bitem *b = &it[mem[c]];
            struct mc_obj_read_ev ev = {.key = keys[b->idx].data,
                                        .key_len = keys[b->idx].len,
                                        .key_hash = b->h,
                                        .batch_keys = batch_keys,
                                        .found = mem_found[c]};
            mc_obj_ev_read(m, &ev);
        }
        a = e;
    }
    for (size_t j = 0; j < k; j++) {
        uint32_t i = it[j].idx;
        if (rcs[i] != 1)
            continue;
        struct mc_shard *s;
        struct mc_object *o = mc_master_lock_find(m, it[j].h, keys[i].data, keys[i].len, false, &s);
        if (!o) {
            rcs[i] = MC_ERR_OBJECT_NOT_FOUND;
            continue;
        }
        bool counted = false;
        unsigned found = 0;
        if (op == BOP_GET) {
            rcs[i] = mc_master_get_locked(m, s, o, now, &gout[i]);
            counted = announce && rcs[i] == MC_OK;
            found = counted ? mc_obj_found_tiers(o) : 0;
        } else {
            eout[i] = mc_master_exist_locked(m, s, o, now);
        }
        mc_shard_unlock(s);
        if (counted) {
            struct mc_obj_read_ev ev = {.key = keys[i].data,
                                        .key_len = keys[i].len,
                                        .key_hash = it[j].h,
                                        .batch_keys = batch_keys,
                                        .found = found};
            mc_obj_ev_read(m, &ev);
        }
    }
    if (op == BOP_EXIST) /* a missing key is not an error for Exist */
        for (size_t i = 0; i < n; i++)
            if (rcs[i] == MC_ERR_OBJECT_NOT_FOUND)
                rcs[i] = MC_OK;
    if (it != stackv)
        free(it);
    return MC_OK;
}

int mc_master_batch_get_replica_list(struct mc_master *m, const struct mc_key_ref *keys, size_t n,
                                     struct mc_get_result *out, int *rcs)
{
    if (n && (!keys || !out || !rcs)) {
        batch_account(m, MC_BATCH_GET_REPLICA_LIST, n, NULL, MC_ERR_INVALID_PARAMS);
        return MC_ERR_INVALID_PARAMS;
    }
    CNT_ADD(m, total_get_nums, n);
    int rc = batch_read(m, keys, n, BOP_GET, n, out, NULL, rcs);
    size_t fails = batch_account(m, MC_BATCH_GET_REPLICA_LIST, n, rcs, rc);
    if (rc != MC_OK)
        return rc;
    CNT_ADD(m, get_replica_list_requests, n);
    CNT_ADD(m, get_replica_list_failures, fails);
    return MC_OK;
}

int mc_master_batch_get_replica_list_windowed(struct mc_master *m, const struct mc_key_ref *keys,
                                              size_t n, size_t window, struct mc_get_result *out,
                                              int *rcs, mc_batch_get_emit_fn emit, void *arg)
{
    if (n && (!keys || !out || !rcs || !emit || window == 0)) {
        batch_account_failed(m, MC_BATCH_GET_REPLICA_LIST, n, n, MC_ERR_INVALID_PARAMS);
        return MC_ERR_INVALID_PARAMS;
    }
    CNT_ADD(m, total_get_nums, n);
    size_t fails = 0;
    int rc = MC_OK;
    for (size_t a = 0; a < n && rc == MC_OK; a += window) {
        size_t cnt = n - a < window ? n - a : window;
        rc = batch_read(m, keys + a, cnt, BOP_GET, n, out, NULL, rcs);
        if (rc != MC_OK)
            break;
        for (size_t i = 0; i < cnt; i++)
            fails += rcs[i] != MC_OK;
        rc = emit(arg, a, cnt, out, rcs);
    }
    batch_account_failed(m, MC_BATCH_GET_REPLICA_LIST, n, fails, rc);
    if (rc != MC_OK)
        return rc;
    CNT_ADD(m, get_replica_list_requests, n);
    CNT_ADD(m, get_replica_list_failures, fails);
    return MC_OK;
}

int mc_master_batch_exist_key(struct mc_master *m, const struct mc_key_ref *keys, size_t n,
                              bool *exists, int *rcs)
{
    if (n && (!keys || !exists || !rcs)) {
        batch_account(m, MC_BATCH_EXIST_KEY, n, NULL, MC_ERR_INVALID_PARAMS);
        return MC_ERR_INVALID_PARAMS;
    }
    int rc = batch_read(m, keys, n, BOP_EXIST, n, NULL, exists, rcs);
    size_t fails = batch_account(m, MC_BATCH_EXIST_KEY, n, rcs, rc);
    if (rc != MC_OK)
        return rc;
    CNT_ADD(m, exist_key_requests, n);
    CNT_ADD(m, exist_key_failures, fails);
    return MC_OK;
}
