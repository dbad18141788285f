/*
 * worker_promote.c - the worker's promotion loop (design in worker.h, DESIGN.md §1.1, §8).
 *
 * One step: PromotionObjectHeartbeat (long-poll, wait_ms), then the tasks it returned in
 * chunks of at most batch_bytes of values. Per chunk:
 *   1. read: every task's record is pinned in the disk store (so the store's own capacity
 *      eviction prefers other extents while it is copied) and the chunk is read with one
 *      mc_disk_store_read call (one io_uring batch) straight into 4 KiB-aligned buffers; the
 *      store checks each value against its stored CRC, and the task's version, size and CRC
 *      are checked here. A task whose source fails any check is a bad source;
 *   2. run: the chunk's tasks are handed to the task pool (promote_threads threads plus the
 *      loop's own). The heartbeat asks the master to stage each task's replica as it hands the
 *      task out (stage): a task that comes with its staged replica is written there and its
 *      outcome (0, or why not) is kept for the next heartbeat, which carries it (results) — no
 *      RPC of its own. A task without one (a master that does not stage, or could not place
 *      it) takes the per-task RPCs: PromotionAllocStart -> write -> NotifyPromotionSuccess,
 *      NotifyPromotionFailure for a bad source or on any error after AllocStart (so nothing
 *      waits for the master's reaper);
 *   3. the records are unpinned and the buffers freed; the chunk's outcomes join the reports
 *      the next heartbeat carries. Reports survive a heartbeat lost on the way (RPC_FAIL,
 *      RPC_TIMEOUT: sent again; applying one twice is harmless) and are dropped on a refusal.
 * The loop thread waits for the chunk's last task before the next chunk (bounded memory:
 * batch_bytes of buffers at a time).
 *
 * Heartbeat errors: SEGMENT_NOT_FOUND (the master has no LOCAL_DISK registration of this
 * client: it restarted or expired it) asks for a registration (the offload loop makes it) and
 * waits wait_ms; a master without the tier or promotion: wait wait_ms; unreachable: wait
 * MC_WORKER_RETRY_MS.
 *
 * Test hook (MC_TEST_HOOKS builds only): MC_TEST_PROMOTION_STALL_MS in the environment makes
 * every task stall that long between its AllocStart and its write, so a process test can kill
 * the holder while a staged replica exists.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/master_conn.h"
#include "client/peer_server.h"
#include "client/worker_internal.h"
#include "common/log.h"
#include "common/mc_assert.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define DEFAULT_THREADS 4u
#define MAX_THREADS 64u

struct promo_job {
    const Mc__PromotionTaskItem *task;
    void *buf;   /* the value, 4 KiB-aligned, read from the disk store (the pool's arena) */
    int source;  /* 0 = the bytes are good; else why the source is unusable */
    bool pinned; /* the record is pinned in the store */
    bool direct; /* staged: the store's read hands the bytes to stage_sink, no buffer */
    bool sunk;   /* direct: stage_sink wrote (or tried to write) the replica */
    int wrote;   /* sunk: the write's outcome (0 written, else why not) */
    bool report; /* staged task: result goes out with the next heartbeat */
    int result;  /* its outcome: 0 written, else why not */
};

/* An outcome waiting for the next heartbeat (the loop thread's own: no lock). */
struct promo_report {
    uint64_t task_id;
    int status;
    char *key;
};

#define MAX_REPORTS 4096u /* reports one heartbeat carries (the master takes up to 8192) */

struct mc_promote_pool {
    struct mc_worker *w;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t th[MAX_THREADS];
    unsigned nth;
    bool stop;
    struct promo_job *jobs; /* the chunk being run; NULL between chunks */
    size_t njobs, next, done;
    struct promo_report *rep; /* outcomes for the next heartbeat (loop thread only) */
    size_t nrep, caprep;
    void *arena; /* the chunk's read buffers, kept between chunks (loop thread only) */
    size_t arena_cap;
};

/* Read buffers up to this size are kept from one chunk to the next: a fresh 4 KiB-aligned
 * buffer per task cost a heap grow, page faults and the kernel's slow page pinning on every
 * O_DIRECT read, more CPU than the copy of the value itself. */
#define ARENA_KEEP_BYTES (4u << 20)

static size_t round_block(uint64_t n)
{
    uint64_t r = (n + MC_DISK_BLOCK - 1) / MC_DISK_BLOCK * MC_DISK_BLOCK;
    return r ? (size_t)r : MC_DISK_BLOCK;
}

/* ---- the RPCs ------------------------------------------------------------------------------ */

static void notify_failure(struct mc_worker *w, const Mc__PromotionTaskItem *t, int reason)
{
    Mc__Uuid u;
    Mc__NotifyPromotionFailureRequest req = MC__NOTIFY_PROMOTION_FAILURE_REQUEST__INIT;
    req.client_id = mc_worker_uuid(w->cfg.client_id, &u);
    req.task_id = t->task_id;
    req.key = t->key;
    req.reason = reason;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(w->cfg.mc, MC_METHOD_NOTIFY_PROMOTION_FAILURE, &req.base,
                                 &mc__notify_promotion_failure_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (rc) {
        /* the master's reaper ends the task after promotion_task_timeout */
        mc_warn("worker", "NotifyPromotionFailure failed", "key=%s task=%llu rc=%s", t->key,
                (unsigned long long)t->task_id, mc_strerror(rc));
        mc_worker_count(w, &w->st.promo_errors, 1);
    }
    mc_worker_count(w, &w->st.promo_failed, 1);
}

/* PromotionAllocStart: *out gets the answer (its replica is the staged descriptor). */
static int alloc_start(struct mc_worker *w, const Mc__PromotionTaskItem *t, ProtobufCMessage **out)
{
    Mc__Uuid u;
    Mc__PromotionAllocStartRequest req = MC__PROMOTION_ALLOC_START_REQUEST__INIT;
    req.client_id = mc_worker_uuid(w->cfg.client_id, &u);
    req.task_id = t->task_id;
    req.key = t->key;
    req.size = t->size;
    int rc = mc_master_conn_call(w->cfg.mc, MC_METHOD_PROMOTION_ALLOC_START, &req.base,
                                 &mc__promotion_alloc_start_response__descriptor, out);
    if (rc == 0) {
        const Mc__ReplicaDescriptor *d = ((const Mc__PromotionAllocStartResponse *)*out)->replica;
        if (!d || d->type != MC__REPLICA_TYPE__RT_MEMORY || !d->memory || !d->memory->segment_id ||
            (d->memory->size && d->memory->size < t->size))
            rc = MC_ERR_INVALID_REPLICA;
    }
    return rc;
}

/* The bytes into the staged replica d, which the master places in this process's own segment
 * only (DESIGN.md §7, "Staged space"): one memcpy under the segment's epoch lock, made only if
 * the segment's current mount is the descriptor's. A holder stopped past its TTL and resumed
 * finds its segment fenced or mounted again and writes nothing; a descriptor of another
 * process's segment (a master that places elsewhere) is refused, never written remotely. */
static int write_staged(struct mc_worker *w, const Mc__ReplicaDescriptor *d, const void *buf,
                        size_t len, uint32_t *crc)
{
    const Mc__MemoryLocation *m = d->memory;
    struct mc_id sid = {m->segment_id->hi, m->segment_id->lo};
    int rc =
        mc_peer_server_write_current_crc(w->cfg.ps, sid, m->mount_epoch, m->offset, buf, len, crc);
    if (rc == 0) {
        mc_worker_count(w, &w->st.promo_local, 1);
        return 0;
    }
    if (rc == MC_ERR_SEGMENT_NOT_FOUND) {
        mc_warn("worker", "staged replica not in this process's segment: not written", "rc=%s",
                mc_strerror(rc));
        return MC_ERR_INVALID_REPLICA;
    }
    if (rc == MC_ERR_REPLICA_IS_GONE)
        mc_worker_count(w, &w->st.promo_stale, 1);
    return rc; /* ours, but of another mount: the task is stale */
}

static int notify_success(struct mc_worker *w, const Mc__PromotionTaskItem *t)
{
    Mc__Uuid u;
    Mc__NotifyPromotionSuccessRequest req = MC__NOTIFY_PROMOTION_SUCCESS_REQUEST__INIT;
    req.client_id = mc_worker_uuid(w->cfg.client_id, &u);
    req.task_id = t->task_id;
    req.key = t->key;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(w->cfg.mc, MC_METHOD_NOTIFY_PROMOTION_SUCCESS, &req.base,
                                 &mc__notify_promotion_success_response__descriptor, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* The end of one task, staged or not: a success counted (promoted, promo_bytes), a failure
 * logged and counted; an unstaged task's failure is also told to the master at once (a staged
 * one's outcome rides on the next heartbeat: j->report). */
static void task_done(struct mc_worker *w, struct promo_job *j, int rc)
{
    const Mc__PromotionTaskItem *t = j->task;
    j->result = rc;
    if (rc == MC_OK) {
        worker_lock(w);
        w->st.promoted++;
        w->st.promo_bytes += t->size;
        worker_unlock(w);
        return;
    }
    /* REPLICA_IS_NOT_READY from AllocStart or Success: the task is stale (reaped, cancelled);
     * the failure report is then a no-op at the master, and harmless */
    mc_debug("worker", j->source ? "promotion source unusable: task failed" : "promotion failed",
             "key=%s task=%llu rc=%s", t->key, (unsigned long long)t->task_id, mc_strerror(rc));
    if (j->source)
        mc_worker_count(w, &w->st.promo_bad_source, 1);
    if (j->report)
        mc_worker_count(w, &w->st.promo_failed, 1);
    else
        notify_failure(w, t, rc); /* counts promo_failed */
}

/* Whether a staged task's replica is one this process can write t's bytes into. */
static bool staged_usable(const Mc__PromotionTaskItem *t)
{
    const Mc__ReplicaDescriptor *d = t->staged;
    return d->type == MC__REPLICA_TYPE__RT_MEMORY && d->memory && d->memory->segment_id &&
           (!d->memory->size || d->memory->size >= t->size);
}

/* A staged task read into a buffer: the bytes into the replica the master placed with it. */
static int run_staged(struct mc_worker *w, const struct promo_job *j)
{
    const Mc__PromotionTaskItem *t = j->task;
    if (!staged_usable(t))
        return MC_ERR_INVALID_REPLICA;
#ifdef MC_TEST_HOOKS
    if (w->test_promote_stall_ms)
        mc_worker_pause_ms(w, w->test_promote_stall_ms);
#endif
    return write_staged(w, t->staged, j->buf, (size_t)t->size, NULL);
}

struct sink_ctx {
    struct mc_worker *w;
    struct promo_job *job;
};

/* The store's read of a direct job (mc_disk_sink_fn): the value goes from the store's staging
 * straight into the staged replica, its CRC taken in the same pass (the store checks it). Only
 * a value of exactly the task's size is written (never past the staged range); a version or
 * CRC the task does not expect is refused after the read (read_sources), and the task then
 * fails: the range is the task's own, invisible to readers until the master commits it. Never
 * returns CHECKSUM_MISMATCH (which would make the store drop a good record). */
static int stage_sink(void *ctx, const struct mc_disk_get *g, const void *bytes, uint32_t *crc)
{
    struct sink_ctx *c = ctx;
    const Mc__PromotionTaskItem *t = c->job->task;
    int rc;
    if (g->len != t->size) {
        rc = MC_ERR_REPLICA_NOT_FOUND; /* not the record the task names */
    } else {
#ifdef MC_TEST_HOOKS
        if (c->w->test_promote_stall_ms)
            mc_worker_pause_ms(c->w, c->w->test_promote_stall_ms);
#endif
        rc = write_staged(c->w, t->staged, bytes, (size_t)g->len, crc);
        if (rc == MC_ERR_CHECKSUM_MISMATCH)
            rc = MC_ERR_INTERNAL_ERROR;
        c->job->sunk = true;
        c->job->wrote = rc;
    }
    return rc;
}

/* A task without a staged replica: PromotionAllocStart -> write -> NotifyPromotionSuccess. */
static int run_unstaged(struct mc_worker *w, const struct promo_job *j)
{
    const Mc__PromotionTaskItem *t = j->task;
    ProtobufCMessage *m = NULL;
    int rc = alloc_start(w, t, &m);
    if (rc == 0) {
#ifdef MC_TEST_HOOKS
        if (w->test_promote_stall_ms)
            mc_worker_pause_ms(w, w->test_promote_stall_ms);
#endif
        rc = write_staged(w, ((const Mc__PromotionAllocStartResponse *)m)->replica, j->buf,
                          (size_t)t->size, NULL);
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (rc == 0)
        rc = notify_success(w, t);
    return rc;
}

/* One task, start to end (any thread of the pool); a staged task's outcome is kept in
 * j->result for the next heartbeat. */
static void run_job(struct mc_worker *w, struct promo_job *j)
{
    j->report = j->task->staged != NULL;
    int rc = j->source         ? j->source
             : j->direct       ? j->wrote
             : j->task->staged ? run_staged(w, j)
                               : run_unstaged(w, j);
    task_done(w, j, rc);
}

/* ---- the task pool ------------------------------------------------------------------------- */

/* Takes the next job of the current chunk (pool->mu held), or NULL. */
/* p->mu goes through these: a leaf of the lock order (common/lock_order.h). */
static void pool_lock(struct mc_promote_pool *p)
{
    mc_lo_acquire(MC_LO_PROMO_POOL, 0);
    pthread_mutex_lock(&p->mu);
}

static void pool_unlock(struct mc_promote_pool *p)
{
    pthread_mutex_unlock(&p->mu);
    mc_lo_release(MC_LO_PROMO_POOL, 0);
}

static struct promo_job *take_job_locked(struct mc_promote_pool *p)
{
    MC_ASSERT(mc_lo_holds(MC_LO_PROMO_POOL, 0, false));
    return p->jobs && p->next < p->njobs ? &p->jobs[p->next++] : NULL;
}

static void job_done_locked(struct mc_promote_pool *p)
{
    MC_ASSERT(mc_lo_holds(MC_LO_PROMO_POOL, 0, false));
    if (++p->done == p->njobs)
        pthread_cond_broadcast(&p->done_cv);
}

static void *pool_main(void *arg)
{
    struct mc_promote_pool *p = arg;
    mc_log_set_current(p->w->logger);
    pool_lock(p);
    for (;;) {
        struct promo_job *j = NULL;
        while (!p->stop && !(j = take_job_locked(p)))
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop)
            break;
        pool_unlock(p);
        run_job(p->w, j);
        pool_lock(p);
        job_done_locked(p);
    }
    pool_unlock(p);
    return NULL;
}

/* Runs jobs[0..n) on the pool and this thread; returns when all are done. */
static void run_chunk(struct mc_worker *w, struct promo_job *jobs, size_t n)
{
    struct mc_promote_pool *p = w->pool;
    /* staged tasks make no RPC: a memcpy each, cheaper on this thread than handing them out */
    size_t staged = 0;
    for (size_t i = 0; i < n; i++)
        staged += jobs[i].task->staged != NULL;
    if (staged == n) {
        for (size_t i = 0; i < n; i++)
            run_job(w, &jobs[i]);
        return;
    }
    pool_lock(p);
    p->jobs = jobs;
    p->njobs = n;
    p->next = p->done = 0;
    pthread_cond_broadcast(&p->work_cv);
    struct promo_job *j;
    while ((j = take_job_locked(p))) {
        pool_unlock(p);
        run_job(w, j);
        pool_lock(p);
        job_done_locked(p);
    }
    while (p->done < p->njobs)
        pthread_cond_wait(&p->done_cv, &p->mu);
    p->jobs = NULL;
    p->njobs = p->next = p->done = 0;
    pool_unlock(p);
}

int mc_worker_promote_init(struct mc_worker *w)
{
    struct mc_promote_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return -1;
    p->w = w;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    w->pool = p;
    unsigned n = w->cfg.promote_threads ? w->cfg.promote_threads : DEFAULT_THREADS;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    /* the loop thread runs tasks too: n - 1 more threads make n at once */
    for (unsigned i = 0; i + 1 < n; i++) {
        if (pthread_create(&p->th[i], NULL, pool_main, p) != 0) {
            mc_worker_promote_destroy(w);
            return -1;
        }
        p->nth++;
    }
#ifdef MC_TEST_HOOKS
    const char *stall = getenv("MC_TEST_PROMOTION_STALL_MS");
    w->test_promote_stall_ms = stall ? (uint32_t)strtoul(stall, NULL, 10) : 0;
#endif
    return 0;
}

void mc_worker_promote_destroy(struct mc_worker *w)
{
    struct mc_promote_pool *p = w->pool;
    if (!p)
        return;
    pool_lock(p);
    p->stop = true;
    pthread_cond_broadcast(&p->work_cv);
    pool_unlock(p);
    for (unsigned i = 0; i < p->nth; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    /* unsent reports: their tasks end at the master (the holder's unmount, or the reaper) */
    for (size_t i = 0; i < p->nrep; i++)
        free(p->rep[i].key);
    free(p->rep);
    free(p->arena);
    free(p);
    w->pool = NULL;
}

/* ---- one chunk ----------------------------------------------------------------------------- */

/* The pool's arena with room for need bytes (4 KiB-aligned), or NULL. */
static void *arena_get(struct mc_promote_pool *p, size_t need)
{
    if (need <= p->arena_cap)
        return p->arena;
    free(p->arena);
    p->arena = NULL;
    p->arena_cap = 0;
    if (posix_memalign(&p->arena, MC_DISK_BLOCK, need) != 0) {
        p->arena = NULL;
        return NULL;
    }
    p->arena_cap = need;
    return p->arena;
}

/* After a chunk: an arena grown past ARENA_KEEP_BYTES (a chunk of large values) is let go. */
static void arena_trim(struct mc_promote_pool *p)
{
    if (p->arena_cap > ARENA_KEEP_BYTES) {
        free(p->arena);
        p->arena = NULL;
        p->arena_cap = 0;
    }
}

/* Pins and reads every job's record in one store call, and checks what came back. A staged
 * task whose replica this process can write (direct) is read straight into it: the store hands
 * the bytes from its registered staging to stage_sink, one pass that copies and takes the CRC.
 * Every other job's buffer is its 4 KiB-aligned slice of the pool's arena (valid until the next
 * chunk). */
static void read_sources(struct mc_worker *w, struct promo_job *jobs, size_t n)
{
    struct mc_disk_store *s = mc_disk_tier_store(w->cfg.tier);
    struct mc_disk_get *g = calloc(n, sizeof(*g));
    struct sink_ctx *sc = calloc(n, sizeof(*sc));
    size_t *gi = calloc(n, sizeof(*gi));
    size_t m = 0, need = 0;
    char *arena = NULL;
    bool ok = g && sc && gi;
    for (size_t i = 0; ok && i < n; i++) {
        struct promo_job *j = &jobs[i];
        const Mc__PromotionTaskItem *t = j->task;
        if (t->size > SIZE_MAX / 4) {
            ok = false;
            break;
        }
        j->direct = t->size > 0 && t->staged && staged_usable(t);
        if (!j->direct)
            need += round_block(t->size);
    }
    if (ok && need)
        ok = (arena = arena_get(w->pool, need)) != NULL;
    if (!ok) {
        for (size_t i = 0; i < n; i++)
            jobs[i].source = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0, at = 0; i < n; i++) {
        struct promo_job *j = &jobs[i];
        const Mc__PromotionTaskItem *t = j->task;
        size_t cap = round_block(t->size);
        uint32_t klen = (uint32_t)strlen(t->key);
        g[m] = (struct mc_disk_get){.key = t->key, .key_len = klen, .cap = cap};
        if (j->direct) {
            sc[i] = (struct sink_ctx){.w = w, .job = j};
            g[m].sink = stage_sink;
            g[m].sink_ctx = &sc[i];
        } else {
            j->buf = arena + at;
            g[m].buf = j->buf;
            at += cap;
        }
        j->pinned = mc_disk_store_pin(s, t->key, klen, NULL) == 0;
        gi[m++] = i;
    }
    if (m)
        mc_disk_store_read(s, g, m);
    for (size_t k = 0; k < m; k++) {
        struct promo_job *j = &jobs[gi[k]];
        const Mc__PromotionTaskItem *t = j->task;
        int st = g[k].result;
        if (j->sunk && j->wrote != 0 && st == j->wrote) {
            st = 0; /* the source was good; the write was refused: the task's outcome */
        } else if (st == MC_ERR_OBJECT_NOT_FOUND || st == MC_ERR_BUFFER_OVERFLOW ||
                   (j->direct && st == MC_ERR_REPLICA_NOT_FOUND)) {
            st = MC_ERR_REPLICA_NOT_FOUND; /* the record is gone */
        } else if (st == 0 && t->version && g[k].version != t->version) {
            st = MC_ERR_INVALID_VERSION; /* another version: never promoted */
        } else if (st == 0 && g[k].len != t->size) {
            st = MC_ERR_REPLICA_NOT_FOUND;
        } else if (st == 0 && t->crc_valid && g[k].crc != t->crc32c) {
            st = MC_ERR_CHECKSUM_MISMATCH; /* not the bytes the master knows */
        }
        j->source = st;
        if (j->direct && st == 0 && !j->sunk)
            j->source = MC_ERR_INTERNAL_ERROR; /* nothing was written (cannot happen) */
    }
out:
    free(g);
    free(sc);
    free(gi);
}

/* Keeps t's outcome for the next heartbeat. Out of memory it is reported at once instead. */
static void add_report(struct mc_worker *w, const Mc__PromotionTaskItem *t, int status)
{
    struct mc_promote_pool *p = w->pool;
    char *key = strdup(t->key);
    if (key && p->nrep == p->caprep) {
        size_t ncap = p->caprep ? p->caprep * 2 : 64;
        struct promo_report *nv = realloc(p->rep, ncap * sizeof(*nv));
        if (nv) {
            p->rep = nv;
            p->caprep = ncap;
        }
    }
    if (!key || p->nrep == p->caprep) {
        free(key);
        if (status == 0 && notify_success(w, t) == 0)
            return;
        notify_failure(w, t, status ? status : MC_ERR_INTERNAL_ERROR);
        return;
    }
    p->rep[p->nrep++] = (struct promo_report){.task_id = t->task_id, .status = status, .key = key};
}

/* The first k reports were delivered (or refused): drop them. */
static void drop_reports(struct mc_promote_pool *p, size_t k)
{
    for (size_t i = 0; i < k; i++)
        free(p->rep[i].key);
    memmove(p->rep, p->rep + k, (p->nrep - k) * sizeof(*p->rep));
    p->nrep -= k;
}

static void promote_chunk(struct mc_worker *w, Mc__PromotionTaskItem **tasks, size_t n)
{
    struct promo_job *jobs = calloc(n, sizeof(*jobs));
    if (!jobs) {
        for (size_t i = 0; i < n; i++)
            notify_failure(w, tasks[i], MC_ERR_INTERNAL_ERROR);
        return;
    }
    for (size_t i = 0; i < n; i++)
        jobs[i].task = tasks[i];
    read_sources(w, jobs, n);
    run_chunk(w, jobs, n);
    struct mc_disk_store *s = mc_disk_tier_store(w->cfg.tier);
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].pinned)
            mc_disk_store_unpin(s, tasks[i]->key, (uint32_t)strlen(tasks[i]->key));
        if (jobs[i].report)
            add_report(w, tasks[i], jobs[i].result);
    }
    arena_trim(w->pool);
    free(jobs);
}

void mc_worker_promote_step(struct mc_worker *w)
{
    Mc__Uuid u;
    Mc__PromotionObjectHeartbeatRequest req = MC__PROMOTION_OBJECT_HEARTBEAT_REQUEST__INIT;
    req.client_id = mc_worker_uuid(w->cfg.client_id, &u);
    req.wait_ms = w->cfg.wait_ms;
    req.max_items = w->cfg.promote_max_items;
    req.stage = true;
    /* the outcomes of the tasks staged by earlier heartbeats ride on this one */
    struct mc_promote_pool *p = w->pool;
    size_t nr = p->nrep < MAX_REPORTS ? p->nrep : MAX_REPORTS;
    Mc__PromotionResult *res = nr ? calloc(nr, sizeof(*res) + sizeof(void *)) : NULL;
    if (res) {
        Mc__PromotionResult **ptrs = (Mc__PromotionResult **)(res + nr);
        for (size_t i = 0; i < nr; i++) {
            mc__promotion_result__init(&res[i]);
            res[i].task_id = p->rep[i].task_id;
            res[i].key = p->rep[i].key;
            res[i].status = p->rep[i].status;
            ptrs[i] = &res[i];
        }
        req.n_results = nr;
        req.results = ptrs;
        if (nr < p->nrep)
            req.wait_ms = 0; /* more to carry: the next heartbeat follows at once */
    } else {
        nr = 0; /* out of memory: the next heartbeat tries again */
    }
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call_wait(w->cfg.mc, MC_METHOD_PROMOTION_OBJECT_HEARTBEAT, &req.base,
                                      &mc__promotion_object_heartbeat_response__descriptor,
                                      req.wait_ms, &m);
    free(res);
    /* delivered, or refused by the master (which then applied none: their tasks expire there);
     * a heartbeat lost on the way carries them again */
    if (nr && rc != MC_ERR_RPC_FAIL && rc != MC_ERR_RPC_TIMEOUT)
        drop_reports(p, nr);
    if (rc) {
        mc_worker_count(w, &w->st.promo_errors, 1);
        if (rc == MC_ERR_SEGMENT_NOT_FOUND) {
            /* no LOCAL_DISK registration here: the offload loop registers the tier again */
            mc_disk_tier_want_register(w->cfg.tier);
            mc_worker_pause_ms(w, w->cfg.wait_ms);
        } else if (rc == MC_ERR_RPC_TIMEOUT) {
            mc_worker_pause_ms(w, 0);
        } else if (rc == MC_ERR_RPC_FAIL) {
            mc_worker_pause_ms(w, MC_WORKER_RETRY_MS);
        } else {
            /* a master without the tier or promotion, or another refusal: the poll pace */
            mc_worker_pause_ms(w, w->cfg.wait_ms);
        }
        return;
    }
    const Mc__PromotionObjectHeartbeatResponse *r = (const Mc__PromotionObjectHeartbeatResponse *)m;
    Mc__PromotionTaskItem **chunk = calloc(r->n_items ? r->n_items : 1, sizeof(*chunk));
    size_t nc = 0, ntasks = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; chunk && i < r->n_items; i++) {
        Mc__PromotionTaskItem *it = r->items[i];
        if (!it || !it->key || !*it->key)
            continue;
        ntasks++;
        if (nc && bytes + it->size > w->cfg.batch_bytes) {
            promote_chunk(w, chunk, nc);
            nc = 0;
            bytes = 0;
        }
        chunk[nc++] = it;
        bytes += it->size;
    }
    if (nc)
        promote_chunk(w, chunk, nc);
    free(chunk);
    worker_lock(w);
    w->st.promo_heartbeats++;
    w->st.promo_tasks += ntasks;
    worker_unlock(w);
    protobuf_c_message_free_unpacked(m, NULL);
}
