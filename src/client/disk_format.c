/*
 * disk_format.c - the LOCAL_DISK record header (layout in disk_store.h), little-endian:
 *   0 magic u32 | 4 format u16 | 6 flags u16 | 8 key_len u32 | 12 value_crc u32 |
 *   16 value_len u64 | 24 version u64 | 32 reserved (12 bytes, zero) | 44 hdr_crc u32
 * hdr_crc is the CRC32C of bytes 0..43 followed by the key, so a flipped bit in the header or
 * the key is caught. Decoding treats the bytes as untrusted: every length is bounded.
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

void disk_hdr_encode(void *blk, const struct disk_hdr *h, const char *key)
{
    unsigned char *p = blk;
    size_t n = disk_hdr_block(h->key_len);
    memset(p, 0, n);
    put32(p + 0, DISK_MAGIC);
    put16(p + 4, DISK_FORMAT);
    put16(p + 6, (uint16_t)h->flags);
    put32(p + 8, h->key_len);
    put32(p + 12, h->value_crc);
    put64(p + 16, h->value_len);
    put64(p + 24, h->version);
    memcpy(p + DISK_HDR_SIZE, key, h->key_len);
    uint32_t crc = mc_crc32c(p, 44);
    crc = mc_crc32c_extend(crc, key, h->key_len);
    put32(p + 44, crc);
}

int disk_hdr_decode(const void *blk, size_t avail, struct disk_hdr *h)
{
    const unsigned char *p = blk;
    if (avail < DISK_HDR_SIZE || get32(p) != DISK_MAGIC || get16(p + 4) != DISK_FORMAT)
        return -1;
    uint32_t flags = get16(p + 6);
    uint32_t key_len = get32(p + 8);
    uint64_t value_len = get64(p + 16);
    if (flags & ~DISK_FLAG_TOMBSTONE)
        return -1;
    if (key_len == 0 || key_len > MC_DISK_MAX_KEY_LEN || DISK_HDR_SIZE + (size_t)key_len > avail)
        return -1;
    if (value_len > DISK_MAX_VALUE || ((flags & DISK_FLAG_TOMBSTONE) && value_len != 0))
        return -1;
    for (int i = 32; i < 44; i++)
        if (p[i] != 0)
            return -1;
    uint32_t crc = mc_crc32c(p, 44);
    crc = mc_crc32c_extend(crc, p + DISK_HDR_SIZE, key_len);
    if (crc != get32(p + 44))
        return -1;
    h->flags = flags;
    h->key_len = key_len;
    h->value_len = value_len;
    h->version = get64(p + 24);
    h->value_crc = get32(p + 12);
    return 0;
}
