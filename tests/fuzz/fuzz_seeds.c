/*
 * fuzz_seeds.c - writes the seed corpora of the fuzz targets: valid frames, so the fuzzer
 * starts from inputs that reach every handler instead of having to discover the framing.
 *
 *   fuzz_seeds DIR   writes DIR/master/<name> and DIR/peer/<name>
 *
 * master: one file per method (a plausible request) and one "session" file that mounts a
 * segment and runs Put / Get / Exist / Remove / batch forms / admin queries in order, so later
 * handlers see real state. peer: each peer method against the fuzz target's segment (id 1:1,
 * epoch 7), in bounds and out of bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "common/wire.h"
#include "proto/master.pb-c.h"
#include "proto/peer.pb-c.h"

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            exit(1);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static uint64_t g_id = 1;

/* A frame with a protobuf body (peer: with the peer prefix and a payload). */
static void frame(struct buf *b, uint16_t method, const ProtobufCMessage *msg, bool peer,
                  const void *payload, size_t plen)
{
    size_t clen = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    size_t body = peer ? MC_WIRE_PEER_PREFIX + clen + plen : clen;
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, g_id++, 0, (uint32_t)body);
    mc_wire_encode_header(&h, hb);
    put(b, hb, sizeof(hb));
    if (peer) {
        uint8_t pre[4];
        mc_wire_put_u32(pre, (uint32_t)clen);
        put(b, pre, 4);
    }
    if (clen) {
        uint8_t *tmp = malloc(clen);
        protobuf_c_message_pack(msg, tmp);
        put(b, tmp, clen);
        free(tmp);
    }
    if (plen)
        put(b, payload, plen);
}

static void save(const char *dir, const char *sub, const char *name, struct buf *b)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->p, 1, b->n, f) != b->n) {
        perror(path);
        exit(1);
    }
    fclose(f);
    b->n = 0;
}

static Mc__Uuid g_client = MC__UUID__INIT, g_seg = MC__UUID__INIT;

/* The master requests, appended to b (all of them: the session) or one per file. */
static void master_frames(struct buf *b, const char *dir)
{
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = &g_seg;
    seg.name = "127.0.0.1:1";
    seg.endpoint = "127.0.0.1:1";
    seg.size = 64u << 20;
    seg.base_addr = 0x10000000;
    Mc__Segment *segs[1] = {&seg};
    char *keys[3] = {"k1", "k2", "k3"};
    uint64_t lens[3] = {4096, 100, 1};
    Mc__ReplicateConfig rc = MC__REPLICATE_CONFIG__INIT;
    rc.replica_num = 1;
    rc.with_soft_pin = 1;
    rc.group_id = "g";

#define EMIT(name, method, msg)                                                                    \
    do {                                                                                           \
        frame(b, method, &(msg).base, false, NULL, 0);                                             \
        if (dir) {                                                                                 \
            save(dir, "master", name, b);                                                          \
        }                                                                                          \
    } while (0)

    Mc__ServiceReadyRequest sr = MC__SERVICE_READY_REQUEST__INIT;
    EMIT("service_ready", MC_METHOD_SERVICE_READY, sr);
    Mc__PingRequest ping = MC__PING_REQUEST__INIT;
    ping.client_id = &g_client;
    EMIT("ping", MC_METHOD_PING, ping);
    Mc__MountSegmentRequest ms = MC__MOUNT_SEGMENT_REQUEST__INIT;
    ms.client_id = &g_client;
    ms.segment = &seg;
    EMIT("mount_segment", MC_METHOD_MOUNT_SEGMENT, ms);
    Mc__ReMountSegmentRequest rms = MC__RE_MOUNT_SEGMENT_REQUEST__INIT;
    rms.client_id = &g_client;
    rms.n_segments = 1;
    rms.segments = segs;
    EMIT("remount_segment", MC_METHOD_REMOUNT_SEGMENT, rms);
    Mc__PutStartRequest ps = MC__PUT_START_REQUEST__INIT;
    ps.client_id = &g_client;
    ps.key = "k0";
    ps.value_length = 4096;
    ps.config = &rc;
    EMIT("put_start", MC_METHOD_PUT_START, ps);
    Mc__PutEndRequest pe = MC__PUT_END_REQUEST__INIT;
    pe.client_id = &g_client;
    pe.key = "k0";
    pe.crc32c = 0x12345678;
    pe.crc_valid = 1;
    EMIT("put_end", MC_METHOD_PUT_END, pe);
    Mc__BatchPutStartRequest bps = MC__BATCH_PUT_START_REQUEST__INIT;
    bps.client_id = &g_client;
    bps.n_keys = 3;
    bps.keys = keys;
    bps.n_value_lengths = 3;
    bps.value_lengths = lens;
    EMIT("batch_put_start", MC_METHOD_BATCH_PUT_START, bps);
    Mc__PutEndItem it[3] = {MC__PUT_END_ITEM__INIT, MC__PUT_END_ITEM__INIT, MC__PUT_END_ITEM__INIT};
    Mc__PutEndItem *its[3] = {&it[0], &it[1], &it[2]};
    for (int i = 0; i < 3; i++)
        it[i].key = keys[i];
    Mc__BatchPutEndRequest bpe = MC__BATCH_PUT_END_REQUEST__INIT;
    bpe.client_id = &g_client;
    bpe.n_items = 2;
    bpe.items = its;
    EMIT("batch_put_end", MC_METHOD_BATCH_PUT_END, bpe);
    Mc__BatchPutRevokeRequest bpr = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
    bpr.client_id = &g_client;
    bpr.n_keys = 1;
    bpr.keys = &keys[2];
    EMIT("batch_put_revoke", MC_METHOD_BATCH_PUT_REVOKE, bpr);
    Mc__GetReplicaListRequest g = MC__GET_REPLICA_LIST_REQUEST__INIT;
    g.key = "k0";
    g.client_id = &g_client;
    EMIT("get_replica_list", MC_METHOD_GET_REPLICA_LIST, g);
    Mc__BatchGetReplicaListRequest bg = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    bg.n_keys = 3;
    bg.keys = keys;
    EMIT("batch_get_replica_list", MC_METHOD_BATCH_GET_REPLICA_LIST, bg);
    Mc__ExistKeyRequest ek = MC__EXIST_KEY_REQUEST__INIT;
    ek.key = "k1";
    EMIT("exist_key", MC_METHOD_EXIST_KEY, ek);
    Mc__BatchExistKeyRequest bek = MC__BATCH_EXIST_KEY_REQUEST__INIT;
    bek.n_keys = 3;
    bek.keys = keys;
    EMIT("batch_exist_key", MC_METHOD_BATCH_EXIST_KEY, bek);
    Mc__QueryKeyRequest qk = MC__QUERY_KEY_REQUEST__INIT;
    qk.key = "k0";
    EMIT("query_key", MC_METHOD_QUERY_KEY, qk);
    Mc__ListSegmentsRequest ls = MC__LIST_SEGMENTS_REQUEST__INIT;
    EMIT("list_segments", MC_METHOD_LIST_SEGMENTS, ls);
    Mc__GetStatsRequest gs = MC__GET_STATS_REQUEST__INIT;
    EMIT("get_stats", MC_METHOD_GET_STATS, gs);
    Mc__PutRevokeRequest pr = MC__PUT_REVOKE_REQUEST__INIT;
    pr.client_id = &g_client;
    pr.key = "k2";
    EMIT("put_revoke", MC_METHOD_PUT_REVOKE, pr);
    Mc__RemoveRequest rm = MC__REMOVE_REQUEST__INIT;
    rm.key = "k0";
    rm.force = 1;
    EMIT("remove", MC_METHOD_REMOVE, rm);
    Mc__BatchRemoveRequest brm = MC__BATCH_REMOVE_REQUEST__INIT;
    brm.n_keys = 2;
    brm.keys = keys;
    EMIT("batch_remove", MC_METHOD_BATCH_REMOVE, brm);
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.force = 1;
    EMIT("remove_all", MC_METHOD_REMOVE_ALL, ra);
    Mc__UnmountSegmentRequest us = MC__UNMOUNT_SEGMENT_REQUEST__INIT;
    us.client_id = &g_client;
    us.segment_id = &g_seg;
    EMIT("unmount_segment", MC_METHOD_UNMOUNT_SEGMENT, us);
#undef EMIT
}

static void peer_frames(const char *dir)
{
    struct buf b = {0};
    static uint8_t data[8192];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)i;
    Mc__Uuid id = MC__UUID__INIT;
    id.hi = 1;
    id.lo = 1;
    Mc__PeerWriteRequest w = MC__PEER_WRITE_REQUEST__INIT;
    w.segment_id = &id;
    w.offset = 100;
    w.length = 4096;
    w.mount_epoch = 7;
    frame(&b, MC_METHOD_PEER_WRITE, &w.base, true, data, 4096);
    save(dir, "peer", "write", &b);
    w.offset = (64u << 10) - 10; /* past the end */
    frame(&b, MC_METHOD_PEER_WRITE, &w.base, true, data, 4096);
    save(dir, "peer", "write_oob", &b);
    Mc__PeerReadRequest r = MC__PEER_READ_REQUEST__INIT;
    r.segment_id = &id;
    r.offset = 0;
    r.length = 8192;
    r.mount_epoch = 7;
    frame(&b, MC_METHOD_PEER_READ, &r.base, true, NULL, 0);
    save(dir, "peer", "read", &b);
    Mc__PeerSlice sl[2] = {MC__PEER_SLICE__INIT, MC__PEER_SLICE__INIT};
    Mc__PeerSlice *sls[2] = {&sl[0], &sl[1]};
    for (int i = 0; i < 2; i++) {
        sl[i].segment_id = &id;
        sl[i].offset = (uint64_t)i * 1000;
        sl[i].length = 512;
        sl[i].mount_epoch = 7;
    }
    Mc__PeerBatchWriteRequest bw = MC__PEER_BATCH_WRITE_REQUEST__INIT;
    bw.n_slices = 2;
    bw.slices = sls;
    frame(&b, MC_METHOD_PEER_BATCH_WRITE, &bw.base, true, data, 1024);
    save(dir, "peer", "batch_write", &b);
    Mc__PeerBatchReadRequest br = MC__PEER_BATCH_READ_REQUEST__INIT;
    br.n_slices = 2;
    br.slices = sls;
    frame(&b, MC_METHOD_PEER_BATCH_READ, &br.base, true, NULL, 0);
    save(dir, "peer", "batch_read", &b);
    /* a session: write, read back, batch forms, a stale epoch */
    frame(&b, MC_METHOD_PEER_WRITE, &w.base, true, data, 4096);
    w.offset = 0;
    frame(&b, MC_METHOD_PEER_WRITE, &w.base, true, data, 4096);
    frame(&b, MC_METHOD_PEER_READ, &r.base, true, NULL, 0);
    frame(&b, MC_METHOD_PEER_BATCH_WRITE, &bw.base, true, data, 1024);
    frame(&b, MC_METHOD_PEER_BATCH_READ, &br.base, true, NULL, 0);
    r.mount_epoch = 6;
    frame(&b, MC_METHOD_PEER_READ, &r.base, true, NULL, 0);
    save(dir, "peer", "session", &b);
    free(b.p);
}

/* disk: real extents written by the store (values, an overwrite, a tombstone). */
static void disk_seeds(const char *dir)
{
    char tmp[64] = "/tmp/mc_fuzz_seeds.XXXXXX";
    if (!mkdtemp(tmp))
        exit(1);
    struct mc_disk_store_config cfg = {.path = tmp, .capacity = 64u << 20, .extent_size = 1u << 20};
    struct mc_disk_store *s = NULL;
    char err[256];
    if (mc_disk_store_open(&cfg, &s, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_seeds: %s\n", err);
        exit(1);
    }
    static uint8_t val[10000];
    for (size_t i = 0; i < sizeof(val); i++)
        val[i] = (uint8_t)(i * 7);
    const char *keys[3] = {"a", "key/with/longer/name", "c"};
    uint64_t lens[3] = {1, 5000, 10000};
    for (int i = 0; i < 3; i++) {
        struct mc_disk_put p = {.key = keys[i], .key_len = (uint32_t)strlen(keys[i]),
                                .version = 10 + (uint64_t)i, .data = val, .len = lens[i]};
        p.crc = mc_crc32c(val, lens[i]);
        if (mc_disk_store_append(s, &p, 1, NULL) != 0)
            exit(1);
    }
    struct mc_disk_put again = {.key = "a", .key_len = 1, .version = 20, .data = val, .len = 3};
    again.crc = mc_crc32c(val, 3);
    mc_disk_store_append(s, &again, 1, NULL);
    uint32_t klen = 1;
    mc_disk_store_remove(s, &keys[2], &klen, 1, NULL);
    mc_disk_store_close(s);
    char src[128], dst[512];
    snprintf(src, sizeof(src), "%s/0000000000000001.ext", tmp);
    snprintf(dst, sizeof(dst), "%s/disk/extent", dir);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out)
        exit(1);
    char b[4096];
    for (size_t n; (n = fread(b, 1, sizeof(b), in)) > 0;)
        fwrite(b, 1, n, out);
    fclose(in);
    fclose(out);
    unlink(src);
    rmdir(tmp);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    g_client.hi = 0xc1;
    g_client.lo = 0x1e;
    g_seg.hi = 0x5e;
    g_seg.lo = 0x6;
    struct buf b = {0};
    master_frames(&b, argv[1]); /* one file per method */
    master_frames(&b, NULL);    /* and all of them in one stream */
    save(argv[1], "master", "session", &b);
    free(b.p);
    peer_frames(argv[1]);
    disk_seeds(argv[1]);
    return 0;
}
