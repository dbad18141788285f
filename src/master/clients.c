/*
 * clients.c - client registry and liveness: Ping, Mount/ReMount/UnmountSegment and the client
 * monitor tick.
 *
 * The registry is a chained hash of {client id, liveness deadline, status} under one mutex (the
 * first lock of the lock order). A client is registered by its first Mount (status OK) or Ping
 * (status NEED_REMOUNT: after a master restart nobody is known, and a Ping from an unknown id
 * tells the client to re-mount; ReMountSegment then marks it OK). Every Mount, ReMount and Ping
 * pushes the deadline to now + client_ttl.
 *
 * Expiry (mc_master_tick_monitor): under the registry lock the expired clients are removed and
 * their segments unmounted (registry → segment table is in lock order, and holding the registry
 * keeps a concurrent Mount of the same client from slipping in between); then, with no lock
 * held, the shards are swept: replicas on dead segments are dropped and objects left with none
 * erased. Pins held for a client's offload and promotion tasks are released when their objects
 * are erased (MC_OBJ_EV_ERASED) or when the tasks are cancelled (MC_OBJ_EV_CLIENT_EXPIRED, and
 * the sweep's MC_OBJ_EV_REPLICA_DROPPING): object_events.h, the policies subscribe.
 *
 * The sweep (after an expiry or an UnmountSegment) visits every shard under its write lock, one
 * at a time: replicas whose storage is gone (dead segment, dead holder) are dropped, objects left
 * with none are erased, and the buffers go back after each shard's lock is dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/clients.h"
#include "master/freelist.h"
#include "master/master_state.h"
#include "master/object_events.h"
#include "master/objects.h"
#include "master/shard.h"
#include "mooncake/errors.h"

/* The registry is the first lock of the lock order. */
static void registry_lock(struct mc_master *m)
{
    mc_lo_acquire(MC_LO_REGISTRY, 0);
    pthread_mutex_lock(&m->clients->lock);
}

static void registry_unlock(struct mc_master *m)
{
    pthread_mutex_unlock(&m->clients->lock);
    mc_lo_release(MC_LO_REGISTRY, 0);
}

static uint32_t id_bucket(struct mc_id id, uint32_t mask)
{
    uint64_t x = id.hi * 0x9e3779b97f4a7c15ull ^ id.lo;
    x ^= x >> 29;
    return (uint32_t)x & mask;
}

int mc_clients_init(struct mc_master *m)
{
    m->clients = calloc(1, sizeof(*m->clients));
    if (!m->clients)
        return -1;
    pthread_mutex_init(&m->clients->lock, NULL);
    m->clients->mask = 63;
    m->clients->buckets = calloc(m->clients->mask + 1, sizeof(*m->clients->buckets));
    return m->clients->buckets ? 0 : -1;
}

void mc_clients_destroy(struct mc_master *m)
{
    if (!m->clients)
        return;
    if (!m->clients->buckets)
        goto out;
    for (uint32_t b = 0; b <= m->clients->mask; b++) {
        struct mc_client_rec *c = m->clients->buckets[b];
        while (c) {
            struct mc_client_rec *nx = c->next;
            free(c);
            c = nx;
        }
    }
    free(m->clients->buckets);
    m->clients->buckets = NULL;
out:
    pthread_mutex_destroy(&m->clients->lock);
    free(m->clients);
    m->clients = NULL;
}

static struct mc_client_rec *client_find(struct mc_master *m, struct mc_id id)
{
    for (struct mc_client_rec *c = m->clients->buckets[id_bucket(id, m->clients->mask)]; c;
         c = c->next)
        if (mc_id_eq(c->id, id))
            return c;
    return NULL;
}

static void clients_grow(struct mc_master *m)
{
    uint32_t nb = (m->clients->mask + 1) * 2;
    struct mc_client_rec **nbk = calloc(nb, sizeof(*nbk));
    if (!nbk)
        return; /* keep the longer chains */
    for (uint32_t b = 0; b <= m->clients->mask; b++) {
        struct mc_client_rec *c = m->clients->buckets[b];
        while (c) {
            struct mc_client_rec *nx = c->next;
            uint32_t h = id_bucket(c->id, nb - 1);
            c->next = nbk[h];
            nbk[h] = c;
            c = nx;
        }
    }
    free(m->clients->buckets);
    m->clients->buckets = nbk;
    m->clients->mask = nb - 1;
}

/* Finds or registers a client (registry lock held). NULL when out of memory. */
static struct mc_client_rec *client_touch(struct mc_master *m, struct mc_id id,
                                          enum mc_client_status new_status, uint64_t now)
{
    struct mc_client_rec *c = client_find(m, id);
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
        c->id = id;
        c->status = new_status;
        uint32_t b = id_bucket(id, m->clients->mask);
        c->next = m->clients->buckets[b];
        m->clients->buckets[b] = c;
        if (++m->clients->n > (m->clients->mask + 1) * 2)
            clients_grow(m);
        char buf[MC_ID_STRLEN];
        mc_info("master", "client registered", "client=%s status=%s", mc_id_format(id, buf),
                new_status == MC_CLIENT_OK ? "ok" : "need_remount");
    }
    c->deadline_ms = now + m->cfg.client_ttl_ms;
    return c;
}

int mc_master_ping(struct mc_master *m, struct mc_id client, struct mc_ping_result *out)
{
    CNT_INC(m, ping_requests);
    if (mc_id_is_zero(client) || !out)
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_OK;
    registry_lock(m);
    struct mc_client_rec *c = client_touch(m, client, MC_CLIENT_NEED_REMOUNT, mc_master_now_ms(m));
    if (c) {
        out->status = c->status;
        out->view_version = (int64_t)m->epoch;
    } else {
        rc = MC_ERR_INTERNAL_ERROR;
    }
    registry_unlock(m);
    return rc;
}

int mc_clients_touch(struct mc_master *m, struct mc_id id)
{
    registry_lock(m);
    struct mc_client_rec *c = client_touch(m, id, MC_CLIENT_NEED_REMOUNT, mc_master_now_ms(m));
    registry_unlock(m);
    return c ? MC_OK : MC_ERR_INTERNAL_ERROR;
}

int mc_master_mount_segment(struct mc_master *m, struct mc_id client,
                            const struct mc_segment_desc *seg, uint64_t *mount_epoch)
{
    CNT_INC(m, mount_segment_requests);
    int rc;
    if (mc_id_is_zero(client) || !seg) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    registry_lock(m);
    rc = mc_segments_mount(m->segs, seg, client, mount_epoch);
    if (rc == MC_OK && !client_touch(m, client, MC_CLIENT_OK, mc_master_now_ms(m)))
        rc = MC_ERR_INTERNAL_ERROR; /* the segment stays; the next Ping/Mount registers */
    registry_unlock(m);
out:
    if (rc != MC_OK)
        CNT_INC(m, mount_segment_failures);
    return rc;
}

int mc_master_remount_segments(struct mc_master *m, struct mc_id client,
                               const struct mc_segment_desc *segs, size_t n, uint64_t *mount_epochs)
{
    CNT_INC(m, remount_segment_requests);
    int rc = MC_OK;
    if (mc_id_is_zero(client) || (n && !segs)) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    registry_lock(m);
    for (size_t i = 0; i < n && rc == MC_OK; i++)
        rc = mc_segments_mount(m->segs, &segs[i], client, mount_epochs ? &mount_epochs[i] : NULL);
    struct mc_client_rec *c = client_touch(m, client, MC_CLIENT_NEED_REMOUNT, mc_master_now_ms(m));
    if (!c)
        rc = rc != MC_OK ? rc : MC_ERR_INTERNAL_ERROR;
    else if (rc == MC_OK)
        c->status = MC_CLIENT_OK;
    registry_unlock(m);
out:
    if (rc != MC_OK)
        CNT_INC(m, remount_segment_failures);
    return rc;
}

int mc_master_unmount_segment(struct mc_master *m, struct mc_id client, struct mc_id segment_id)
{
    CNT_INC(m, unmount_segment_requests);
    int rc;
    bool unmounted = false;
    if (mc_id_is_zero(client) || mc_id_is_zero(segment_id)) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    rc = mc_segments_unmount(m->segs, segment_id, client, &unmounted);
    /* The segment is dead now: its replicas are unreadable and no new one lands there. The
     * sweep of the whole table that drops them is left to the monitor tick, off the caller's
     * (an RPC I/O) thread. */
    if (unmounted)
        atomic_store_explicit(&m->sweep_pending, true, memory_order_release);
out:
    if (rc != MC_OK)
        CNT_INC(m, unmount_segment_failures);
    return rc;
}

int mc_master_list_segments(struct mc_master *m, struct mc_segment_info **out, size_t *n)
{
    if (!out || !n)
        return MC_ERR_INVALID_PARAMS;
    return mc_segments_list(m->segs, out, n);
}

/* ---- sweep --------------------------------------------------------------------------------- */

/* Drops o's replicas whose storage is gone (dead segment / dead holder); erases o when none is
 * left (counted). */
static bool sweep_visit(struct mc_master *m, struct mc_shard *s, struct mc_object *o,
                        struct mc_freelist *fl, void *arg)
{
    (void)arg;
    uint8_t r = 0;
    while (r < o->nrep && mc_replica_valid(&o->rep[r]))
        r++;
    if (r == o->nrep)
        return false;
    /* a task whose source or staged replica is lost ends (promotion) */
    const struct mc_obj_drop_ev ev = {.fl = fl, .storage_lost = true};
    mc_obj_ev_replica_dropping(m, s, o, &ev); /* it may have taken replicas off o: rescan */
    bool changed = false;
    for (r = 0; r < o->nrep;) {
        if (mc_replica_valid(&o->rep[r])) {
            r++;
            continue;
        }
        mc_freelist_add_replica(fl, &o->rep[r], o->size);
        mc_obj_drop_replica(o, r);
        changed = true;
    }
    if (!changed)
        return false;
    if (o->nrep == 0) {
        mc_master_erase_object(m, s, o, fl);
        return true;
    }
    mc_shard_refresh_bits(s, o);
    return false;
}

int mc_master_tick_monitor(struct mc_master *m)
{
    uint64_t now = mc_master_now_ms(m);
    int expired = 0;
    size_t unmounted = 0;
    /* expired ids, for the LOCAL_DISK tier once the registry is unlocked */
    struct mc_id stackv[16], *gone = stackv;
    size_t ngone = 0, gone_cap = 16;
    registry_lock(m);
    for (uint32_t b = 0; b <= m->clients->mask; b++) {
        struct mc_client_rec **pp = &m->clients->buckets[b];
        while (*pp) {
            struct mc_client_rec *c = *pp;
            if (c->deadline_ms > now) {
                pp = &c->next;
                continue;
            }
            *pp = c->next;
            m->clients->n--;
            unmounted += mc_segments_unmount_owner(m->segs, c->id);
            char buf[MC_ID_STRLEN];
            mc_warn("master", "client expired", "client=%s", mc_id_format(c->id, buf));
            if (mc_obj_events_wanted(m, MC_OBJ_EV_CLIENT_EXPIRED)) {
                if (ngone == gone_cap) {
                    struct mc_id *nv = malloc(gone_cap * 2 * sizeof(*nv));
                    if (nv) {
                        memcpy(nv, gone, ngone * sizeof(*nv));
                        if (gone != stackv)
                            free(gone);
                        gone = nv;
                        gone_cap *= 2;
                    }
                }
                if (ngone < gone_cap)
                    gone[ngone++] = c->id;
                else /* out of memory: the holder stays until it is unmounted */
                    mc_error("master", "cannot deregister an expired holder", "client=%s", buf);
            }
            free(c);
            expired++;
        }
    }
    registry_unlock(m);
    for (size_t i = 0; i < ngone; i++)
        mc_obj_ev_client_expired(m, gone[i]); /* tasks cancelled, its disk replicas dead */
    if (gone != stackv)
        free(gone);
    if (expired)
        atomic_fetch_add_explicit(&m->c.expired_clients, (uint64_t)expired, memory_order_relaxed);
    bool pending = atomic_exchange_explicit(&m->sweep_pending, false, memory_order_acq_rel);
    if (unmounted || pending)
        mc_master_each_object(m, sweep_visit, NULL);
    return expired;
}

uint64_t mc_master_active_clients(struct mc_master *m)
{
    registry_lock(m);
    uint64_t n = m->clients->n;
    registry_unlock(m);
    return n;
}
