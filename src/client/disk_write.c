/*
 * disk_write.c - the LOCAL_DISK store's write path (design in disk_store.h): appends, removals
 * and the in-place "dead" marks that keep a superseded record from coming back.
 *
 * Append (write_jobs, one struct wbatch through phase functions named by lock state): under
 * the store lock, refuse stale versions, make room (evicting whole
 * extents through the callback), then reserve each record's place in the active extent (a new
 * extent file, with its superblock, when it is full) and count a writer on the extent. Without
 * the lock, encode the records back to back into an aligned buffer (the ring's staging, or the
 * window buffer the ring keeps between calls: disk_ring_window) and write the batch through a
 * ring, records adjacent on disk merged into writes of up to 4 MiB cut at 4 KiB-aligned offsets
 * (disk_append_io.c; an append of PAD_MIN_BYTES or more is padded with dead filler records to
 * start and end on a 4 KiB boundary; a failed merged write is retried record by record, so a
 * fault costs only the records it really hits). Under
 * the lock again, commit the records that were written in full to the index (newest version
 * wins). A failed record is never indexed: its reservation is rolled back (the extent shrinks
 * back and is reused) when nothing was reserved after it, else its header block is zeroed (best
 * effort) and it stays a hole that recovery steps over. ENOSPC from the filesystem is capacity
 * pressure, not a fault: the append fails (UNABLE_OFFLOAD, usage.no_space), the store's capacity
 * drops to what it uses (s->cap_limit) and eviction brings it under that, so appends resume.
 * When an append, a removal or a failed read drops an extent's last live record, the extent
 * is deleted at once (disk_reclaim_locked).
 *
 * Dead marks. There are no tombstones: a record that stops being the key's live one (replaced by
 * a newer append, removed, or an append that lost to a newer version at commit) has its header
 * rewritten in place with the DEAD flag, so no restart can bring it back whatever happens to the
 * extents after it (eviction by extent is not strictly oldest-first: pinned extents are
 * skipped). The marks of a batch go out as one ring batch after the commit, while the batch
 * still holds writer counts on the new records' extents and on the extents of the dead records,
 * so neither can be evicted in between. A mark that fails is counted on the dead record's extent
 * (x->unkilled): eviction then never passes that extent (pick_victim_locked). The marks are
 * encoded and written by disk_dead.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "client/disk_internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define WINDOW_BYTES DISK_WINDOW_BYTES
#define NOSPACE_HEADROOM (1u << 20) /* free bytes beyond an append to resume after ENOSPC */

/* Whether the filesystem under the store has room for need more bytes (and some headroom). */
static int fs_has_room(struct mc_disk_store *s, uint64_t need)
{
    struct statvfs st;
    if (fstatvfs(s->dir_fd, &st) != 0)
        return 1; /* cannot tell: let the write find out */
    uint64_t avail = (uint64_t)st.f_bavail * (uint64_t)st.f_frsize;
    return avail >= need + NOSPACE_HEADROOM;
}

static void set_no_space_locked(struct mc_disk_store *s, int on)
{
    DISK_ASSERT_LOCKED(s);
    if (s->no_space == on)
        return;
    s->no_space = on;
    if (on) {
        s->no_space_events++;
        /* Capacity pressure: the store may use what it uses now, no more, and the watermark
         * pass that follows every append evicts below that (telling the owner first); the
         * next append makes room against it too. Spares give their blocks back. Only the
         * change to full lowers it: a fault that persists costs one eviction, not the store. */
        if (!s->cap_limit || s->bytes_used < s->cap_limit)
            s->cap_limit = s->bytes_used;
        disk_spares_drop_locked(s);
        mc_warn(DISK_COMP,
                "filesystem full (ENOSPC): capacity lowered to what the store uses, evicting",
                "path=%s used=%" PRIu64 " records=%zu capacity=%" PRIu64 " limit=%" PRIu64, s->path,
                s->bytes_used, s->idx.count, s->cfg.capacity, s->cap_limit);
    } else {
        mc_info(DISK_COMP, "filesystem has room again, appends resume", "path=%s", s->path);
    }
}

/* While the capacity is limited by the filesystem (cap_limit): raise the limit to what the
 * filesystem has room for now (less a new extent's preallocation and some headroom), lifting it
 * once the configured capacity fits. s->mu held (one fstatvfs). */
static void cap_limit_refresh_locked(struct mc_disk_store *s)
{
    DISK_ASSERT_LOCKED(s);
    struct statvfs st;
    if (!s->cap_limit || fstatvfs(s->dir_fd, &st) != 0)
        return;
    uint64_t avail = (uint64_t)st.f_bavail * (uint64_t)st.f_frsize;
    uint64_t keep = NOSPACE_HEADROOM + s->cfg.extent_size;
    uint64_t fits = avail > keep ? s->bytes_used + avail - keep : s->bytes_used;
    if (fits <= s->cap_limit)
        return;
    if (fits >= s->cfg.capacity) {
        s->cap_limit = 0;
        mc_info(DISK_COMP, "filesystem has room for the whole capacity again",
                "path=%s capacity=%" PRIu64, s->path, s->cfg.capacity);
    } else {
        s->cap_limit = fits;
    }
}

static uint64_t new_nonce(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v) && v)
        return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    return v ? v : 1;
}

/* Creates a new extent file and writes its superblock. 0, or -errno. s->mu held (one 4 KiB
 * synchronous write per extent). The file is a spare (an evicted extent's, disk_evict.c) when
 * one is kept: its new superblock goes out first, then it takes its new name. */
static int extent_create_locked(struct mc_disk_store *s, struct disk_extent **out)
{
    DISK_ASSERT_LOCKED(s);
    uint64_t id = s->next_extent_id++;
    char name[32], cur[32]; /* cur: the file's name now (the spare's, until renamed) */
    disk_extent_name(id, 0, name, sizeof(name));
    int recycled = s->nspares > 0, fd;
    if (recycled) {
        s->nspares--;
        fd = s->spares[s->nspares].fd;
        disk_extent_name(s->spares[s->nspares].id, 1, cur, sizeof(cur));
    } else {
        fd = disk_open_extent_fd(s, id, 1);
        if (fd < 0)
            return -errno;
        memcpy(cur, name, sizeof(name));
    }
    int rc = 0;
    void *blk = NULL;
    uint64_t nonce = new_nonce();
    if (posix_memalign(&blk, MC_DISK_BLOCK, MC_DISK_BLOCK) != 0) {
        rc = -ENOMEM;
        goto fail;
    }
    disk_sb_encode(blk, id, nonce, recycled ? DISK_SB_RECYCLED : 0, s->align);
    ssize_t w = pwrite(fd, blk, MC_DISK_BLOCK, 0);
    if (w != MC_DISK_BLOCK) {
        rc = w < 0 ? -errno : -ENOSPC;
        goto fail;
    }
    if (recycled) {
        if (renameat(s->dir_fd, cur, s->dir_fd, name) != 0) {
            rc = -errno;
            goto fail;
        }
        memcpy(cur, name, sizeof(name));
    }
    /* Blocks for the whole extent up front: O_DIRECT appends then land inside the file instead
     * of extending it (an extending write allocates blocks and updates the size in the journal,
     * which on ext4 halves sequential write throughput). The unwritten tail reads as zeros and
     * the start-up scan cuts it off (disk_recover.c). Best effort: a filesystem that refuses
     * (or has no room) just gets extending writes. */
    if (s->cfg.extent_size > MC_DISK_BLOCK && fallocate(fd, 0, 0, (off_t)s->cfg.extent_size) != 0 &&
        ftruncate(fd, MC_DISK_BLOCK) != 0)
        mc_debug(DISK_COMP, "extent preallocation failed", "path=%s errno=%d", s->path, errno);
    struct disk_extent *x = disk_extent_add_locked(s, id, fd, MC_DISK_BLOCK);
    if (!x) {
        rc = -ENOMEM;
        goto fail;
    }
    x->nonce = nonce;
    x->recycled = recycled;
    s->recycled_extents += (uint64_t)recycled;
    free(blk);
    *out = x;
    return 0;
fail:
    free(blk);
    close(fd);
    unlinkat(s->dir_fd, cur, 0);
    return rc;
}

/* Appends of at least this many bytes start and end on a 4 KiB boundary of their extent: dead
 * filler records (at most 3.5 KiB each) take the gap when the record unit is smaller
 * (disk_append_io.c says why). A smaller append is written as it falls: fillers would cost it
 * up to twice its space. */
#define PAD_MIN_BYTES (256u << 10)

/* The filler that brings x's end to a 4 KiB boundary with more bytes to follow within the
 * extent (0: none needed, or it would not fit). s->mu held. */
static uint32_t pad_to_block_locked(const struct mc_disk_store *s, const struct disk_extent *x,
                                    uint64_t more)
{
    DISK_ASSERT_LOCKED(s);
    uint64_t r = x->size & (MC_DISK_BLOCK - 1);
    if (x->align >= MC_DISK_BLOCK || r == 0)
        return 0;
    uint32_t pad = (uint32_t)(MC_DISK_BLOCK - r); /* a multiple of the unit: >= one header */
    return x->size + pad + more <= s->cfg.extent_size ? pad : 0;
}

/* Places jobs with result MC_OK in extents (fillers around a large append: PAD_MIN_BYTES).
 * s->mu held. */
static void place_locked(struct mc_disk_store *s, struct disk_wjob *jobs, size_t n)
{
    DISK_ASSERT_LOCKED(s);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].result == MC_OK)
            total += disk_record_size(s->align, jobs[i].key_len, jobs[i].len);
    int pad = s->align < MC_DISK_BLOCK && total >= PAD_MIN_BYTES;
    struct disk_wjob *last = NULL;
    for (size_t i = 0; i < n; i++) {
        struct disk_wjob *j = &jobs[i];
        if (j->result != MC_OK)
            continue;
        uint64_t rec = disk_record_size(s->align, j->key_len, j->len);
        struct disk_extent *x = s->active;
        if (!x || x->sealed || (x->size > MC_DISK_BLOCK && x->size + rec > s->cfg.extent_size)) {
            if (x)
                x->sealed = 1;
            s->active = NULL;
            int e = -extent_create_locked(s, &x);
            if (e) {
                int full = e == ENOSPC || e == EDQUOT;
                mc_error(DISK_COMP, "cannot create extent", "path=%s err=%d", s->path, e);
                if (full)
                    set_no_space_locked(s, 1);
                j->result = full          ? MC_ERR_UNABLE_OFFLOAD
                            : e == ENOMEM ? MC_ERR_INTERNAL_ERROR
                                          : MC_ERR_FILE_OPEN_FAIL;
                continue;
            }
            s->active = x;
        }
        j->pre = pad && (!last || last->x != x) ? pad_to_block_locked(s, x, rec) : 0;
        j->x = x;
        j->off = x->size + j->pre;
        x->size += j->pre + rec;
        s->bytes_used += j->pre + rec;
        s->filler_bytes += j->pre;
        x->writers++;
        last = j;
    }
    if (pad && last && last->x == s->active) {
        last->post = pad_to_block_locked(s, last->x, 0);
        last->x->size += last->post;
        s->bytes_used += last->post;
        s->filler_bytes += last->post;
    }
}

/* ---------------------------------------------------------------- append */

/* Commits a written record; fills *k (returns 1) when a record must be marked dead: the one it
 * replaces, or itself when it lost to a newer version. */
static int commit_locked(struct mc_disk_store *s, struct disk_wjob *j, struct disk_kill *k)
{
    DISK_ASSERT_LOCKED(s);
    struct disk_entry *e = disk_index_find(&s->idx, j->key, j->key_len);
    *k = (struct disk_kill){.key = j->key, .key_len = j->key_len};
    struct disk_entry *ne = NULL;
    if (e && e->version > j->version) {
        j->result = MC_ERR_INVALID_VERSION; /* a newer version was committed meanwhile */
    } else if (!(ne = disk_entry_new(j->key, j->key_len))) {
        j->result = MC_ERR_INTERNAL_ERROR;
    }
    if (j->result != MC_OK) {
        /* Its own extent is held by the job's writer count. */
        k->x = j->x;
        k->off = j->off;
        k->version = j->version;
        k->crc = j->crc;
        k->value_len = j->len;
        return 1;
    }
    ne->off = j->off;
    ne->value_len = j->len;
    ne->version = j->version;
    ne->crc = j->crc;
    int kill = 0;
    if (e) {
        ne->pins = e->pins;
        /* a removal of the newer version must still wait for / mark the older copies */
        ne->moving = e->moving;
        ne->shadow = e->shadow;
        ne->shadow_off = e->shadow_off;
        k->x = e->ext;
        k->off = e->off;
        k->version = e->version;
        k->crc = e->crc;
        k->value_len = e->value_len;
        k->held = 1;
        e->ext->writers++;
        kill = 1;
        disk_entry_drop_locked(s, e);
    }
    disk_entry_attach_locked(s, ne, j->x);
    disk_index_insert(&s->idx, ne);
    return kill;
}

/* Gives back the space of failed records that nothing was reserved after (newest first, so a
 * run of failures at an extent's end all go), cutting the file back so no partial record stays
 * past the end. s->mu held. */
static void rollback_locked(struct mc_disk_store *s, struct disk_wjob *jobs, size_t n)
{
    DISK_ASSERT_LOCKED(s);
    for (int progress = 1; progress;) {
        progress = 0;
        for (size_t i = 0; i < n; i++) {
            struct disk_wjob *j = &jobs[i];
            if (!j->x || j->err == 0 || j->rolled_back)
                continue;
            uint64_t span = disk_wjob_span(j), start = j->off - j->pre;
            if (start + span != j->x->size)
                continue;
            j->x->size = start;
            s->bytes_used -= span;
            j->rolled_back = 1;
            progress = 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct disk_wjob *j = &jobs[i];
        if (j->rolled_back && j->x->size <= j->off - j->pre &&
            ftruncate(j->x->fd, (off_t)j->x->size) != 0)
            mc_warn(DISK_COMP, "cannot cut failed record off", "path=%s extent=%" PRIu64 " err=%d",
                    s->path, j->x->id, errno);
    }
}

/* The most record bytes a batch can have once every extent that eviction may take has gone:
 * the capacity less the extents it must leave (being dropped, or being written by another
 * batch), less a superblock for every extent the batch would open. s->mu held. */
static uint64_t room_after_eviction_locked(const struct mc_disk_store *s)
{
    DISK_ASSERT_LOCKED(s);
    uint64_t stuck = 0;
    for (const struct disk_extent *x = s->oldest; x; x = x->next)
        if (x->dropping || x->writers > 0)
            stuck += x->size;
    uint64_t cap = disk_capacity_locked(s);
    uint64_t room = cap > stuck ? cap - stuck : 0;
    uint64_t sbs = (room / s->cfg.extent_size + 1) * MC_DISK_BLOCK;
    return room > sbs ? room - sbs : 0;
}

/* One append batch on its way through the write path. Its phases are named by the lock state
 * they run in (_locked: s->mu held; _unlocked: no lock, I/O); write_jobs runs them in order
 * and batch_end is every path's ending. The window scratch (run: ios, members, first, count)
 * and the dead marks hold n entries each. */
struct wbatch {
    struct mc_disk_store *s;
    struct disk_wjob *jobs;
    size_t n;
    struct disk_ring *r; /* NULL once given back */
    struct disk_wstats io;
    struct disk_kill *kills;
    size_t nk;
};

/* Fails every job still MC_OK with rc. */
static void batch_fail_rest(struct wbatch *b, int rc)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->jobs[i].result == MC_OK)
            b->jobs[i].result = rc;
}

/* The ring and the scratch; on failure every job fails (INTERNAL_ERROR). */
static int batch_init(struct wbatch *b, struct mc_disk_store *s, struct disk_wjob *jobs, size_t n)
{
    size_t cap = n ? n : 1;
    *b = (struct wbatch){.s = s, .jobs = jobs, .n = n};
    b->r = disk_ring_get(s);
    b->kills = calloc(cap, sizeof(*b->kills));
    if (b->r && b->kills)
        return MC_OK;
    batch_fail_rest(b, MC_ERR_INTERNAL_ERROR);
    return MC_ERR_INTERNAL_ERROR;
}

/* Refuses stale versions and what cannot fit, then makes room for the rest (eviction may
 * release s->mu while its callback runs). On failure the rest fail with its code. */
static int batch_admit_locked(struct wbatch *b)
{
    struct mc_disk_store *s = b->s;
    DISK_ASSERT_LOCKED(s);
    cap_limit_refresh_locked(s);
    uint64_t need = 0, room = room_after_eviction_locked(s);
    size_t cut = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct disk_wjob *j = &b->jobs[i];
        if (j->result != MC_OK)
            continue;
        struct disk_entry *e = disk_index_find(&s->idx, j->key, j->key_len);
        uint64_t rec = disk_record_size(s->align, j->key_len, j->len);
        if (e && e->version > j->version) {
            j->result = MC_ERR_INVALID_VERSION;
        } else if (need + rec > room) {
            /* Evicting the whole store and then refusing the batch would lose data for
             * nothing: the part that fits is written, the rest refused. */
            j->result = MC_ERR_UNABLE_OFFLOAD;
            cut++;
        } else {
            need += rec;
        }
    }
    if (cut > 0)
        mc_warn(DISK_COMP, "batch larger than the store can hold, the rest refused",
                "path=%s refused=%zu of=%zu accepted_bytes=%" PRIu64 " capacity=%" PRIu64, s->path,
                cut, b->n, need, s->cfg.capacity);
    if (s->align < MC_DISK_BLOCK && need >= PAD_MIN_BYTES)
        need += 2 * MC_DISK_BLOCK; /* its fillers (place_locked) */
    int rc = MC_OK;
    if (need > 0 && s->no_space && !fs_has_room(s, need)) {
        /* Full: make room against the filesystem's room (cap_limit), then refuse without
         * touching the disk if the filesystem still has none. */
        rc = disk_make_room_locked(s, need);
        if (rc == MC_OK && !fs_has_room(s, need))
            rc = MC_ERR_UNABLE_OFFLOAD;
    } else if (need > 0) {
        rc = disk_make_room_locked(s, need);
    }
    if (rc != MC_OK) {
        batch_fail_rest(b, rc);
        disk_watermark_evict_locked(s); /* a full filesystem: make room for the next one */
    }
    return rc;
}

/* Reserves each admitted record's place (a writer counted on its extent). */
static void batch_place_locked(struct wbatch *b)
{
    DISK_ASSERT_LOCKED(b->s);
    place_locked(b->s, b->jobs, b->n);
    disk_ring_sync_files_locked(b->s, b->r);
}

/* Writes the placed records, window by window (windows bound the scratch memory of a large
 * batch). */
static void batch_write_unlocked(struct wbatch *b)
{
    size_t from = 0;
    while (from < b->n) {
        size_t to = from;
        uint64_t bytes = 0;
        while (to < b->n && (to == from || bytes < WINDOW_BYTES)) {
            if (b->jobs[to].result == MC_OK)
                bytes += disk_wjob_span(&b->jobs[to]);
            to++;
        }
        disk_append_window(b->s, b->r, b->jobs, from, to, &b->io);
        from = to;
    }
}

/* Indexes the records written in full (collecting the dead marks they call for), gives back
 * the space of failed ones where it can, and tracks whether the filesystem is full. */
static void batch_commit_locked(struct wbatch *b)
{
    struct mc_disk_store *s = b->s;
    DISK_ASSERT_LOCKED(s);
    int any_ok = 0, any_nospace = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct disk_wjob *j = &b->jobs[i];
        if (!j->x)
            continue;
        if (j->result == MC_OK) {
            b->nk += (size_t)commit_locked(s, j, &b->kills[b->nk]);
            any_ok |= j->result == MC_OK;
        } else if (j->err) {
            s->write_errors++;
            any_nospace |= j->err == ENOSPC || j->err == EDQUOT;
        }
    }
    rollback_locked(s, b->jobs, b->n);
    s->write_ios += b->io.ios;
    s->write_bytes += b->io.bytes;
    if (any_nospace)
        set_no_space_locked(s, 1);
    else if (any_ok)
        set_no_space_locked(s, 0);
    if (b->nk > 0)
        disk_ring_sync_files_locked(s, b->r);
}

/* Writes the dead marks (the batch still holds writers on every extent they touch). */
static void batch_kill_unlocked(struct wbatch *b)
{
    if (b->nk > 0)
        disk_kill_run(b->s, b->r, b->kills, b->nk);
}

/* Gives the ring back to the pool (at most once). */
static void batch_put_ring_locked(struct wbatch *b)
{
    DISK_ASSERT_LOCKED(b->s);
    if (b->r)
        disk_ring_put_locked(b->s, b->r);
    b->r = NULL;
}

/* Drops the batch's writer counts (reclaiming extents left empty), wakes waiters, runs the
 * watermark pass and gives the ring back. */
static void batch_release_locked(struct wbatch *b)
{
    struct mc_disk_store *s = b->s;
    DISK_ASSERT_LOCKED(s);
    disk_kill_finish_locked(s, b->kills, b->nk);
    for (size_t i = 0; i < b->n; i++)
        if (b->jobs[i].x && --b->jobs[i].x->writers == 0)
            disk_reclaim_locked(s, b->jobs[i].x); /* (no later job holds it) */
    pthread_cond_broadcast(&s->cv);
    disk_watermark_evict_locked(s);
    /* A record of this batch that the watermark pass just evicted (a batch past the high
     * watermark) is gone: its caller has not told the master about it yet, so the eviction's
     * report found nothing to drop, and reporting it stored now would list a replica without
     * bytes. It fails instead. */
    for (size_t i = 0; i < b->n; i++) {
        struct disk_wjob *j = &b->jobs[i];
        if (j->result != MC_OK)
            continue;
        struct disk_entry *e = disk_index_find(&s->idx, j->key, j->key_len);
        if (!e || e->version != j->version)
            j->result = MC_ERR_UNABLE_OFFLOAD;
    }
    batch_put_ring_locked(b);
}

/* Every batch's ending: the ring back if a phase did not give it, the scratch freed; the
 * first failing job's code, or MC_OK. */
static int batch_end(struct wbatch *b)
{
    if (b->r) {
        disk_lock(b->s);
        batch_put_ring_locked(b);
        disk_unlock(b->s);
    }
    free(b->kills);
    for (size_t i = 0; i < b->n; i++)
        if (b->jobs[i].result != MC_OK)
            return b->jobs[i].result;
    return MC_OK;
}

/* Appends a batch: admitted and placed under the lock, written without it, committed under
 * it, dead marks written without it, writer counts dropped under it. */
static int write_jobs(struct mc_disk_store *s, struct disk_wjob *jobs, size_t n)
{
    struct wbatch b;
    if (batch_init(&b, s, jobs, n) != MC_OK)
        return batch_end(&b);
    disk_lock(s);
    int rc = batch_admit_locked(&b);
    if (rc == MC_OK)
        batch_place_locked(&b);
    disk_unlock(s);
    if (rc != MC_OK)
        return batch_end(&b);
    batch_write_unlocked(&b);
    disk_lock(s);
    batch_commit_locked(&b);
    disk_unlock(s);
    batch_kill_unlocked(&b);
    disk_lock(s);
    batch_release_locked(&b);
    disk_unlock(s);
    return batch_end(&b);
}

int mc_disk_store_append(struct mc_disk_store *s, const struct mc_disk_put *items, size_t n,
                         int *results)
{
    if (!s || (n > 0 && !items))
        return MC_ERR_INVALID_PARAMS;
    struct disk_wjob *jobs = calloc(n ? n : 1, sizeof(*jobs));
    if (!jobs)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++) {
        const struct mc_disk_put *p = &items[i];
        struct disk_wjob *j = &jobs[i];
        *j = (struct disk_wjob){.key = p->key,
                                .key_len = p->key_len,
                                .version = p->version,
                                .crc = p->crc,
                                .data = p->data,
                                .len = p->len};
        if (!p->key || p->key_len == 0 || p->key_len > MC_DISK_MAX_KEY_LEN ||
            p->len > DISK_MAX_VALUE || (p->len > 0 && !p->data) ||
            disk_record_size(s->align, p->key_len, p->len) + MC_DISK_BLOCK > s->cfg.capacity)
            j->result = MC_ERR_INVALID_PARAMS;
        else if (p->len == 0 && p->crc != 0) /* (a value's CRC is checked as it is copied) */
            j->result = MC_ERR_CHECKSUM_MISMATCH;
    }
    int rc = write_jobs(s, jobs, n);
    if (results)
        for (size_t i = 0; i < n; i++)
            results[i] = jobs[i].result;
    free(jobs);
    return rc;
}

/* ---------------------------------------------------------------- remove */

/* Whether a key of the call is being copied by an eviction (disk_entry.moving). s->mu held. */
static int remove_must_wait_locked(struct mc_disk_store *s, const char *const *keys,
                                   const uint32_t *key_lens, size_t n)
{
    DISK_ASSERT_LOCKED(s);
    for (size_t i = 0; i < n; i++) {
        if (!keys[i] || key_lens[i] == 0 || key_lens[i] > MC_DISK_MAX_KEY_LEN)
            continue;
        struct disk_entry *e = disk_index_find(&s->idx, keys[i], key_lens[i]);
        if (e && e->moving)
            return 1;
    }
    return 0;
}

/* Marks each present key's record dead in place, then drops it from the index (unless a newer
 * append replaced it meanwhile: that one stays). Needs no space. A key whose mark cannot be
 * written stays (FILE_WRITE_FAIL): a removal that a restart would undo is not reported done.
 * A record an eviction is moving has two copies on disk: the removal waits for the copy to be
 * written, then marks the new copy and the old one (entry->shadow) dead before it returns. */
int mc_disk_store_remove(struct mc_disk_store *s, const char *const *keys, const uint32_t *key_lens,
                         size_t n, int *results)
{
    if (!s || (n > 0 && (!keys || !key_lens)))
        return MC_ERR_INVALID_PARAMS;
    struct disk_kill *kills = calloc(n ? 2 * n : 1, sizeof(*kills));
    size_t *kill_of = calloc(n ? n : 1, sizeof(*kill_of));     /* key i -> kill index + 1 */
    size_t *shadow_of = calloc(n ? n : 1, sizeof(*shadow_of)); /* its old copy's kill + 1 */
    int *res = calloc(n ? n : 1, sizeof(*res));
    struct disk_ring *r = disk_ring_get(s);
    int rc = MC_OK;
    size_t nk = 0;
    int oom = !kills || !kill_of || !shadow_of || !res || !r;
    if (oom)
        goto out;
    disk_lock(s);
    while (remove_must_wait_locked(s, keys, key_lens, n))
        pthread_cond_wait(&s->cv, &s->mu); /* the eviction broadcasts when its copies are done */
    for (size_t i = 0; i < n; i++) {
        if (!keys[i] || key_lens[i] == 0 || key_lens[i] > MC_DISK_MAX_KEY_LEN) {
            res[i] = MC_ERR_INVALID_PARAMS;
            continue;
        }
        struct disk_entry *e = disk_index_find(&s->idx, keys[i], key_lens[i]);
        if (!e) {
            res[i] = MC_ERR_OBJECT_NOT_FOUND;
            continue;
        }
        int dup = 0; /* the same key twice in one call: one mark */
        for (size_t k = 0; k < nk && !dup; k++)
            dup = kills[k].x == e->ext && kills[k].off == e->off;
        if (dup) {
            res[i] = MC_ERR_OBJECT_NOT_FOUND;
            continue;
        }
        kills[nk] = (struct disk_kill){.x = e->ext,
                                       .off = e->off,
                                       .key = keys[i],
                                       .key_len = key_lens[i],
                                       .version = e->version,
                                       .crc = e->crc,
                                       .value_len = e->value_len,
                                       .held = 1};
        e->ext->writers++;
        kill_of[i] = ++nk;
        if (e->shadow) {
            kills[nk] = kills[nk - 1];
            kills[nk].x = e->shadow;
            kills[nk].off = e->shadow_off;
            e->shadow->writers++; /* its eviction waits for the mark before deleting it */
            shadow_of[i] = ++nk;
        }
    }
    disk_ring_sync_files_locked(s, r);
    disk_unlock(s);

    disk_kill_run(s, r, kills, nk);

    disk_lock(s);
    for (size_t i = 0; i < n; i++) {
        if (!kill_of[i])
            continue;
        struct disk_kill *k = &kills[kill_of[i] - 1];
        if (k->res != 0) {
            res[i] = MC_ERR_FILE_WRITE_FAIL;
            mc_warn(DISK_COMP, "remove failed: cannot mark the record dead",
                    "path=%s extent=%" PRIu64 " off=%" PRIu64 " err=%d", s->path, k->x->id, k->off,
                    -k->res);
            continue;
        }
        struct disk_entry *e = disk_index_find(&s->idx, k->key, k->key_len);
        if (e && e->ext == k->x && e->off == k->off)
            disk_entry_drop_locked(s, e);
        if (shadow_of[i] && kills[shadow_of[i] - 1].res != 0) {
            /* the record is dead, but its old copy is not: not done (the old extent now goes
             * before any newer one, so the copy cannot outlive the record's extent) */
            struct disk_kill *o = &kills[shadow_of[i] - 1];
            o->x->unkilled++;
            s->kill_failures++;
            res[i] = MC_ERR_FILE_WRITE_FAIL;
            mc_warn(DISK_COMP, "remove failed: cannot mark the moved record's old copy dead",
                    "path=%s extent=%" PRIu64 " off=%" PRIu64 " err=%d", s->path, o->x->id, o->off,
                    -o->res);
        }
    }
    for (size_t k = 0; k < nk; k++)
        if (--kills[k].x->writers == 0)
            disk_reclaim_locked(s, kills[k].x); /* (no later kill holds it: each held one) */
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
    for (size_t i = 0; i < n; i++) {
        int ri = oom ? MC_ERR_INTERNAL_ERROR : res[i];
        if (results)
            results[i] = ri;
        if (rc == MC_OK)
            rc = ri;
    }
    free(kills);
    free(kill_of);
    free(shadow_of);
    free(res);
    return rc;
}

/* ---------------------------------------------------------------- moves (eviction) */

int disk_reserve_locked(struct mc_disk_store *s, uint64_t rec, struct disk_extent **xo,
                        uint64_t *off)
{
    DISK_ASSERT_LOCKED(s);
    if (s->no_space)
        return MC_ERR_UNABLE_OFFLOAD;
    struct disk_extent *x = s->active;
    if (!x || x->sealed || (x->size > MC_DISK_BLOCK && x->size + rec > s->cfg.extent_size)) {
        if (x)
            x->sealed = 1;
        s->active = NULL;
        int e = -extent_create_locked(s, &x);
        if (e) {
            mc_error(DISK_COMP, "cannot create extent", "path=%s err=%d", s->path, e);
            if (e == ENOSPC || e == EDQUOT) {
                set_no_space_locked(s, 1);
                return MC_ERR_UNABLE_OFFLOAD;
            }
            return e == ENOMEM ? MC_ERR_INTERNAL_ERROR : MC_ERR_FILE_OPEN_FAIL;
        }
        s->active = x;
    }
    *xo = x;
    *off = x->size;
    x->size += rec;
    s->bytes_used += rec;
    x->writers++;
    return 0;
}
