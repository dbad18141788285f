/*
 * worker.c - see worker.h for the design.
 *
 * The loops: a table of {name, step}; each runs on its own thread, calling step until stop.
 * A step long-polls once (bounded by wait_ms) and runs what came back, so stop is seen within
 * wait_ms plus one batch. The loop threads are named (mc-offload, mc-promote), so a tool can
 * tell the holder's offload CPU from its promotion CPU (mooncake_bench promotion does). This file
 * holds the table, the offload step and the lifecycle; the promotion step is worker_promote.c.
 */
#include "client/worker.h"
#include "client/worker_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/holder_index.h"
#include "client/master_conn.h"
#include "client/peer_server.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

static void offload_step(struct mc_worker *w);

/* Every loop of the worker, each on its own thread: a slow disk batch of one never delays the
 * other's long-poll, so offload and promotion both make progress when both are pending. */
static const struct {
    const char *name;
    const char *thread; /* its thread's name (at most 15 characters): tools tell them apart */
    void (*step)(struct mc_worker *w);
} g_loops[MC_WORKER_LOOPS] = {
    {"offload", "mc-offload", offload_step},
    {"promotion", "mc-promote", mc_worker_promote_step},
};

struct loop_arg {
    struct mc_worker *w;
    size_t i;
};

Mc__Uuid *mc_worker_uuid(struct mc_id id, Mc__Uuid *u)
{
    mc__uuid__init(u);
    u->hi = id.hi;
    u->lo = id.lo;
    return u;
}

void mc_worker_pause_ms(struct mc_worker *w, uint32_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    worker_lock(w);
    while (!atomic_load(&w->stop))
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT)
            break;
    worker_unlock(w);
}

void mc_worker_count(struct mc_worker *w, uint64_t *field, uint64_t n)
{
    worker_lock(w);
    *field += n;
    worker_unlock(w);
}

/* ---- offload ------------------------------------------------------------------------------- */

/* A task's outcome on its way to NotifyOffloadSuccess. */
struct job {
    const Mc__OffloadTaskItem *task;
    void *data; /* the value copied out of the segment */
    uint32_t crc;
    int status; /* 0 = to store / stored */
};

/* Whether a heartbeat item asks for a delete (the key was removed or its record dropped: any
 * record of version <= it->version goes) rather than an offload. */
static bool is_delete(const Mc__OffloadTaskItem *it)
{
    return it->drop;
}

/* Copies the task's value out of this process's segment sid (mount epoch, offset) into j->data
 * and checks it against the task's CRC. 1 when no such mount here (not copied). */
static int copy_out(struct mc_worker *w, struct job *j, struct mc_id sid, uint64_t epoch,
                    uint64_t offset)
{
    const Mc__OffloadTaskItem *t = j->task;
    uint8_t *src = NULL;
    if (mc_peer_server_resolve(w->cfg.ps, sid, epoch, offset, t->size, &src) != 0)
        return 1; /* not in this process's segment, or of an earlier mount */
    j->data = malloc(t->size ? (size_t)t->size : 1);
    if (!j->data)
        return MC_ERR_INTERNAL_ERROR;
    /* the copy and the CRC in one pass over the value */
    j->crc = mc_peer_server_copy_out_crc(w->cfg.ps, j->data, src, (size_t)t->size);
    return t->crc_valid && j->crc != t->crc32c ? MC_ERR_CHECKSUM_MISMATCH : 0;
}

/* Copies task's value out of this client's own segment into j->data: from the source the task
 * names (the replica the master pinned for it), or, from a master that names none, from the
 * replica QueryKey lists. */
static int fetch(struct mc_worker *w, struct job *j)
{
    const Mc__OffloadTaskItem *t = j->task;
    if (t->source && t->source->segment_id) {
        struct mc_id sid = {t->source->segment_id->hi, t->source->segment_id->lo};
        int rc = copy_out(w, j, sid, t->source->mount_epoch, t->source->offset);
        return rc == 1 ? MC_ERR_REPLICA_NOT_FOUND : rc;
    }
    Mc__QueryKeyRequest req = MC__QUERY_KEY_REQUEST__INIT;
    req.key = t->key;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(w->cfg.mc, MC_METHOD_QUERY_KEY, &req.base,
                                 &mc__query_key_response__descriptor, &m);
    if (rc)
        return rc;
    const Mc__QueryKeyResponse *q = (const Mc__QueryKeyResponse *)m;
    rc = MC_ERR_REPLICA_NOT_FOUND;
    if (q->version != t->version || q->size != t->size) {
        rc = MC_ERR_INVALID_VERSION; /* the object changed since the task was queued */
        goto out;
    }
    for (size_t i = 0; i < q->n_replicas; i++) {
        const Mc__ReplicaDescriptor *d = q->replicas[i] ? q->replicas[i]->replica : NULL;
        if (!d || d->type != MC__REPLICA_TYPE__RT_MEMORY ||
            d->status != MC__REPLICA_STATUS__RS_COMPLETE || !d->memory || !d->memory->segment_id)
            continue;
        struct mc_id sid = {d->memory->segment_id->hi, d->memory->segment_id->lo};
        int x = copy_out(w, j, sid, d->memory->mount_epoch, d->memory->offset);
        if (x == 1)
            continue;
        rc = x;
        break;
    }
out:
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* After a NotifyOffloadSuccess whose answer was lost: whether the master took the record of
 * key at version from this holder anyway (the report may have reached it before the connection
 * broke). 1: it lists that replica, keep the record; 0: it does not, delete it; -1: the master
 * cannot be asked now, keep it (a record the master does not know only costs space until
 * capacity eviction or a re-registration settles it; deleting one it does know would lose the
 * object once its DRAM copy goes). */
static int master_took(struct mc_worker *w, const char *key, uint64_t version)
{
    Mc__QueryKeyRequest req = MC__QUERY_KEY_REQUEST__INIT;
    req.key = (char *)key;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(w->cfg.mc, MC_METHOD_QUERY_KEY, &req.base,
                                 &mc__query_key_response__descriptor, &m);
    if (rc == MC_ERR_OBJECT_NOT_FOUND)
        return 0;
    if (rc)
        return -1;
    const Mc__QueryKeyResponse *q = (const Mc__QueryKeyResponse *)m;
    int took = 0;
    for (size_t i = 0; q->version == version && i < q->n_replicas; i++) {
        const Mc__ReplicaDescriptor *d = q->replicas[i] ? q->replicas[i]->replica : NULL;
        if (d && d->type == MC__REPLICA_TYPE__RT_LOCAL_DISK && d->local_disk &&
            d->local_disk->holder && d->local_disk->holder->hi == w->cfg.client_id.hi &&
            d->local_disk->holder->lo == w->cfg.client_id.lo)
            took = 1;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return took;
}

/* NotifyOffloadSuccess for jobs[0..n); stored records the master refuses are deleted. */
static void notify(struct mc_worker *w, struct job *jobs, size_t n)
{
    Mc__OffloadResult *res = calloc(n, sizeof(*res));
    Mc__OffloadResult **resp = calloc(n, sizeof(*resp));
    ProtobufCMessage *m = NULL;
    if (!res || !resp) {
        mc_worker_count(w, &w->st.errors, 1);
        goto out;
    }
    uint64_t stored = 0, nacked = 0, refused = 0;
    for (size_t i = 0; i < n; i++) {
        const Mc__OffloadTaskItem *t = jobs[i].task;
        mc__offload_result__init(&res[i]);
        res[i].task_id = t->task_id;
        res[i].key = t->key;
        res[i].status = jobs[i].status;
        res[i].size = t->size;
        res[i].version = t->version;
        res[i].crc32c = jobs[i].crc;
        res[i].crc_valid = jobs[i].status == 0;
        resp[i] = &res[i];
        if (jobs[i].status)
            nacked++;
    }
    Mc__Uuid u;
    Mc__NotifyOffloadSuccessRequest req = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
    req.client_id = mc_worker_uuid(w->cfg.client_id, &u);
    req.n_items = n;
    req.items = resp;
    int rc = mc_master_conn_call(w->cfg.mc, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &req.base,
                                 &mc__notify_offload_success_response__descriptor, &m);
    const Mc__NotifyOffloadSuccessResponse *r = (const Mc__NotifyOffloadSuccessResponse *)m;
    if (rc || r->n_statuses != n) {
        /* The answer is lost, not necessarily the report: a connection that broke after the
         * master executed it leaves records it now lists as LOCAL_DISK replicas. Those stay;
         * the others must not (nothing would ever delete them): their tasks expire there and
         * release the pins. */
        uint64_t kept = 0, deleted = 0;
        for (size_t i = 0; i < n; i++) {
            if (jobs[i].status)
                continue;
            if (master_took(w, jobs[i].task->key, jobs[i].task->version) != 0) {
                kept++;
                continue;
            }
            deleted++;
            mc_disk_tier_delete(w->cfg.tier, jobs[i].task->key, jobs[i].task->version);
        }
        mc_warn("worker", "offload report failed: records the master did not take are deleted",
                "tasks=%zu kept=%llu deleted=%llu rc=%s", n, (unsigned long long)kept,
                (unsigned long long)deleted, mc_strerror(rc ? rc : MC_ERR_RPC_FAIL));
        mc_worker_count(w, &w->st.errors, 1);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].status)
            continue;
        if (r->statuses[i] == 0) {
            stored++;
            continue;
        }
        refused++;
        mc_debug("worker", "offloaded record refused by the master, deleted",
                 "key=%s version=%llx rc=%s", jobs[i].task->key,
                 (unsigned long long)jobs[i].task->version, mc_strerror(r->statuses[i]));
        mc_disk_tier_delete(w->cfg.tier, jobs[i].task->key, jobs[i].task->version);
    }
    worker_lock(w);
    w->st.offloaded += stored;
    w->st.nacked += nacked;
    w->st.refused += refused;
    worker_unlock(w);
out:
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    free(res);
    free(resp);
}

/* Offloads tasks[0..n): fetch, one append, one report. */
static void offload_batch(struct mc_worker *w, Mc__OffloadTaskItem **tasks, size_t n)
{
    struct job *jobs = calloc(n, sizeof(*jobs));
    struct mc_disk_put *puts = calloc(n, sizeof(*puts));
    size_t *pj = calloc(n, sizeof(*pj));
    int *pres = calloc(n, sizeof(*pres));
    if (!jobs || !puts || !pj || !pres) {
        mc_worker_count(w, &w->st.errors, 1);
        goto out; /* the tasks expire at the master */
    }
    size_t np = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        jobs[i].task = tasks[i];
        jobs[i].status = fetch(w, &jobs[i]);
        if (jobs[i].status) {
            mc_debug("worker", "offload task not served", "key=%s rc=%s", tasks[i]->key,
                     mc_strerror(jobs[i].status));
            continue;
        }
        puts[np] = (struct mc_disk_put){.key = tasks[i]->key,
                                        .key_len = (uint32_t)strlen(tasks[i]->key),
                                        .version = tasks[i]->version,
                                        .crc = jobs[i].crc,
                                        .data = jobs[i].data,
                                        .len = tasks[i]->size};
        pj[np++] = i;
        bytes += tasks[i]->size;
    }
    if (np) {
        int rc = mc_disk_store_append(mc_disk_tier_store(w->cfg.tier), puts, np, pres);
        if (rc)
            mc_warn("worker", "disk append failed for part of an offload batch",
                    "records=%zu rc=%s", np, mc_strerror(rc));
        for (size_t k = 0; k < np; k++) {
            jobs[pj[k]].status = pres[k];
            if (pres[k])
                bytes -= puts[k].len;
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(jobs[i].data);
        jobs[i].data = NULL;
    }
    mc_worker_count(w, &w->st.bytes, bytes);
    notify(w, jobs, n);
out:
    free(jobs);
    free(puts);
    free(pj);
    free(pres);
}

/* Runs one heartbeat's answer: its deletes first, each applied durably (the record's dead mark
 * written) and its task id appended to acks (room for r->n_items), then its offload tasks in
 * batches. Returns how many acks it appended. */
static size_t run_answer(struct mc_worker *w, const Mc__OffloadObjectHeartbeatResponse *r,
                         uint64_t *acks)
{
    struct mc_disk_tier *tier = w->cfg.tier;
    Mc__OffloadTaskItem **batch = calloc(r->n_items ? r->n_items : 1, sizeof(*batch));
    size_t nb = 0, ntasks = 0, deleted = 0, nacks = 0;
    uint64_t bytes = 0;
    /* the deletes, all dead marks in one store call */
    const char **dk = calloc(r->n_items ? r->n_items : 1, sizeof(*dk));
    uint64_t *dv = calloc(r->n_items ? r->n_items : 1, sizeof(*dv)), *did = NULL;
    int *drc = calloc(r->n_items ? r->n_items : 1, sizeof(*drc));
    did = calloc(r->n_items ? r->n_items : 1, sizeof(*did));
    size_t nd = 0;
    for (size_t i = 0; acks && dk && dv && drc && did && i < r->n_items; i++) {
        Mc__OffloadTaskItem *it = r->items[i];
        if (!it || !it->key || !*it->key || !is_delete(it))
            continue;
        dk[nd] = it->key;
        dv[nd] = it->version;
        did[nd++] = it->task_id;
    }
    if (nd)
        (void)mc_disk_tier_delete_many(tier, dk, dv, nd, drc);
    for (size_t i = 0; i < nd; i++) {
        if (w->cfg.hidx) /* the DRAM copy's index entry goes before the ack as well */
            (void)mc_holder_index_drop_key(w->cfg.hidx, dk[i], strlen(dk[i]), dv[i]);
        if (drc[i] == 0) {
            deleted++;
            if (did[i]) /* an older master sends none: nothing waits */
                acks[nacks++] = did[i];
        } else {
            /* not acknowledged: the master fences this holder after its delete timeout */
            mc_warn("worker", "delete of a removed key's record failed; not acknowledged",
                    "key=%s rc=%s", dk[i], mc_strerror(drc[i]));
        }
    }
    free(dk);
    free(dv);
    free(drc);
    free(did);
    for (size_t i = 0; batch && i < r->n_items; i++) {
        Mc__OffloadTaskItem *it = r->items[i];
        if (!it || !it->key || !*it->key || is_delete(it))
            continue;
        ntasks++;
        if (nb && bytes + it->size > w->cfg.batch_bytes) {
            offload_batch(w, batch, nb);
            nb = 0;
            bytes = 0;
        }
        batch[nb++] = it;
        bytes += it->size;
    }
    if (nb)
        offload_batch(w, batch, nb);
    free(batch);
    worker_lock(w);
    w->st.tasks += ntasks;
    w->st.deleted += deleted;
    worker_unlock(w);
    return nacks;
}

/* One long-poll and its work. Deletes are acknowledged by the very next heartbeat, sent at once
 * (a Remove waits for the ack): the step goes on polling while it has acks to carry, and retries
 * them through a dropped connection. */
static void offload_step(struct mc_worker *w)
{
    struct mc_disk_tier *tier = w->cfg.tier;
    if (mc_disk_tier_take_register(tier)) {
        int rc = mc_disk_tier_register(tier);
        if (rc) {
            mc_disk_tier_want_register(tier);
            mc_worker_pause_ms(w, mc_disk_tier_master_lacks_tier(rc) ? w->cfg.wait_ms
                                                                     : MC_WORKER_RETRY_MS);
            return;
        }
    }
    uint64_t *acks = NULL;
    size_t nacks = 0;
    for (;;) {
        Mc__Uuid u;
        Mc__OffloadObjectHeartbeatRequest req = MC__OFFLOAD_OBJECT_HEARTBEAT_REQUEST__INIT;
        req.client_id = mc_worker_uuid(w->cfg.client_id, &u);
        req.enable_offloading = true;
        req.wait_ms = w->cfg.wait_ms;
        req.max_items = w->cfg.max_items;
        req.n_acked_delete_task_ids = nacks;
        req.acked_delete_task_ids = acks;
        ProtobufCMessage *m = NULL;
        int rc = mc_master_conn_call_wait(w->cfg.mc, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, &req.base,
                                          &mc__offload_object_heartbeat_response__descriptor,
                                          w->cfg.wait_ms, &m);
        if (mc_disk_tier_master_lacks_tier(rc)) {
            /* a master without the tier: ask again (and register) at the long-poll pace */
            mc_disk_tier_want_register(tier);
            mc_worker_count(w, &w->st.errors, 1);
            mc_worker_pause_ms(w, w->cfg.wait_ms);
            break;
        }
        if (rc && nacks && (rc == MC_ERR_RPC_FAIL || rc == MC_ERR_RPC_TIMEOUT) &&
            !atomic_load(&w->stop)) {
            mc_worker_count(w, &w->st.errors, 1); /* the acks are sent again */
            /* as soon as the link is back: a Remove waits on them (the delete timeout) */
            for (uint32_t t = 0; rc == MC_ERR_RPC_FAIL && t < MC_WORKER_RETRY_MS &&
                                 !mc_master_conn_is_up(w->cfg.mc) && !atomic_load(&w->stop);
                 t += 10)
                mc_worker_pause_ms(w, 10);
            continue;
        }
        if (rc) {
            if (rc != MC_ERR_RPC_FAIL && rc != MC_ERR_RPC_TIMEOUT) {
                /* the master does not know this holder (restart, expiry): register again */
                mc_info("worker", "offload heartbeat refused; registering the disk tier again",
                        "rc=%s", mc_strerror(rc));
                mc_disk_tier_want_register(tier);
            }
            mc_worker_count(w, &w->st.errors, 1);
            mc_worker_pause_ms(w, rc == MC_ERR_RPC_TIMEOUT ? 0 : MC_WORKER_RETRY_MS);
            break;
        }
        const Mc__OffloadObjectHeartbeatResponse *r = (const Mc__OffloadObjectHeartbeatResponse *)m;
        worker_lock(w);
        w->st.heartbeats++;
        worker_unlock(w);
        free(acks);
        acks = r->n_items ? calloc(r->n_items, sizeof(*acks)) : NULL;
        nacks = run_answer(w, r, acks);
        protobuf_c_message_free_unpacked(m, NULL);
        if (nacks == 0 || atomic_load(&w->stop))
            break;
    }
    free(acks);
}

/* ---- loops ---------------------------------------------------------------------------------- */

static void *loop_main(void *arg)
{
    struct loop_arg *la = arg;
    struct mc_worker *w = la->w;
    size_t i = la->i;
    free(la);
    mc_log_set_current(w->logger);
    (void)pthread_setname_np(pthread_self(), g_loops[i].thread);
    while (!atomic_load(&w->stop))
        g_loops[i].step(w);
    return NULL;
}

int mc_worker_start(const struct mc_worker_config *cfg, struct mc_worker **out)
{
    *out = NULL;
    if (!cfg->mc || !cfg->tier || !cfg->ps)
        return MC_ERR_INVALID_PARAMS;
    struct mc_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return MC_ERR_INTERNAL_ERROR;
    w->cfg = *cfg;
    if (!w->cfg.wait_ms)
        w->cfg.wait_ms = 1000;
    if (!w->cfg.max_items)
        w->cfg.max_items = 256;
    if (!w->cfg.batch_bytes)
        w->cfg.batch_bytes = 64u << 20;
    w->logger = mc_log_current();
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (mc_worker_promote_init(w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return MC_ERR_INTERNAL_ERROR;
    }
    w->promote_ready = true;
    for (size_t i = 0; i < MC_WORKER_LOOPS; i++) {
        struct loop_arg *la = malloc(sizeof(*la));
        if (la) {
            la->w = w;
            la->i = i;
        }
        if (!la || pthread_create(&w->threads[i], NULL, loop_main, la) != 0) {
            free(la);
            mc_worker_stop(w);
            return MC_ERR_INTERNAL_ERROR;
        }
        w->started[i] = true;
    }
    *out = w;
    return 0;
}

void mc_worker_stop(struct mc_worker *w)
{
    if (!w)
        return;
    worker_lock(w);
    atomic_store(&w->stop, true);
    pthread_cond_broadcast(&w->cv);
    worker_unlock(w);
    for (size_t i = 0; i < MC_WORKER_LOOPS; i++)
        if (w->started[i])
            pthread_join(w->threads[i], NULL);
    if (w->promote_ready)
        mc_worker_promote_destroy(w); /* after the loops: no batch is running */
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

void mc_worker_get_stats(struct mc_worker *w, struct mc_worker_stats *st)
{
    worker_lock(w);
    *st = w->st;
    worker_unlock(w);
}
