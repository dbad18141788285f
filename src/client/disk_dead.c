/*
 * disk_dead.c - the LOCAL_DISK store's dead marks: a record that stops being its key's live one
 * has its header rewritten in place with DISK_FLAG_DEAD (why: disk_write.c). Encoding, the
 * synchronous mark of recovery, and the batched marks of appends and removals.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "client/disk_internal.h"
#include "common/log.h"

void disk_kill_encode(void *blk, const struct disk_kill *k)
{
    struct disk_hdr h = {.flags = DISK_FLAG_DEAD,
                         .key_len = k->key_len,
                         .value_len = k->value_len,
                         .version = k->version,
                         .value_crc = k->crc,
                         .ext_id = k->x->id,
                         .off = k->off,
                         .nonce = k->x->nonce};
    disk_hdr_encode(blk, &h, k->key, k->x->align);
}

int disk_kill_sync(const struct disk_kill *k)
{
    size_t len = disk_hdr_block(k->x->align, k->key_len);
    void *blk = NULL;
    if (posix_memalign(&blk, MC_DISK_BLOCK, len) != 0)
        return -ENOMEM;
    disk_kill_encode(blk, k);
    ssize_t w;
    do {
        w = pwrite(k->x->fd, blk, len, (off_t)k->off);
    } while (w < 0 && errno == EINTR);
    int rc = w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
    free(blk);
    return rc;
}

struct kctx {
    struct disk_kill *kills;
    size_t *io_kill;
    struct disk_io *ios;
};

static void kill_done(void *ctx, size_t i)
{
    struct kctx *c = ctx;
    struct disk_io *io = &c->ios[i];
    c->kills[c->io_kill[i]].res = io->res == (int)io->len ? 0 : io->res < 0 ? io->res : -EIO;
}

/* Writes the dead marks through r (no lock held; the caller holds writers on each k->x). */
void disk_kill_run(struct mc_disk_store *s, struct disk_ring *r, struct disk_kill *kills, size_t nk)
{
    struct disk_io *ios = calloc(nk ? nk : 1, sizeof(*ios));
    size_t *io_kill = calloc(nk ? nk : 1, sizeof(*io_kill));
    int *heap = calloc(nk ? nk : 1, sizeof(*heap));
    if (!ios || !io_kill || !heap) {
        for (size_t i = 0; i < nk; i++)
            kills[i].res = disk_kill_sync(&kills[i]);
        goto out;
    }
    size_t from = 0;
    while (from < nk) {
        size_t nio = 0, to = from;
        uint64_t bytes = 0;
        r->staging_used = 0;
        for (; to < nk && (to == from || bytes < DISK_WINDOW_BYTES); to++) {
            struct disk_kill *k = &kills[to];
            size_t len = disk_hdr_block(k->x->align, k->key_len);
            void *buf = disk_ring_scratch(r, len, &heap[nio]);
            if (!buf) {
                k->res = disk_kill_sync(k);
                continue;
            }
            disk_kill_encode(buf, k);
            ios[nio] = (struct disk_io){.fd = k->x->fd,
                                        .slot = k->x->slot,
                                        .buf = buf,
                                        .len = (uint32_t)len,
                                        .off = k->off,
                                        .write = 1};
            io_kill[nio++] = to;
            bytes += len;
        }
        struct kctx c = {kills, io_kill, ios};
        disk_ring_run(r, ios, nio, &s->faults, kill_done, &c);
        for (size_t i = 0; i < nio; i++) {
            if (heap[i])
                free(ios[i].buf);
            heap[i] = 0;
        }
        from = to;
    }
out:
    free(ios);
    free(io_kill);
    free(heap);
}

/* After disk_kill_run, s->mu held: drop the writer counts the marks held and count failed marks. */
void disk_kill_finish_locked(struct mc_disk_store *s, struct disk_kill *kills, size_t nk)
{
    DISK_ASSERT_LOCKED(s);
    for (size_t i = 0; i < nk; i++) {
        struct disk_kill *k = &kills[i];
        if (k->res != 0) {
            k->x->unkilled++;
            s->kill_failures++;
            mc_error(DISK_COMP, "cannot mark superseded record dead; its extent now goes first",
                     "path=%s extent=%" PRIu64 " off=%" PRIu64 " err=%d", s->path, k->x->id, k->off,
                     -k->res);
        }
        if (k->held && --k->x->writers == 0)
            disk_reclaim_locked(s, k->x); /* (no later kill holds it: each held one) */
    }
}
