/*
 * master_follow_watch.h - a client's watch of the HA leader key (DESIGN.md §6): a thread that
 * watches /mooncake-c/<cluster_id>/leader in etcd and reports each new leader (a PUT with
 * another create_revision), so a client moves to it at once instead of at its next failed
 * call or ping.
 */
#ifndef MC_CLIENT_MASTER_FOLLOW_WATCH_H
#define MC_CLIENT_MASTER_FOLLOW_WATCH_H

#include <stdint.h>

struct mc_leader_watch;

/* Starts the thread for an etcd:// url. on_new_leader runs on it with the new leader's epoch
 * (its key's create_revision); it must not block long. Returns 0, MC_ERR_INVALID_PARAMS or
 * MC_ERR_INTERNAL_ERROR. */
int mc_leader_watch_start(const char *url, void (*on_new_leader)(void *arg, uint64_t epoch),
                          void *arg, struct mc_leader_watch **out);
/* Stops and joins the thread (within one poll, 200 ms). NULL is a no-op. */
void mc_leader_watch_stop(struct mc_leader_watch *w);

#endif
