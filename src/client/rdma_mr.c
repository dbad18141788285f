/*
 * rdma_mr.c - memory regions of the RDMA transport (rdma_internal.h).
 *
 * Access rights follow what each range is for: the segment (peers READ and WRITE it) gets
 * LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE; buffers only this process posts from or into (user
 * buffers, the disk staging buffer) get LOCAL_WRITE only, so no peer can write into them whatever
 * key it guesses. A range a peer must write for one request (a LOCAL_DISK read's buffer) is
 * exposed for that request only (transport_rdma.c) and revoked when it ends.
 *
 * Re-registration (the mount-epoch fence, DESIGN.md §6) registers the new regions first, swaps
 * them in under mr_lock, and only then deregisters the old ones. While the old region is still
 * registered the device cannot hand its key out again, so the new rkey always differs from the
 * revoked one, even on a device whose key cache (mlx5's mkey cache) recycles keys of regions just
 * deregistered over the same addresses; the check is kept anyway and retried once. The slow part
 * (pinning a large segment) runs without mr_lock, so transfers keep looking keys up meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "client/rdma_internal.h"
#include "common/log.h"
#include "mooncake/errors.h"

int mc_rdma_access(enum mc_rdma_mr_kind kind)
{
    switch (kind) {
    case MC_RDMA_MR_REMOTE:
        return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    case MC_RDMA_MR_PEER_WRITES:
        return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    case MC_RDMA_MR_LOCAL:
        return IBV_ACCESS_LOCAL_WRITE;
    case MC_RDMA_MR_SOURCE:
    default:
        return 0; /* local read is always allowed: a read-only source buffer registers */
    }
}

void mc_rdma_mr_release(struct rdma_ctx *x, struct rdma_mr *m)
{
    for (int d = 0; d < x->ndev; d++)
        if (m->mr[d])
            x->ops->dereg_mr(m->mr[d]);
    memset(m->mr, 0, sizeof(m->mr));
}

void mc_rdma_log_reg_failure(struct rdma_ctx *x, int dev, size_t len, int err)
{
    struct rlimit rl = {0, 0};
    if (err == ENOMEM && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        mc_error("rdma",
                 "cannot register memory: the locked-memory limit (RLIMIT_MEMLOCK) is too small "
                 "for the segment and buffers; raise it (ulimit -l unlimited, systemd "
                 "LimitMEMLOCK=infinity, docker --ulimit memlock=-1) or shrink --segment_size",
                 "device=%s len=%zu memlock_limit=%llu errno=%d(%s)",
                 x->ops->device_name(x->devlist[dev]), len, (unsigned long long)rl.rlim_cur, err,
                 strerror(err));
        return;
    }
    mc_error("rdma", "cannot register memory", "device=%s len=%zu errno=%d(%s)",
             x->ops->device_name(x->devlist[dev]), len, err, strerror(err));
}

/* Registers [addr, addr+len) on every device in use; 0 or TRANSFER_FAIL (logged, m clean). */
static int reg_all(struct rdma_ctx *x, struct rdma_mr *m, int access)
{
    for (int d = 0; d < x->ndev; d++) {
        if (!x->in_use[d])
            continue;
        m->mr[d] = x->ops->reg_mr(x->pd[d], m->addr, m->len, access);
        if (!m->mr[d]) {
            mc_rdma_log_reg_failure(x, d, m->len, errno);
            mc_rdma_mr_release(x, m);
            return MC_ERR_TRANSFER_FAIL;
        }
    }
    return 0;
}

int mc_rdma_ctx_register(struct rdma_ctx *x, void *addr, size_t len, enum mc_rdma_mr_kind kind)
{
    if (!addr || !len || (uintptr_t)addr + len < (uintptr_t)addr)
        return MC_ERR_INVALID_PARAMS;
    struct rdma_mr m = {.addr = addr, .len = len, .kind = kind};
    int rc = 0;
    rdma_mr_lock(x);
    for (size_t i = 0; i < x->nmrs; i++) {
        uintptr_t a = (uintptr_t)x->mrs[i].addr, b = (uintptr_t)addr;
        if (b < a + x->mrs[i].len && a < b + len) {
            rc = MC_ERR_INVALID_PARAMS;
            goto out;
        }
    }
    if (x->nmrs == x->capmrs) {
        size_t cap = x->capmrs ? x->capmrs * 2 : 8;
        struct rdma_mr *nm = realloc(x->mrs, cap * sizeof(*nm));
        if (!nm) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        x->mrs = nm;
        x->capmrs = cap;
    }
    rc = reg_all(x, &m, mc_rdma_access(kind));
    if (rc == 0)
        x->mrs[x->nmrs++] = m;
out:
    rdma_mr_unlock(x);
    return rc;
}

/* Whether any device's new key equals the old one of the same device. */
static bool key_repeats(const struct rdma_ctx *x, const struct rdma_mr *old,
                        const struct rdma_mr *fresh)
{
    for (int d = 0; d < x->ndev; d++)
        if (old->mr[d] && fresh->mr[d] && old->mr[d]->rkey == fresh->mr[d]->rkey)
            return true;
    return false;
}

int mc_rdma_ctx_reregister(struct rdma_ctx *x, void *addr)
{
    struct rdma_mr fresh = {0};
    rdma_mr_lock(x);
    for (size_t i = 0; i < x->nmrs; i++)
        if (x->mrs[i].addr == addr)
            fresh = x->mrs[i];
    rdma_mr_unlock(x);
    if (!fresh.addr)
        return MC_ERR_INVALID_PARAMS;
    struct rdma_mr snapshot = fresh;
    memset(fresh.mr, 0, sizeof(fresh.mr));
    /* the slow part, off the lock: the old regions stay registered (and in use) meanwhile */
    int rc = reg_all(x, &fresh, mc_rdma_access(fresh.kind));
    if (rc == 0 && key_repeats(x, &snapshot, &fresh)) {
        struct rdma_mr again = fresh; /* a repeat while both are live: try once more */
        memset(again.mr, 0, sizeof(again.mr));
        rc = reg_all(x, &again, mc_rdma_access(fresh.kind));
        mc_rdma_mr_release(x, &fresh);
        fresh = again;
        if (rc == 0 && key_repeats(x, &snapshot, &fresh)) {
            mc_error("rdma",
                     "re-registration handed back the revoked rkey: refusing the re-mount (a "
                     "stale descriptor would reach the new bytes)",
                     "len=%zu", fresh.len);
            mc_rdma_mr_release(x, &fresh);
            rc = MC_ERR_TRANSFER_FAIL;
        }
    }
    struct rdma_mr old = {0};
    rdma_mr_lock(x);
    for (size_t i = 0; i < x->nmrs; i++)
        if (x->mrs[i].addr == addr) {
            old = x->mrs[i];
            if (rc == 0)
                x->mrs[i] = fresh; /* swap: lookups see the new keys from here on */
            else
                x->mrs[i] = x->mrs[--x->nmrs]; /* the fence must hold: not registered at all */
            break;
        }
    rdma_mr_unlock(x);
    if (!old.addr) { /* unregistered meanwhile */
        mc_rdma_mr_release(x, &fresh);
        return MC_ERR_INVALID_PARAMS;
    }
    mc_rdma_mr_release(x, &old); /* the old keys die now */
    return rc;
}

int mc_rdma_ctx_unregister(struct rdma_ctx *x, void *addr)
{
    int rc = MC_ERR_INVALID_PARAMS;
    rdma_mr_lock(x);
    for (size_t i = 0; i < x->nmrs; i++)
        if (x->mrs[i].addr == addr) {
            mc_rdma_mr_release(x, &x->mrs[i]);
            x->mrs[i] = x->mrs[--x->nmrs];
            rc = 0;
            break;
        }
    rdma_mr_unlock(x);
    return rc;
}

int mc_rdma_ctx_keys(struct rdma_ctx *x, const void *addr, size_t len, int dev, uint32_t *lkey,
                     uint32_t *rkey)
{
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    uintptr_t b = (uintptr_t)addr;
    if (dev < 0 || dev >= x->ndev)
        return rc;
    rdma_mr_lock(x);
    for (size_t i = 0; i < x->nmrs; i++) {
        uintptr_t a = (uintptr_t)x->mrs[i].addr;
        if (b >= a && len <= x->mrs[i].len && b - a <= x->mrs[i].len - len) {
            /* no region on that device, or (asked for a remote key) a local-only range */
            if (!x->mrs[i].mr[dev] || (rkey && x->mrs[i].kind != MC_RDMA_MR_REMOTE))
                break;
            if (lkey)
                *lkey = x->mrs[i].mr[dev]->lkey;
            if (rkey)
                *rkey = x->mrs[i].mr[dev]->rkey;
            rc = 0;
            break;
        }
    }
    rdma_mr_unlock(x);
    return rc;
}
