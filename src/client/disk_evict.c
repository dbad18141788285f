/*
 * disk_evict.c - how extents leave the LOCAL_DISK store (see disk_store.h, disk_internal.h):
 * capacity and watermark eviction, the second chance that moves an evicted extent's read
 * records to the newest extent first (windowed moves through an io_uring ring), the deletion
 * of an extent (or its keeping as a spare file for reuse) and the reclaim of an extent whose
 * last live record went.
 *
 * Eviction works against disk_capacity_locked (the configured capacity, or the filesystem's
 * room after an ENOSPC: disk_write.c); one runs at a time (s->evicting). An extent chosen for
 * eviction waits for its readers and writers (s->cv) before its file is closed and unlinked.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/disk_internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

/* ---------------------------------------------------------------- extent deletion */

/* Keeps a dropped extent's file (open, renamed to a spare) for disk_write.c's extent_create to
 * write over. 1 when kept; 0 when the caller deletes it (no room among the spares, or the
 * rename failed). The rename comes first, so no restart can ever adopt the file's records. */
static int spare_keep_locked(struct mc_disk_store *s, struct disk_extent *x, const char *name)
{
    DISK_ASSERT_LOCKED(s);
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
    DISK_ASSERT_LOCKED(s);
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
    DISK_ASSERT_LOCKED(s);
    if (!x || x->nlive > 0 || x->dropping || x->readers > 0 || x->writers > 0)
        return;
    mc_debug(DISK_COMP, "extent with no live record reclaimed",
             "path=%s extent=%" PRIu64 " bytes=%" PRIu64, s->path, x->id, x->size);
    extent_delete_locked(s, x);
    s->reclaimed_extents++;
}

void disk_spares_drop_locked(struct mc_disk_store *s)
{
    DISK_ASSERT_LOCKED(s);
    for (unsigned i = 0; i < s->nspares; i++) {
        char spare[32];
        disk_extent_name(s->spares[i].id, 1, spare, sizeof(spare));
        close(s->spares[i].fd);
        if (s->dir_fd >= 0)
            unlinkat(s->dir_fd, spare, 0);
    }
    s->nspares = 0;
}

/* ---------------------------------------------------------------- eviction */

/* Oldest extent that may be dropped. hard: the active extent and pinned extents qualify (a
 * pinned one only when nothing unpinned does). */
static struct disk_extent *pick_victim_locked(struct mc_disk_store *s, int hard)
{
    DISK_ASSERT_LOCKED(s);
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
    DISK_ASSERT_LOCKED(s);
    struct disk_kill k = {.x = x,
                          .off = off,
                          .key = j->key,
                          .key_len = j->key_len,
                          .version = j->version,
                          .crc = j->crc,
                          .value_len = j->value_len};
    disk_unlock(s);
    int rc = disk_kill_sync(&k);
    disk_lock(s);
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
    DISK_ASSERT_LOCKED(s);
#ifdef MC_TEST_HOOKS
    disk_faults_lock(&s->faults);
    void (*fn)(void *, int) = s->faults.f.on_move;
    void *ctx = s->faults.f.on_move_ctx;
    disk_faults_unlock(&s->faults);
    if (!fn)
        return;
    disk_unlock(s);
    fn(ctx, stage);
    disk_lock(s);
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
    DISK_ASSERT_LOCKED(s);
    for (size_t m = 0; m < n; m++) {
        if (!moves[m].moved)
            continue;
        struct disk_entry *e = disk_index_find(&s->idx, moves[m].key, moves[m].key_len);
        if (e && e->shadow == x)
            e->shadow = NULL;
    }
}

/* A moved record's room in the window: its size in x or in its new extent, the larger. */
static uint64_t move_slot(const struct disk_extent *x, const struct reins *j)
{
    uint64_t a = disk_record_size(x->align, j->key_len, j->value_len);
    uint64_t b = disk_record_size(j->y->align, j->key_len, j->value_len);
    return a > b ? a : b;
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
        uint64_t rec = disk_record_size(x->align, j->key_len, j->value_len);
        j->res = 0;
        c->at[i] = buf + pos;
        c->ios[i] = (struct disk_io){
            .fd = x->fd, .slot = x->slot, .buf = c->at[i], .len = (uint32_t)rec, .off = j->old_off};
        pos += move_slot(x, j);
    }
    c->jobs = jobs;
    disk_ring_run(r, c->ios, n, NULL, move_read_done, c);

    size_t nw = 0;
    for (size_t i = 0; i < n; i++) {
        struct reins *j = &jobs[i];
        uint64_t hb = disk_hdr_block(x->align, j->key_len);
        uint64_t nhb = disk_hdr_block(j->y->align, j->key_len);
        uint64_t rec = disk_record_size(j->y->align, j->key_len, j->value_len);
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
        if (nhb != hb) { /* an extent of the other record unit (format 2 <-> 3) */
            memmove(c->at[i] + nhb, c->at[i] + hb, j->value_len);
            memset(c->at[i] + nhb + j->value_len, 0, rec - nhb - j->value_len);
        }
        disk_hdr_encode(c->at[i], &h, j->key, j->y->align);
        struct disk_io *w = nw ? &c->ios[nw - 1] : NULL;
        size_t prev = w ? c->first[nw - 1] + c->count[nw - 1] - 1 : 0;
        /* the previous job's bytes end where this one's start (the window is in job order), so
         * when its new place ends where this one's starts too, one write takes both */
        if (w && prev == i - 1 && jobs[prev].y == j->y && w->off + w->len == j->off &&
            (char *)w->buf + w->len == c->at[i] && (uint64_t)w->len + rec <= UINT32_MAX) {
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
            uint64_t hb = disk_hdr_block(jobs[i].y->align, jobs[i].key_len);
            memset(c->at[i], 0, hb);
            if (pwrite(jobs[i].y->fd, c->at[i], hb, (off_t)jobs[i].off) != (ssize_t)hb)
                mc_warn(DISK_COMP, "cannot zero failed move", "extent=%" PRIu64 " off=%" PRIu64,
                        jobs[i].y->id, jobs[i].off);
        }
    }
}

/* The end of the window of jobs that starts at from (at least one job); its bytes in *bytes. */
static size_t move_window_end(const struct disk_extent *x, const struct reins *jobs, size_t from,
                              size_t n, uint64_t *bytes)
{
    size_t to = from;
    *bytes = 0;
    for (; to < n; to++) {
        uint64_t rec = move_slot(x, &jobs[to]);
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
        to = move_window_end(x, jobs, from, n, &bytes);
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
        to = move_window_end(x, jobs, from, n, &bytes);
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
    DISK_ASSERT_LOCKED(s);
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
        uint64_t rec = disk_record_size(s->align, e->key_len, e->value_len); /* its new copy */
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
    disk_unlock(s);
    move_records(r, x, jobs, nj);
    disk_lock(s);
    if (r)
        disk_ring_put_locked(s, r);
    move_hook_locked(s, MC_DISK_MOVE_COPIED);

    size_t moved = 0;
    for (size_t i = 0; i < nj; i++) {
        struct reins *j = &jobs[i];
        uint64_t rec = disk_record_size(j->y->align, j->key_len, j->value_len);
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
    DISK_ASSERT_LOCKED(s);
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
        disk_unlock(s);
        int cb = s->cfg.evict_cb(s->cfg.evict_ctx, items, n);
        disk_lock(s);
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
    DISK_ASSERT_LOCKED(s);
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
    DISK_ASSERT_LOCKED(s);
    while (!s->evicting && s->bytes_used > disk_high_water_locked(s)) {
        struct disk_extent *x = pick_victim_locked(s, 0);
        if (!x || evict_extent_locked(s, x) != 0)
            break;
    }
}
