/*
 * rdma_disk.h - the RDMA side of a LOCAL_DISK read (peer.proto PeerDiskRead, DESIGN.md §6).
 *
 * The reader names the keys and, per item, where the value must land: the address and rkey of
 * its own registered buffer (rdma_addr/rdma_rkey), plus its peer endpoint (rdma_endpoint) for
 * the holder to connect to. The holder reads each value from its SSD into its registered
 * staging buffer and RDMA-writes it to the reader (mc_transport_rdma_push), then answers the
 * PeerDiskRead with one status, length and CRC per item; the reader trusts the bytes only after
 * that answer. A value larger than the staging buffer is refused with INVALID_PARAMS (as
 * upstream refuses one larger than its staging allocator).
 *
 * Wiring: the holder's disk tier serves a PeerDiskRead that names an rdma_endpoint with
 * mc_rdma_disk_serve when the client runs protocol rdma (disk_tier.c; NOT_SUPPORTED without
 * an rdma transport); the reader's Get sends one (mc_transport_tcp_disk_read_rdma, from
 * client_disk.c) with its buffers' rkeys, and falls back to the streaming form for items the
 * holder cannot push. Tested through the loopback test provider only, never on a device.
 */
#ifndef MC_CLIENT_RDMA_DISK_H
#define MC_CLIENT_RDMA_DISK_H

#include <stdint.h>

#include "client/transport.h"
#include "proto/peer.pb-c.h"

/* Reader: fills *it (key and size point at the caller's storage) for a value of size bytes to
 * land at buf, which must lie in a range registered with the rdma transport t. 0 or
 * INVALID_PARAMS (buf not registered). */
int mc_rdma_disk_item_init(struct mc_transport *t, Mc__DiskReadItem *it, const char *key,
                           uint64_t size, uint64_t version, void *buf);

/* Reads key's whole value (version 0 = any) into buf (cap bytes): 0 with *len and *crc, or
 * OBJECT_NOT_FOUND, REPLICA_NOT_FOUND (another version), BUFFER_OVERFLOW, FILE_READ_FAIL,
 * CHECKSUM_MISMATCH. */
typedef int (*mc_rdma_disk_read_fn)(void *arg, const char *key, uint64_t version, void *buf,
                                    uint64_t cap, uint64_t *len, uint32_t *crc);

/* Holder: serves every item of req with RDMA (items without rdma_rkey/rdma_addr, or a request
 * without rdma_endpoint, get INVALID_PARAMS: those are the streaming path's). statuses,
 * lengths, crcs and crc_valid have req->n_items entries. Returns the number of items served. */
size_t mc_rdma_disk_serve(struct mc_transport *t, const Mc__PeerDiskReadRequest *req,
                          mc_rdma_disk_read_fn read, void *arg, int32_t *statuses,
                          uint64_t *lengths, uint32_t *crcs, protobuf_c_boolean *crc_valid);

/* An mc_rdma_disk_read_fn over an mc_disk_store (arg). */
int mc_rdma_disk_store_read(void *store, const char *key, uint64_t version, void *buf, uint64_t cap,
                            uint64_t *len, uint32_t *crc);

#endif
