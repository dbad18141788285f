/*
 * client_rdma_off.c - the client's rdma calls (client_rdma.c) in a build without RDMA
 * (-DMC_WITH_RDMA=OFF): protocol rdma is refused at open with a clear error; the client never
 * has an rdma transport, so every other call has nothing to do.
 */
#include "client/client_internal.h"
#include "common/log.h"

int mc_client_rdma_open(struct mc_client *c, const struct mc_rdma_ops *ops)
{
    (void)ops;
    mc_error("client",
             "protocol rdma is not in this build (built with -DMC_WITH_RDMA=OFF); use "
             "protocol tcp (--protocol=tcp)",
             "protocol=%s", c->protocol);
    return MC_ERR_NOT_SUPPORTED;
}

int mc_client_rdma_listen(struct mc_client *c)
{
    (void)c;
    return 0;
}

int mc_client_rdma_mount_keys(struct mc_client *c, struct mc_mounted_segment *ms)
{
    (void)c;
    (void)ms;
    return 0;
}

void mc_client_rdma_fence(struct mc_client *c, struct mc_id segment_id, uint64_t epoch)
{
    (void)c;
    (void)segment_id;
    (void)epoch;
}

bool mc_client_rdma_remount_ready(void *arg)
{
    (void)arg;
    return true;
}

void mc_client_rdma_stop(struct mc_client *c)
{
    (void)c;
}

int mc_client_rdma_register_buffer(struct mc_client *c, void *addr, size_t len)
{
    (void)c;
    (void)addr;
    (void)len;
    return 0;
}

void mc_client_rdma_unregister_buffer(struct mc_client *c, void *addr)
{
    (void)c;
    (void)addr;
}

void mc_client_rdma_disk_group(struct mc_client *c, const char *ep, struct mc_disk_read_item *items,
                               size_t m)
{
    (void)c;
    (void)ep;
    for (size_t i = 0; i < m; i++)
        items[i].status = 1; /* not taken: tcp */
}
