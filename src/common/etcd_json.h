/*
 * etcd_json.h - the JSON side of the etcd gateway client (etcd.c): building request bodies and
 * reading replies, with every quirk of the gateway listed in etcd.h. Pure functions (no I/O), so
 * tests feed them canned replies. Private to etcd.c and its tests.
 */
#ifndef MC_COMMON_ETCD_JSON_H
#define MC_COMMON_ETCD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/etcd.h"

/* base64 (standard alphabet, padded). enc: *out malloc'd, NUL-terminated. dec: *out malloc'd
 * with a NUL after the *len bytes. Return 0, MC_ERR_DESERIALIZE_FAIL or MC_ERR_INTERNAL_ERROR. */
int mc_etcdj_b64enc(const void *in, size_t len, char **out);
int mc_etcdj_b64dec(const char *in, char **out, size_t *len);

/* Replies. Each returns 0, the mapped error of an {"error"...} reply (see etcd.h), or
 * MC_ERR_DESERIALIZE_FAIL for a body that is not what the gateway sends. `revision` outputs
 * (may be NULL) are the header's revision. */
int mc_etcdj_parse_status(const char *body, size_t len, uint64_t *revision);
int mc_etcdj_parse_range(const char *body, size_t len, struct mc_etcd_kv *kv, bool *found,
                         uint64_t *revision);
/* A range reply of many keys: cb runs for each (stops at its first non-zero return, which is
 * returned). */
int mc_etcdj_parse_range_each(const char *body, size_t len,
                              int (*cb)(void *arg, const struct mc_etcd_kv *kv), void *arg);
/* A txn reply: *succeeded (absent = false); kv (may be NULL) gets the first key of the first
 * response_range found in the responses, if any (else kv->key stays NULL). */
int mc_etcdj_parse_txn(const char *body, size_t len, bool *succeeded, uint64_t *revision,
                       struct mc_etcd_kv *kv);
/* A maintenance/status reply: header.member_id and leader. */
int mc_etcdj_parse_member_status(const char *body, size_t len, uint64_t *member_id,
                                 uint64_t *leader_id);
int mc_etcdj_parse_grant(const char *body, size_t len, uint64_t *id, int64_t *ttl);
/* A keepalive reply ({"result":{...}}): *ttl = TTL, 0 when omitted (the lease is gone). */
int mc_etcdj_parse_keepalive(const char *body, size_t len, int64_t *ttl);
/* One message of a watch stream: appends its events to r (up to the array's size; the count of
 * those that did not fit goes to *dropped), sets created/canceled/compact_revision/revision. */
int mc_etcdj_parse_watch(const char *msg, size_t len, struct mc_etcd_watch_result *r, int *dropped);

#endif
