/*
 * test_client_epoch.c - mount epochs end to end, against a real mooncake_master process.
 *
 * A replica descriptor names a segment, an offset and the mount epoch the master gave that
 * segment. The segment id survives a master restart (the client re-mounts the same segment),
 * and the new master hands the segment's offsets out afresh, so a descriptor obtained before
 * the restart may point at bytes that now belong to another object. The test keeps such a
 * descriptor (a raw GetReplicaList issued before the master is killed), restarts the master on
 * the same port, waits for the re-mount, puts another object into the same segment, and checks
 * that the stale descriptor is refused (REPLICA_IS_GONE, no byte moved, nothing overwritten)
 * both over tcp (another client) and in-process (the owner's memcpy transport), while fresh
 * descriptors carry the new epoch and a Get after a re-Put returns the right bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <stdio.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "test_client_util.h"

#define MiB (1u << 20)
#define VLEN (64u * 1024u)

static struct mc_client *open_client(const char *master, uint64_t seg)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = master;
    cfg.segment_size = seg;
    cfg.ping_interval_ms = 100;
    cfg.rpc_timeout_ms = 2000;
    struct mc_client *c = NULL;
    int rc = mc_client_open(&cfg, &c);
    if (rc)
        fail_msg("mc_client_open: %s", mc_strerror(rc));
    return c;
}

/* Put into owner's segment (the only one in the cluster with DRAM). */
static int put_on(struct mc_client *c, struct mc_client *owner, const char *key, const void *v,
                  size_t n)
{
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *p[1] = {mc_client_endpoint(owner)};
    rc.preferred_segments = p;
    rc.preferred_segments_count = 1;
    return mc_put(c, key, v, n, &rc);
}

/* A raw GetReplicaList: the descriptors exactly as the master sent them. */
static Mc__GetReplicaListResponse *replica_list(struct mc_client *c, const char *key)
{
    Mc__Uuid u;
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = (char *)key;
    req.client_id = mc_client_uuid(c, &u);
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(mc_client_master_conn(c), MC_METHOD_GET_REPLICA_LIST, &req.base,
                                 &mc__get_replica_list_response__descriptor, &m);
    if (rc)
        fail_msg("GetReplicaList %s: %s", key, mc_strerror(rc));
    Mc__GetReplicaListResponse *r = (Mc__GetReplicaListResponse *)m;
    assert_int_equal(r->status, 0);
    assert_int_equal(r->n_replicas, 1);
    assert_int_equal(r->replicas[0]->type, MC__REPLICA_TYPE__RT_MEMORY);
    assert_non_null(r->replicas[0]->memory);
    return r;
}

static void wait_remounted(struct mc_client *c, uint64_t deadline)
{
    struct mc_master_conn_stats st;
    do {
        mc_master_conn_get_stats(mc_client_master_conn(c), &st);
        if (st.up && st.remounts >= 1)
            return;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    } while (mc_now_ms() < deadline);
    fail_msg("client did not re-mount (up=%d remounts=%llu)", st.up,
             (unsigned long long)st.remounts);
}

static void test_stale_descriptor_after_master_restart(void **state)
{
    (void)state;
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, NULL), 0);
    uint16_t port = m.port;
    struct mc_client *owner = open_client(m.addr, 8 * MiB); /* the only DRAM segment */
    struct mc_client *peer = open_client(m.addr, 0);        /* reads and writes over tcp */
    uint8_t *a = malloc(VLEN), *b = malloc(VLEN), *out = malloc(VLEN);
    tm_fill(a, VLEN, 1);
    tm_fill(b, VLEN, 2);
    assert_int_equal(put_on(peer, owner, "ep/a", a, VLEN), 0);

    /* the descriptor of the first mount: it works while that mount lasts */
    Mc__GetReplicaListResponse *old = replica_list(peer, "ep/a");
    const Mc__ReplicaDescriptor *od = old->replicas[0];
    uint64_t e1 = od->memory->mount_epoch;
    assert_true(e1 != 0);
    struct mc_id sid = {od->memory->segment_id->hi, od->memory->segment_id->lo};
    assert_true(mc_id_eq(sid, mc_client_segment_id(owner)));
    memset(out, 0, VLEN);
    assert_int_equal(mc_client_replica_io(peer, od, false, out, VLEN), 0);
    assert_memory_equal(out, a, VLEN);

    /* the master dies and comes back on the same port with no state; the owner re-mounts */
    tm_kill(&m);
    assert_int_equal(tm_start(&m, port, NULL), 0);
    uint64_t deadline = mc_now_ms() + 10000;
    wait_remounted(owner, deadline);
    int rc;
    while ((rc = put_on(peer, owner, "ep/b", b, VLEN)) != 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(rc, 0);

    /* the new mount has another epoch, same segment id */
    Mc__GetReplicaListResponse *cur = replica_list(peer, "ep/b");
    const Mc__ReplicaDescriptor *cd = cur->replicas[0];
    uint64_t e2 = cd->memory->mount_epoch;
    assert_true(e2 != 0);
    assert_true(e2 != e1);
    assert_int_equal(cd->memory->segment_id->hi, sid.hi);
    assert_int_equal(cd->memory->segment_id->lo, sid.lo);
    bool overlaps = cd->memory->offset < od->memory->offset + VLEN &&
                    od->memory->offset < cd->memory->offset + VLEN;
    print_message("old offset %llu epoch %llx, new offset %llu epoch %llx (overlap: %s)\n",
                  (unsigned long long)od->memory->offset, (unsigned long long)e1,
                  (unsigned long long)cd->memory->offset, (unsigned long long)e2,
                  overlaps ? "yes" : "no");

    /* the stale descriptor is refused for reads (no byte lands) and writes (nothing changes),
     * over tcp (peer) and in-process (owner) */
    struct mc_peer_server_stats st0, st1;
    mc_peer_server_get_stats(mc_client_peer_server(owner), &st0);
    struct mc_client *via[2] = {peer, owner};
    for (int k = 0; k < 2; k++) {
        memset(out, 0x5a, VLEN);
        assert_int_equal(mc_client_replica_io(via[k], od, false, out, VLEN),
                         MC_ERR_REPLICA_IS_GONE);
        for (size_t i = 0; i < VLEN; i++)
            if (out[i] != 0x5a)
                fail_msg("refused stale read (%s) delivered byte %zu", k ? "local" : "tcp", i);
        assert_int_equal(mc_client_replica_io(via[k], od, true, a, VLEN), MC_ERR_REPLICA_IS_GONE);
    }
    mc_peer_server_get_stats(mc_client_peer_server(owner), &st1);
    assert_int_equal(st1.stale_epoch - st0.stale_epoch, 4);

    /* the current descriptor works, and ep/b's bytes were not overwritten */
    memset(out, 0, VLEN);
    assert_int_equal(mc_client_replica_io(peer, cd, false, out, VLEN), 0);
    assert_memory_equal(out, b, VLEN);
    memset(out, 0, VLEN);
    assert_int_equal(mc_get(owner, "ep/b", out, VLEN), (int64_t)VLEN);
    assert_memory_equal(out, b, VLEN);

    /* the new master never knew ep/a; after a re-Put a fresh Get works from both sides */
    assert_int_equal(mc_exist(peer, "ep/a"), 0);
    assert_int_equal(put_on(peer, owner, "ep/a", a, VLEN), 0);
    for (int k = 0; k < 2; k++) {
        memset(out, 0, VLEN);
        assert_int_equal(mc_get(via[k], "ep/a", out, VLEN), (int64_t)VLEN);
        assert_memory_equal(out, a, VLEN);
    }
    Mc__GetReplicaListResponse *again = replica_list(owner, "ep/a");
    assert_int_equal(again->replicas[0]->memory->mount_epoch, e2);
    protobuf_c_message_free_unpacked(&again->base, NULL);

    protobuf_c_message_free_unpacked(&old->base, NULL);
    protobuf_c_message_free_unpacked(&cur->base, NULL);
    free(a);
    free(b);
    free(out);
    mc_client_close(peer);
    mc_client_close(owner);
    tm_stop(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_descriptor_after_master_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
