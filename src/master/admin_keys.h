/*
 * admin_keys.h - listing the master's keys a page at a time (the HTTP admin API's /get_all_keys).
 *
 * A listing walks the shards in index order; within a shard the keys come in byte order. The
 * cursor is (shard, last key returned): the next page starts after it, so a key that exists for
 * the whole listing is returned exactly once, whatever is put or removed meanwhile (a key added
 * or removed during the listing may or may not appear). Only complete objects (PutEnd done) are
 * listed. Each shard is read-locked once per page it contributes to; no lease, no side effect.
 */
#ifndef MC_MASTER_ADMIN_KEYS_H
#define MC_MASTER_ADMIN_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mc_master;

/* One page: keys[i] (keys_len[i] bytes, not NUL-terminated) point into buf. */
struct mc_key_page {
    char *buf;
    size_t *keys_off;
    size_t *keys_len;
    size_t n;
    bool more;           /* keys remain after this page */
    uint32_t next_shard; /* the cursor to pass for the next page (valid when more) */
    char *next_after;    /* the last key returned (malloc'd) */
    size_t next_after_len;
};

/* Lists up to limit (>= 1) keys after the cursor (shard, after, after_len); the first page is
 * shard 0 with after NULL. Returns 0 (out filled; free with mc_key_page_free), or
 * MC_ERR_INVALID_PARAMS (shard out of range, limit 0), MC_ERR_INTERNAL_ERROR (no memory). */
int mc_master_list_keys(struct mc_master *m, uint32_t shard, const char *after, size_t after_len,
                        size_t limit, struct mc_key_page *out);
void mc_key_page_free(struct mc_key_page *p);

/* The number of shards a cursor may name (shard < this). */
uint32_t mc_master_list_keys_shards(void);

#endif
