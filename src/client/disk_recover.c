/*
 * disk_recover.c - the LOCAL_DISK store's start-up scan (design in disk_store.h).
 *
 * Extents are scanned in id order and each one from its superblock on, which is append order,
 * so applying records as they are met rebuilds the index exactly: a record replaces the
 * indexed one unless that has a higher version, and the loser is marked dead on disk right away
 * (a crash can leave both alive: the mark had not been written yet). Records marked dead are
 * skipped by their length. Every live record is verified before it is applied: the header CRC
 * (header + key), that the header names this extent, this offset and this extent's nonce,
 * lengths that fit the file, then the value CRC (read in 1 MiB aligned chunks).
 *
 * Damage: a record with a good header but a bad value is skipped by its length and counted. A
 * bad header cannot be trusted for a length, so the scan moves on one record unit (the extent's
 * alignment: 512 B in format 3, 4 KiB in format 2) at a time until a unit verifies as a header
 * again (records always start on a unit boundary; runs of zero units are crossed a chunk at a
 * time); the bytes it steps through are a value's, so a header image stored inside a value never
 * verifies (it would have to name this very offset and the extent's random nonce). That region
 * counts as one dropped record unless it starts with a zero unit (an unused hole left by a
 * failed append). Whatever follows the last good record (a torn append) is counted and cut off with
 * ftruncate. An extent with no live record is deleted.
 *
 * A reused extent (superblock flag RECYCLED, see disk_store.h "Space") holds the stale bytes of
 * the file's older extent past its records: a bad run that reaches the end there is not counted
 * as dropped (it cannot verify: other extent id and nonce); one followed by a good record is.
 * Spare files ("<id>.spr") left by a crash are deleted.
 *
 * An extent whose block 0 is not a superblock of format 2 or 3 is never read: one of format 1
 * (its block 0 is an old record header), of a newer format (named in the log line) or with a
 * damaged superblock is logged and left on disk untouched (not adopted, not deleted); one
 * whose block 0 is all zero or missing (a crash right after creating it) is deleted. Reads here
 * are synchronous pread: start-up is one sequential pass.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/disk_internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define SCAN_CHUNK (1u << 20)

struct scan {
    struct mc_disk_store *s;
    struct disk_extent *x;
    uint64_t fsz;
    char *buf; /* SCAN_CHUNK bytes, aligned */
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
    ssize_t rc;
    do {
        rc = pread(fd, buf, len, (off_t)off);
    } while (rc < 0 && errno == EINTR);
    return rc == (ssize_t)len ? 0 : -1;
}

/* Reads and decodes the header at off. 0 when valid (a header of this extent at this offset)
 * and the record fits the file. */
static int read_header(struct scan *sc, uint64_t off, struct disk_hdr *h, int *zero_block)
{
    uint32_t u = sc->x->align;
    *zero_block = 0;
    if (read_full(sc->x->fd, sc->buf, u, off) != 0)
        return -1;
    int zero = 1;
    for (size_t i = 0; i < u && zero; i++)
        zero = sc->buf[i] == 0;
    *zero_block = zero;
    uint32_t key_len;
    memcpy(&key_len, sc->buf + 8, 4);
    uint64_t hb = disk_hdr_block(u, le32toh(key_len) <= MC_DISK_MAX_KEY_LEN ? le32toh(key_len) : 0);
    if (hb > u) {
        if (off + hb > sc->fsz || read_full(sc->x->fd, sc->buf, hb, off) != 0)
            return -1;
    }
    if (disk_hdr_decode(sc->buf, hb, h, u) != 0 || h->ext_id != sc->x->id || h->off != off ||
        h->nonce != sc->x->nonce)
        return -1;
    return off + disk_record_size(u, h->key_len, h->value_len) <= sc->fsz ? 0 : 1;
}

static int value_ok(struct scan *sc, uint64_t voff, const struct disk_hdr *h)
{
    uint64_t left = h->value_len, padded = disk_pad(sc->x->align, h->value_len);
    uint32_t crc = 0;
    for (uint64_t done = 0; done < padded;) {
        size_t n = padded - done < SCAN_CHUNK ? padded - done : SCAN_CHUNK;
        if (read_full(sc->x->fd, sc->buf, n, voff + done) != 0)
            return 0;
        size_t use = left < n ? left : n;
        crc = mc_crc32c_extend(crc, sc->buf, use);
        left -= use;
        done += n;
    }
    return crc == h->value_crc;
}

/* From a zero unit at off: the offset of the first unit after it that is not all zero (or the
 * end), read a chunk at a time: the preallocated, never written end of an extent is crossed
 * without a read per unit. No record starts with a zero unit (its magic). */
static uint64_t skip_zeros(struct scan *sc, uint64_t off)
{
    uint32_t u = sc->x->align;
    off += u;
    while (off + u <= sc->fsz) {
        uint64_t n = sc->fsz - off < SCAN_CHUNK ? (sc->fsz - off) / u * u : SCAN_CHUNK;
        if (read_full(sc->x->fd, sc->buf, n, off) != 0)
            return off; /* the per-unit path reports it */
        for (uint64_t i = 0; i < n; i += u) {
            const char *p = sc->buf + i;
            if (p[0] != 0 || memcmp(p, p + 1, u - 1) != 0)
                return off + i;
        }
        off += n;
    }
    return off;
}

/* Marks a record that lost to another one of its key dead on disk. */
static void mark_dead(struct mc_disk_store *s, struct disk_extent *x, uint64_t off, const char *key,
                      uint32_t key_len, uint64_t version, uint32_t crc, uint64_t value_len)
{
    struct disk_kill k = {.x = x,
                          .off = off,
                          .key = key,
                          .key_len = key_len,
                          .version = version,
                          .crc = crc,
                          .value_len = value_len};
    int rc = disk_kill_sync(&k);
    if (rc != 0) {
        x->unkilled++;
        s->kill_failures++;
        mc_error(DISK_COMP, "recovery cannot mark superseded record dead",
                 "path=%s extent=%" PRIu64 " off=%" PRIu64 " err=%d", s->path, x->id, off, -rc);
    }
}

/* Takes x off the extent list (its file stays). */
static void list_remove(struct mc_disk_store *s, struct disk_extent *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        s->oldest = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        s->newest = x->prev;
    if (x->slot >= 0)
        s->slot_fds[x->slot] = -1;
    s->nextents--;
}

static int apply(struct mc_disk_store *s, struct disk_extent *x, uint64_t off,
                 const struct disk_hdr *h, const char *key)
{
    struct disk_entry *e = disk_index_find(&s->idx, key, h->key_len);
    if (e && e->version > h->version) {
        /* an older version appended later (it lost at commit, the mark did not make it) */
        mark_dead(s, x, off, key, h->key_len, h->version, h->value_crc, h->value_len);
        return 0;
    }
    struct disk_entry *ne = disk_entry_new(key, h->key_len);
    if (!ne)
        return -1;
    ne->off = off;
    ne->value_len = h->value_len;
    ne->version = h->version;
    ne->crc = h->value_crc;
    if (e) {
        mark_dead(s, e->ext, e->off, e->key, e->key_len, e->version, e->crc, e->value_len);
        disk_entry_detach_locked(s, e);
        disk_index_unlink(&s->idx, e);
        free(e);
    }
    disk_entry_attach_locked(s, ne, x);
    disk_index_insert(&s->idx, ne);
    return 0;
}

/* Reads x's superblock. 0: fine (x->nonce, x->align set); 1: empty (nothing was ever written:
 * delete); -2: format 1; -3: a newer format (*format); -1: damaged. */
static int read_superblock(struct scan *sc, uint32_t *format)
{
    if (sc->fsz < MC_DISK_BLOCK)
        return 1;
    if (read_full(sc->x->fd, sc->buf, MC_DISK_BLOCK, 0) != 0)
        return -1;
    uint64_t id = 0, nonce = 0;
    uint32_t flags = 0, align = 0;
    int rc = disk_sb_decode(sc->buf, &id, &nonce, &flags, &align, format);
    if (rc == 0 && id == sc->x->id) {
        sc->x->nonce = nonce;
        sc->x->align = align;
        sc->x->recycled = (flags & DISK_SB_RECYCLED) != 0;
        return 0;
    }
    if (rc == -2 || rc == -3)
        return rc;
    for (size_t i = 0; i < MC_DISK_BLOCK; i++)
        if (sc->buf[i] != 0)
            return -1;
    return 1;
}

/* Scans one extent; returns the length to keep (end of the last good record). */
static int scan_extent(struct scan *sc, uint64_t *keep)
{
    struct mc_disk_store *s = sc->s;
    uint64_t off = MC_DISK_BLOCK, good_end = MC_DISK_BLOCK, bad_start = 0;
    uint32_t u = sc->x->align;
    int in_bad = 0, torn = 0, bad_zero = 0; /* bad_zero: the bad run is all zero blocks */
    /* In a reused file, a bad run is damage only when a good record follows it: one that runs
     * to the end is the older extent's stale bytes, so its count waits for its end. */
    int recycled = sc->x->recycled, bad_pending = 0;
    char *key = malloc(MC_DISK_MAX_KEY_LEN);
    if (!key)
        return -1;
    while (off + u <= sc->fsz) {
        struct disk_hdr h;
        int zero;
        int hr = read_header(sc, off, &h, &zero);
        if (hr == 0) {
            memcpy(key, sc->buf + DISK_HDR_SIZE, h.key_len);
            uint64_t rec = disk_record_size(u, h.key_len, h.value_len);
            if (in_bad) {
                s->dropped_bytes += off - bad_start;
                in_bad = 0;
                if (bad_pending) {
                    s->dropped_records++;
                    mc_warn(DISK_COMP, "recovery skipped damaged record",
                            "extent=%" PRIu64 " off=%" PRIu64, sc->x->id, bad_start);
                }
                bad_pending = 0;
            }
            if (h.flags & DISK_FLAG_DEAD) {
                good_end = off + rec; /* superseded or removed: nothing to verify */
            } else if (value_ok(sc, off + disk_hdr_block(u, h.key_len), &h)) {
                if (apply(s, sc->x, off, &h, key) != 0) {
                    free(key);
                    return -1;
                }
                good_end = off + rec;
            } else {
                s->dropped_records++;
                s->dropped_bytes += rec;
                mc_warn(DISK_COMP, "recovery dropped record with bad value CRC",
                        "extent=%" PRIu64 " off=%" PRIu64, sc->x->id, off);
            }
            off += rec;
            continue;
        }
        if (hr == 1) {
            /* A valid header whose record runs past the end: a torn append. */
            torn = 1;
            break;
        }
        if (in_bad && !zero)
            bad_zero = 0;
        if (!in_bad) {
            in_bad = 1;
            bad_start = off;
            bad_zero = zero;
            if (!zero && recycled) {
                bad_pending = 1;
            } else if (!zero) {
                s->dropped_records++;
                mc_warn(DISK_COMP, "recovery skipped damaged record",
                        "extent=%" PRIu64 " off=%" PRIu64, sc->x->id, off);
            }
        }
        off = zero ? skip_zeros(sc, off) : off + u;
    }
    /* zeros up to the end are the preallocated, never written part of the extent (see
     * extent_create_locked): not a loss */
    if (in_bad && !bad_zero && !recycled)
        s->dropped_bytes += off - bad_start;
    if (off < sc->fsz) {
        /* A torn record, or a fragment of one shorter than a block. */
        s->dropped_bytes += sc->fsz - off;
        if (torn || !in_bad) {
            s->dropped_records++;
            mc_warn(DISK_COMP, "recovery dropped torn tail",
                    "extent=%" PRIu64 " off=%" PRIu64 " bytes=%" PRIu64, sc->x->id, off,
                    sc->fsz - off);
        }
    }
    *keep = good_end;
    free(key);
    return 0;
}

int disk_recover(struct mc_disk_store *s, char *err, size_t errlen)
{
    int rc = MC_OK;
    uint64_t *ids = NULL;
    size_t nids = 0, cap = 0;
    struct scan sc = {.s = s};
    int dfd = dup(s->dir_fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        if (err)
            snprintf(err, errlen, "%s: cannot list directory", s->path);
        return MC_ERR_FILE_OPEN_FAIL;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (strlen(n) == 20 && strcmp(n + 16, ".spr") == 0 && strspn(n, "0123456789abcdef") == 16) {
            unlinkat(s->dir_fd, n, 0); /* a spare left by a crash: holds nothing */
            continue;
        }
        if (strlen(n) != 20 || strcmp(n + 16, ".ext") != 0)
            continue;
        char *end;
        uint64_t id = strtoull(n, &end, 16);
        if (end != n + 16)
            continue;
        if (nids == cap) {
            cap = cap ? cap * 2 : 64;
            uint64_t *ni = realloc(ids, cap * sizeof(*ids));
            if (!ni) {
                rc = MC_ERR_INTERNAL_ERROR;
                goto out;
            }
            ids = ni;
        }
        ids[nids++] = id;
    }
    if (nids > 1)
        qsort(ids, nids, sizeof(*ids), cmp_u64);
    if (posix_memalign((void **)&sc.buf, MC_DISK_BLOCK, SCAN_CHUNK) != 0) {
        sc.buf = NULL;
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    disk_lock(s);
    for (size_t i = 0; i < nids; i++) {
        int fd = disk_open_extent_fd(s, ids[i], 0);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            if (err)
                snprintf(err, errlen, "%s: cannot open extent %016" PRIx64 " (%s)", s->path, ids[i],
                         strerror(errno));
            if (fd >= 0)
                close(fd);
            rc = MC_ERR_FILE_OPEN_FAIL;
            break;
        }
        if (ids[i] >= s->next_extent_id)
            s->next_extent_id = ids[i] + 1;
        struct disk_extent *x = disk_extent_add_locked(s, ids[i], fd, 0);
        if (!x) {
            close(fd);
            rc = MC_ERR_INTERNAL_ERROR;
            break;
        }
        x->sealed = 1;
        sc.x = x;
        sc.fsz = (uint64_t)st.st_size;
        uint64_t keep = 0;
        uint32_t format = 0;
        int sb = read_superblock(&sc, &format);
        if (sb < 0) {
            mc_warn(DISK_COMP,
                    sb == -2   ? "extent of on-disk format 1 (no longer read), not adopted (left "
                                 "on disk)"
                    : sb == -3 ? "extent of an on-disk format newer than this version reads "
                                 "(written by a newer mooncake_client), not adopted (left on disk)"
                               : "extent with a damaged superblock, not adopted (left on disk)",
                    "path=%s extent=%016" PRIx64 " format=%u reads=%u,%u bytes=%" PRIu64, s->path,
                    x->id, format, DISK_FORMAT_4K, DISK_FORMAT, sc.fsz);
            s->skipped_extents++;
            list_remove(s, x);
            close(x->fd);
            free(x);
            continue;
        }
        if (sb == 1) {
            x->size = 0; /* created, never written: deleted below */
            continue;
        }
        if (scan_extent(&sc, &keep) != 0) {
            rc = MC_ERR_INTERNAL_ERROR;
            break;
        }
        if (keep < sc.fsz && ftruncate(fd, (off_t)keep) != 0)
            mc_warn(DISK_COMP, "cannot truncate extent", "path=%s extent=%" PRIu64 " err=%d",
                    s->path, x->id, errno);
        x->size = keep;
        s->bytes_used += keep;
    }
    /* Extents with no live record go away (what they hold is dead, damaged or superseded). */
    for (struct disk_extent *x = s->oldest, *nx; x; x = nx) {
        nx = x->next;
        if (x->nlive == 0) {
            s->bytes_used -= x->size;
            list_remove(s, x);
            close(x->fd);
            char name[32];
            snprintf(name, sizeof(name), "%016" PRIx64 ".ext", x->id);
            unlinkat(s->dir_fd, name, 0);
            free(x);
        }
    }
    s->files_gen++;
    disk_unlock(s);
    if (s->dropped_records)
        mc_warn(DISK_COMP, "recovery dropped damaged records",
                "path=%s records=%" PRIu64 " bytes=%" PRIu64, s->path, s->dropped_records,
                s->dropped_bytes);
out:
    closedir(d);
    free(ids);
    free(sc.buf);
    return rc;
}
