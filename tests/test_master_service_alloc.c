/*
 * test_master_service_alloc.c - the master's RPC adapters serve a large BatchGetReplicaList
 * with memory proportional to what the reply holds, not to MC_MAX_REPLICAS fixed-size results
 * per key.
 *
 * The master core and its service run in this process behind a real rpc_server on loopback; the
 * test calls BatchGetReplicaList with 8,192 keys (the batch limit) over an rpc_client. This
 * binary is linked with -Wl,--wrap for malloc, calloc and realloc: every allocation the project's
 * code makes (statically linked here) is counted while the call is in flight, on the server's
 * threads only (the calling thread's own request and reply buffers are not the server's cost).
 * protobuf-c's own unpack allocations (a shared library) are not counted: they are the decoded
 * request, the same before and after.
 *
 * A second test counts, the same way, the allocations and the read(2) calls the server makes per
 * GetReplicaList: one allocation for the call and its body, one for the reply written in place
 * (no decoded request, no message packed, no header-only frame made and thrown away), and no read
 * that only finds the socket empty after a short read took a whole request (read is wrapped
 * too).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <cmocka.h>

#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "common/wire.h"
#include "master/service.h"
#include "proto/master.pb-c.h"
#include "master_service_fixture.h"
#include "test_master_util.h"

/* ---- counting allocator ---------------------------------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
ssize_t __real_read(int fd, void *b, size_t n);
ssize_t __wrap_read(int fd, void *b, size_t n);

static _Atomic bool g_counting;
static _Atomic uint64_t g_bytes, g_calls, g_reads, g_empty_reads;
static pthread_t g_caller;

static void count(size_t n)
{
    if (atomic_load_explicit(&g_counting, memory_order_relaxed) &&
        !pthread_equal(pthread_self(), g_caller)) {
        atomic_fetch_add(&g_bytes, n);
        atomic_fetch_add(&g_calls, 1);
    }
}

void *__wrap_malloc(size_t n)
{
    count(n);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
    count(k * n);
    return __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
    count(n);
    return __real_realloc(p, n);
}

ssize_t __wrap_read(int fd, void *b, size_t n)
{
    ssize_t r = __real_read(fd, b, n);
    if (atomic_load_explicit(&g_counting, memory_order_relaxed) &&
        !pthread_equal(pthread_self(), g_caller)) {
        int e = errno;
        atomic_fetch_add(&g_reads, 1);
        if (r < 0 && (e == EAGAIN || e == EWOULDBLOCK))
            atomic_fetch_add(&g_empty_reads, 1);
        errno = e;
    }
    return r;
}

/* ---- the test -------------------------------------------------------------------------------- */

/* What each test drives: the master (fake clock, manual ticks, a 256 MiB segment of client 1
 * mounted) with its service on a loopback server (master_service_fixture.c) and one connected
 * client. */
struct served {
    struct mc_fake_clock fc;
    struct msf x;
    struct mc_rpc_client *c;
};

static void serve(struct served *v)
{
    mc_fake_clock_init(&v->fc, 1000ull * 1000000000ull);
    struct mc_master_config mc = msf_master_config();
    mc.clock = &v->fc.clock;
    mc.manual_ticks = true;
    mc.epoch = 5;
    struct mc_rpc_server_config rc = msf_server_config("127.0.0.1");
    rc.port = 0;
    rc.name = "master";
    msf_open(&v->x, &mc, rc);
    struct mc_segment_desc sd = tm_seg(1, 256 * MIB);
    assert_int_equal(mc_master_mount_segment(v->x.m, tm_id(1), &sd, NULL), MC_OK);
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = msf_start(&v->x);
    cc.call_timeout_ms = 20000;
    v->c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &v->c), 0);
    assert_int_equal(mc_rpc_client_connect(v->c), 0);
}

static void unserve(struct served *v)
{
    mc_rpc_client_free(v->c);
    msf_close(&v->x);
}

#define NKEYS ((int)MC_SERVICE_MAX_BATCH)

static void test_batch_get_allocation_follows_the_reply(void **state)
{
    (void)state;
    static struct served v;
    serve(&v);
    struct mc_master *m = v.x.m;
    struct mc_rpc_client *c = v.c;
    static char names[NKEYS][24];
    static char *keys[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(names[i], sizeof(names[i]), "key:%012d", i);
        keys[i] = names[i];
        if (i % 8 != 7) /* one key in 8 is absent: replies of both kinds */
            assert_int_equal(tm_put(m, tm_id(1), names[i], 4096), MC_OK);
    }

    Mc__BatchGetReplicaListRequest req = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    req.n_keys = NKEYS;
    req.keys = keys;
    ProtobufCMessage *resp = NULL;
    g_caller = pthread_self();
    atomic_store(&g_bytes, 0);
    atomic_store(&g_calls, 0);
    atomic_store(&g_counting, true);
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_BATCH_GET_REPLICA_LIST, &req.base,
                                    &mc__batch_get_replica_list_response__descriptor, 0, &resp);
    atomic_store(&g_counting, false);
    assert_int_equal(rc, 0);
    Mc__BatchGetReplicaListResponse *r = (Mc__BatchGetReplicaListResponse *)resp;
    assert_int_equal(r->n_results, NKEYS);
    size_t encoded = protobuf_c_message_get_packed_size(resp);
    for (int i = 0; i < NKEYS; i++) {
        Mc__GetReplicaListResponse *it = r->results[i];
        if (i % 8 == 7) {
            assert_int_equal(it->status, MC_ERR_OBJECT_NOT_FOUND);
            continue;
        }
        assert_int_equal(it->status, 0);
        assert_int_equal(it->n_replicas, 1);
        assert_int_equal(it->size, 4096);
        assert_non_null(it->replicas[0]->memory);
        assert_string_equal(it->replicas[0]->memory->segment_name, "seg-1");
        assert_string_equal(it->replicas[0]->memory->endpoint, "10.0.0.1:17001");
    }
    protobuf_c_message_free_unpacked(resp, NULL);

    uint64_t bytes = atomic_load(&g_bytes);
    double per_key = (double)bytes / NKEYS;
    print_message("server allocated %llu bytes in %llu calls for %d keys: %.0f B/key (reply "
                  "%zu B encoded, %.0f B/key)\n",
                  (unsigned long long)bytes, (unsigned long long)atomic_load(&g_calls), NKEYS,
                  per_key, encoded, (double)encoded / NKEYS);
    /* The server must at least encode the reply, and the descriptors it is built from take a
     * few hundred bytes per replica; before replies were sized by what is there, every key cost
     * a full result of MC_MAX_REPLICAS descriptors (~5.3 KB). */
    assert_true(bytes >= encoded);
    assert_true(per_key < 1024);

    unserve(&v);
}

#define NGETS 400

static void test_get_allocations_and_reads_per_call(void **state)
{
    (void)state;
    static struct served v;
    serve(&v);
    struct mc_master *m = v.x.m;
    struct mc_rpc_client *c = v.c;
    assert_int_equal(tm_put(m, tm_id(1), "get-me", 4096), MC_OK);

    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = "get-me";
    g_caller = pthread_self();
    atomic_store(&g_bytes, 0);
    atomic_store(&g_calls, 0);
    atomic_store(&g_reads, 0);
    atomic_store(&g_empty_reads, 0);
    for (int i = 0; i < NGETS; i++) {
        ProtobufCMessage *resp = NULL;
        atomic_store(&g_counting, i > 0); /* the first call also sets the connection up */
        int rc = mc_rpc_client_call_msg(c, MC_METHOD_GET_REPLICA_LIST, &req.base,
                                        &mc__get_replica_list_response__descriptor, 0, &resp);
        atomic_store(&g_counting, false);
        assert_int_equal(rc, 0);
        Mc__GetReplicaListResponse *r = (Mc__GetReplicaListResponse *)resp;
        assert_int_equal(r->status, 0);
        assert_int_equal(r->n_replicas, 1);
        assert_int_equal(r->size, 4096);
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    double n = NGETS - 1;
    double allocs = (double)atomic_load(&g_calls) / n;
    double reads = (double)atomic_load(&g_reads) / n;
    double empty = (double)atomic_load(&g_empty_reads) / n;
    print_message("per GetReplicaList: %.2f allocations, %.2f reads (%.2f found nothing)\n", allocs,
                  reads, empty);
    /* The call with its body copied into it, and the reply frame written in place: 2. The
     * request is read in place (no decoded message, no key copy) and the reply is not packed
     * from a message. Before: the body, the call, the decoded message and its key, the reply
     * item (5); before that the reply alone took 4 (a header frame thrown away, then an item
     * and its bytes apart): 8 in all. */
    assert_true(allocs <= 2.0);
    /* Each request arrives in one short read; before, every one was followed by a read that
     * found the socket empty (2 reads per call). The bound leaves room for a request split
     * in two by the network. */
    assert_true(reads >= 1.0);
    assert_true(empty <= 0.1);

    unserve(&v);
}

#define NPUTS 400
#define MAX_PUT_ALLOCS 10.5

/* Server allocations per Put (PutStart + PutEnd of a new key), counted as above. What the
 * project's code allocates: the two calls (each with its body), the PutStart reply written in
 * place, the PutEnd status reply, the object's record and what the core keeps for it, and the
 * PutStartRequest's decode through the bounded allocator (pb_budget.c, project code). PutEnd's
 * body is read in place and its reply is not packed from a message. */
static void test_put_allocations_per_call(void **state)
{
    (void)state;
    static struct served v;
    serve(&v);
    struct mc_master *m = v.x.m;
    struct mc_rpc_client *c = v.c;

    g_caller = pthread_self();
    atomic_store(&g_bytes, 0);
    atomic_store(&g_calls, 0);
    for (int i = 0; i < NPUTS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "put:%08d", i);
        Mc__Uuid id = MC__UUID__INIT;
        id.hi = tm_id(1).hi;
        id.lo = tm_id(1).lo;
        Mc__PutStartRequest ps = MC__PUT_START_REQUEST__INIT;
        ps.client_id = &id;
        ps.key = key;
        ps.value_length = 4096;
        ProtobufCMessage *resp = NULL;
        atomic_store(&g_counting, i > 0); /* the first call also sets the connection up */
        int rc = mc_rpc_client_call_msg(c, MC_METHOD_PUT_START, &ps.base,
                                        &mc__put_start_response__descriptor, 0, &resp);
        assert_int_equal(rc, 0);
        Mc__PutStartResponse *r = (Mc__PutStartResponse *)resp;
        assert_int_equal(r->n_replicas, 1);
        assert_non_null(r->replicas[0]->memory);
        uint64_t version = r->version;
        protobuf_c_message_free_unpacked(resp, NULL);
        Mc__PutEndRequest pe = MC__PUT_END_REQUEST__INIT;
        pe.client_id = &id;
        pe.key = key;
        pe.version = version;
        resp = NULL;
        rc = mc_rpc_client_call_msg(c, MC_METHOD_PUT_END, &pe.base,
                                    &mc__put_end_response__descriptor, 0, &resp);
        atomic_store(&g_counting, false);
        assert_int_equal(rc, 0);
        if (resp)
            protobuf_c_message_free_unpacked(resp, NULL);
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g), MC_OK);
    }
    double allocs = (double)atomic_load(&g_calls) / (NPUTS - 1);
    print_message("per Put (PutStart + PutEnd): %.2f allocations\n", allocs);
    /* measured 10.3, 13.3 before (PutEnd decoded by protobuf-c through the bounded allocator:
     * the message, its key and its uuid); the fraction: the core's tables growing now and then. The
     * bound has no room for one more allocation per Put */
    assert_true(allocs <= MAX_PUT_ALLOCS);

    unserve(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_get_allocation_follows_the_reply),
        cmocka_unit_test(test_get_allocations_and_reads_per_call),
        cmocka_unit_test(test_put_allocations_per_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
