/*
 * test_master_daemon_flags.c - the real mooncake_master process, driven over its real ports
 * (master_daemon_fixture.h): flags (--help, unknown and refused flags: short-lived children) and
 * RDMA segment descriptors.
 */
#include "master_daemon_fixture.h"

struct run {
    int status;
    char out[65536];
    char err[4096];
};

/* Runs the master with args (NULL-terminated), output to files; 10 s deadline. */
static void run_master(struct daemon *d, struct run *r, const char *first, ...)
{
    const char *argv[16];
    int n = 0;
    argv[n++] = md_bin;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 15; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char out_path[320];
    snprintf(out_path, sizeof(out_path), "%s/stdout", d->dir);
    const struct mc_proc_io io = {.out_path = out_path, .err_path = d->err_path};
    r->status = mc_proc_run(argv, &io, 10000);
    assert_true(r->status >= 0); /* neither overran nor failed to start */
    memset(r->out, 0, sizeof(r->out));
    memset(r->err, 0, sizeof(r->err));
    int fd = open(out_path, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(read(fd, r->out, sizeof(r->out) - 1) >= 0);
    close(fd);
    unlink(out_path);
    fd = open(d->err_path, O_RDONLY);
    assert_true(fd >= 0);
    assert_true(read(fd, r->err, sizeof(r->err) - 1) >= 0);
    close(fd);
}

/* --help lists every flag. */
static void flags_help(struct daemon *d, struct run *r)
{
    run_master(d, r, "--help", NULL);
    assert_int_equal(r->status, 0);
    static const char *const names[] = {"rpc_address",
                                        "rpc_port",
                                        "rpc_thread_num",
                                        "metrics_host",
                                        "metrics_port",
                                        "default_kv_lease_ttl",
                                        "default_kv_soft_pin_ttl",
                                        "max_kv_soft_pin_ttl",
                                        "allow_evict_soft_pinned_objects",
                                        "eviction_ratio",
                                        "eviction_high_watermark_ratio",
                                        "eviction_threads",
                                        "client_ttl",
                                        "put_start_discard_timeout_sec",
                                        "put_start_release_timeout_sec",
                                        "allocation_strategy",
                                        "max_key_len",
                                        "max_frame_bytes",
                                        "log_level",
                                        "enable_offload",
                                        "offload_on_evict",
                                        "offload_force_evict",
                                        "offloading_queue_limit",
                                        "offload_cap_ratio",
                                        "promotion_on_hit",
                                        "promotion_admission_threshold",
                                        "promotion_queue_limit",
                                        "promotion_max_per_heartbeat",
                                        "promotion_task_timeout_sec"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strstr(r->out, names[i]))
            fail_msg("--help does not list %s", names[i]);
}

/* An unknown flag, or a value out of range or without what it needs: exit 2, never READY. */
static void flags_refused(struct daemon *d, struct run *r)
{
    run_master(d, r, "--no_such_flag=1", NULL);
    assert_int_equal(r->status, 2);
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--offload_on_evict", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "--offload_on_evict needs --enable_offload"));
    assert_int_equal(strlen(r->out), 0);
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--enable_offload",
               "--offloading_queue_limit=0", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "offloading_queue_limit"));
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--enable_offload",
               "--offload_cap_ratio=1.5", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "offload_cap_ratio"));
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--promotion_queue_limit=0", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "promotion_queue_limit must be at least 1"));
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--promotion_task_timeout_sec=0", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "promotion_task_timeout_sec must be positive"));
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--promotion_max_per_heartbeat=0", NULL);
    assert_int_equal(r->status, 2);
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--allocation_strategy=best", NULL);
    assert_int_equal(r->status, 2);
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--eviction_ratio=2", NULL);
    assert_int_equal(r->status, 2);
    assert_int_equal(strlen(r->out), 0); /* never READY */
    run_master(d, r, "--rpc_port=0", "--metrics_port=0", "--eviction_threads=65", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "eviction_threads"));
    assert_int_equal(strlen(r->out), 0);
}

static void test_flags(void **state)
{
    struct daemon *d = *state;
    static struct run r;
    flags_help(d, &r);
    flags_refused(d, &r);
}

/* A segment mounted with protocol RDMA: every MEMORY descriptor the master hands out for it
 * (PutStart, GetReplicaList) carries protocol RDMA, the segment's rkey and remote_addr = the
 * segment's base + the replica's offset, which is all a peer needs for one-sided verbs; a TCP
 * segment's descriptors carry no key. */
/* Mounts an RDMA segment (rkey, base address, device) for a. */
static void rdma_mount(struct daemon *d, Mc__Uuid *a, Mc__Uuid *seg_id)
{
    Mc__RdmaInfo ri = MC__RDMA_INFO__INIT;
    ri.rkey = 0x5eed1234u;
    ri.addr = SEG_BASE;
    ri.device = "mlx5_7";
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = seg_id;
    seg.name = "rdma0";
    seg.base_addr = SEG_BASE;
    seg.size = SEG_SIZE;
    seg.endpoint = "127.0.0.1:2";
    seg.protocol = MC__PROTOCOL__PROTOCOL_RDMA;
    seg.rdma = &ri;
    Mc__MountSegmentRequest req = MC__MOUNT_SEGMENT_REQUEST__INIT;
    req.segment = &seg;
    req.client_id = a;
    assert_int_equal(
        md_call(d->c, MC_METHOD_MOUNT_SEGMENT, &req, &mc__mount_segment_response__descriptor, NULL),
        0);
}

/* PutStart and GetReplicaList descriptors carry protocol RDMA, the rkey and base + offset; the
 * segment list says RDMA. */
static void rdma_descriptors(struct daemon *d, Mc__Uuid *a)
{
    const uint64_t sizes[] = {4096, 100000, 1u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char key[16];
        snprintf(key, sizeof(key), "rk%zu", i);
        Mc__PutStartResponse *ps = NULL;
        assert_int_equal(md_put_start(d->c, a, key, sizes[i], &ps), 0);
        assert_int_equal(ps->n_replicas, 1);
        const Mc__MemoryLocation *m = ps->replicas[0]->memory;
        assert_non_null(m);
        assert_int_equal(m->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
        assert_int_equal(m->rkey, 0x5eed1234u);
        assert_int_equal(m->remote_addr, SEG_BASE + m->offset);
        assert_true(m->offset + sizes[i] <= SEG_SIZE);
        uint64_t off = m->offset;
        FREE_MSG(ps);
        assert_int_equal(md_put_end(d->c, a, key, 0x1234u), 0);
        Mc__GetReplicaListResponse *g = NULL;
        assert_int_equal(md_get(d->c, key, &g), 0);
        assert_int_equal(g->n_replicas, 1);
        m = g->replicas[0]->memory;
        assert_non_null(m);
        assert_int_equal(m->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
        assert_int_equal(m->rkey, 0x5eed1234u);
        assert_int_equal(m->offset, off);
        assert_int_equal(m->remote_addr, SEG_BASE + off);
        assert_string_equal(m->endpoint, "127.0.0.1:2");
        FREE_MSG(g);
    }
    /* the segment list says how to reach it */
    Mc__ListSegmentsResponse *ls = NULL;
    assert_int_equal(
        md_call(d->c, MC_METHOD_LIST_SEGMENTS, NULL, &mc__list_segments_response__descriptor, &ls),
        0);
    assert_int_equal(ls->n_segments, 1);
    assert_int_equal(ls->segments[0]->protocol, MC__PROTOCOL__PROTOCOL_RDMA);
    FREE_MSG(ls);
}

/* Once the RDMA segment is gone, a TCP segment's replicas carry no key. */
static void rdma_then_tcp(struct daemon *d, Mc__Uuid *a, Mc__Uuid *seg_id, Mc__Uuid *tcp_id)
{
    /* once the RDMA segment is gone, a TCP segment's replicas carry no key */
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.client_id = a;
    ra.force = 1;
    assert_int_equal(
        md_call(d->c, MC_METHOD_REMOVE_ALL, &ra, &mc__remove_all_response__descriptor, NULL), 0);
    Mc__UnmountSegmentRequest um = MC__UNMOUNT_SEGMENT_REQUEST__INIT;
    um.segment_id = seg_id;
    um.client_id = a;
    assert_int_equal(md_call(d->c, MC_METHOD_UNMOUNT_SEGMENT, &um,
                             &mc__unmount_segment_response__descriptor, NULL),
                     0);
    assert_int_equal(md_mount(d->c, a, tcp_id, "tcp0"), 0);
    Mc__PutStartResponse *ps = NULL;
    assert_int_equal(md_put_start(d->c, a, "tk", 4096, &ps), 0);
    assert_int_equal(ps->n_replicas, 1);
    assert_int_equal(ps->replicas[0]->memory->protocol, MC__PROTOCOL__PROTOCOL_TCP);
    assert_int_equal(ps->replicas[0]->memory->rkey, 0);
    FREE_MSG(ps);
}

static void test_rdma_segment_descriptors(void **state)
{
    struct daemon *d = *state;
    md_start(d, NULL);
    d->c = md_connect(d);
    Mc__Uuid a = md_uuid(1, 2), seg_id = md_uuid(7, 8), tcp_id = md_uuid(9, 10);
    rdma_mount(d, &a, &seg_id);
    rdma_descriptors(d, &a);
    rdma_then_tcp(d, &a, &seg_id, &tcp_id);
    md_stop_ok(d);
}

int main(void)
{
    md_main_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flags, md_setup, md_teardown),
        cmocka_unit_test_setup_teardown(test_rdma_segment_descriptors, md_setup, md_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
