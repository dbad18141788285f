/*
 * client_disk.c - reads of LOCAL_DISK replicas (DESIGN.md §6, §8): the reader's side.
 *
 * A LOCAL_DISK descriptor names the holder (client id) and its peer endpoint. Items whose
 * holder is this client are read from this process's own disk store (no RPC); the others are
 * grouped by endpoint and each group is one PeerDiskRead round trip to its holder
 * (transport_tcp_disk.c), which reads its SSD and streams the values back. The groups run side
 * by side (common/fanout.h), so a batch spread over several holders waits for the slowest. The
 * holder refuses a record of another version than the reader names (REPLICA_NOT_FOUND); the caller
 * checks the value CRC against the master's (client_get.c).
 *
 * With protocol rdma the PeerDiskRead goes in RDMA mode (rdma_disk.h): each item names its
 * buffer's address and an rkey that exists for this call only (the buffer is registered for the
 * peer's writes and deregistered after the answer or the timeout, so a late write is refused by
 * the device), and the holder RDMA-writes the values there before
 * it answers with statuses, lengths and CRCs; the version and CRC checks are the same. Items
 * the holder cannot serve that way (NOT_SUPPORTED: no rdma there; INVALID_PARAMS: larger than
 * its staging buffer) and items whose buffer cannot be registered go over tcp as before.
 */
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/fanout.h"
#include "common/log.h"
#include "mooncake/errors.h"

static bool is_self(const struct mc_client *c, const Mc__LocalDiskLocation *h)
{
    return h && h->holder && h->holder->hi == c->id.hi && h->holder->lo == c->id.lo;
}

/* The items of one holder: this process's own store (ep NULL) or one peer endpoint. */
struct dgroup {
    const char *ep;
    size_t off, m; /* its items: tmp[off .. off + m) */
};

struct dread {
    struct mc_client *c;
    struct mc_disk_tier *self;
    struct mc_disk_read_item *tmp;
    const struct dgroup *groups;
};

/* One holder's items: a store read, or one PeerDiskRead (RDMA mode first when it is on). */
static void read_group(void *arg, size_t gi)
{
    const struct dread *d = arg;
    const struct dgroup *g = &d->groups[gi];
    struct mc_disk_read_item *it = d->tmp + g->off;
    if (!g->ep) {
        mc_disk_tier_read(d->self, it, g->m);
        return;
    }
    struct mc_disk_read_item *tcp = it, *left = NULL;
    size_t m = g->m, *at = NULL;
    if (d->c->rdma) {
        mc_client_rdma_disk_group(d->c, g->ep, it, m);
        left = malloc(m * sizeof(*left)); /* what RDMA did not take, packed for one tcp request */
        at = malloc(m * sizeof(*at));
        size_t nl = 0;
        for (size_t k = 0; k < m; k++) {
            if (it[k].status != 1)
                continue;
            if (!left || !at)
                it[k].status = MC_ERR_INTERNAL_ERROR;
            else {
                at[nl] = k;
                left[nl++] = it[k];
            }
        }
        tcp = left;
        m = nl; /* 0 when out of memory: no request */
    }
    int rc = mc_transport_tcp_disk_read(d->c->tcp, g->ep, tcp, m);
    for (size_t k = 0; k < m; k++) {
        if (rc)
            tcp[k].status = rc;
        if (tcp != it)
            it[at[k]] = tcp[k];
    }
    free(left);
    free(at);
}

void mc_client_disk_read(struct mc_client *c, const Mc__LocalDiskLocation *const *holders,
                         struct mc_disk_read_item *items, size_t n)
{
    struct mc_disk_tier *self = atomic_load(&c->disk);
    struct mc_disk_read_item *tmp = calloc(n ? n : 1, sizeof(*tmp));
    size_t *idx = calloc(n ? n : 1, sizeof(*idx));
    bool *done = calloc(n ? n : 1, sizeof(*done));
    struct dgroup *groups = calloc(n + 1, sizeof(*groups));
    size_t ng = 0, m = 0;
    if (!tmp || !idx || !done || !groups) {
        for (size_t i = 0; i < n; i++)
            items[i].status = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    /* this process's own records: one store read */
    for (size_t i = 0; self && i < n; i++)
        if (is_self(c, holders[i])) {
            idx[m] = i;
            tmp[m++] = items[i];
            done[i] = true;
        }
    if (m)
        groups[ng++] = (struct dgroup){.ep = NULL, .off = 0, .m = m};
    /* then one PeerDiskRead batch per holder endpoint */
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        const char *ep = holders[i] ? holders[i]->endpoint : NULL;
        if (!ep || !*ep) {
            items[i].status = MC_ERR_INVALID_REPLICA;
            done[i] = true;
            continue;
        }
        size_t off = m;
        for (size_t j = i; j < n; j++)
            if (!done[j] && holders[j] && holders[j]->endpoint &&
                strcmp(holders[j]->endpoint, ep) == 0) {
                idx[m] = j;
                tmp[m++] = items[j];
                done[j] = true;
            }
        groups[ng++] = (struct dgroup){.ep = ep, .off = off, .m = m - off};
    }
    /* the holders side by side: the batch waits for the slowest one, not for their sum */
    struct dread d = {c, self, tmp, groups};
    mc_fanout(ng, read_group, &d);
    for (size_t k = 0; k < m; k++)
        items[idx[k]] = tmp[k];
out:
    free(tmp);
    free(idx);
    free(done);
    free(groups);
}
