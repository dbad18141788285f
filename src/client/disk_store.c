/*
 * disk_store.c - the LOCAL_DISK store (design in disk_store.h): open/close, batched reads, pins
 * and capacity eviction. The write path (appends, removals) is in disk_write.c.
 *
 * Read path: under the lock, look keys up and count a reader on their extents; read without the
 * lock (straight into the caller's buffer when aligned, else via a bounce buffer), check each
 * CRC as it completes, then drop the reader counts. An extent chosen for eviction waits for
 * its readers and writers (s->cv) before its file is closed and unlinked.
 */
#include <errno.h>
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
    struct disk_extent *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->id = id;
    x->fd = fd;
    x->size = size;
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

/* Keeps a dropped extent's file (open, renamed to a spare) for disk_write.c's extent_create to
 * write over. 1 when kept; 0 when the caller deletes it (no room among the spares, or the
 * rename failed). The rename comes first, so no restart can ever adopt the file's records. */
static int spare_keep_locked(struct mc_disk_store *s, struct disk_extent *x, const char *name)
{
    if (s->cfg.no_recycle || s->nspares >= DISK_MAX_SPARES || s->cap_limit)
        return 0; /* (a full filesystem needs the blocks back) */
    char spare[32];
    disk_extent_name(x->id, 1, spare, sizeof(spare));
    if (renameat(s->dir_fd, name, s->dir_fd, spare) != 0) {
        mc_warn(DISK_COMP, "cannot keep evicted extent as a spare, deleting it",
                "path=%s extent=%s err=%d", s->path, name, errno);
        return 0;
    }
    s->spares[s->nspares].id = x->id;
    s->spares[s->nspares].fd = x->fd;
    s->nspares++;
    return 1;
}

/* Closes and deletes an extent with no live entries, readers or writers. */
static void extent_delete_locked(struct mc_disk_store *s, struct disk_extent *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        s->oldest = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        s->newest = x->prev;
    if (s->active == x)
        s->active = NULL;
    if (x->slot >= 0) {
        s->slot_fds[x->slot] = -1;
        s->files_gen++;
        disk_pool_sync_files_locked(s); /* idle rings let go of the file */
    }
    char name[32];
    disk_extent_name(x->id, 0, name, sizeof(name));
    if (!spare_keep_locked(s, x, name)) {
        close(x->fd);
        if (unlinkat(s->dir_fd, name, 0) != 0)
            mc_warn(DISK_COMP, "cannot delete extent", "path=%s extent=%s err=%d", s->path, name,
                    errno);
    }
    s->bytes_used -= x->size;
    s->nextents--;
    free(x);
}

void disk_reclaim_locked(struct mc_disk_store *s, struct disk_extent *x)
{
    if (!x || x->nlive > 0 || x->dropping || x->readers > 0 || x->writers > 0)
        return;
    mc_debug(DISK_COMP, "extent with no live record reclaimed",
             "path=%s extent=%" PRIu64 " bytes=%" PRIu64, s->path, x->id, x->size);
    extent_delete_locked(s, x);
    s->reclaimed_extents++;
}

void disk_spares_drop_locked(struct mc_disk_store *s)
{
    for (unsigned i = 0; i < s->nspares; i++) {
        char spare[32];
        disk_extent_name(s->spares[i].id, 1, spare, sizeof(spare));
        close(s->spares[i].fd);
        if (s->dir_fd >= 0)
            unlinkat(s->dir_fd, spare, 0);
    }
    s->nspares = 0;
}

void disk_entry_attach_locked(struct mc_disk_store *s, struct disk_entry *e, struct disk_extent *x)
{
    e->ext = x;
    e->eprev = NULL;
    e->enext = x->entries;
    if (x->entries)
        x->entries->eprev = e;
    x->entries = e;
    uint64_t rec = disk_record_size(e->key_len, e->value_len);
    x->live_bytes += rec;
    x->nlive++;
    x->pinned += e->pins;
    s->live_bytes += rec;
}

void disk_entry_detach_locked(struct mc_disk_store *s, struct disk_entry *e)
{
    struct disk_extent *x = e->ext;
    if (e->eprev)
        e->eprev->enext = e->enext;
    else
        x->entries = e->enext;
    if (e->enext)
        e->enext->eprev = e->eprev;
    uint64_t rec = disk_record_size(e->key_len, e->value_len);
    x->live_bytes -= rec;
    x->nlive--;
    x->pinned -= e->pins;
    s->live_bytes -= rec;
    e->ext = NULL;
}

void disk_entry_drop_locked(struct mc_disk_store *s, struct disk_entry *e)
{
    disk_entry_detach_locked(s, e);
    disk_index_unlink(&s->idx, e);
    free(e);
}

/* ---------------------------------------------------------------- eviction */

/* Oldest extent that may be dropped. hard: the active extent and pinned extents qualify (a
 * pinned one only when nothing unpinned does). */
static struct disk_extent *pick_victim_locked(struct mc_disk_store *s, int hard)
{
    struct disk_extent *pinned = NULL;
    for (struct disk_extent *x = s->oldest; x; x = x->next) {
        if (x->dropping || x->writers > 0 || (x == s->active && !hard)) {
            if (x->unkilled)
                break; /* a newer extent going first would bring a dead record back */
            continue;
        }
        if (x->pinned == 0)
            return x;
        if (!pinned)
            pinned = x;
        if (x->unkilled)
            break;
    }
    return hard ? pinned : NULL;
}

/* ---------------------------------------------------------------- second chance */

/* One record an eviction moves: where it was (in the extent being dropped) and where it goes. */
struct reins {
    const char *key; /* a copy (the entry may go while the lock is released) */
    uint32_t key_len;
    uint64_t version;
    uint32_t crc;
    uint64_t value_len;
    uint64_t old_off;
    struct disk_extent *y; /* the new copy's extent (a writer is counted on it) */
    uint64_t off;
    int res;   /* 0: the new copy is written; else -errno or -EBADMSG (CRC) */
    int moved; /* the index points at the new copy */
};

/* Marks a record dead with s->mu released (the caller holds a writer or the eviction on x);
 * counts a failure as the write path does. s->mu held on entry and exit. */
static void reins_kill_locked(struct mc_disk_store *s, struct disk_extent *x, uint64_t off,
                              const struct reins *j)
{
    struct disk_kill k = {.x = x,
                          .off = off,
                          .key = j->key,
                          .key_len = j->key_len,
                          .version = j->version,
                          .crc = j->crc,
                          .value_len = j->value_len};
    pthread_mutex_unlock(&s->mu);
    int rc = disk_kill_sync(&k);
    pthread_mutex_lock(&s->mu);
    if (rc != 0) {
        x->unkilled++;
        s->kill_failures++;
        mc_error(DISK_COMP, "cannot mark a moved record's other copy dead",
                 "path=%s extent=%" PRIu64 " off=%" PRIu64 " err=%d", s->path, x->id, off, -rc);
    }
}

/* The test hook at a point of a move (MC_DISK_MOVE_*), with s->mu released around it when one
 * is set. s->mu held on entry and exit. */
static void move_hook_locked(struct mc_disk_store *s, int stage)
{
#ifdef MC_TEST_HOOKS
    pthread_mutex_lock(&s->faults.mu);
    void (*fn)(void *, int) = s->faults.f.on_move;
    void *ctx = s->faults.f.on_move_ctx;
    pthread_mutex_unlock(&s->faults.mu);
    if (!fn)
        return;
    pthread_mutex_unlock(&s->mu);
    fn(ctx, stage);
    pthread_mutex_lock(&s->mu);
#else
    (void)s;
    (void)stage;
#endif
}

/* After an eviction of x is over (x deleted next, or kept): the moved records' entries stop
 * pointing at their old copies there. s->mu held. */
static void clear_shadows_locked(struct mc_disk_store *s, struct disk_extent *x,
                                 const struct reins *moves, size_t n)
{
    for (size_t m = 0; m < n; m++) {
        if (!moves[m].moved)
            continue;
        struct disk_entry *e = disk_index_find(&s->idx, moves[m].key, moves[m].key_len);
        if (e && e->shadow == x)
            e->shadow = NULL;
    }
}

/* Moves go through a ring in windows of at most this many bytes of records (one larger
 * record is a window of its own). */
#define MOVE_WINDOW (8u << 20)

struct move_ctx {
    struct reins *jobs;
    struct disk_io *ios;
    size_t *first, *count; /* per write: its first job and how many (a run) */
    char **at;             /* per job: its record's bytes in the window */
};

/* Read k is job k's. */
static void move_read_done(void *ctx, size_t k)
{
    struct move_ctx *c = ctx;
    if (c->ios[k].res != (int)c->ios[k].len)
        c->jobs[k].res = c->ios[k].res < 0 ? c->ios[k].res : -EIO;
}

static void move_write_done(void *ctx, size_t k)
{
    struct move_ctx *c = ctx;
    if (c->ios[k].res == (int)c->ios[k].len)
        return;
    int e = c->ios[k].res < 0 ? c->ios[k].res : -EIO;
    for (size_t i = 0; i < c->count[k]; i++)
        c->jobs[c->first[k] + i].res = e;
}

/* Copies jobs [0, n) (one window, all in buf) from x to their reserved places: every record is
 * read in one ring batch, its value CRC checked and its header re-encoded for the new place
 * (a header verifies only where it lies), then the new copies are written, each run of places
 * adjacent in one extent as one write. Sets each job's res. No lock held. */
static void move_window(struct disk_ring *r, struct disk_extent *x, struct reins *jobs, size_t n,
                        char *buf, struct move_ctx *c)
{
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        struct reins *j = &jobs[i];
        uint64_t rec = disk_record_size(j->key_len, j->value_len);
        j->res = 0;
        c->at[i] = buf + pos;
        c->ios[i] = (struct disk_io){
            .fd = x->fd, .slot = x->slot, .buf = c->at[i], .len = (uint32_t)rec, .off = j->old_off};
        pos += rec;
    }
    c->jobs = jobs;
    disk_ring_run(r, c->ios, n, NULL, move_read_done, c);

    size_t nw = 0;
    for (size_t i = 0; i < n; i++) {
        struct reins *j = &jobs[i];
        uint64_t hb = disk_hdr_block(j->key_len), rec = disk_record_size(j->key_len, j->value_len);
        if (j->res != 0)
            continue;
        if (mc_crc32c(c->at[i] + hb, j->value_len) != j->crc) {
            mc_error(DISK_COMP, "value checksum mismatch, record not moved",
                     "extent=%" PRIu64 " off=%" PRIu64 " len=%" PRIu64, x->id, j->old_off,
                     j->value_len);
            j->res = -EBADMSG;
            continue;
        }
        struct disk_hdr h = {.key_len = j->key_len,
                             .value_len = j->value_len,
                             .version = j->version,
                             .value_crc = j->crc,
                             .ext_id = j->y->id,
                             .off = j->off,
                             .nonce = j->y->nonce};
        disk_hdr_encode(c->at[i], &h, j->key);
        struct disk_io *w = nw ? &c->ios[nw - 1] : NULL;
        size_t prev = w ? c->first[nw - 1] + c->count[nw - 1] - 1 : 0;
        /* the previous job's bytes end where this one's start (the window is in job order), so
         * when its new place ends where this one's starts too, one write takes both */
        if (w && prev == i - 1 && jobs[prev].y == j->y && w->off + w->len == j->off &&
            (uint64_t)w->len + rec <= UINT32_MAX) {
            w->len += (uint32_t)rec;
            c->count[nw - 1]++;
            continue;
        }
        c->ios[nw] = (struct disk_io){.fd = j->y->fd,
                                      .slot = j->y->slot,
                                      .buf = c->at[i],
                                      .len = (uint32_t)rec,
                                      .off = j->off,
                                      .write = 1};
        c->first[nw] = i;
        c->count[nw++] = 1;
    }
    disk_ring_run(r, c->ios, nw, NULL, move_write_done, c);
    for (size_t k = 0; k < nw; k++) {
        if (c->ios[k].res == (int)c->ios[k].len)
            continue;
        /* best effort: no half record that could look like one at any place of the run */
        for (size_t i = c->first[k]; i < c->first[k] + c->count[k]; i++) {
            memset(c->at[i], 0, MC_DISK_BLOCK);
            if (pwrite(jobs[i].y->fd, c->at[i], MC_DISK_BLOCK, (off_t)jobs[i].off) != MC_DISK_BLOCK)
                mc_warn(DISK_COMP, "cannot zero failed move", "extent=%" PRIu64 " off=%" PRIu64,
                        jobs[i].y->id, jobs[i].off);
        }
    }
}

/* The end of the window of jobs that starts at from (at least one job); its bytes in *bytes. */
static size_t move_window_end(const struct reins *jobs, size_t from, size_t n, uint64_t *bytes)
{
    size_t to = from;
    *bytes = 0;
    for (; to < n; to++) {
        uint64_t rec = disk_record_size(jobs[to].key_len, jobs[to].value_len);
        if (to > from && *bytes + rec > MOVE_WINDOW)
            break;
        *bytes += rec;
    }
    return to;
}

/* Copies every job's record (see move_window), window by window. No lock held. */
static void move_records(struct disk_ring *r, struct disk_extent *x, struct reins *jobs, size_t n)
{
    struct move_ctx c = {0};
    char *buf = NULL;
    uint64_t maxwin = 0, bytes;
    for (size_t from = 0, to; from < n; from = to) {
        to = move_window_end(jobs, from, n, &bytes);
        if (bytes > maxwin)
            maxwin = bytes;
    }
    c.ios = calloc(n, sizeof(*c.ios));
    c.first = calloc(n, sizeof(*c.first));
    c.count = calloc(n, sizeof(*c.count));
    c.at = calloc(n, sizeof(*c.at));
    if (!r || !c.ios || !c.first || !c.count || !c.at ||
        posix_memalign((void **)&buf, MC_DISK_BLOCK, (size_t)maxwin) != 0) {
        buf = NULL;
        for (size_t i = 0; i < n; i++)
            jobs[i].res = -ENOMEM;
        goto out;
    }
    for (size_t from = 0, to; from < n; from = to) {
        to = move_window_end(jobs, from, n, &bytes);
        move_window(r, x, jobs + from, to - from, buf, &c);
    }
out:
    free(buf);
    free(c.ios);
    free(c.first);
    free(c.count);
    free(c.at);
}

/* Moves x's accessed (and pinned) live records to the newest extent before x is dropped, up to
 * half of x's size and the room left under the capacity. Releases s->mu for the I/O; x is the
 * eviction's (dropping, sealed). On return the moved records are indexed at their new place
 * and *out holds every attempted move (the caller kills the old copies if x stays). */
static void reinsert_locked(struct mc_disk_store *s, struct disk_extent *x, struct reins **out,
                            size_t *nout, char **keys_out)
{
    *out = NULL;
    *nout = 0;
    *keys_out = NULL;
    if (s->cfg.no_reinsert || s->no_space)
        return;
    uint64_t cap = disk_capacity_locked(s);
    uint64_t room = cap > s->bytes_used ? cap - s->bytes_used : 0;
    uint64_t budget = x->size / 2;
    if (budget > room)
        budget = room;
    size_t n = 0, keybytes = 0;
    for (struct disk_entry *e = x->entries; e; e = e->enext) {
        if (e->accessed || e->pins) {
            n++;
            keybytes += e->key_len;
        }
    }
    if (n == 0)
        return;
    struct reins *jobs = calloc(n, sizeof(*jobs));
    char *keys = malloc(keybytes);
    struct disk_ring *r = NULL;
    size_t nj = 0, kp = 0;
    if (!jobs || !keys)
        goto fail;
    uint64_t bytes = 0;
    for (struct disk_entry *e = x->entries; e && nj < n; e = e->enext) {
        uint64_t rec = disk_record_size(e->key_len, e->value_len);
        if ((!e->accessed && !e->pins) || bytes + rec > budget)
            continue;
        if (s->bytes_used + rec + MC_DISK_BLOCK > cap) /* + a new superblock */
            break;
        struct reins *j = &jobs[nj];
        if (disk_reserve_locked(s, rec, &j->y, &j->off) != 0)
            break;
        memcpy(keys + kp, e->key, e->key_len);
        *j = (struct reins){.key = keys + kp,
                            .key_len = e->key_len,
                            .version = e->version,
                            .crc = e->crc,
                            .value_len = e->value_len,
                            .old_off = e->off,
                            .y = j->y,
                            .off = j->off};
        kp += e->key_len;
        e->accessed = 0; /* a read from now on sets it again for the new copy */
        e->moving = 1;   /* a removal waits for the copy (it must mark it dead too) */
        bytes += rec;
        nj++;
    }
    if (nj == 0)
        goto fail;
    r = disk_ring_get(s);
    if (r)
        disk_ring_sync_files_locked(s, r); /* the new extent's slot, if one was just made */
    pthread_mutex_unlock(&s->mu);
    move_records(r, x, jobs, nj);
    pthread_mutex_lock(&s->mu);
    if (r)
        disk_ring_put_locked(s, r);
    move_hook_locked(s, MC_DISK_MOVE_COPIED);

    size_t moved = 0;
    for (size_t i = 0; i < nj; i++) {
        struct reins *j = &jobs[i];
        uint64_t rec = disk_record_size(j->key_len, j->value_len);
        if (j->res != 0) {
            if (j->res != -EBADMSG)
                s->write_errors++;
            if (j->off + rec == j->y->size) { /* nothing after it: give the space back */
                j->y->size = j->off;
                s->bytes_used -= rec;
            }
            continue;
        }
        struct disk_entry *e = disk_index_find(&s->idx, j->key, j->key_len);
        struct disk_entry *ne = NULL;
        if (e && e->ext == x && e->off == j->old_off && (ne = disk_entry_new(j->key, j->key_len))) {
            ne->off = j->off;
            ne->value_len = j->value_len;
            ne->version = j->version;
            ne->crc = j->crc;
            ne->pins = e->pins;
            ne->accessed = e->accessed; /* read while it was being moved */
            ne->shadow = x;             /* live on disk until x is deleted */
            ne->shadow_off = j->old_off;
            disk_entry_drop_locked(s, e);
            disk_entry_attach_locked(s, ne, j->y);
            disk_index_insert(&s->idx, ne);
            j->moved = 1;
            moved++;
            s->reinserted_records++;
        } else {
            /* replaced or removed meanwhile (or out of memory): the new copy must not come
             * back at a restart */
            reins_kill_locked(s, j->y, j->off, j);
        }
    }
    /* Only now, with every copy that must die marked dead, may a waiting removal go on. */
    for (size_t i = 0; i < nj; i++) {
        struct disk_entry *cur = disk_index_find(&s->idx, jobs[i].key, jobs[i].key_len);
        if (cur)
            cur->moving = 0; /* this key's entry (or the newer one that replaced it) */
    }
    for (size_t i = 0; i < nj; i++)
        jobs[i].y->writers--;
    pthread_cond_broadcast(&s->cv);
    if (moved)
        mc_debug(DISK_COMP, "records moved before eviction",
                 "path=%s extent=%" PRIu64 " moved=%zu of=%zu", s->path, x->id, moved, nj);
    *out = jobs;
    *nout = nj;
    *keys_out = keys;
    return;
fail:
    free(jobs);
    free(keys);
}

/* Gives x's read records a second chance (reinsert_locked), tells the callback which live keys
 * x still holds, then (on success) drops them and deletes x once its readers are done. Releases
 * s->mu around the moves and the callback. Returns 0 or an error code. */
static int evict_extent_locked(struct mc_disk_store *s, struct disk_extent *x)
{
    x->dropping = 1;
    x->sealed = 1;
    if (s->active == x)
        s->active = NULL;
    s->evicting = 1;

    struct reins *moves = NULL;
    size_t nmoves = 0;
    char *move_keys = NULL;
    reinsert_locked(s, x, &moves, &nmoves, &move_keys);

    size_t n = x->nlive, keybytes = 0;
    for (struct disk_entry *e = x->entries; e; e = e->enext)
        keybytes += e->key_len;
    struct mc_disk_evict_item *items = calloc(n ? n : 1, sizeof(*items));
    char *keys = malloc(keybytes ? keybytes : 1);
    int rc = 0;
    if (!items || !keys) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    size_t i = 0, kp = 0;
    for (struct disk_entry *e = x->entries; e; e = e->enext, i++) {
        memcpy(keys + kp, e->key, e->key_len);
        items[i].key = keys + kp;
        items[i].key_len = e->key_len;
        items[i].version = e->version;
        items[i].size = e->value_len;
        kp += e->key_len;
    }
    uint64_t id = x->id;
    if (nmoves > 0)
        move_hook_locked(s, MC_DISK_MOVE_SWITCHED);
    if (s->cfg.evict_cb && n > 0) {
        pthread_mutex_unlock(&s->mu);
        int cb = s->cfg.evict_cb(s->cfg.evict_ctx, items, n);
        pthread_mutex_lock(&s->mu);
        if (cb != 0) {
            rc = cb < 0 ? cb : MC_ERR_INTERNAL_ERROR;
            mc_warn(DISK_COMP, "eviction refused by callback, nothing deleted",
                    "path=%s extent=%" PRIu64 " keys=%zu rc=%d", s->path, id, n, cb);
            goto out;
        }
    }
    while (x->entries) {
        disk_entry_drop_locked(s, x->entries);
        s->evicted_records++;
    }
    while (x->readers > 0 || x->writers > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    clear_shadows_locked(s, x, moves, nmoves); /* the lock is held from here to the delete */
    mc_info(DISK_COMP, "extent evicted", "path=%s extent=%" PRIu64 " keys=%zu bytes=%" PRIu64,
            s->path, id, n, x->size);
    extent_delete_locked(s, x);
    s->evicted_extents++;
    x = NULL;
out:
    if (x && rc != 0) {
        /* x stays: the old copies of moved records must not come back at a restart */
        for (size_t m = 0; m < nmoves; m++)
            if (moves[m].moved)
                reins_kill_locked(s, x, moves[m].old_off, &moves[m]);
        clear_shadows_locked(s, x, moves, nmoves);
        x->dropping = 0;
    }
    s->evicting = 0;
    pthread_cond_broadcast(&s->cv);
    free(items);
    free(keys);
    free(moves);
    free(move_keys);
    return rc;
}

/* Makes bytes_used + need <= capacity. s->mu held (released while evicting). */
int disk_make_room_locked(struct mc_disk_store *s, uint64_t need)
{
    for (;;) {
        while (s->evicting)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->bytes_used + need <= disk_capacity_locked(s))
            return 0;
        struct disk_extent *x = pick_victim_locked(s, 1);
        if (!x) {
            mc_warn(DISK_COMP, "disk store full, nothing evictable",
                    "path=%s used=%" PRIu64 " need=%" PRIu64 " capacity=%" PRIu64, s->path,
                    s->bytes_used, need, disk_capacity_locked(s));
            return MC_ERR_UNABLE_OFFLOAD;
        }
        int rc = evict_extent_locked(s, x);
        if (rc != 0)
            return rc;
    }
}

/* Watermark eviction after an append: unpinned sealed extents, oldest first. */
void disk_watermark_evict_locked(struct mc_disk_store *s)
{
    while (!s->evicting && s->bytes_used > disk_high_water_locked(s)) {
        struct disk_extent *x = pick_victim_locked(s, 0);
        if (!x || evict_extent_locked(s, x) != 0)
            break;
    }
}

/* ---------------------------------------------------------------- write path */

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
        if (!e || e->ext != jobs[i].x || e->off + disk_hdr_block(e->key_len) != jobs[i].voff ||
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
    pthread_mutex_lock(&s->mu);
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
    pthread_mutex_unlock(&s->mu);
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

    pthread_mutex_lock(&s->mu);
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
        if (e->value_len > g->cap || (e->value_len > 0 && !g->buf)) {
            g->result = MC_ERR_BUFFER_OVERFLOW;
            continue;
        }
        e->accessed = 1;
        jobs[i].x = e->ext;
        jobs[i].voff = e->off + disk_hdr_block(e->key_len);
        jobs[i].padded = disk_round_up(e->value_len);
        e->ext->readers++;
    }
    disk_ring_sync_files_locked(s, r);
    pthread_mutex_unlock(&s->mu);

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
            if (g->len == 0) {
                if (g->crc != 0) /* CRC32C of no bytes */
                    g->result = MC_ERR_CHECKSUM_MISMATCH;
                continue;
            }
            char *dst = g->buf;
            if (((uintptr_t)dst & (MC_DISK_BLOCK - 1)) || g->cap < j->padded) {
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

    pthread_mutex_lock(&s->mu);
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
    pthread_mutex_unlock(&s->mu);
out:
    if (r) {
        pthread_mutex_lock(&s->mu);
        disk_ring_put_locked(s, r);
        pthread_mutex_unlock(&s->mu);
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
    pthread_mutex_lock(&s->mu);
    struct disk_entry *e = disk_index_find(&s->idx, key, key_len);
    if (e && info)
        *info = (struct mc_disk_record_info){e->key, e->key_len,   e->version,
                                             e->crc, e->value_len, e->pins};
    pthread_mutex_unlock(&s->mu);
    return e ? MC_OK : MC_ERR_OBJECT_NOT_FOUND;
}

static int pin_delta(struct mc_disk_store *s, const char *key, uint32_t key_len, int d,
                     uint64_t *version)
{
    if (!s || !key || key_len == 0 || key_len > MC_DISK_MAX_KEY_LEN)
        return MC_ERR_INVALID_PARAMS;
    int rc = MC_OK;
    pthread_mutex_lock(&s->mu);
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
    pthread_mutex_unlock(&s->mu);
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
    pthread_mutex_lock(&s->mu);
    for (size_t b = 0; b < s->idx.nbuckets && rc == 0; b++) {
        for (struct disk_entry *e = s->idx.buckets[b]; e && rc == 0; e = e->hnext) {
            struct mc_disk_record_info info = {e->key, e->key_len,   e->version,
                                               e->crc, e->value_len, e->pins};
            rc = fn(ctx, &info);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void mc_disk_store_usage(struct mc_disk_store *s, struct mc_disk_usage *u)
{
    memset(u, 0, sizeof(*u));
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
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
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->pool_mu);
    u->registered_buffers = s->last_buf_registered;
    u->window_maps = s->window_maps;
    u->registered_files = s->last_files_registered;
    pthread_mutex_unlock(&s->pool_mu);
}

#ifdef MC_TEST_HOOKS
void mc_disk_store_test_set_fault(struct mc_disk_store *s, const struct mc_disk_fault *f)
{
    pthread_mutex_lock(&s->faults.mu);
    if (f)
        s->faults.f = *f;
    else
        memset(&s->faults.f, 0, sizeof(s->faults.f));
    pthread_mutex_unlock(&s->faults.mu);
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

int mc_disk_store_open(const struct mc_disk_store_config *cfg, struct mc_disk_store **out,
                       char *err, size_t errlen)
{
    int rc = MC_OK;
    if (out)
        *out = NULL;
    if (!cfg || !out || !cfg->path || !cfg->path[0] || cfg->capacity == 0 ||
        (cfg->extent_size & (MC_DISK_BLOCK - 1)) || cfg->high_watermark < 0 ||
        cfg->high_watermark > 1) {
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
        s->cfg.extent_size = 64ull << 20;
    if (!s->cfg.queue_depth)
        s->cfg.queue_depth = 32;
    if (s->cfg.queue_depth > 4096)
        s->cfg.queue_depth = 4096;
    if (!s->cfg.staging_bytes)
        s->cfg.staging_bytes = 4u << 20;
    s->cfg.staging_bytes = disk_round_up(s->cfg.staging_bytes);
    s->hw_bytes = (uint64_t)((double)s->cfg.capacity * s->cfg.high_watermark);
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
    /* Spares hold nothing: give their space back. */
    disk_spares_drop_locked(s);
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
