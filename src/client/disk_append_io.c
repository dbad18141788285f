/*
 * disk_append_io.c - the LOCAL_DISK store's append I/O (design in disk_store.h, the write path
 * in disk_write.c): one window of placed records encoded into an aligned buffer and written
 * through a ring.
 *
 * Records placed back to back in one extent form a run; a run goes out as writes of up to
 * CUT_BYTES, cut at offsets of the extent that are multiples of 4 KiB (a record may straddle two
 * writes). Each run lies in the buffer at the same offset modulo 4 KiB as on disk, so every
 * write but a run's first and last starts and ends on a 4 KiB boundary in memory and on disk.
 * That matters on ext4 (and xfs): a direct write that is not aligned to the filesystem block
 * into preallocated, never written blocks takes the inode exclusively and waits for every
 * direct I/O in flight on the file, so 512-byte-unit records written as they fall ran one write
 * at a time into a fresh extent. The placement (disk_write.c) pads a large append's start and
 * end to 4 KiB with dead filler records, so its first and last writes are aligned too.
 *
 * A record is encoded just before the first write holding it goes out (so copying the values
 * overlaps the writes in flight), its value copied and its CRC32C computed in one pass
 * (mc_crc32c_copy); a value that does not match the caller's CRC is written as a dead record
 * (recovery steps over it by length) and fails with CHECKSUM_MISMATCH. A failed write of
 * several records, or of part of one, is retried record by record, so a fault costs only the
 * records it really hits; a failed write of exactly one record fails it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/disk_internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

/* Largest single write. On ext4 an O_DIRECT write into preallocated (unwritten) blocks converts
 * them to written when it completes, a journaled metadata update per write: one write per 64 KiB
 * record spends much of the device's time on those, one per few MiB does not. */
#define CUT_BYTES (4u << 20)
#define FS_BLOCK ((uint64_t)MC_DISK_BLOCK)

static const char filler_key[1] = {'-'};

/* A dead record of exactly len bytes (len: a multiple of the extent's unit, at least one unit)
 * at off of x: recovery skips it by its length. */
static void filler_encode(char *buf, const struct disk_extent *x, uint64_t off, uint64_t len)
{
    uint64_t hb = disk_hdr_block(x->align, sizeof(filler_key));
    struct disk_hdr h = {.flags = DISK_FLAG_DEAD,
                         .key_len = sizeof(filler_key),
                         .value_len = len - hb,
                         .ext_id = x->id,
                         .off = off,
                         .nonce = x->nonce};
    disk_hdr_encode(buf, &h, filler_key, x->align);
    memset(buf + hb, 0, len - hb);
}

/* Encodes job j's record (and its fillers) into the window buffer; a value that does not match
 * its CRC becomes a dead record and the job fails. */
static void record_encode(char *base, struct disk_wjob *j)
{
    const struct disk_extent *x = j->x;
    char *buf = base + j->at;
    uint64_t hb = disk_hdr_block(x->align, j->key_len),
             rec = disk_record_size(x->align, j->key_len, j->len);
    if (j->pre)
        filler_encode(buf - j->pre, x, j->off - j->pre, j->pre);
    uint32_t crc = 0;
    if (j->len) {
        crc = mc_crc32c_copy(0, buf + hb, j->data, j->len);
        memset(buf + hb + j->len, 0, rec - hb - j->len);
    }
    struct disk_hdr h = {.key_len = j->key_len,
                         .value_len = j->len,
                         .version = j->version,
                         .value_crc = j->crc,
                         .ext_id = x->id,
                         .off = j->off,
                         .nonce = x->nonce};
    if (crc != j->crc) {
        h.flags = DISK_FLAG_DEAD; /* never live: the bytes are not the ones the CRC names */
        j->result = MC_ERR_CHECKSUM_MISMATCH;
    }
    disk_hdr_encode(buf, &h, j->key, x->align);
    if (j->post)
        filler_encode(buf + rec, x, j->off + rec, j->post);
    j->encoded = 1;
}

/* The writes of a window: write k holds jobs run[first[k] .. first[k] + count[k]). */
struct wctx {
    struct disk_io *ios;
    struct disk_wjob **run; /* the window's jobs in disk order */
    size_t *first, *count;
    char *buf;
    size_t failed;
};

static void job_fail(struct disk_wjob *j, int res, uint32_t len, size_t *failed)
{
    j->err = res < 0 ? -res : EIO;
    j->result =
        j->err == ENOSPC || j->err == EDQUOT ? MC_ERR_UNABLE_OFFLOAD : MC_ERR_FILE_WRITE_FAIL;
    if ((*failed)++ == 0)
        mc_warn(DISK_COMP, "record write failed",
                "extent=%" PRIu64 " off=%" PRIu64 " len=%u res=%d", j->x->id, j->off, len, res);
}

static void wfill(void *ctx, size_t k)
{
    struct wctx *c = ctx;
    for (size_t m = c->first[k]; m < c->first[k] + c->count[k]; m++)
        if (!c->run[m]->encoded)
            record_encode(c->buf, c->run[m]);
}

static void wdone(void *ctx, size_t k)
{
    struct wctx *c = ctx;
    struct disk_io *io = &c->ios[k];
    if (io->res == (int)io->len)
        return;
    struct disk_wjob *j = c->run[c->first[k]];
    if (c->count[k] == 1 && io->off == j->off - j->pre && io->len == disk_wjob_span(j)) {
        job_fail(j, io->res, io->len, &c->failed); /* the whole of one record: it fails */
        return;
    }
    for (size_t m = c->first[k]; m < c->first[k] + c->count[k]; m++) {
        c->run[m]->retry = 1;
        c->run[m]->wres = io->res;
    }
}

/* Zeroes a failed record's header block so a restart cannot mistake it for a record. */
static void zero_header(struct disk_ring *r, struct disk_wjob *j)
{
    int heap = 0;
    uint64_t hb = disk_hdr_block(j->x->align, j->key_len); /* not past its own record */
    void *z = disk_ring_scratch(r, hb, &heap);
    if (!z)
        return;
    memset(z, 0, hb);
    if (pwrite(j->x->fd, z, hb, (off_t)j->off) != (ssize_t)hb)
        mc_warn(DISK_COMP, "cannot zero failed record", "extent=%" PRIu64 " off=%" PRIu64, j->x->id,
                j->off);
    if (heap)
        free(z);
}

/* Lays the window's jobs out in the buffer (runs congruent to their disk offsets modulo 4 KiB)
 * and lists them in c->run. Returns the buffer length; *nruns gets the number of runs. */
static uint64_t layout(struct disk_wjob *jobs, size_t from, size_t to, struct wctx *c, size_t *nj,
                       size_t *nruns)
{
    uint64_t p = 0, end = 0;
    const struct disk_wjob *prev = NULL;
    *nj = *nruns = 0;
    for (size_t i = from; i < to; i++) {
        struct disk_wjob *j = &jobs[i];
        if (j->result != MC_OK)
            continue;
        uint64_t start = j->off - j->pre;
        if (!prev || prev->x != j->x || end != start) {
            p = ((p + FS_BLOCK - 1) & ~(FS_BLOCK - 1)) + (start & (FS_BLOCK - 1));
            (*nruns)++;
        }
        j->at = p + j->pre;
        p += disk_wjob_span(j);
        end = start + disk_wjob_span(j);
        prev = j;
        c->run[(*nj)++] = j;
    }
    return p;
}

/* Cuts the runs of c->run[0..nj) into writes (c->ios); returns how many. */
static size_t cut_writes(struct wctx *c, size_t nj)
{
    size_t nio = 0;
    for (size_t a = 0; a < nj;) {
        size_t b = a + 1; /* the run is run[a .. b) */
        while (b < nj && c->run[b]->x == c->run[a]->x &&
               c->run[b]->off - c->run[b]->pre ==
                   c->run[b - 1]->off - c->run[b - 1]->pre + disk_wjob_span(c->run[b - 1]))
            b++;
        struct disk_wjob *j0 = c->run[a], *jl = c->run[b - 1];
        uint64_t start = j0->off - j0->pre, stop = jl->off - jl->pre + disk_wjob_span(jl);
        char *base = c->buf + (j0->at - j0->pre);
        size_t m = a;
        for (uint64_t o = start; o < stop;) {
            uint64_t e = (o + CUT_BYTES) & ~(FS_BLOCK - 1);
            if (e > stop)
                e = stop;
            while (c->run[m]->off - c->run[m]->pre + disk_wjob_span(c->run[m]) <= o)
                m++; /* the first job that reaches past o */
            size_t last = m;
            while (last + 1 < b && c->run[last + 1]->off - c->run[last + 1]->pre < e)
                last++;
            c->ios[nio] = (struct disk_io){.fd = j0->x->fd,
                                           .slot = j0->x->slot,
                                           .buf = base + (o - start),
                                           .len = (uint32_t)(e - o),
                                           .off = o,
                                           .write = 1};
            c->first[nio] = m;
            c->count[nio++] = last - m + 1;
            o = e;
        }
        a = b;
    }
    return nio;
}

void disk_append_window(struct mc_disk_store *s, struct disk_ring *r, struct disk_wjob *jobs,
                        size_t from, size_t to, struct disk_wstats *st)
{
    size_t n = to - from, nj = 0, nruns = 0;
    struct wctx c = {0};
    int own = 0;
    uint64_t len = 0;
    c.run = calloc(n ? n : 1, sizeof(*c.run));
    if (c.run)
        len = layout(jobs, from, to, &c, &nj, &nruns);
    r->staging_used = 0;
    c.buf = c.run && len ? disk_ring_window(s, r, len, &own) : NULL;
    size_t max_io = nj + nruns + (size_t)(len / (CUT_BYTES - FS_BLOCK)) + 1;
    if (c.buf) {
        c.ios = calloc(max_io, sizeof(*c.ios));
        c.first = calloc(max_io, sizeof(*c.first));
        c.count = calloc(max_io, sizeof(*c.count));
    }
    if (!c.buf || !c.ios || !c.first || !c.count) {
        for (size_t i = from; i < to; i++)
            if (jobs[i].result == MC_OK) {
                jobs[i].result = MC_ERR_INTERNAL_ERROR;
                jobs[i].err = ENOMEM; /* never written: its space goes back */
            }
        goto out;
    }
    for (size_t m = 0; m < nj; m++)
        c.run[m]->tried = 1;
    size_t nio = cut_writes(&c, nj);
    st->ios += nio;
    for (size_t k = 0; k < nio; k++)
        st->bytes += c.ios[k].len;
    disk_ring_run_fed(r, c.ios, nio, &s->faults, wfill, wdone, &c);
    /* Jobs in failed writes of several records (or of part of one): again one write per record
     * (not when the ring itself failed: the batch fails then, as a single write would). */
    size_t nretry = 0;
    for (size_t m = 0; m < nj; m++) {
        struct disk_wjob *j = c.run[m];
        if (!j->retry || j->err)
            continue;
        j->retry = 0;
        if (r->broken || !j->encoded) {
            job_fail(j, j->wres, (uint32_t)disk_wjob_span(j), &c.failed);
            continue;
        }
        c.run[nretry] = j; /* nretry <= m: in place */
        c.ios[nretry] = (struct disk_io){.fd = j->x->fd,
                                         .slot = j->x->slot,
                                         .buf = c.buf + (j->at - j->pre),
                                         .len = (uint32_t)disk_wjob_span(j),
                                         .off = j->off - j->pre,
                                         .write = 1};
        c.first[nretry] = nretry;
        c.count[nretry] = 1;
        nretry++;
    }
    if (nretry > 0) {
        mc_info(DISK_COMP, "merged record write failed, retrying record by record",
                "path=%s records=%zu", s->path, nretry);
        disk_ring_run(r, c.ios, nretry, &s->faults, wdone, &c);
    }
    if (c.failed > 1)
        mc_warn(DISK_COMP, "record writes failed", "path=%s failed=%zu", s->path, c.failed);
    for (size_t i = from; i < to; i++)
        if (jobs[i].tried && jobs[i].err)
            zero_header(r, &jobs[i]);
out:
    disk_ring_window_release(c.buf, len, own);
    free(c.run);
    free(c.ios);
    free(c.first);
    free(c.count);
}
