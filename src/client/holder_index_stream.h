/*
 * holder_index_stream.h - the DRAM holder's side of the holder stream (DESIGN.md §7): one
 * thread long-polls HolderIndexHeartbeat and files what comes back in the holder index
 * (holder_index.h): commits for the segment's current mount, drops by key and version. Every
 * process that mounts a DRAM segment runs it, with or without a disk tier.
 *
 * Answers: NOT_SUPPORTED (a master with the stream off, or an older one) is asked again at the
 * long-poll pace; REPLICA_IS_GONE (the master fenced this holder's index: its backlog passed
 * the limit) drops the whole index; other errors are retried after a short pause.
 */
#ifndef MC_CLIENT_HOLDER_INDEX_STREAM_H
#define MC_CLIENT_HOLDER_INDEX_STREAM_H

#include <stdint.h>

#include "common/id.h"

struct mc_master_conn;
struct mc_peer_server;
struct mc_holder_index;
struct mc_hidx_stream;

struct mc_hidx_stream_stats {
    uint64_t polls, items, commits, drops, fenced, errors;
    uint64_t reregistered, rereg_refused, rereg_bad_crc; /* re-registration, by entry */
};

/* Starts the thread. ps: the peer server serving the index's segments (re-registration reads
 * each entry's bytes through it and sends only those whose CRC32C still matches). 0,
 * INVALID_PARAMS or INTERNAL_ERROR. wait_ms 0 = 1000. */
int mc_hidx_stream_start(struct mc_master_conn *mc, struct mc_id client_id,
                         struct mc_holder_index *ix, struct mc_peer_server *ps, uint32_t wait_ms,
                         struct mc_hidx_stream **out);
/* Segment seg was mounted again with epoch (a master restart, or this holder's expiry): the
 * thread re-registers seg's entries (HolderReregister, in batches), dropping each the master
 * refuses. Called from the mount-epoch callback; the work runs on the stream's thread. */
void mc_hidx_stream_reregister(struct mc_hidx_stream *s, struct mc_id seg, uint64_t epoch);
/* Stops and joins it (within one long-poll). NULL: nothing. */
void mc_hidx_stream_stop(struct mc_hidx_stream *s);
void mc_hidx_stream_stats(struct mc_hidx_stream *s, struct mc_hidx_stream_stats *st);

#endif
