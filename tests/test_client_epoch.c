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
 *
 * The same hole without a restart: the epoch is per mount of a segment, not per master. A
 * segment-owning mooncake_client process is stopped (SIGSTOP) past the master's --client_ttl, the
 * master expires it (its segment unmounted, its objects dropped), the process continues
 * (SIGCONT), is told to re-mount and does so, and the master hands the same offsets out to a new
 * object. A descriptor obtained before the expiry must now be refused (REPLICA_IS_GONE), not
 * read the new object's bytes or overwrite them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/clock.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "cluster_util.h"
#include "cluster_data.h"
#include "test_client_util.h"

#define MiB (1u << 20)
#define VLEN (64u * 1024u)

/* Put into the segment named endpoint (the only one in the cluster with DRAM). */
static int put_on_ep(struct mc_client *c, const char *endpoint, const char *key, const void *v,
                     size_t n)
{
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *p[1] = {endpoint};
    rc.preferred_segments = p;
    rc.preferred_segments_count = 1;
    return mc_put(c, key, v, n, &rc);
}

static int put_on(struct mc_client *c, struct mc_client *owner, const char *key, const void *v,
                  size_t n)
{
    return put_on_ep(c, mc_client_endpoint(owner), key, v, n);
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
    /* the subject is the old mount's descriptor, not DRAM re-registration (test_holder_stream):
     * without the holder stream the new master never learns ep/a */
    const char *no_stream[] = {"--holder_stream=false", NULL};
    assert_int_equal(tm_start(&m, 0, no_stream), 0);
    uint16_t port = m.port;
    struct mc_client *owner = cu_open_client_at(m.addr, 8 * MiB, true); /* the only DRAM segment */
    struct mc_client *peer = cu_open_client_at(m.addr, 0, true); /* reads and writes over tcp */
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
    assert_int_equal(tm_start(&m, port, no_stream), 0);
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

/* Segments the master has mounted now (ListSegments). */
static size_t mounted_segments(struct mc_client *c)
{
    Mc__ListSegmentsRequest req = MC__LIST_SEGMENTS_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(mc_client_master_conn(c), MC_METHOD_LIST_SEGMENTS, &req.base,
                                 &mc__list_segments_response__descriptor, &m);
    if (rc)
        fail_msg("ListSegments: %s", mc_strerror(rc));
    size_t n = ((Mc__ListSegmentsResponse *)m)->n_segments;
    protobuf_c_message_free_unpacked(m, NULL);
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_stale_descriptor_after_client_expiry(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc-epoch-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char log[256], bin[512], master_arg[128];
    snprintf(log, sizeof(log), "%s/client.log", dir);
    const char *bindir = getenv("MC_BIN_DIR");
    snprintf(bin, sizeof(bin), "%s/mooncake_client", bindir ? bindir : ".");

    /* a short TTL; the owner pings every second */
    static const char *const flags[] = {"--client_ttl=2500ms", NULL};
    struct test_master m;
    assert_int_equal(tm_start(&m, 0, flags), 0);
    snprintf(master_arg, sizeof(master_arg), "--master=%s", m.addr);
    const char *argv[] = {
        bin, master_arg, "--segment_size=8MiB", "--host=127.0.0.1", "--log_level=info", NULL};
    struct cu_proc owner;
    assert_int_equal(cu_spawn(&owner, argv, log), 0);
    struct mc_proc_ready ready;
    if (cu_await_ready(&owner, MC_PROC_READY_DAEMON, &ready, "mooncake_client", 10000) != 0)
        fail_msg("mooncake_client did not get ready: '%s'", ready.line);
    const char *endpoint = ready.endpoint;

    struct mc_client *peer =
        cu_open_client_at(m.addr, 0, true); /* no DRAM: reads and writes over tcp */
    uint8_t *a = malloc(VLEN), *b = malloc(VLEN), *out = malloc(VLEN);
    tm_fill(a, VLEN, 3);
    tm_fill(b, VLEN, 4);
    assert_int_equal(put_on_ep(peer, endpoint, "ex/a", a, VLEN), 0);
    Mc__GetReplicaListResponse *old = replica_list(peer, "ex/a");
    const Mc__ReplicaDescriptor *od = old->replicas[0];
    uint64_t e1 = od->memory->mount_epoch;
    assert_true(e1 != 0);
    memset(out, 0, VLEN);
    assert_int_equal(mc_client_replica_io(peer, od, false, out, VLEN), 0);
    assert_memory_equal(out, a, VLEN);

    /* the owner stops past its TTL: the master expires it and drops its segment */
    assert_int_equal(kill(owner.pid, SIGSTOP), 0);
    uint64_t deadline = mc_now_ms() + 15000;
    while (mounted_segments(peer) != 0 && mc_now_ms() < deadline)
        sleep_ms(50);
    assert_int_equal(mounted_segments(peer), 0);
    assert_int_equal(mc_exist(peer, "ex/a"), 0);

    /* it continues, is told to re-mount, and the segment's offsets go to a new object */
    assert_int_equal(kill(owner.pid, SIGCONT), 0);
    int rc;
    while ((rc = put_on_ep(peer, endpoint, "ex/b", b, VLEN)) != 0 && mc_now_ms() < deadline)
        sleep_ms(20);
    if (rc) {
        cu_dump_log(&owner, "mooncake_client");
        fail_msg("no Put into the re-mounted segment: %s", mc_strerror(rc));
    }
    Mc__GetReplicaListResponse *cur = replica_list(peer, "ex/b");
    const Mc__ReplicaDescriptor *cd = cur->replicas[0];
    uint64_t e2 = cd->memory->mount_epoch;
    assert_true(e2 != 0);
    assert_true(e2 != e1);
    assert_int_equal(cd->memory->segment_id->hi, od->memory->segment_id->hi);
    assert_int_equal(cd->memory->segment_id->lo, od->memory->segment_id->lo);
    bool overlaps = cd->memory->offset < od->memory->offset + VLEN &&
                    od->memory->offset < cd->memory->offset + VLEN;
    print_message("before expiry: offset %llu epoch %llx; after: offset %llu epoch %llx "
                  "(overlap: %s)\n",
                  (unsigned long long)od->memory->offset, (unsigned long long)e1,
                  (unsigned long long)cd->memory->offset, (unsigned long long)e2,
                  overlaps ? "yes" : "no");

    /* the descriptor from before the expiry reads nothing and writes nothing */
    memset(out, 0x5a, VLEN);
    assert_int_equal(mc_client_replica_io(peer, od, false, out, VLEN), MC_ERR_REPLICA_IS_GONE);
    for (size_t i = 0; i < VLEN; i++)
        if (out[i] != 0x5a)
            fail_msg("refused stale read delivered byte %zu", i);
    assert_int_equal(mc_client_replica_io(peer, od, true, a, VLEN), MC_ERR_REPLICA_IS_GONE);

    /* the current descriptor and a Get read ex/b's own bytes */
    memset(out, 0, VLEN);
    assert_int_equal(mc_client_replica_io(peer, cd, false, out, VLEN), 0);
    assert_memory_equal(out, b, VLEN);
    memset(out, 0, VLEN);
    assert_int_equal(mc_get(peer, "ex/b", out, VLEN), (int64_t)VLEN);
    assert_memory_equal(out, b, VLEN);

    protobuf_c_message_free_unpacked(&old->base, NULL);
    protobuf_c_message_free_unpacked(&cur->base, NULL);
    free(a);
    free(b);
    free(out);
    mc_client_close(peer);
    int st = cu_stop(&owner, SIGTERM, 5000);
    if (st != 0)
        cu_dump_log(&owner, "mooncake_client");
    assert_int_equal(st, 0);
    tm_stop(&m);
    cu_rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_descriptor_after_master_restart),
        cmocka_unit_test(test_stale_descriptor_after_client_expiry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
