/*
 * disk_store.c - the LOCAL_DISK store (design in disk_store.h): open/close, batched reads, pins
 * and the extent/entry bookkeeping. The write path (appends, removals) is in disk_write.c;
 * capacity eviction, the second-chance moves and extent deletion/reclaim are in disk_evict.c.
 *
 * Read path: under the lock, look keys up and count a reader on their extents; read without the
 * lock (straight into the caller's buffer when aligned, else via a bounce buffer), check each
 * CRC as it completes, then drop the reader counts. An extent chosen for eviction waits for
 * its readers and writers (s->cv) before its file is closed and unlinked.
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/disk_internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define WINDOW_BYTES (64u << 20) /* scratch memory per I/O window */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- extents and entries */

int disk_open_extent_fd(struct mc_disk_store *s, uint64_t id, int create)
{
    char name[32];
    snprintf(name, sizeof(name), "%016" PRIx64 ".ext", id);
    int flags = O_RDWR | O_DIRECT | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
    return openat(s->dir_fd, name, flags, 0644);
}

struct disk_extent *disk_extent_add_locked(struct mc_disk_store *s, uint64_t id, int fd,
                                           uint64_t size)
{
    DISK_ASSERT_LOCKED(s);
    struct disk_extent *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->id = id;
    x->fd = fd;
    x->size = size;
    x->align = s->align; /* recovery sets a recovered extent's from its superblock */
    x->slot = -1;
    for (unsigned i = 0; i < DISK_MAX_SLOTS; i++) {
        if (s->slot_fds[i] == -1) {
            x->slot = (int)i;
            s->slot_fds[i] = fd;
            s->files_gen++;
            break;
        }
    }
    x->prev = s->newest;
    if (s->newest)
        s->newest->next = x;
    else
        s->oldest = x;
    s->newest = x;
    s->nextents++;
    s->bytes_used += size;
    return x;
}

void disk_extent_name(uint64_t id, int spare, char *name, size_t len)
{
    snprintf(name, len, "%016" PRIx64 ".%s", id, spare ? "spr" : "ext");
}

void disk_entry_attach_locked(struct mc_disk_store *s, struct disk_entry *e, struct disk_extent *x)
{
    DISK_ASSERT_LOCKED(s);
    e->ext = x;
    e->eprev = NULL;
    e->enext = x->entries;
    if (x->entries)
        x->entries->eprev = e;
    x->entries = e;
    uint64_t rec = disk_record_size(x->align, e->key_len, e->value_len);
    x->live_bytes += rec;
    x->nlive++;
    x->pinned += e->pins;
    s->live_bytes += rec;
}

void disk_entry_detach_locked(struct mc_disk_store *s, struct disk_entry *e)
{
    DISK_ASSERT_LOCKED(s);
    struct disk_extent *x = e->ext;
    if (e->eprev)
        e->eprev->enext = e->enext;
    else
        x->entries = e->enext;
    if (e->enext)
        e->enext->eprev = e->eprev;
    uint64_t rec = disk_record_size(x->align, e->key_len, e->value_len);
    x->live_bytes -= rec;
    x->nlive--;
    x->pinned -= e->pins;
    s->live_bytes -= rec;
    e->ext = NULL;
}

void disk_entry_drop_locked(struct mc_disk_store *s, struct disk_entry *e)
{
    DISK_ASSERT_LOCKED(s);
    disk_entry_detach_locked(s, e);
    disk_index_unlink(&s->idx, e);
    free(e);
}

/* ---------------------------------------------------------------- read path */

struct rjob {
    struct disk_extent *x;
    uint64_t voff;
    uint64_t padded;
    char *bounce;
    int heap;
};

struct rctx {
    struct mc_disk_get *items;
    struct rjob *jobs;
    size_t *io_item;
    struct disk_io *ios;
};

static void read_done(void *ctx, size_t k)
{
    struct rctx *c = ctx;
    struct disk_io *io = &c->ios[k];
    size_t i = c->io_item[k];
    struct mc_disk_get *g = &c->items[i];
    struct rjob *j = &c->jobs[i];
    if (io->res != (int)io->len) {
        g->result = MC_ERR_FILE_READ_FAIL;
        mc_warn(DISK_COMP, "record read failed", "extent=%" PRIu64 " off=%" PRIu64 " res=%d",
                j->x->id, io->off, io->res);
    } else if (g->sink) {
        /* the consumer copies out of staging, taking the CRC in the same pass */
        uint32_t crc = 0;
        int rc = g->sink(g->sink_ctx, g, io->buf, &crc);
        if (rc == 0 && crc == g->crc)
            return;
        g->result = rc ? rc : MC_ERR_CHECKSUM_MISMATCH;
        if (!rc)
            mc_error(DISK_COMP, "value checksum mismatch",
                     "extent=%" PRIu64 " off=%" PRIu64 " len=%" PRIu64, j->x->id, io->off, g->len);
    } else if (mc_crc32c(io->buf, g->len) != g->crc) {
        g->result = MC_ERR_CHECKSUM_MISMATCH;
        mc_error(DISK_COMP, "value checksum mismatch",
                 "extent=%" PRIu64 " off=%" PRIu64 " len=%" PRIu64, j->x->id, io->off, g->len);
    } else {
        if (j->bounce)
            memcpy(g->buf, j->bounce, g->len);
        return;
    }
    if (!j->bounce)
        memset(g->buf, 0, g->len); /* never hand out wrong bytes */
    g->len = 0;
}

/* Records a read found damaged: dead marks (the record and its old copy, if an eviction is
 * moving it) to write, and what to tell drop_cb. */
struct bad_set {
    struct disk_kill *kills;
    struct mc_disk_evict_item *items;
    char *keys; /* the keys, back to back (the entries are freed) */
    size_t nk, n;
};

/* Drops each indexed record that read item i found damaged (still the record read: same
 * extent, place and version), holding a writer on the extents of its dead marks. s->mu held,
 * before the read's reader counts are dropped. */
static void bad_collect_locked(struct mc_disk_store *s, const struct mc_disk_get *items,
                               const struct rjob *jobs, size_t n, struct bad_set *b)
{
    DISK_ASSERT_LOCKED(s);
    size_t nbad = 0, keybytes = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].result == MC_ERR_CHECKSUM_MISMATCH && jobs[i].x) {
            nbad++;
            keybytes += items[i].key_len;
        }
    if (nbad == 0)
        return;
    b->kills = calloc(2 * nbad, sizeof(*b->kills));
    b->items = calloc(nbad, sizeof(*b->items));
    b->keys = malloc(keybytes);
    if (!b->kills || !b->items || !b->keys) {
        mc_error(DISK_COMP, "out of memory: damaged records not dropped", "path=%s records=%zu",
                 s->path, nbad);
        return;
    }
    size_t kp = 0;
    for (size_t i = 0; i < n; i++) {
        const struct mc_disk_get *g = &items[i];
        if (g->result != MC_ERR_CHECKSUM_MISMATCH || !jobs[i].x)
            continue;
        struct disk_entry *e = disk_index_find(&s->idx, g->key, g->key_len);
        if (!e || e->ext != jobs[i].x ||
            e->off + disk_hdr_block(e->ext->align, e->key_len) != jobs[i].voff ||
            e->version != g->version)
            continue; /* replaced, removed or moved meanwhile: not the bytes that were read */
        char *key = b->keys + kp;
        memcpy(key, e->key, e->key_len);
        kp += e->key_len;
        b->items[b->n++] = (struct mc_disk_evict_item){
            .key = key, .key_len = e->key_len, .version = e->version, .size = e->value_len};
        struct disk_kill k = {.x = e->ext,
                              .off = e->off,
                              .key = key,
                              .key_len = e->key_len,
                              .version = e->version,
                              .crc = e->crc,
                              .value_len = e->value_len,
                              .held = 1};
        b->kills[b->nk++] = k;
        e->ext->writers++;
        if (e->shadow) {
            k.x = e->shadow;
            k.off = e->shadow_off;
            b->kills[b->nk++] = k;
            e->shadow->writers++;
        }
        mc_error(DISK_COMP, "record failed its value check on read: dropped",
                 "path=%s key=%.*s version=%" PRIu64 " extent=%" PRIu64 " off=%" PRIu64, s->path,
                 (int)e->key_len, e->key, e->version, e->ext->id, e->off);
        disk_entry_drop_locked(s, e);
        s->corrupt_dropped++;
    }
}

/* Writes the dead marks of b (no lock held), then tells drop_cb. */
static void bad_finish(struct mc_disk_store *s, struct bad_set *b)
{
    if (b->nk == 0)
        goto out;
    for (size_t k = 0; k < b->nk; k++)
        b->kills[k].res = disk_kill_sync(&b->kills[k]);
    disk_lock(s);
    for (size_t k = 0; k < b->nk; k++) {
        struct disk_kill *kl = &b->kills[k];
        if (kl->res != 0) {
            /* recovery checks the CRC too: the record cannot come back; only counted */
            s->kill_failures++;
            mc_warn(DISK_COMP, "cannot mark a damaged record dead",
                    "path=%s extent=%" PRIu64 " off=%" PRIu64 " err=%d", s->path, kl->x->id,
                    kl->off, -kl->res);
        }
        if (--kl->x->writers == 0)
            disk_reclaim_locked(s, kl->x); /* (no later kill holds it: each held one) */
    }
    pthread_cond_broadcast(&s->cv);
    disk_unlock(s);
    if (s->cfg.drop_cb && b->n > 0) {
        int cb = s->cfg.drop_cb(s->cfg.drop_ctx, b->items, b->n);
        if (cb != 0)
            mc_warn(DISK_COMP, "damaged records dropped, but the owner was not told",
                    "path=%s records=%zu rc=%d", s->path, b->n, cb);
    }
out:
    free(b->kills);
    free(b->items);
    free(b->keys);
}

int mc_disk_store_read(struct mc_disk_store *s, struct mc_disk_get *items, size_t n)
{
    struct bad_set bad = {0};
    if (!s || (n > 0 && !items))
        return MC_ERR_INVALID_PARAMS;
    struct rjob *jobs = calloc(n ? n : 1, sizeof(*jobs));
    struct disk_io *ios = calloc(n ? n : 1, sizeof(*ios));
    size_t *io_item = calloc(n ? n : 1, sizeof(*io_item));
    struct disk_ring *r = disk_ring_get(s);
    int rc = MC_OK;
    if (!jobs || !ios || !io_item || !r) {
        for (size_t i = 0; i < n; i++)
            items[i].result = MC_ERR_INTERNAL_ERROR;
        goto out;
    }

    disk_lock(s);
    for (size_t i = 0; i < n; i++) {
        struct mc_disk_get *g = &items[i];
        g->result = MC_OK;
        g->len = 0;
        g->version = 0;
        g->crc = 0;
        struct disk_entry *e = NULL;
        if (!g->key || g->key_len == 0 || g->key_len > MC_DISK_MAX_KEY_LEN) {
            g->result = MC_ERR_INVALID_PARAMS;
            continue;
        }
        e = disk_index_find(&s->idx, g->key, g->key_len);
        if (!e) {
            g->result = MC_ERR_OBJECT_NOT_FOUND;
            continue;
        }
        g->len = e->value_len;
        g->version = e->version;
        g->crc = e->crc;
        if (e->value_len > g->cap || (e->value_len > 0 && !g->buf && !g->sink)) {
            g->result = MC_ERR_BUFFER_OVERFLOW;
            continue;
        }
        e->accessed = 1;
        jobs[i].x = e->ext;
        jobs[i].voff = e->off + disk_hdr_block(e->ext->align, e->key_len);
        jobs[i].padded = disk_pad(e->ext->align, e->value_len);
        e->ext->readers++;
    }
    disk_ring_sync_files_locked(s, r);
    disk_unlock(s);

    struct rctx c = {items, jobs, io_item, ios};
    size_t from = 0;
    while (from < n) {
        size_t nio = 0, to = from;
        uint64_t bounce = 0;
        r->staging_used = 0;
        for (; to < n && (to == from || bounce < WINDOW_BYTES); to++) {
            struct mc_disk_get *g = &items[to];
            struct rjob *j = &jobs[to];
            if (g->result != MC_OK || !j->x)
                continue;
            /* a sink's bytes stay in the (registered) staging: the window ends where it is full
             * rather than spilling into heap buffers */
            if (g->sink && nio > 0 && r->staging_len - r->staging_used < disk_round_up(j->padded))
                break;
            if (g->len == 0) {
                if (g->crc != 0) /* CRC32C of no bytes */
                    g->result = MC_ERR_CHECKSUM_MISMATCH;
                continue;
            }
            char *dst = g->buf;
            if (g->sink || ((uintptr_t)dst & (MC_DISK_BLOCK - 1)) || g->cap < j->padded) {
                dst = j->bounce = disk_ring_scratch(r, j->padded, &j->heap);
                if (!dst) {
                    g->result = MC_ERR_INTERNAL_ERROR;
                    continue;
                }
                bounce += j->padded;
            }
            ios[nio] = (struct disk_io){.fd = j->x->fd,
                                        .slot = j->x->slot,
                                        .buf = dst,
                                        .len = (uint32_t)j->padded,
                                        .off = j->voff};
            io_item[nio++] = to;
        }
        disk_ring_run(r, ios, nio, &s->faults, read_done, &c);
        for (size_t i = from; i < to; i++) {
            if (jobs[i].heap)
                free(jobs[i].bounce);
            jobs[i].bounce = NULL;
            jobs[i].heap = 0;
        }
        from = to;
    }

    disk_lock(s);
    bad_collect_locked(s, items, jobs, n, &bad);
    int wake = 0;
    for (size_t i = 0; i < n; i++) {
        struct disk_extent *x = jobs[i].x;
        if (!x)
            continue;
        if (--x->readers == 0 && x->dropping)
            wake = 1;
        else if (x->readers == 0)
            disk_reclaim_locked(s, x); /* its records were removed during the read */
    }
    if (wake)
        pthread_cond_broadcast(&s->cv);
    disk_ring_put_locked(s, r);
    r = NULL;
    disk_unlock(s);
out:
    if (r) {
        disk_lock(s);
        disk_ring_put_locked(s, r);
        disk_unlock(s);
    }
    bad_finish(s, &bad);
    free(jobs);
    free(ios);
    free(io_item);
    for (size_t i = 0; i < n; i++)
        if (items[i].result != MC_OK) {
            rc = items[i].result;
            break;
        }
    return rc;
}

/* ---------------------------------------------------------------- small calls */

int mc_disk_store_lookup(struct mc_disk_store *s, const char *key, uint32_t key_len,
                         struct mc_disk_record_info *info)
{
    if (!s || !key || key_len == 0 || key_len > MC_DISK_MAX_KEY_LEN)
        return MC_ERR_INVALID_PARAMS;
    disk_lock(s);
    struct disk_entry *e = disk_index_find(&s->idx, key, key_len);
    if (e && info)
        *info = (struct mc_disk_record_info){e->key, e->key_len,   e->version,
                                             e->crc, e->value_len, e->pins};
    disk_unlock(s);
    return e ? MC_OK : MC_ERR_OBJECT_NOT_FOUND;
}

static int pin_delta(struct mc_disk_store *s, const char *key, uint32_t key_len, int d,
                     uint64_t *version)
{
    if (!s || !key || key_len == 0 || key_len > MC_DISK_MAX_KEY_LEN)
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_OK;
    disk_lock(s);
    struct disk_entry *e = disk_index_find(&s->idx, key, key_len);
    if (!e) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
    } else if (d < 0 && e->pins == 0) {
        rc = MC_ERR_INVALID_PARAMS;
    } else {
        e->pins += d;
        e->ext->pinned += d;
        if (version)
            *version = e->version;
    }
    disk_unlock(s);
    return rc;
}

int mc_disk_store_pin(struct mc_disk_store *s, const char *key, uint32_t key_len, uint64_t *version)
{
    return pin_delta(s, key, key_len, 1, version);
}

int mc_disk_store_unpin(struct mc_disk_store *s, const char *key, uint32_t key_len)
{
    return pin_delta(s, key, key_len, -1, NULL);
}

int mc_disk_store_foreach(struct mc_disk_store *s, mc_disk_foreach_fn fn, void *ctx)
{
    if (!s || !fn)
        return MC_ERR_INVALID_PARAMS;
    int rc = 0;
    disk_lock(s);
    for (size_t b = 0; b < s->idx.nbuckets && rc == 0; b++) {
        for (struct disk_entry *e = s->idx.buckets[b]; e && rc == 0; e = e->hnext) {
            struct mc_disk_record_info info = {e->key, e->key_len,   e->version,
                                               e->crc, e->value_len, e->pins};
            rc = fn(ctx, &info);
        }
    }
    disk_unlock(s);
    return rc;
}

void mc_disk_store_usage(struct mc_disk_store *s, struct mc_disk_usage *u)
{
    memset(u, 0, sizeof(*u));
    if (!s)
        return;
    disk_lock(s);
    u->bytes_used = s->bytes_used;
    u->capacity = s->cfg.capacity;
    u->live_bytes = s->live_bytes;
    u->records = s->idx.count;
    u->extents = s->nextents;
    u->dropped_records_at_recovery = s->dropped_records;
    u->dropped_bytes_at_recovery = s->dropped_bytes;
    u->evicted_extents = s->evicted_extents;
    u->evicted_records = s->evicted_records;
    u->reinserted_records = s->reinserted_records;
    u->no_space = s->no_space;
    u->no_space_events = s->no_space_events;
    u->write_errors = s->write_errors;
    u->kill_failures = s->kill_failures;
    u->skipped_extents = s->skipped_extents;
    u->recycled_extents = s->recycled_extents;
    u->capacity_limit = disk_capacity_locked(s);
    u->reclaimed_extents = s->reclaimed_extents;
    u->corrupt_dropped = s->corrupt_dropped;
    u->record_unit = s->align;
    u->write_ios = s->write_ios;
    u->write_bytes = s->write_bytes;
    u->filler_bytes = s->filler_bytes;
    disk_unlock(s);
    disk_pool_lock(s);
    u->registered_buffers = s->last_buf_registered;
    u->window_maps = s->window_maps;
    u->registered_files = s->last_files_registered;
    disk_pool_unlock(s);
}

#ifdef MC_TEST_HOOKS
void mc_disk_store_test_set_fault(struct mc_disk_store *s, const struct mc_disk_fault *f)
{
    disk_faults_lock(&s->faults);
    if (f)
        s->faults.f = *f;
    else
        memset(&s->faults.f, 0, sizeof(s->faults.f));
    disk_faults_unlock(&s->faults);
}
#endif

/* ---------------------------------------------------------------- open / close */

/* Creates, writes and reads back one O_DIRECT block: some filesystems refuse O_DIRECT at open,
 * others only at the first I/O. */
static int probe_odirect(struct mc_disk_store *s, char *err, size_t errlen)
{
    const char *name = ".odirect-probe";
    int fd = -1, rc = MC_OK, e = 0;
    void *blk = NULL;
    if (posix_memalign(&blk, MC_DISK_BLOCK, MC_DISK_BLOCK) != 0)
        return MC_ERR_INTERNAL_ERROR;
    memset(blk, 0x5a, MC_DISK_BLOCK);
#ifdef MC_TEST_HOOKS
    if (s->cfg.test_refuse_odirect) {
        e = EINVAL;
        goto fail;
    }
#endif
    fd = openat(s->dir_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0) {
        e = errno;
        goto fail;
    }
    if (pwrite(fd, blk, MC_DISK_BLOCK, 0) != MC_DISK_BLOCK ||
        pread(fd, blk, MC_DISK_BLOCK, 0) != MC_DISK_BLOCK) {
        e = errno ? errno : EIO;
        goto fail;
    }
    /* The record unit: 512 B when the filesystem and device take direct I/O at that offset and
     * length (a 4 KiB value then takes 4.5 KiB on disk instead of 8), else 4 KiB. */
    int small = pwrite(fd, blk, DISK_MIN_ALIGN, DISK_MIN_ALIGN) == DISK_MIN_ALIGN &&
                pread(fd, blk, DISK_MIN_ALIGN, DISK_MIN_ALIGN) == DISK_MIN_ALIGN;
    if (!s->cfg.record_align) {
        s->align = small ? DISK_MIN_ALIGN : MC_DISK_BLOCK;
    } else if (s->cfg.record_align < MC_DISK_BLOCK && !small) {
        close(fd);
        unlinkat(s->dir_fd, name, 0);
        free(blk);
        set_err(err, errlen,
                "%s: the filesystem refuses 512-byte O_DIRECT I/O; leave the record unit to the "
                "probe (0) or use 4096",
                s->path);
        return MC_ERR_INVALID_PARAMS;
    }
    goto out;
fail:
    rc = MC_ERR_FILE_OPEN_FAIL;
    set_err(err, errlen,
            "%s: the filesystem refuses O_DIRECT I/O (%s); use a directory on a "
            "block-device filesystem such as ext4 or xfs",
            s->path, strerror(e));
    mc_error(DISK_COMP, "O_DIRECT refused", "path=%s err=%d", s->path, e);
out:
    if (fd >= 0)
        close(fd);
    unlinkat(s->dir_fd, name, 0);
    free(blk);
    return rc;
}

uint64_t mc_disk_extent_size_for(uint64_t capacity)
{
    uint64_t e = capacity / MC_DISK_MIN_EXTENTS / MC_DISK_BLOCK * MC_DISK_BLOCK;
    if (e < MC_DISK_EXTENT_MIN)
        e = MC_DISK_EXTENT_MIN;
    if (e > MC_DISK_EXTENT_MAX)
        e = MC_DISK_EXTENT_MAX;
    return e;
}

int mc_disk_store_open(const struct mc_disk_store_config *cfg, struct mc_disk_store **out,
                       char *err, size_t errlen)
{
    int rc = MC_OK;
    if (out)
        *out = NULL;
    if (!cfg || !out || !cfg->path || !cfg->path[0] || cfg->capacity == 0 ||
        (cfg->extent_size & (MC_DISK_BLOCK - 1)) || cfg->high_watermark < 0 ||
        cfg->high_watermark > 1 ||
        (cfg->record_align && cfg->record_align != DISK_MIN_ALIGN &&
         cfg->record_align != MC_DISK_BLOCK)) {
        set_err(err, errlen, "invalid disk store configuration");
        return MC_ERR_INVALID_PARAMS;
    }
    struct mc_disk_store *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    s->cfg = *cfg;
    s->dir_fd = s->lock_fd = -1;
    s->path = strdup(cfg->path);
    s->cfg.path = s->path;
    if (!s->cfg.high_watermark)
        s->cfg.high_watermark = 0.90;
    if (!s->cfg.extent_size)
        s->cfg.extent_size = mc_disk_extent_size_for(s->cfg.capacity);
    if (!s->cfg.queue_depth)
        s->cfg.queue_depth = 32;
    if (s->cfg.queue_depth > 4096)
        s->cfg.queue_depth = 4096;
    if (!s->cfg.staging_bytes)
        s->cfg.staging_bytes = 4u << 20;
    s->cfg.staging_bytes = disk_round_up(s->cfg.staging_bytes);
    s->hw_bytes = (uint64_t)((double)s->cfg.capacity * s->cfg.high_watermark);
    s->align = s->cfg.record_align ? s->cfg.record_align : MC_DISK_BLOCK;
    static _Atomic uint32_t next_lo_idx;
    s->lo_idx = atomic_fetch_add(&next_lo_idx, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->pool_mu, NULL);
    pthread_mutex_init(&s->faults.mu, NULL);
    for (unsigned i = 0; i < DISK_MAX_SLOTS; i++)
        s->slot_fds[i] = -1;
    s->files_gen = 1;
    s->next_extent_id = 1;
    if (!s->path || disk_index_init(&s->idx) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }

    if (mkdir(s->path, 0755) != 0 && errno != EEXIST) {
        set_err(err, errlen, "%s: cannot create directory (%s)", s->path, strerror(errno));
        rc = MC_ERR_FILE_OPEN_FAIL;
        goto fail;
    }
    s->dir_fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0) {
        set_err(err, errlen, "%s: cannot open directory (%s)", s->path, strerror(errno));
        rc = MC_ERR_FILE_OPEN_FAIL;
        goto fail;
    }
    s->lock_fd = openat(s->dir_fd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        set_err(err, errlen, "%s: directory is in use by another process (%s)", s->path,
                strerror(errno));
        rc = MC_ERR_FILE_LOCK_FAIL;
        goto fail;
    }
    rc = probe_odirect(s, err, errlen);
    if (rc != MC_OK)
        goto fail;
    rc = disk_recover(s, err, errlen);
    if (rc != MC_OK)
        goto fail;
    mc_info(DISK_COMP, "disk store open",
            "path=%s records=%zu extents=%" PRIu64 " used=%" PRIu64 " capacity=%" PRIu64
            " dropped=%" PRIu64,
            s->path, s->idx.count, s->nextents, s->bytes_used, s->cfg.capacity, s->dropped_records);
    *out = s;
    return MC_OK;
fail:
    mc_disk_store_close(s);
    return rc;
}

void mc_disk_store_close(struct mc_disk_store *s)
{
    if (!s)
        return;
    disk_pool_destroy(s);
    disk_index_destroy(&s->idx);
    while (s->oldest) {
        struct disk_extent *x = s->oldest;
        s->oldest = x->next;
        /* A reused file's stale bytes past its records would cost the next start-up's scan a
         * block-by-block walk: cut them off (best effort; the scan copes either way). */
        if (x->recycled && x->size >= MC_DISK_BLOCK && ftruncate(x->fd, (off_t)x->size) != 0)
            mc_debug(DISK_COMP, "cannot cut a reused extent's tail", "path=%s errno=%d", s->path,
                     errno);
        close(x->fd);
        free(x);
    }
    /* Spares hold nothing: give their space back (no other thread is left: the lock is
     * taken for the function's contract only). */
    disk_lock(s);
    disk_spares_drop_locked(s);
    disk_unlock(s);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->pool_mu);
    pthread_mutex_destroy(&s->faults.mu);
    free(s->path);
    free(s);
}
