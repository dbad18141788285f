/*
 * test_master_service_encode.c - the read path's hand-written wire code against protobuf-c.
 *
 * Replies: GetReplicaListResponse and BatchGetReplicaListResponse are written by hand from the
 * core's results (service_encode.c). For fixed cases (not found, no replica, one memory replica
 * over TCP and over RDMA, a disk replica, eight mixed replicas, empty strings, zero ids, all
 * 64-bit values at their largest) and for random results, the bytes must equal what protobuf-c's
 * generated packer makes from the view the adapters used to build (mc_svc_get_fill), and the
 * generated unpacker must read them back field by field as the result says.
 *
 * PutStartResponse is written by hand too (mc_svc_put_start_reply_*): fixed and random results
 * against protobuf-c's packing of mc_svc_put_start_fill's view, and decoded back.
 *
 * Requests: GetReplicaListRequest and ExistKeyRequest are read in place
 * (mc_svc_decode_key_request). Valid bodies packed by protobuf-c, then with unknown fields of
 * every wire type, repeated keys and client ids, and then mutated at random (bytes flipped,
 * cut, inserted), must be accepted or refused exactly as the bounded protobuf-c decode the
 * handlers used before (mc_pb_unpack_bounded) accepts or refuses them, with the same key (a key
 * holding a NUL: length 0, as the NUL scan made it) and the same client id.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/pb_budget.h"
#include "common/pb_varint.h"
#include "master/service_internal.h"
#include "master/service_wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "put_end_diff.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* A value of a random width: zero, small, mid or all 64 bits (each varint length is met). */
static uint64_t rnd_val(void)
{
    switch (rnd() % 5) {
    case 0:
        return 0;
    case 1:
        return rnd() % 128;
    case 2:
        return rnd() % 100000;
    case 3:
        return UINT64_MAX;
    default:
        return rnd();
    }
}

static void rnd_str(char *s, size_t cap)
{
    size_t n = rnd() % 4 == 0 ? 0 : 1 + rnd() % (cap - 1);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)('a' + rnd() % 26);
    s[n] = '\0';
}

static void rnd_replica(struct mc_replica_desc *r)
{
    memset(r, 0, sizeof(*r));
    r->id = rnd_val();
    r->status = (uint8_t)(rnd() % 6);
    r->size = rnd_val();
    if (rnd() % 3 == 0) {
        r->type = MC_REPLICA_TYPE_LOCAL_DISK;
        r->u.disk.holder.hi = rnd_val();
        r->u.disk.holder.lo = rnd_val();
        rnd_str(r->u.disk.endpoint, sizeof(r->u.disk.endpoint));
    } else {
        r->type = MC_REPLICA_TYPE_MEMORY;
        r->u.mem.segment_id.hi = rnd_val();
        r->u.mem.segment_id.lo = rnd_val();
        rnd_str(r->u.mem.segment_name, sizeof(r->u.mem.segment_name));
        r->u.mem.offset = rnd_val();
        r->u.mem.addr = rnd_val();
        r->u.mem.mount_epoch = rnd_val();
        rnd_str(r->u.mem.endpoint, sizeof(r->u.mem.endpoint));
        strcpy(r->u.mem.protocol, rnd() % 2 ? "rdma" : "tcp");
        r->u.mem.rkey = (uint32_t)rnd_val();
    }
}

static void rnd_result(struct mc_get_result *g)
{
    memset(g, 0, sizeof(*g));
    g->version = rnd_val();
    g->size = rnd_val();
    g->crc32c = (uint32_t)rnd_val();
    g->has_crc = rnd() % 2;
    g->lease_ttl_ms = rnd_val();
    g->nreplicas = (uint32_t)(rnd() % (MC_MAX_REPLICAS + 1));
    for (uint32_t i = 0; i < g->nreplicas; i++)
        rnd_replica(&g->replicas[i]);
}

static void check_replicas(Mc__ReplicaDescriptor *const *reps, const struct mc_replica_desc *src,
                           uint32_t n);

/* The generated decoder's reading of the hand-written bytes, field by field. */
static void check_decoded(const Mc__GetReplicaListResponse *r, int status,
                          const struct mc_get_result *g)
{
    assert_int_equal(r->status, status);
    if (status != 0) {
        assert_int_equal(r->n_replicas, 0);
        assert_int_equal(r->size, 0);
        return;
    }
    assert_int_equal(r->n_replicas, g->nreplicas);
    assert_true(r->lease_ttl_ms == g->lease_ttl_ms);
    assert_true(r->size == g->size);
    assert_true(r->version == g->version);
    assert_int_equal(r->crc32c, g->crc32c);
    assert_int_equal(!!r->crc_valid, !!g->has_crc);
    check_replicas(r->replicas, g->replicas, g->nreplicas);
}

/* The generated decoder's replicas against the ones they were written from. */
static void check_replicas(Mc__ReplicaDescriptor *const *reps, const struct mc_replica_desc *src,
                           uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const struct mc_replica_desc *s = &src[i];
        const Mc__ReplicaDescriptor *d = reps[i];
        assert_true(d->id == s->id);
        assert_int_equal(d->status, s->status);
        if (s->type == MC_REPLICA_TYPE_LOCAL_DISK) {
            assert_int_equal(d->type, MC__REPLICA_TYPE__RT_LOCAL_DISK);
            assert_null(d->memory);
            assert_non_null(d->local_disk);
            assert_non_null(d->local_disk->holder);
            assert_true(d->local_disk->holder->hi == s->u.disk.holder.hi);
            assert_true(d->local_disk->holder->lo == s->u.disk.holder.lo);
            assert_string_equal(d->local_disk->endpoint, s->u.disk.endpoint);
            assert_true(d->local_disk->size == s->size);
        } else {
            assert_int_equal(d->type, MC__REPLICA_TYPE__RT_MEMORY);
            assert_null(d->local_disk);
            const Mc__MemoryLocation *m = d->memory;
            assert_non_null(m);
            assert_non_null(m->segment_id);
            assert_true(m->segment_id->hi == s->u.mem.segment_id.hi);
            assert_true(m->segment_id->lo == s->u.mem.segment_id.lo);
            assert_string_equal(m->segment_name, s->u.mem.segment_name);
            assert_true(m->offset == s->u.mem.offset);
            assert_true(m->size == s->size);
            assert_string_equal(m->endpoint, s->u.mem.endpoint);
            assert_int_equal(m->protocol, strcmp(s->u.mem.protocol, "rdma") == 0
                                              ? MC__PROTOCOL__PROTOCOL_RDMA
                                              : MC__PROTOCOL__PROTOCOL_TCP);
            assert_true(m->remote_addr == s->u.mem.addr);
            assert_int_equal(m->rkey, s->u.mem.rkey);
            assert_true(m->mount_epoch == s->u.mem.mount_epoch);
        }
    }
}

/* One reply both ways: the same bytes, read back as the result says. */
static void check_one(int status, const struct mc_get_result *g)
{
    struct mc_svc_get_plan pl;
    mc_svc_get_reply_plan(status, g, &pl);
    uint8_t *hand = malloc(pl.size + 1);
    assert_non_null(hand);
    assert_ptr_equal(mc_svc_get_reply_put(hand, &pl), hand + pl.size);

    Mc__GetReplicaListResponse v;
    struct mc_svc_pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaDescriptor *ptrs[MC_MAX_REPLICAS];
    mc_svc_get_fill(status, g, &v, reps, ptrs);
    size_t n = protobuf_c_message_get_packed_size(&v.base);
    uint8_t *gen = malloc(n + 1);
    assert_non_null(gen);
    assert_int_equal(protobuf_c_message_pack(&v.base, gen), n);
    assert_int_equal(pl.size, n);
    assert_memory_equal(hand, gen, n);

    Mc__GetReplicaListResponse *r = mc__get_replica_list_response__unpack(NULL, pl.size, hand);
    assert_non_null(r);
    check_decoded(r, status, g);
    mc__get_replica_list_response__free_unpacked(r, NULL);
    free(hand);
    free(gen);
}

static void mem_replica(struct mc_replica_desc *r, uint64_t id, const char *prot)
{
    memset(r, 0, sizeof(*r));
    r->id = id;
    r->type = MC_REPLICA_TYPE_MEMORY;
    r->status = 3; /* COMPLETE */
    r->size = 4096;
    r->u.mem.segment_id = (struct mc_id){7, 9};
    strcpy(r->u.mem.segment_name, "seg-1");
    r->u.mem.offset = 1u << 20;
    r->u.mem.addr = 0x7f0000100000ull;
    r->u.mem.mount_epoch = 3;
    strcpy(r->u.mem.endpoint, "10.0.0.1:17001");
    strcpy(r->u.mem.protocol, prot);
    r->u.mem.rkey = strcmp(prot, "rdma") == 0 ? 0x1234 : 0;
}

static void disk_replica(struct mc_replica_desc *r, uint64_t id)
{
    memset(r, 0, sizeof(*r));
    r->id = id;
    r->type = MC_REPLICA_TYPE_LOCAL_DISK;
    r->status = 3;
    r->size = 4096;
    r->u.disk.holder = (struct mc_id){0xabc, 0xdef};
    strcpy(r->u.disk.endpoint, "10.0.0.2:17002");
}

static void test_get_reply_cases(void **state)
{
    (void)state;
    static struct mc_get_result g;
    memset(&g, 0, sizeof(g));
    check_one(MC_ERR_OBJECT_NOT_FOUND, &g); /* not found: status alone */
    check_one(MC_ERR_REPLICA_IS_NOT_READY, &g);
    check_one(0, &g); /* found, nothing set: an empty message */
    g.size = 4096;
    g.version = 5;
    g.lease_ttl_ms = 5000;
    g.nreplicas = 1;
    mem_replica(&g.replicas[0], 1, "tcp");
    check_one(0, &g);
    mem_replica(&g.replicas[0], 1, "rdma");
    g.crc32c = 0xdeadbeef;
    g.has_crc = true;
    check_one(0, &g);
    disk_replica(&g.replicas[0], 2); /* disk only */
    check_one(0, &g);
    g.nreplicas = MC_MAX_REPLICAS; /* multi-replica, mixed */
    for (uint32_t i = 0; i < MC_MAX_REPLICAS; i++) {
        if (i % 3 == 2)
            disk_replica(&g.replicas[i], 10 + i);
        else
            mem_replica(&g.replicas[i], 10 + i, i % 2 ? "rdma" : "tcp");
    }
    check_one(0, &g);
    /* zero ids and empty strings: the uuid and the location are still written */
    memset(&g.replicas[0], 0, sizeof(g.replicas[0]));
    g.replicas[0].type = MC_REPLICA_TYPE_MEMORY;
    memset(&g.replicas[2], 0, sizeof(g.replicas[2]));
    g.replicas[2].type = MC_REPLICA_TYPE_LOCAL_DISK;
    check_one(0, &g);
    /* every 64-bit value at its largest (ten-byte varints) */
    g.size = g.version = g.lease_ttl_ms = UINT64_MAX;
    g.crc32c = UINT32_MAX;
    for (uint32_t i = 0; i < MC_MAX_REPLICAS; i++) {
        g.replicas[i].id = g.replicas[i].size = UINT64_MAX;
        if (g.replicas[i].type == MC_REPLICA_TYPE_MEMORY) {
            g.replicas[i].u.mem.offset = g.replicas[i].u.mem.addr = UINT64_MAX;
            g.replicas[i].u.mem.mount_epoch = UINT64_MAX;
            g.replicas[i].u.mem.segment_id = (struct mc_id){UINT64_MAX, UINT64_MAX};
            g.replicas[i].u.mem.rkey = UINT32_MAX;
        }
    }
    check_one(0, &g);
    /* a long segment name and endpoint (two-byte lengths) */
    memset(g.replicas[1].u.mem.segment_name, 'n', MC_SEGMENT_NAME_MAX - 1);
    g.replicas[1].u.mem.segment_name[MC_SEGMENT_NAME_MAX - 1] = '\0';
    memset(g.replicas[1].u.mem.endpoint, 'e', MC_ENDPOINT_MAX - 1);
    g.replicas[1].u.mem.endpoint[MC_ENDPOINT_MAX - 1] = '\0';
    check_one(0, &g);
    check_one(-1, &g); /* any non-zero status: nothing of g */
    check_one(INT32_MIN, &g);
}

static void test_get_reply_random(void **state)
{
    (void)state;
    static struct mc_get_result g;
    for (int i = 0; i < 3000; i++) {
        rnd_result(&g);
        int status = rnd() % 4 == 0 ? -(int)(rnd() % 1000) : 0;
        check_one(status, &g);
    }
}

/* PutStartResponse: the same bytes as protobuf-c packs from mc_svc_put_start_fill's view, read
 * back by the generated decoder as the result says. */
static void check_put_start(const struct mc_put_start_result *ps)
{
    struct mc_svc_put_start_plan pl;
    mc_svc_put_start_reply_plan(ps, &pl);
    uint8_t *hand = malloc(pl.size + 1);
    assert_non_null(hand);
    assert_ptr_equal(mc_svc_put_start_reply_put(hand, &pl), hand + pl.size);

    Mc__PutStartResponse v;
    struct mc_svc_pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaDescriptor *ptrs[MC_MAX_REPLICAS];
    mc_svc_put_start_fill(ps, &v, reps, ptrs);
    size_t n = protobuf_c_message_get_packed_size(&v.base);
    uint8_t *gen = malloc(n + 1);
    assert_non_null(gen);
    assert_int_equal(protobuf_c_message_pack(&v.base, gen), n);
    assert_int_equal(pl.size, n);
    assert_memory_equal(hand, gen, n);

    Mc__PutStartResponse *r = mc__put_start_response__unpack(NULL, pl.size, hand);
    assert_non_null(r);
    assert_true(r->version == ps->version);
    assert_int_equal(r->n_replicas, ps->nreplicas);
    check_replicas(r->replicas, ps->replicas, ps->nreplicas);
    mc__put_start_response__free_unpacked(r, NULL);
    free(hand);
    free(gen);
}

static void test_put_start_reply(void **state)
{
    (void)state;
    static struct mc_put_start_result ps;
    memset(&ps, 0, sizeof(ps));
    check_put_start(&ps); /* nothing set: an empty message */
    ps.version = 1;
    ps.nreplicas = 1;
    mem_replica(&ps.replicas[0], 1, "tcp");
    ps.replicas[0].status = 1; /* PROCESSING */
    check_put_start(&ps);
    mem_replica(&ps.replicas[0], 1, "rdma");
    check_put_start(&ps);
    ps.nreplicas = MC_MAX_REPLICAS;
    for (uint32_t i = 0; i < MC_MAX_REPLICAS; i++)
        mem_replica(&ps.replicas[i], 10 + i, i % 2 ? "rdma" : "tcp");
    memset(&ps.replicas[3], 0, sizeof(ps.replicas[3])); /* zero ids, empty strings */
    check_put_start(&ps);
    ps.version = UINT64_MAX;
    ps.replicas[0].id = ps.replicas[0].size = ps.replicas[0].u.mem.addr = UINT64_MAX;
    check_put_start(&ps);
    for (int i = 0; i < 3000; i++) { /* random ones, disk replicas included */
        static struct mc_get_result g;
        rnd_result(&g);
        memset(&ps, 0, sizeof(ps));
        ps.version = rnd_val();
        ps.nreplicas = g.nreplicas;
        memcpy(ps.replicas, g.replicas, sizeof(ps.replicas));
        check_put_start(&ps);
    }
}

static void test_batch_reply(void **state)
{
    (void)state;
    enum { N = 300 };
    static struct mc_get_result g[N];
    int rcs[N];
    for (int round = 0; round < 20; round++) {
        size_t n = round == 0 ? 1 : (size_t)(rnd() % N) + 1;
        size_t total = 0;
        struct mc_svc_get_plan pl;
        for (size_t i = 0; i < n; i++) {
            rnd_result(&g[i]);
            rcs[i] = rnd() % 5 == 0 ? MC_ERR_OBJECT_NOT_FOUND : 0;
            mc_svc_get_reply_plan(rcs[i], &g[i], &pl);
            total += mc_svc_batch_item_size(&pl);
        }
        uint8_t *hand = malloc(total + 1), *p = hand;
        assert_non_null(hand);
        for (size_t i = 0; i < n; i++) {
            mc_svc_get_reply_plan(rcs[i], &g[i], &pl);
            p = mc_svc_batch_item_put(p, &pl);
        }
        assert_ptr_equal(p, hand + total);

        static Mc__GetReplicaListResponse views[N];
        static struct mc_svc_pb_replica reps[N][MC_MAX_REPLICAS];
        static Mc__ReplicaDescriptor *rptrs[N][MC_MAX_REPLICAS];
        Mc__GetReplicaListResponse *items[N];
        for (size_t i = 0; i < n; i++) {
            mc_svc_get_fill(rcs[i], &g[i], &views[i], reps[i], rptrs[i]);
            items[i] = &views[i];
        }
        Mc__BatchGetReplicaListResponse resp = MC__BATCH_GET_REPLICA_LIST_RESPONSE__INIT;
        resp.n_results = n;
        resp.results = items;
        size_t gn = protobuf_c_message_get_packed_size(&resp.base);
        uint8_t *gen = malloc(gn + 1);
        assert_non_null(gen);
        protobuf_c_message_pack(&resp.base, gen);
        assert_int_equal(total, gn);
        assert_memory_equal(hand, gen, gn);

        Mc__BatchGetReplicaListResponse *r =
            mc__batch_get_replica_list_response__unpack(NULL, total, hand);
        assert_non_null(r);
        assert_int_equal(r->n_results, n);
        for (size_t i = 0; i < n; i++)
            check_decoded(r->results[i], rcs[i], &g[i]);
        mc__batch_get_replica_list_response__free_unpacked(r, NULL);
        free(hand);
        free(gen);
    }
}

/* ---- requests -------------------------------------------------------------------------- */

static void test_field_numbers(void **state)
{
    (void)state;
    assert_int_equal(mc_svc_field_num(&mc__get_replica_list_request__descriptor, "key"),
                     MC_SVC_GET_KEY_FIELD);
    assert_int_equal(mc_svc_field_num(&mc__get_replica_list_request__descriptor, "client_id"),
                     MC_SVC_GET_CLIENT_FIELD);
    assert_int_equal(mc_svc_field_num(&mc__exist_key_request__descriptor, "key"),
                     MC_SVC_EXIST_KEY_FIELD);
    assert_int_equal(mc__get_replica_list_request__descriptor.n_fields, 2);
    assert_int_equal(mc__exist_key_request__descriptor.n_fields, 1);
    assert_int_equal(mc__uuid__descriptor.n_fields, 2);
    assert_int_equal(mc_svc_field_num(&mc__uuid__descriptor, "hi"), 1);
    assert_int_equal(mc_svc_field_num(&mc__uuid__descriptor, "lo"), 2);
}

struct verdicts {
    unsigned accepted, refused;
};

/* One body through both decoders: the same verdict, the same fields. */
static void check_request(const uint8_t *b, size_t len, bool get, struct verdicts *v)
{
    const ProtobufCMessageDescriptor *desc =
        get ? &mc__get_replica_list_request__descriptor : &mc__exist_key_request__descriptor;
    struct mc_pb_limits lim = {0};
    ProtobufCMessage *m = mc_pb_unpack_bounded(desc, b, len, &lim, NULL);
    struct mc_key_ref key;
    struct mc_id client = {1, 1};
    const char *why =
        get ? mc_svc_decode_key_request(b, len, MC_SVC_GET_KEY_FIELD, MC_SVC_GET_CLIENT_FIELD, &key,
                                        &client)
            : mc_svc_decode_key_request(b, len, MC_SVC_EXIST_KEY_FIELD, 0, &key, NULL);
    if (!m) {
        if (!why) {
            fprintf(stderr, "accepted a body protobuf-c refuses (%zu bytes):", len);
            for (size_t i = 0; i < len; i++)
                fprintf(stderr, " %02x", b[i]);
            fprintf(stderr, "\n");
        }
        assert_non_null(why);
        v->refused++;
        return;
    }
    if (why) {
        fprintf(stderr, "refused (%s) a body protobuf-c accepts (%zu bytes):", why, len);
        for (size_t i = 0; i < len; i++)
            fprintf(stderr, " %02x", b[i]);
        fprintf(stderr, "\n");
    }
    assert_null(why);
    v->accepted++;
    const char *k;
    struct mc_id want = {0, 0};
    if (get) {
        const Mc__GetReplicaListRequest *r = (const void *)m;
        k = r->key;
        want = mc_svc_id_from_pb(r->client_id);
    } else {
        k = ((const Mc__ExistKeyRequest *)m)->key;
    }
    struct mc_key_ref ref = {.data = k ? k : "", .len = k ? strlen(k) : 0};
    mc_svc_mark_nul_strings(b, len, get ? MC_SVC_GET_KEY_FIELD : MC_SVC_EXIST_KEY_FIELD, 0, true,
                            &ref, 1);
    assert_int_equal(key.len, ref.len);
    assert_memory_equal(key.data, ref.data, key.len);
    if (get && (client.hi != want.hi || client.lo != want.lo)) {
        fprintf(stderr, "client %llx/%llx, protobuf-c %llx/%llx for (%zu bytes):",
                (unsigned long long)client.hi, (unsigned long long)client.lo,
                (unsigned long long)want.hi, (unsigned long long)want.lo, len);
        for (size_t i = 0; i < len; i++)
            fprintf(stderr, " %02x", b[i]);
        fprintf(stderr, "\n");
    }
    if (get) {
        assert_true(client.hi == want.hi);
        assert_true(client.lo == want.lo);
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Appends a field to b (at *n): tag, then a value of its wire type. */
static void put_field(uint8_t *b, size_t *n, uint32_t num, unsigned wt, const void *data,
                      size_t len, uint64_t v)
{
    *n += mc_varint_put(b + *n, ((uint64_t)num << 3) | wt);
    switch (wt) {
    case 0:
        *n += mc_varint_put(b + *n, v);
        break;
    case 1:
        memcpy(b + *n, &v, 8);
        *n += 8;
        break;
    case 5:
        memcpy(b + *n, &v, 4);
        *n += 4;
        break;
    case 2:
        *n += mc_varint_put(b + *n, len);
        memcpy(b + *n, data, len);
        *n += len;
        break;
    default:
        break;
    }
}

/* A body of random well-formed fields: keys, client ids (some with unknown fields of their
 * own, some repeated), unknown fields of every wire type. */
static size_t rnd_body(uint8_t *b, bool get)
{
    size_t n = 0;
    int fields = (int)(rnd() % 6);
    for (int f = 0; f < fields; f++) {
        unsigned kind = (unsigned)(rnd() % 4);
        if (kind == 0 || (!get && kind == 1)) {
            char key[40];
            size_t kl = rnd() % sizeof(key);
            for (size_t i = 0; i < kl; i++)
                key[i] = rnd() % 16 == 0 ? 0 : (char)(rnd() % 256);
            put_field(b, &n, 1, 2, key, kl, 0);
        } else if (kind == 1) {
            uint8_t u[64];
            size_t un = 0;
            int uf = (int)(rnd() % 4);
            for (int i = 0; i < uf; i++) {
                uint32_t num = 1 + (uint32_t)(rnd() % 3);
                if (num == 3) /* unknown field inside the uuid */
                    put_field(u, &un, 3 + (uint32_t)(rnd() % 100), 0, NULL, 0, rnd_val());
                else
                    put_field(u, &un, num, 0, NULL, 0, rnd() % 2 ? 0 : rnd_val());
            }
            put_field(b, &n, 2, 2, u, un, 0);
        } else {
            static const unsigned wts[] = {0, 1, 2, 5};
            unsigned wt = wts[rnd() % 4];
            uint32_t num = 3 + (uint32_t)(rnd() % (rnd() % 2 ? 20 : 100000));
            uint8_t junk[16];
            for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = (uint8_t)rnd();
            put_field(b, &n, num, wt, junk, rnd() % sizeof(junk), rnd_val());
        }
    }
    return n;
}

static void test_request_cases(void **state)
{
    (void)state;
    struct verdicts v = {0, 0};
    for (int get = 0; get < 2; get++) {
        /* packed by protobuf-c */
        Mc__Uuid id = MC__UUID__INIT;
        id.hi = 42;
        id.lo = UINT64_MAX;
        Mc__GetReplicaListRequest gr = MC__GET_REPLICA_LIST_REQUEST__INIT;
        gr.key = "key:000000000001";
        gr.client_id = &id;
        uint8_t b[256];
        size_t n = protobuf_c_message_pack(&gr.base, b);
        check_request(b, n, get, &v);
        check_request(b, 0, get, &v);    /* empty: no key */
        check_request(NULL, 0, get, &v); /* an empty body the server passes as NULL */
        for (size_t cut = 1; cut < n; cut++)
            check_request(b, cut, get, &v); /* truncated anywhere */
        static const uint8_t cases[][14] = {
            {2, 0x0a, 0x80},             /* truncated length */
            {3, 0x0a, 0x05, 'a'},        /* length past the body */
            {4, 0x08, 0x80, 0x80, 0x80}, /* truncated varint */
            {12, 0x18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
            {2, 0x08, 0x01},                                        /* key as a varint */
            {5, 0x0d, 1, 2, 3, 4},                                  /* key as fixed32 */
            {3, 0x10, 0x01, 0x00},                                  /* client id as a varint */
            {4, 0x12, 0x02, 0x0a, 0x00},                            /* client hi as a string */
            {3, 0x12, 0x01, 0x08},                                  /* client hi truncated */
            {3, 0x0b, 0x0c, 0x00},                                  /* a group */
            {2, 0x1e, 0x00},                                        /* wire type 6 */
            {2, 0x00, 0x00},                                        /* field number 0 */
            {3, 0x80, 0x00, 0x00},                                  /* field 0 in two bytes */
            {7, 0x88, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00},          /* a six-byte tag */
            {7, 0x0a, 0x81, 0x80, 0x80, 0x80, 0x00, 'k'},           /* five-byte length */
            {8, 0x0a, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 'k'},     /* six-byte length */
            {7, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 'k'},           /* a 4 GiB length */
            {10, 0x1a, 0x03, 'x', 'y', 'z', 0x0a, 0x02, 'k', 0, 0}, /* unknown, then a key */
            {9, 0x0a, 0x03, 'a', 0, 'b', 0x21, 1, 2, 3},            /* NUL key, then truncated */
            {5, 0x0a, 0x03, 'a', 0, 'b'},                           /* a key holding a NUL */
            {7, 0x0a, 0x01, 'a', 0x0a, 0x01, 'b', 0x00},            /* trailing zero byte */
            {6, 0x0a, 0x01, 'a', 0x0a, 0x01, 'b'},                  /* two keys: the last */
            {8, 0x12, 0x02, 0x08, 0x05, 0x12, 0x02, 0x10, 0x06},    /* two client ids: the last */
            {8, 0x12, 0x02, 0x08, 0x05, 0x12, 0x02, 0x08, 0x00},    /* a later zero hi */
            {9, 0x12, 0x07, 0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x08}, /* tag 2^29-1 in uuid */
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            check_request(cases[i] + 1, cases[i][0], get, &v);
    }
    print_message("fixed request cases: %u accepted, %u refused\n", v.accepted, v.refused);
    assert_true(v.accepted > 0 && v.refused > 0);
}

static void test_request_random(void **state)
{
    (void)state;
    struct verdicts v = {0, 0};
    uint8_t b[1024];
    for (int i = 0; i < 200000; i++) {
        bool get = i % 2;
        size_t n = rnd_body(b, get);
        /* a mutation in half of them: a byte changed, the body cut, a byte inserted */
        switch (rnd() % 6) {
        case 0:
            if (n)
                b[rnd() % n] = (uint8_t)rnd();
            break;
        case 1:
            if (n)
                n = rnd() % n;
            break;
        case 2:
            if (n < sizeof(b) - 1) {
                size_t at = rnd() % (n + 1);
                memmove(b + at + 1, b + at, n - at);
                b[at] = (uint8_t)rnd();
                n++;
            }
            break;
        default:
            break;
        }
        check_request(b, n, get, &v);
    }
    print_message("random requests: %u accepted, %u refused\n", v.accepted, v.refused);
    assert_true(v.accepted > 1000 && v.refused > 1000);
}

/* ---- PutEndRequest / PutRevokeRequest in place ------------------------------------------ */

static void dump(const char *what, const uint8_t *b, size_t len)
{
    fprintf(stderr, "%s (%zu bytes):", what, len);
    for (size_t i = 0; i < len; i++)
        fprintf(stderr, " %02x", b[i]);
    fprintf(stderr, "\n");
}

/* One body through both decoders (put_end_diff.c): the same verdict and, when accepted, the
 * same fields. */
static void check_put_end(const uint8_t *b, size_t len, bool end, struct verdicts *v)
{
    const char *why = NULL;
    enum put_end_verdict r = put_end_diff(b, len, end, &why);
    if (r == PUT_END_REFUSED) {
        v->refused++;
        return;
    }
    if (r != PUT_END_SAME)
        dump(r == PUT_END_ONLY_OURS_REFUSES && why ? why : put_end_verdict_name(r), b, len);
    assert_int_equal(r, PUT_END_SAME);
    v->accepted++;
}

/* A random varint value as raw bytes: one to ten of them, the tenth with any bits (those past
 * bit 63 make a bool true in protobuf-c and nothing else). */
static void put_raw_varint(uint8_t *b, size_t *n)
{
    size_t len = 1 + rnd() % 10;
    for (size_t i = 0; i < len; i++)
        b[(*n)++] = (uint8_t)((rnd() % 3 == 0 ? 0 : rnd() & 0x7f) | (i + 1 < len ? 0x80 : 0));
}

static size_t rnd_put_end_body(uint8_t *b)
{
    size_t n = 0;
    int fields = (int)(rnd() % 8);
    for (int f = 0; f < fields; f++) {
        uint32_t num = 1 + (uint32_t)(rnd() % 8); /* 7, 8: unknown */
        unsigned wt = rnd() % 8 == 0 ? (unsigned[]){0, 1, 2, 5}[rnd() % 4] : 0;
        if (num == 1 && !wt) {
            uint8_t u[64];
            size_t un = 0;
            int uf = (int)(rnd() % 4);
            for (int i = 0; i < uf; i++)
                put_field(u, &un, 1 + (uint32_t)(rnd() % 3), 0, NULL, 0, rnd_val());
            put_field(b, &n, 1, 2, u, un, 0);
        } else if (num == 2 && !wt) {
            char key[24];
            size_t kl = rnd() % sizeof(key);
            for (size_t i = 0; i < kl; i++)
                key[i] = rnd() % 16 == 0 ? 0 : (char)('a' + rnd() % 26);
            put_field(b, &n, 2, 2, key, kl, 0);
        } else if (wt == 0) {
            n += mc_varint_put(b + n, (uint64_t)num << 3);
            put_raw_varint(b, &n);
        } else {
            uint8_t junk[8];
            for (size_t i = 0; i < sizeof(junk); i++)
                junk[i] = (uint8_t)rnd();
            put_field(b, &n, num, wt, junk, rnd() % sizeof(junk), rnd_val());
        }
    }
    return n;
}

static void test_put_end_request(void **state)
{
    (void)state;
    struct verdicts v = {0, 0};
    for (int end = 0; end < 2; end++) {
        Mc__Uuid id = MC__UUID__INIT;
        id.hi = 42;
        id.lo = UINT64_MAX;
        Mc__PutEndRequest pe = MC__PUT_END_REQUEST__INIT;
        pe.key = "key:000000000001";
        pe.client_id = &id;
        pe.replica_type = MC__REPLICA_TYPE__RT_MEMORY;
        pe.version = 1ull << 40;
        pe.crc32c = 0xdeadbeef;
        pe.crc_valid = true;
        uint8_t b[1024];
        size_t n = protobuf_c_message_pack(&pe.base, b);
        check_put_end(b, n, end, &v);
        check_put_end(b, 0, end, &v);
        check_put_end(NULL, 0, end, &v);
        for (size_t cut = 1; cut < n; cut++)
            check_put_end(b, cut, end, &v);
        static const uint8_t cases[][14] = {
            {12, 0x30, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
             0x02}, /* bool bit 64 */
            {11, 0x30, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
            {4, 0x30, 0x02, 0x30, 0x00}, /* two bools: the last */
            {11, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, /* type -1 */
            {6, 0x28, 0xff, 0xff, 0xff, 0xff, 0x7f},             /* crc past 32 bits */
            {5, 0x2d, 1, 2, 3, 4},                               /* crc as fixed32 */
            {3, 0x1a, 0x01, 0x00},                               /* type as a string */
            {8, 0x0a, 0x02, 0x08, 0x01, 0x0a, 0x02, 0x10, 0x02}, /* two client ids: the last */
            {5, 0x12, 0x03, 'a', 0, 'b'},                        /* a key holding a NUL */
            {2, 0x08, 0x01},                                     /* client id as a varint */
            {3, 0x33, 0x34, 0x00},                               /* a group */
            {5, 0x35, 0x80, 0x80, 0x80, 0x80}, /* bool as fixed32, no payload bit */
            {5, 0x35, 0x80, 0x01, 0x00, 0x00}, /* bool as fixed32 */
            {3, 0x32, 0x80, 0x00},             /* bool as an empty string */
            {3, 0x32, 0x01, 0x80},             /* bool: its length prefix counts */
            {9, 0x31, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, /* bool as fixed64 */
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            check_put_end(cases[i] + 1, cases[i][0], end, &v);
        for (int i = 0; i < 100000; i++) {
            n = rnd_put_end_body(b);
            switch (rnd() % 6) {
            case 0:
                if (n)
                    b[rnd() % n] = (uint8_t)rnd();
                break;
            case 1:
                if (n)
                    n = rnd() % n;
                break;
            default:
                break;
            }
            check_put_end(b, n, end, &v);
        }
    }
    print_message("put end/revoke requests: %u accepted, %u refused\n", v.accepted, v.refused);
    assert_true(v.accepted > 1000 && v.refused > 1000);
    assert_int_equal(mc_svc_field_num(&mc__put_end_request__descriptor, "client_id"), 1);
    assert_int_equal(mc_svc_field_num(&mc__put_end_request__descriptor, "key"), 2);
    assert_int_equal(mc_svc_field_num(&mc__put_end_request__descriptor, "replica_type"), 3);
    assert_int_equal(mc_svc_field_num(&mc__put_end_request__descriptor, "version"), 4);
    assert_int_equal(mc_svc_field_num(&mc__put_end_request__descriptor, "crc32c"), 5);
    assert_int_equal(mc_svc_field_num(&mc__put_end_request__descriptor, "crc_valid"), 6);
    assert_int_equal(mc__put_end_request__descriptor.n_fields, 6);
    assert_int_equal(mc_svc_field_num(&mc__put_revoke_request__descriptor, "client_id"), 1);
    assert_int_equal(mc_svc_field_num(&mc__put_revoke_request__descriptor, "key"), 2);
    assert_int_equal(mc_svc_field_num(&mc__put_revoke_request__descriptor, "replica_type"), 3);
    assert_int_equal(mc_svc_field_num(&mc__put_revoke_request__descriptor, "version"), 4);
    assert_int_equal(mc__put_revoke_request__descriptor.n_fields, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_reply_cases), cmocka_unit_test(test_get_reply_random),
        cmocka_unit_test(test_batch_reply),     cmocka_unit_test(test_field_numbers),
        cmocka_unit_test(test_request_cases),   cmocka_unit_test(test_request_random),
        cmocka_unit_test(test_put_start_reply), cmocka_unit_test(test_put_end_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
