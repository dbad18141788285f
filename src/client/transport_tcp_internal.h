/*
 * transport_tcp_internal.h - what transport_tcp.c lends transport_tcp_batch.c: its connection
 * pool, its socket helpers and its counters. Internal to those two files.
 */
#ifndef MC_CLIENT_TRANSPORT_TCP_INTERNAL_H
#define MC_CLIENT_TRANSPORT_TCP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/transport.h"
#include "common/net.h"
#ifdef MC_TEST_HOOKS
#include "common/rpc_client.h"
#endif

struct mc_tcp_conn; /* one connection to a peer, owned by one transfer at a time */

/* A pooled connection to endpoint (*reused = true) or a new one (pooled false: always new).
 * 0, TRANSFER_FAIL (cannot connect: the endpoint is forgotten) or INVALID_PARAMS. */
int mc_tcp_conn_get(struct mc_transport *t, const char *endpoint, bool pooled,
                    struct mc_tcp_conn **out, bool *reused);
/* Back to the pool when clean (every reply read, no error), else closed. */
void mc_tcp_conn_put(struct mc_transport *t, const char *endpoint, struct mc_tcp_conn *c,
                     bool clean);
int mc_tcp_conn_fd(const struct mc_tcp_conn *c);
/* The endpoint failed on the wire: forget its entry and pooled connections (peer gone). */
void mc_tcp_peer_forget(struct mc_transport *t, const char *endpoint);
/* Reserves n consecutive request ids on c; returns the first. */
uint64_t mc_tcp_conn_ids(struct mc_tcp_conn *c, uint64_t n);

/* Counters: one request sent; one stale pooled connection replaced. */
void mc_tcp_count_request(struct mc_transport *t);
void mc_tcp_count_retry(struct mc_transport *t);
const struct mc_tcp_transport_config *mc_tcp_config(const struct mc_transport *t);

/* Sends a request frame (common/net.h mc_net_send_iov); test builds let the rpc client's drop
 * hook (common/rpc_client.h) break the connection at that point. */
#ifdef MC_TEST_HOOKS
#define SEND_IOV(fd, method, iov, n) mc_rpc_test_send_iov((fd), (method), (iov), (n))
#else
#define SEND_IOV(fd, method, iov, n) mc_net_send_iov((fd), (iov), (n))
#endif

/* 0, or -1 on EOF / error / timeout. */
int mc_tcp_recv_all(int fd, void *buf, size_t len);
/* mc_tcp_recv_all that also sets *crc to the CRC32C of the bytes, taken piece by piece as they
 * arrive (in cache, not in a second pass). */
int mc_tcp_recv_crc(int fd, void *buf, size_t len, uint32_t *crc);
int mc_tcp_discard(int fd, size_t len);

/* The pipelined single transfer (transport_tcp.c); with crc (not NULL) a write extends *crc
 * over the bytes as they go out, a read sets it to the CRC32C of the bytes it received. */
int mc_tcp_transfer(struct mc_transport *t, bool is_write, const struct mc_xfer_loc *loc, void *buf,
                    size_t len, uint32_t *crc);

/* transport_tcp_batch.c: the ops->batch of the tcp transport. */
int mc_tcp_batch(struct mc_transport *t, bool is_write, struct mc_xfer_item *items, size_t n);

#endif
