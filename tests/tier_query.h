/*
 * tier_query.h - what the tier fault tests ask the master directly, over an admin rpc client
 * (no lease, no access counted): a GetStats figure by its metric name, and the COMPLETE
 * replicas QueryKey lists for a key. Shared by test_faults_tier*.c.
 */
#ifndef MC_TESTS_TIER_QUERY_H
#define MC_TESTS_TIER_QUERY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/rpc_client.h"
#include "proto/master.pb-c.h"

/* The GetStats figure named name (one of the response's extra values); fails the test when the
 * master does not report it. */
double tq_stats_extra(const Mc__GetStatsResponse *r, const char *name);

/* QueryKey of key: *mem / *disk = its COMPLETE MEMORY / LOCAL_DISK replicas, *version (when not
 * NULL) = the object's version. false, with everything 0, when the call failed (the key is not
 * there, or the master cannot be reached). */
bool tq_replicas(struct mc_rpc_client *adm, const char *key, int *mem, int *disk,
                 uint64_t *version);

#endif
