/*
 * ha_fence.h - the delete rule's holder fences kept in etcd under HA (DESIGN.md §6, §7).
 *
 * One record per fenced holder: key /mooncake-c/<cluster_id>/fence/<holder id, 32 hex digits>,
 * value the fence version in decimal. The leader writes them from its HA thread (drained from
 * the fence journal, fence.h) in txns that compare the leader key's create_revision with its
 * epoch, so a deposed leader writes nothing. A new leader loads them all before it serves.
 */
#ifndef MC_MASTER_HA_FENCE_H
#define MC_MASTER_HA_FENCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/id.h"

struct mc_etcd;
struct mc_fences;

/* The fence record's key of holder. 0 or MC_ERR_INVALID_PARAMS. */
int mc_ha_fence_key(const char *cluster_id, struct mc_id holder, char *buf, size_t cap);
/* Loads every fence record of the cluster into f (mc_fences_load); *n = how many. A record
 * that does not parse is skipped with a warning. Returns 0 or the etcd error. */
int mc_ha_fences_load(struct mc_etcd *e, const char *cluster_id, struct mc_fences *f, size_t *n);
/* Writes the journal's pending records, each guarded by guard_key's create_revision == epoch.
 * A record not written stays pending. Returns 0, MC_ERR_NOT_LEADER (the guard failed: this
 * master is no longer the leader) or the etcd error. */
int mc_ha_fences_sync(struct mc_etcd *e, const char *guard_key, uint64_t epoch,
                      const char *cluster_id, struct mc_fences *f);

#endif
