/*
 * disk_format.c - the LOCAL_DISK on-disk format (layout in disk_store.h), little-endian.
 *
 * Extent superblock, block 0 of every extent file (format 3; format 2 is the same with byte 28
 * zero and a record unit of 4 KiB):
 *   0 magic "MCDX" u32 | 4 format u16 | 6 zero u16 | 8 extent id u64 | 16 nonce u64 |
 *   24 flags u32 | 28 record unit u32 (512) | 32 zero (28 bytes) | 60 crc u32 (CRC32C
 *   of bytes 0..59); the rest of the block is zero. Flags: DISK_SB_RECYCLED (1): the file held an
 * older extent, whose stale bytes follow the records (a scan does not count them as damage when
 * they run to the end). Record header (the extent's format), at a record-unit boundary after the
 * superblock: 0 magic "MCDR" u32 | 4 format u16 | 6 flags u16 | 8 key_len u32 | 12 value_crc u32 |
 *   16 value_len u64 | 24 version u64 | 32 extent id u64 | 40 offset u64 | 48 nonce u64 |
 *   56 zero u32 | 60 hdr_crc u32
 * hdr_crc is the CRC32C of bytes 0..59 followed by the key, so a flipped bit in the header or
 * the key is caught. A header names its own extent, offset and the extent's random nonce: a
 * header image inside a value (or copied from elsewhere) cannot verify where it lies. Decoding
 * treats the bytes as untrusted: every length is bounded.
 * Format 1 (a 48-byte header, no superblock, tombstones) is not read any more; a superblock of
 * a format above 3 (a newer version's) is recognised and refused by name (disk_recover.c).
 */
#include <endian.h>
#include <string.h>

#include "client/disk_internal.h"
#include "common/crc32c.h"

static void put16(unsigned char *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static void put32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static void put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static uint16_t get16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}
static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

void disk_sb_encode(void *blk, uint64_t id, uint64_t nonce, uint32_t flags, uint32_t align)
{
    unsigned char *p = blk;
    uint16_t fmt = disk_format_for(align);
    memset(p, 0, MC_DISK_BLOCK);
    put32(p + 0, DISK_SB_MAGIC);
    put16(p + 4, fmt);
    put64(p + 8, id);
    put64(p + 16, nonce);
    put32(p + 24, flags);
    if (fmt != DISK_FORMAT_4K)
        put32(p + 28, align);
    put32(p + 60, mc_crc32c(p, 60));
}

int disk_sb_decode(const void *blk, uint64_t *id, uint64_t *nonce, uint32_t *flags, uint32_t *align,
                   uint32_t *format)
{
    const unsigned char *p = blk;
    uint16_t fmt = get16(p + 4);
    *format = fmt;
    if (get32(p) == DISK_MAGIC)
        return fmt == 1 ? -2 : -1; /* a format-1 record at offset 0 */
    if (get32(p) != DISK_SB_MAGIC || mc_crc32c(p, 60) != get32(p + 60))
        return -1;
    if (fmt != DISK_FORMAT && fmt != DISK_FORMAT_4K)
        return fmt > DISK_FORMAT ? -3 : -1;
    uint32_t a = get32(p + 28);
    if (fmt == DISK_FORMAT_4K ? a != 0 : a != DISK_MIN_ALIGN)
        return -1; /* (a 4 KiB unit is written as format 2) */
    *align = fmt == DISK_FORMAT_4K ? MC_DISK_BLOCK : a;
    *id = get64(p + 8);
    *nonce = get64(p + 16);
    *flags = get32(p + 24);
    return *flags & ~DISK_SB_RECYCLED ? -1 : 0; /* a flag this version does not know */
}

void disk_hdr_encode(void *blk, const struct disk_hdr *h, const char *key, uint32_t align)
{
    unsigned char *p = blk;
    size_t n = disk_hdr_block(align, h->key_len);
    memset(p, 0, n);
    put32(p + 0, DISK_MAGIC);
    put16(p + 4, disk_format_for(align));
    put16(p + 6, (uint16_t)h->flags);
    put32(p + 8, h->key_len);
    put32(p + 12, h->value_crc);
    put64(p + 16, h->value_len);
    put64(p + 24, h->version);
    put64(p + 32, h->ext_id);
    put64(p + 40, h->off);
    put64(p + 48, h->nonce);
    memcpy(p + DISK_HDR_SIZE, key, h->key_len);
    uint32_t crc = mc_crc32c(p, 60);
    crc = mc_crc32c_extend(crc, key, h->key_len);
    put32(p + 60, crc);
}

int disk_hdr_decode(const void *blk, size_t avail, struct disk_hdr *h, uint32_t align)
{
    const unsigned char *p = blk;
    if (avail < DISK_HDR_SIZE || get32(p) != DISK_MAGIC || get16(p + 4) != disk_format_for(align))
        return -1;
    uint32_t flags = get16(p + 6);
    uint32_t key_len = get32(p + 8);
    uint64_t value_len = get64(p + 16);
    if (flags & ~DISK_FLAG_DEAD)
        return -1;
    if (key_len == 0 || key_len > MC_DISK_MAX_KEY_LEN || DISK_HDR_SIZE + (size_t)key_len > avail)
        return -1;
    if (value_len > DISK_MAX_VALUE || get32(p + 56) != 0)
        return -1;
    uint32_t crc = mc_crc32c(p, 60);
    crc = mc_crc32c_extend(crc, p + DISK_HDR_SIZE, key_len);
    if (crc != get32(p + 60))
        return -1;
    h->flags = flags;
    h->key_len = key_len;
    h->value_len = value_len;
    h->version = get64(p + 24);
    h->value_crc = get32(p + 12);
    h->ext_id = get64(p + 32);
    h->off = get64(p + 40);
    h->nonce = get64(p + 48);
    return 0;
}
