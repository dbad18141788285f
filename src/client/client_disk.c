/*
 * client_disk.c - reads of LOCAL_DISK replicas (DESIGN.md §6, §8): the reader's side.
 *
 * A LOCAL_DISK descriptor names the holder (client id) and its peer endpoint. Items whose
 * holder is this client are read from this process's own disk store (no RPC); the others are
 * grouped by endpoint and each group is one PeerDiskRead round trip to its holder
 * (transport_tcp_disk.c), which reads its SSD and streams the values back. The holder refuses a
 * record of another version than the reader names (REPLICA_NOT_FOUND); the caller checks the
 * value CRC against the master's (client_get.c).
 */
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "common/log.h"

static bool is_self(const struct mc_client *c, const Mc__LocalDiskLocation *h)
{
    return h && h->holder && h->holder->hi == c->id.hi && h->holder->lo == c->id.lo;
}

void mc_client_disk_read(struct mc_client *c, const Mc__LocalDiskLocation *const *holders,
                         struct mc_disk_read_item *items, size_t n)
{
    struct mc_disk_tier *self = atomic_load(&c->disk);
    struct mc_disk_read_item *tmp = calloc(n ? n : 1, sizeof(*tmp));
    size_t *idx = calloc(n ? n : 1, sizeof(*idx));
    bool *done = calloc(n ? n : 1, sizeof(*done));
    if (!tmp || !idx || !done) {
        for (size_t i = 0; i < n; i++)
            items[i].status = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    /* this process's own records first, in one store read */
    size_t m = 0;
    for (size_t i = 0; self && i < n; i++)
        if (is_self(c, holders[i])) {
            idx[m] = i;
            tmp[m++] = items[i];
            done[i] = true;
        }
    if (m) {
        mc_disk_tier_read(self, tmp, m);
        for (size_t k = 0; k < m; k++)
            items[idx[k]] = tmp[k];
    }
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
        m = 0;
        for (size_t j = i; j < n; j++)
            if (!done[j] && holders[j] && holders[j]->endpoint &&
                strcmp(holders[j]->endpoint, ep) == 0) {
                idx[m] = j;
                tmp[m++] = items[j];
                done[j] = true;
            }
        int rc = mc_transport_tcp_disk_read(c->tcp, ep, tmp, m);
        for (size_t k = 0; k < m; k++) {
            if (rc)
                tmp[k].status = rc;
            items[idx[k]] = tmp[k];
        }
    }
out:
    free(tmp);
    free(idx);
    free(done);
}
