/*
 * disk_uring.c - the LOCAL_DISK store's I/O engine: a pool of io_uring rings and a batched
 * submit/complete loop.
 *
 * A thread that submits a batch takes a ring from the store's pool (creating one when the pool
 * is empty) and gives it back afterwards, so concurrent submitters never share a ring and no
 * thread exists per request. disk_ring_run() keeps up to `depth` operations in flight: it tops
 * the submission queue up, submits (waiting for one completion only when nothing else is ready),
 * then runs the completion callbacks of what it reaped last time, so CRC checks overlap the I/O
 * already queued.
 *
 * Each ring tries to register its aligned staging buffer (pinned memory: RLIMIT_MEMLOCK) and a
 * sparse table of DISK_MAX_SLOTS files. The store bumps files_gen whenever an extent file is
 * opened or closed; a ring brings its table up to date under the store lock before it is used
 * and before it goes back to the pool, and idle rings are synced when an extent is dropped, so
 * no ring keeps a deleted file alive. When registration is refused, the ring uses plain buffers
 * or fds and the store logs it once. When io_uring itself is unavailable, pread/pwrite are used.
 *
 * Fault injection (MC_TEST_HOOKS): EIO / ENOSPC complete an operation without submitting it;
 * SHORT submits half the length (4 KiB aligned) so the disk really holds a torn record.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "client/disk_internal.h"
#include "common/log.h"

static struct disk_ring *ring_new(struct mc_disk_store *s)
{
    struct disk_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->depth = s->cfg.queue_depth;
    r->reaped = calloc(r->depth, sizeof(*r->reaped));
    if (!r->reaped) {
        free(r);
        return NULL;
    }
    if (posix_memalign((void **)&r->staging, MC_DISK_BLOCK, s->cfg.staging_bytes) == 0)
        r->staging_len = s->cfg.staging_bytes;
    else
        r->staging = NULL;

    int rc = io_uring_queue_init(r->depth, &r->ring, 0);
    pthread_mutex_lock(&s->pool_mu);
    if (rc < 0) {
        if (!s->logged_no_uring++)
            mc_warn(DISK_COMP, "io_uring unavailable, using pread/pwrite", "path=%s err=%d",
                    s->path, -rc);
        pthread_mutex_unlock(&s->pool_mu);
        return r;
    }
    r->uring = 1;
    if (r->staging) {
        struct iovec iov = {r->staging, r->staging_len};
        rc = io_uring_register_buffers(&r->ring, &iov, 1);
        if (rc == 0) {
            r->buf_registered = 1;
        } else if (!s->logged_plain_bufs++) {
            struct rlimit rl = {0, 0};
            getrlimit(RLIMIT_MEMLOCK, &rl);
            mc_info(DISK_COMP, "registered buffers refused, using plain buffers",
                    "path=%s err=%d memlock_limit=%llu staging=%zu", s->path, -rc,
                    (unsigned long long)rl.rlim_cur, r->staging_len);
        }
    }
    rc = io_uring_register_files_sparse(&r->ring, DISK_MAX_SLOTS);
    if (rc == 0) {
        r->files_registered = 1;
        r->files_gen = 0; /* the store's generation starts at 1: first use syncs */
    } else if (!s->logged_plain_files++) {
        mc_info(DISK_COMP, "registered files refused, using plain fds", "path=%s err=%d", s->path,
                -rc);
    }
    s->last_buf_registered = r->buf_registered;
    s->last_files_registered = r->files_registered;
    pthread_mutex_unlock(&s->pool_mu);
    return r;
}

static void ring_free(struct disk_ring *r)
{
    if (r->uring)
        io_uring_queue_exit(&r->ring);
    free(r->staging);
    free(r->reaped);
    free(r);
}

struct disk_ring *disk_ring_get(struct mc_disk_store *s)
{
    pthread_mutex_lock(&s->pool_mu);
    struct disk_ring *r = s->pool;
    if (r)
        s->pool = r->next;
    pthread_mutex_unlock(&s->pool_mu);
    if (!r)
        r = ring_new(s);
    if (r) {
        r->next = NULL;
        r->staging_used = 0;
    }
    return r;
}

void disk_ring_sync_files_locked(struct mc_disk_store *s, struct disk_ring *r)
{
    if (!r->files_registered || r->files_gen == s->files_gen)
        return;
    int rc = io_uring_register_files_update(&r->ring, 0, s->slot_fds, DISK_MAX_SLOTS);
    if (rc < 0) {
        /* Drop the table entirely so the ring holds no stale file, then use plain fds. */
        io_uring_unregister_files(&r->ring);
        r->files_registered = 0;
        mc_warn(DISK_COMP, "registered file update failed, using plain fds", "path=%s err=%d",
                s->path, -rc);
        return;
    }
    r->files_gen = s->files_gen;
}

void disk_ring_put_locked(struct mc_disk_store *s, struct disk_ring *r)
{
    disk_ring_sync_files_locked(s, r);
    pthread_mutex_lock(&s->pool_mu);
    r->next = s->pool;
    s->pool = r;
    pthread_mutex_unlock(&s->pool_mu);
}

void disk_pool_sync_files_locked(struct mc_disk_store *s)
{
    pthread_mutex_lock(&s->pool_mu);
    for (struct disk_ring *r = s->pool; r; r = r->next)
        disk_ring_sync_files_locked(s, r);
    pthread_mutex_unlock(&s->pool_mu);
}

void disk_pool_destroy(struct mc_disk_store *s)
{
    while (s->pool) {
        struct disk_ring *r = s->pool;
        s->pool = r->next;
        ring_free(r);
    }
}

void *disk_ring_scratch(struct disk_ring *r, size_t len, int *heap)
{
    len = disk_round_up(len ? len : 1);
    if (r->staging && r->staging_len - r->staging_used >= len) {
        void *p = r->staging + r->staging_used;
        r->staging_used += len;
        *heap = 0;
        return p;
    }
    void *p = NULL;
    if (posix_memalign(&p, MC_DISK_BLOCK, len) != 0)
        return NULL;
    *heap = 1;
    return p;
}

/* Returns the fault to apply to this operation (MC_DISK_FAULT_NONE normally). */
static int fault_take(struct disk_faults *f, int write)
{
#ifdef MC_TEST_HOOKS
    if (!f)
        return 0;
    int kind = MC_DISK_FAULT_NONE;
    pthread_mutex_lock(&f->mu);
    if (f->f.kind != MC_DISK_FAULT_NONE &&
        (f->f.ops & (write ? MC_DISK_FAULT_WRITE : MC_DISK_FAULT_READ))) {
        if (f->f.skip > 0) {
            f->f.skip--;
        } else if (f->f.count != 0) {
            kind = f->f.kind;
            if (f->f.count > 0 && --f->f.count == 0)
                f->f.kind = MC_DISK_FAULT_NONE;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return kind;
#else
    (void)f;
    (void)write;
    return 0;
#endif
}

/* Applies an injected fault: 1 when the operation is complete without I/O, else 0 with *len
 * possibly shortened. */
static int fault_apply(int kind, struct disk_io *io, uint32_t *len)
{
    *len = io->len;
    switch (kind) {
    case MC_DISK_FAULT_EIO:
        io->res = -EIO;
        return 1;
    case MC_DISK_FAULT_ENOSPC:
        io->res = -ENOSPC;
        return 1;
    case MC_DISK_FAULT_SHORT:
        *len = (io->len / 2) & ~(MC_DISK_BLOCK - 1);
        if (*len == 0) {
            io->res = 0;
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}

static void run_sync(struct disk_ring *r, struct disk_io *ios, size_t n, struct disk_faults *faults,
                     disk_done_fn done, void *ctx)
{
    (void)r;
    for (size_t i = 0; i < n; i++) {
        struct disk_io *io = &ios[i];
        uint32_t len;
        if (!fault_apply(fault_take(faults, io->write), io, &len)) {
            ssize_t rc;
            do {
                rc = io->write ? pwrite(io->fd, io->buf, len, (off_t)io->off)
                               : pread(io->fd, io->buf, len, (off_t)io->off);
            } while (rc < 0 && errno == EINTR);
            io->res = rc < 0 ? -errno : (int)rc;
        }
        done(ctx, i);
    }
}

static void before_io(struct disk_faults *f, struct disk_io *ios, size_t n)
{
#ifdef MC_TEST_HOOKS
    if (!f || n == 0)
        return;
    pthread_mutex_lock(&f->mu);
    void (*fn)(void *, int) = f->f.before_io;
    void *ctx = f->f.before_io_ctx;
    pthread_mutex_unlock(&f->mu);
    if (fn)
        fn(ctx, ios[0].write);
#else
    (void)f;
    (void)ios;
    (void)n;
#endif
}

void disk_ring_run(struct disk_ring *r, struct disk_io *ios, size_t n, struct disk_faults *faults,
                   disk_done_fn done, void *ctx)
{
    before_io(faults, ios, n);
    if (!r->uring) {
        run_sync(r, ios, n, faults, done, ctx);
        return;
    }
    size_t next = 0, inflight = 0, nreaped = 0;
    while (next < n || inflight > 0 || nreaped > 0) {
        while (next < n && inflight < r->depth) {
            struct disk_io *io = &ios[next];
            uint32_t len;
            if (fault_apply(fault_take(faults, io->write), io, &len)) {
                done(ctx, next++);
                continue;
            }
            struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
            if (!sqe)
                break;
            int fd = io->fd;
            int fixed_file = r->files_registered && io->slot >= 0;
            if (fixed_file)
                fd = io->slot;
            char *b = io->buf;
            int fixed_buf =
                r->buf_registered && b >= r->staging && b + len <= r->staging + r->staging_len;
            if (io->write) {
                if (fixed_buf)
                    io_uring_prep_write_fixed(sqe, fd, b, len, io->off, 0);
                else
                    io_uring_prep_write(sqe, fd, b, len, io->off);
            } else {
                if (fixed_buf)
                    io_uring_prep_read_fixed(sqe, fd, b, len, io->off, 0);
                else
                    io_uring_prep_read(sqe, fd, b, len, io->off);
            }
            if (fixed_file)
                sqe->flags |= IOSQE_FIXED_FILE;
            io_uring_sqe_set_data64(sqe, next);
            next++;
            inflight++;
        }
        if (inflight > 0) {
            int rc = io_uring_submit_and_wait(&r->ring, nreaped == 0 ? 1 : 0);
            if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
                mc_warn(DISK_COMP, "io_uring submit failed", "err=%d", -rc);
        }
        /* Callbacks of the previous reap run while the new submissions are in flight. */
        for (size_t k = 0; k < nreaped; k++)
            done(ctx, r->reaped[k]);
        nreaped = 0;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&r->ring, head, cqe)
        {
            size_t i = (size_t)io_uring_cqe_get_data64(cqe);
            ios[i].res = cqe->res;
            r->reaped[nreaped++] = i;
            seen++;
        }
        io_uring_cq_advance(&r->ring, seen);
        inflight -= seen;
    }
}
