/*
 * disk_uring.c - the LOCAL_DISK store's I/O engine: a pool of io_uring rings and a batched
 * submit/complete loop.
 *
 * A thread that submits a batch takes a ring from the store's pool (creating one when the pool
 * is empty) and gives it back afterwards, so concurrent submitters never share a ring and no
 * thread exists per request. disk_ring_run() keeps up to `depth` operations in flight: it tops
 * the submission queue up, submits (waiting for one completion only when nothing else is ready),
 * then runs the completion callbacks of what it reaped last time, so CRC checks overlap the I/O
 * already queued. disk_ring_run_fed also fills each operation's buffer just before it is queued
 * (the write path encodes its records there), so that work overlaps the I/O in flight too.
 *
 * Each ring tries to register its aligned staging buffer (pinned memory: RLIMIT_MEMLOCK) and a
 * sparse table of DISK_MAX_SLOTS files. A ring that writes batches larger than its staging
 * also keeps a window buffer (disk_ring_window: an anonymous mapping, grown in 8 MiB steps up
 * to DISK_WINDOW_KEEP, freed with the ring) instead of mapping, faulting in and zeroing fresh
 * memory for every batch; it is registered as buffer 1 beside staging when the memlock limit
 * allows, else written from as a plain buffer. The store bumps files_gen whenever an extent file is
 * opened or closed; a ring brings its table up to date under the store lock before it is used
 * and before it goes back to the pool, and idle rings are synced when an extent is dropped, so
 * no ring keeps a deleted file alive. When registration is refused, the ring uses plain buffers
 * or fds and the store logs it once. When io_uring itself is unavailable, pread/pwrite are used.
 *
 * A transfer that comes back short is resubmitted for the rest, and one that completes with
 * EAGAIN / EINTR is resubmitted too, each at most DISK_IO_TRIES times per operation; a transfer
 * that makes no progress (0 bytes) or fails otherwise finishes the operation with that result.
 *
 * Fault injection (MC_TEST_HOOKS): EIO / ENOSPC / EAGAIN complete a transfer without submitting
 * it; SHORT submits half the remaining length (4 KiB aligned) so the disk really holds a partial
 * transfer; SUBMIT makes a submit call fail hard (ENXIO).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    r->retry = calloc(r->depth, sizeof(*r->retry));
    r->pend = calloc(r->depth, sizeof(*r->pend));
    if (!r->reaped || !r->retry || !r->pend) {
        free(r->reaped);
        free(r->retry);
        free(r->pend);
        free(r);
        return NULL;
    }
    if (posix_memalign((void **)&r->staging, MC_DISK_BLOCK, s->cfg.staging_bytes) == 0)
        r->staging_len = s->cfg.staging_bytes;
    else
        r->staging = NULL;

    int rc = io_uring_queue_init(r->depth, &r->ring, 0);
    disk_pool_lock(s);
    if (rc < 0) {
        if (!s->logged_no_uring++)
            mc_warn(DISK_COMP, "io_uring unavailable, using pread/pwrite", "path=%s err=%d",
                    s->path, -rc);
        disk_pool_unlock(s);
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
    disk_pool_unlock(s);
    return r;
}

static void ring_free(struct disk_ring *r)
{
    if (r->uring)
        io_uring_queue_exit(&r->ring);
    if (r->window)
        munmap(r->window, r->window_len);
    free(r->staging);
    free(r->reaped);
    free(r->retry);
    free(r->pend);
    free(r);
}

struct disk_ring *disk_ring_get(struct mc_disk_store *s)
{
    disk_pool_lock(s);
    struct disk_ring *r = s->pool;
    if (r)
        s->pool = r->next;
    disk_pool_unlock(s);
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
    DISK_ASSERT_LOCKED(s);
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
    DISK_ASSERT_LOCKED(s);
    if (r->broken) {
        ring_free(r);
        return;
    }
    disk_ring_sync_files_locked(s, r);
    disk_pool_lock(s);
    r->next = s->pool;
    s->pool = r;
    disk_pool_unlock(s);
}

void disk_pool_sync_files_locked(struct mc_disk_store *s)
{
    DISK_ASSERT_LOCKED(s);
    disk_pool_lock(s);
    for (struct disk_ring *r = s->pool; r; r = r->next)
        disk_ring_sync_files_locked(s, r);
    disk_pool_unlock(s);
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

/* Registers the ring's buffers again: staging as buffer 0 (when it was registered) and the
 * window as buffer 1. When the kernel refuses the pair (RLIMIT_MEMLOCK), staging alone is
 * registered again as before and the window stays a plain buffer. */
static void window_register(struct disk_ring *r)
{
    if (!r->uring || !r->buf_registered)
        return; /* no staging registration to keep index 0 for: plain buffers */
    io_uring_unregister_buffers(&r->ring);
    r->window_registered = 0;
    struct iovec iov[2] = {{r->staging, r->staging_len}, {r->window, r->window_len}};
    if (r->window && io_uring_register_buffers(&r->ring, iov, 2) == 0) {
        r->window_registered = 1;
        return;
    }
    if (io_uring_register_buffers(&r->ring, iov, 1) != 0)
        r->buf_registered = 0;
}

static void *map_window(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *disk_ring_window(struct mc_disk_store *s, struct disk_ring *r, size_t len, int *own)
{
    *own = 0;
    len = disk_round_up(len ? len : 1);
    if (r->staging && len <= r->staging_len) {
        r->staging_used = len;
        return r->staging;
    }
    if (r->window && len <= r->window_len)
        return r->window;
    void *p;
    if (len > DISK_WINDOW_KEEP) {
        p = map_window(len);
        *own = p != NULL;
    } else {
        /* Grow in 8 MiB steps so a batch a little larger than the last one does not map again. */
        size_t want = (len + (8u << 20) - 1) & ~(size_t)((8u << 20) - 1);
        if (want > DISK_WINDOW_KEEP)
            want = DISK_WINDOW_KEEP;
        p = map_window(want);
        if (p) {
            if (r->window)
                munmap(r->window, r->window_len);
            r->window = p;
            r->window_len = want;
            window_register(r);
        }
    }
    if (p) {
        disk_pool_lock(s);
        s->window_maps++;
        disk_pool_unlock(s);
    }
    return p;
}

void disk_ring_window_release(void *buf, size_t len, int own)
{
    if (own && buf)
        munmap(buf, disk_round_up(len ? len : 1));
}

/* Returns the fault to apply (MC_DISK_FAULT_NONE normally). submit: 1 takes only a SUBMIT
 * fault (checked once per submit call), 0 takes only the per-operation kinds. */
static int fault_take(struct disk_faults *f, int write, int submit)
{
#ifdef MC_TEST_HOOKS
    if (!f)
        return 0;
    int kind = MC_DISK_FAULT_NONE;
    disk_faults_lock(f);
    if (f->f.kind != MC_DISK_FAULT_NONE && (f->f.kind == MC_DISK_FAULT_SUBMIT) == (submit != 0) &&
        (f->f.ops & (write ? MC_DISK_FAULT_WRITE : MC_DISK_FAULT_READ))) {
        if (f->f.skip > 0) {
            f->f.skip--;
        } else if (f->f.count != 0) {
            kind = f->f.kind;
            if (f->f.count > 0 && --f->f.count == 0)
                f->f.kind = MC_DISK_FAULT_NONE;
        }
    }
    disk_faults_unlock(f);
    return kind;
#else
    (void)f;
    (void)write;
    (void)submit;
    return 0;
#endif
}

/* Applies an injected fault to the next transfer of io (*len bytes are left): 1 when the
 * transfer is complete without I/O (*res holds its result), else 0 with *len possibly
 * shortened. */
static int fault_apply(int kind, uint32_t *len, int *res)
{
    switch (kind) {
    case MC_DISK_FAULT_EIO:
        *res = -EIO;
        return 1;
    case MC_DISK_FAULT_ENOSPC:
        *res = -ENOSPC;
        return 1;
    case MC_DISK_FAULT_EAGAIN:
        *res = -EAGAIN;
        return 1;
    case MC_DISK_FAULT_SHORT:
        *len = (*len / 2) & ~(MC_DISK_BLOCK - 1);
        if (*len == 0) {
            *res = 0;
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}

/* Accounts one transfer's result. Returns 1 when io is finished (io->res set: the byte count
 * when complete, else what it got: fewer bytes or -errno), 0 when the rest must be resubmitted:
 * a short transfer that made progress, or EAGAIN / EINTR, each up to DISK_IO_TRIES times. */
static int io_account(struct disk_io *io, int res)
{
    if (res > 0) {
        io->xfer += (uint32_t)res;
        if (io->xfer >= io->len) {
            io->res = (int)io->len;
            return 1;
        }
    } else if (res != -EAGAIN && res != -EINTR) {
        io->res = res < 0 ? res : (int)io->xfer; /* 0: no progress, the transfer stays short */
        return 1;
    }
    if (++io->tries > DISK_IO_TRIES) {
        io->res = res < 0 ? res : (int)io->xfer;
        return 1;
    }
    return 0;
}

static void run_sync(struct disk_io *ios, size_t n, struct disk_faults *faults, disk_fill_fn fill,
                     disk_done_fn done, void *ctx)
{
    int hard = 0;
    if (n > 0 && fault_take(faults, ios[0].write, 1) == MC_DISK_FAULT_SUBMIT)
        hard = -ENXIO;
    for (size_t i = 0; i < n; i++) {
        struct disk_io *io = &ios[i];
        if (hard) {
            io->res = hard;
            done(ctx, i);
            continue;
        }
        if (fill)
            fill(ctx, i);
        for (;;) {
            uint32_t len = io->len - io->xfer;
            int res;
            if (!fault_apply(fault_take(faults, io->write, 0), &len, &res)) {
                char *b = (char *)io->buf + io->xfer;
                off_t off = (off_t)(io->off + io->xfer);
                ssize_t rc = io->write ? pwrite(io->fd, b, len, off) : pread(io->fd, b, len, off);
                res = rc < 0 ? -errno : (int)rc;
            }
            if (io_account(io, res))
                break;
        }
        done(ctx, i);
    }
    if (hard)
        mc_warn(DISK_COMP, "injected submit failure, batch failed", "ops=%zu err=%d", n, -hard);
}

static void before_io(struct disk_faults *f, struct disk_io *ios, size_t n)
{
#ifdef MC_TEST_HOOKS
    if (!f || n == 0)
        return;
    disk_faults_lock(f);
    void (*fn)(void *, int) = f->f.before_io;
    void *ctx = f->f.before_io_ctx;
    disk_faults_unlock(f);
    if (fn)
        fn(ctx, ios[0].write);
#else
    (void)f;
    (void)ios;
    (void)n;
#endif
}

/* Queues io's next transfer (len bytes from where it stands). 0, or -1 when the SQ is full. */
static int prep(struct disk_ring *r, struct disk_io *io, size_t i, uint32_t len)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (!sqe)
        return -1;
    int fd = io->fd;
    int fixed_file = r->files_registered && io->slot >= 0;
    if (fixed_file)
        fd = io->slot;
    char *b = (char *)io->buf + io->xfer;
    uint64_t off = io->off + io->xfer;
    int fixed_buf = -1; /* registered buffer index */
    if (r->buf_registered && b >= r->staging && b + len <= r->staging + r->staging_len)
        fixed_buf = 0;
    else if (r->window_registered && b >= r->window && b + len <= r->window + r->window_len)
        fixed_buf = 1;
    if (io->write) {
        if (fixed_buf >= 0)
            io_uring_prep_write_fixed(sqe, fd, b, len, off, fixed_buf);
        else
            io_uring_prep_write(sqe, fd, b, len, off);
    } else {
        if (fixed_buf >= 0)
            io_uring_prep_read_fixed(sqe, fd, b, len, off, fixed_buf);
        else
            io_uring_prep_read(sqe, fd, b, len, off);
    }
    if (fixed_file)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, i);
    return 0;
}

/*
 * The loop keeps three queues of operation indices, together never more than depth:
 *   pend    transfers prepared in the SQ but not yet taken by the kernel (FIFO: the kernel takes
 *           them in order, and io_uring_submit says how many it took);
 *   inflight  taken, completion not reaped yet;
 *   retry   reaped short / EAGAIN transfers whose rest goes out again.
 * A hard submit error (anything but EINTR / EAGAIN / EBUSY, or those past DISK_SUBMIT_TRIES in a
 * row) fails every operation not yet taken, waits (without submitting) for what the kernel holds,
 * logs one line and marks the ring broken: its SQ still holds the refused entries, so it is
 * never submitted again and disk_ring_put_locked frees it.
 */
void disk_ring_run(struct disk_ring *r, struct disk_io *ios, size_t n, struct disk_faults *faults,
                   disk_done_fn done, void *ctx)
{
    disk_ring_run_fed(r, ios, n, faults, NULL, done, ctx);
}

void disk_ring_run_fed(struct disk_ring *r, struct disk_io *ios, size_t n,
                       struct disk_faults *faults, disk_fill_fn fill, disk_done_fn done, void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        ios[i].xfer = 0;
        ios[i].tries = 0;
        ios[i].res = INT32_MIN; /* not finished */
    }
    before_io(faults, ios, n);
    if (!r->uring || r->broken) {
        run_sync(ios, n, faults, fill, done, ctx);
        return;
    }
    size_t next = 0, inflight = 0, nreaped = 0, nretry = 0;
    size_t phead = 0, npend = 0; /* pend is a ring of depth entries */
    int hard = 0, soft = 0;
    size_t hard_failed = 0;
    while (next < n || npend > 0 || inflight > 0 || nreaped > 0 || nretry > 0) {
        while (!hard && inflight + npend < r->depth && (nretry > 0 || next < n)) {
            int fresh = nretry == 0;
            size_t i = fresh ? next++ : r->retry[--nretry];
            struct disk_io *io = &ios[i];
            if (fresh && fill)
                fill(ctx, i);
            uint32_t len;
            int res, finished = 0;
            for (;;) {
                len = io->len - io->xfer;
                if (!fault_apply(fault_take(faults, io->write, 0), &len, &res))
                    break;
                if (io_account(io, res)) {
                    finished = 1;
                    break;
                }
            }
            if (finished) {
                done(ctx, i);
                continue;
            }
            if (prep(r, io, i, len) != 0) { /* not expected: the SQ holds depth entries */
                r->retry[nretry++] = i;
                break;
            }
            r->pend[(phead + npend++) % r->depth] = i;
        }
        if (!hard && (npend > 0 || inflight > 0)) {
            int rc;
            if (npend > 0 && fault_take(faults, ios[0].write, 1) == MC_DISK_FAULT_SUBMIT)
                rc = -ENXIO;
            else
                rc = io_uring_submit_and_wait(&r->ring, nreaped == 0 ? 1 : 0);
            if (rc >= 0) {
                size_t took = (size_t)rc < npend ? (size_t)rc : npend;
                phead = (phead + took) % r->depth;
                npend -= took;
                inflight += took;
                soft = 0;
            } else if ((rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) &&
                       ++soft <= DISK_SUBMIT_TRIES) {
                if (rc != -EINTR && nreaped == 0)
                    sched_yield();
            } else {
                hard = rc;
            }
            if (hard) {
                /* Everything the kernel has not taken fails now. */
                for (; npend > 0; npend--, phead = (phead + 1) % r->depth, hard_failed++) {
                    ios[r->pend[phead]].res = hard;
                    done(ctx, r->pend[phead]);
                }
                for (; nretry > 0; hard_failed++) {
                    size_t i = r->retry[--nretry];
                    ios[i].res = hard;
                    done(ctx, i);
                }
                for (; next < n; next++, hard_failed++) {
                    ios[next].res = hard;
                    done(ctx, next);
                }
                r->broken = 1;
            }
        } else if (hard && inflight > 0 && nreaped == 0) {
            struct io_uring_cqe *cqe;
            int rc = io_uring_wait_cqe(&r->ring, &cqe); /* submits nothing */
            if (rc < 0 && rc != -EINTR && rc != -EAGAIN) {
                /* The ring is gone: the kernel may still own these buffers; nothing safe is
                 * left to do but report them failed. */
                mc_error(DISK_COMP, "io_uring wait failed with operations in flight",
                         "err=%d inflight=%zu", -rc, inflight);
                for (size_t i = 0; i < n; i++)
                    if (ios[i].res == INT32_MIN) {
                        ios[i].res = rc;
                        done(ctx, i);
                    }
                inflight = 0;
            }
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
            seen++;
            if (i >= n)
                continue;
            if (io_account(&ios[i], cqe->res))
                r->reaped[nreaped++] = i;
            else if (hard) {
                ios[i].res = hard;
                r->reaped[nreaped++] = i;
            } else {
                r->retry[nretry++] = i;
            }
        }
        io_uring_cq_advance(&r->ring, seen);
        inflight -= seen < inflight ? seen : inflight;
    }
    if (hard)
        mc_warn(DISK_COMP, "io_uring submit failed, batch failed, ring retired",
                "err=%d ops=%zu failed_unsubmitted=%zu", -hard, n, hard_failed);
}
