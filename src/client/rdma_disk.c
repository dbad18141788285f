/*
 * rdma_disk.c - the RDMA side of a LOCAL_DISK read (see rdma_disk.h).
 */
#include <string.h>

#include "client/disk_store.h"
#include "client/rdma_disk.h"
#include "common/log.h"
#include "mooncake/errors.h"

int mc_rdma_disk_item_init(struct mc_transport *t, Mc__DiskReadItem *it, const char *key,
                           uint64_t size, uint64_t version, void *buf)
{
    mc__disk_read_item__init(it);
    uint32_t rkey = 0;
    if (!key || !buf || !size || mc_transport_rdma_rkey(t, buf, size, &rkey))
        return MC_ERR_INVALID_PARAMS;
    it->key = (char *)key;
    it->size = size;
    it->version = version;
    it->rdma_addr = (uint64_t)(uintptr_t)buf;
    it->rdma_rkey = rkey;
    return 0;
}

struct fill_ctx {
    mc_rdma_disk_read_fn read;
    void *arg;
    const Mc__DiskReadItem *it;
    uint64_t cap; /* the staging buffer's size */
    uint64_t len;
    uint32_t crc;
};

/* The whole value fits the staging buffer, so the push asks for it in one piece. */
static int fill_value(void *arg, uint64_t off, void *buf, size_t n)
{
    struct fill_ctx *f = arg;
    if (off != 0 || n != f->it->size)
        return MC_ERR_INTERNAL_ERROR;
    int rc = f->read(f->arg, f->it->key, f->it->version, buf, f->cap, &f->len, &f->crc);
    if ((rc == 0 && f->len != f->it->size) || rc == MC_ERR_BUFFER_OVERFLOW)
        rc = MC_ERR_INVALID_PARAMS; /* the reader asked for another size than stored */
    return rc;
}

size_t mc_rdma_disk_serve(struct mc_transport *t, const Mc__PeerDiskReadRequest *req,
                          mc_rdma_disk_read_fn read, void *arg, int32_t *statuses,
                          uint64_t *lengths, uint32_t *crcs, protobuf_c_boolean *crc_valid)
{
    size_t served = 0;
    uint64_t staging = mc_transport_rdma_staging_bytes(t);
    for (size_t i = 0; i < req->n_items; i++) {
        const Mc__DiskReadItem *it = req->items[i];
        statuses[i] = MC_ERR_INVALID_PARAMS;
        lengths[i] = 0;
        crcs[i] = 0;
        crc_valid[i] = 0;
        if (!it || !it->key || !*it->key || !it->rdma_rkey || !it->rdma_addr || !it->size ||
            it->size > staging || !req->rdma_endpoint || !*req->rdma_endpoint) {
            mc_warn("rdma", "disk read item refused", "item=%zu size=%llu", i,
                    (unsigned long long)(it ? it->size : 0));
            continue;
        }
        struct fill_ctx f = {.read = read, .arg = arg, .it = it, .cap = staging};
        int rc = mc_transport_rdma_push(t, req->rdma_endpoint, it->rdma_addr, it->rdma_rkey,
                                        it->size, fill_value, &f);
        statuses[i] = rc;
        if (rc == 0) {
            lengths[i] = f.len;
            crcs[i] = f.crc;
            crc_valid[i] = 1;
            served++;
        }
    }
    return served;
}

int mc_rdma_disk_store_read(void *store, const char *key, uint64_t version, void *buf, uint64_t cap,
                            uint64_t *len, uint32_t *crc)
{
    struct mc_disk_get g = {.key = key, .key_len = (uint32_t)strlen(key), .buf = buf, .cap = cap};
    mc_disk_store_read(store, &g, 1);
    if (g.result)
        return g.result;
    if (version && g.version != version)
        return MC_ERR_REPLICA_NOT_FOUND; /* stale bytes are never served */
    *len = g.len;
    *crc = g.crc;
    return 0;
}
