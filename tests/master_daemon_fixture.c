/*
 * master_daemon_fixture.c - the mooncake_master process tests' shared fixture. See
 * master_daemon_fixture.h.
 */
#include "master_daemon_fixture.h"

char md_bin[4096];

/* ---- process plumbing ------------------------------------------------------------------------ */

void md_print_log(const struct daemon *d)
{
    mc_proc_dump_log(&d->p, "master stderr", 1u << 20);
}

void md_start(struct daemon *d, const char *extra, ...)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = md_bin;
    argv[n++] = "--rpc_port=0";
    argv[n++] = "--metrics_port=0";
    argv[n++] = "--rpc_address=127.0.0.1";
    argv[n++] = "--metrics_host=127.0.0.1";
    argv[n++] = "--rpc_thread_num=2";
    va_list ap;
    va_start(ap, extra);
    for (const char *a = extra; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;

    const struct mc_proc_io io = {.err_path = d->err_path};
    assert_int_equal(mc_proc_spawn(&d->p, argv, &io), 0);
    struct mc_proc_ready r;
    int rc = mc_proc_await_ready(&d->p, &r, 20000);
    if (rc == -1) {
        md_print_log(d);
        fail_msg("the master did not print READY within 20 s");
    }
    if (rc != 0 || r.kind != MC_PROC_READY_MASTER)
        fail_msg("unexpected first line: '%s'", r.line);
    assert_string_equal(r.rpc_host, "127.0.0.1");
    assert_string_equal(r.metrics_host, "127.0.0.1");
    d->rpc_port = r.rpc_port;
    d->metrics_port = r.metrics_port;
    /* exactly one line: nothing else may follow on stdout */
    struct pollfd p = {.fd = d->p.out_fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
}

struct mc_rpc_client *md_connect(const struct daemon *d)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = "127.0.0.1";
    cc.port = d->rpc_port;
    cc.call_timeout_ms = 5000;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    assert_int_equal(mc_rpc_client_connect(c), 0);
    return c;
}

/* SIGTERM, then exit status 0 within 10 s. */
void md_stop_ok(struct daemon *d)
{
    mc_rpc_client_free(d->c);
    d->c = NULL;
    assert_int_equal(kill(d->p.pid, SIGTERM), 0);
    int st = mc_proc_wait(&d->p, 10000);
    if (st != 0)
        md_print_log(d);
    assert_int_equal(st, 0);
    /* stdout carried nothing after READY */
    char buf[64];
    assert_int_equal(read(d->p.out_fd, buf, sizeof(buf)), 0);
    mc_proc_stop(&d->p, SIGKILL, 0); /* closes the pipe */
}

int md_setup(void **state)
{
    struct daemon *d = calloc(1, sizeof(*d));
    if (!d || mc_proc_mkdtemp(d->dir, sizeof(d->dir), NULL, "mc_master_daemon") != 0) {
        free(d);
        return -1;
    }
    snprintf(d->err_path, sizeof(d->err_path), "%s/stderr", d->dir);
    d->p.out_fd = -1;
    *state = d;
    return 0;
}

int md_teardown(void **state)
{
    struct daemon *d = *state;
    mc_rpc_client_free(d->c);
    free(d->body);
    mc_proc_stop(&d->p, SIGKILL, 10000);
    mc_proc_rm_rf(d->dir);
    free(d);
    return 0;
}

/* ---- RPC helpers ----------------------------------------------------------------------------- */

int md_call(struct mc_rpc_client *c, uint16_t method, const void *req,
            const ProtobufCMessageDescriptor *desc, void *resp_out)
{
    ProtobufCMessage *resp = NULL;
    int rc = mc_rpc_client_call_msg(c, method, (const ProtobufCMessage *)req, desc, 0, &resp);
    if (resp_out)
        *(ProtobufCMessage **)resp_out = resp;
    else if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

Mc__Uuid md_uuid(uint64_t hi, uint64_t lo)
{
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = hi;
    u.lo = lo;
    return u;
}

int md_ping(struct mc_rpc_client *c, Mc__Uuid *client, Mc__PingResponse **out)
{
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = client;
    return md_call(c, MC_METHOD_PING, &req, &mc__ping_response__descriptor, out);
}

int md_mount(struct mc_rpc_client *c, Mc__Uuid *client, Mc__Uuid *seg_id, const char *name)
{
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = seg_id;
    seg.name = (char *)name;
    seg.base_addr = SEG_BASE;
    seg.size = SEG_SIZE;
    seg.endpoint = "127.0.0.1:1";
    seg.protocol = MC__PROTOCOL__PROTOCOL_TCP;
    Mc__MountSegmentRequest req = MC__MOUNT_SEGMENT_REQUEST__INIT;
    req.segment = &seg;
    req.client_id = client;
    return md_call(c, MC_METHOD_MOUNT_SEGMENT, &req, &mc__mount_segment_response__descriptor, NULL);
}

int md_put_start(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint64_t size,
                 Mc__PutStartResponse **out)
{
    Mc__PutStartRequest req = MC__PUT_START_REQUEST__INIT;
    req.client_id = client;
    req.key = (char *)key;
    req.value_length = size;
    return md_call(c, MC_METHOD_PUT_START, &req, &mc__put_start_response__descriptor, out);
}

int md_put_end(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint32_t crc)
{
    return md_put_end_v(c, client, key, 0, crc);
}

int md_put_end_v(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint64_t version,
                 uint32_t crc)
{
    Mc__PutEndRequest req = MC__PUT_END_REQUEST__INIT;
    req.client_id = client;
    req.key = (char *)key;
    req.version = version;
    req.crc32c = crc;
    req.crc_valid = 1;
    return md_call(c, MC_METHOD_PUT_END, &req, &mc__put_end_response__descriptor, NULL);
}

int md_put_revoke(struct mc_rpc_client *c, Mc__Uuid *client, const char *key, uint64_t version)
{
    Mc__PutRevokeRequest req = MC__PUT_REVOKE_REQUEST__INIT;
    req.client_id = client;
    req.key = (char *)key;
    req.version = version;
    return md_call(c, MC_METHOD_PUT_REVOKE, &req, &mc__put_revoke_response__descriptor, NULL);
}

int md_batch_put_start(struct mc_rpc_client *c, Mc__Uuid *client, char **keys, size_t n_keys,
                       uint64_t *lens, size_t n_lens, Mc__BatchPutStartResponse **out)
{
    Mc__BatchPutStartRequest req = MC__BATCH_PUT_START_REQUEST__INIT;
    req.client_id = client;
    req.n_keys = n_keys;
    req.keys = keys;
    req.n_value_lengths = n_lens;
    req.value_lengths = lens;
    return md_call(c, MC_METHOD_BATCH_PUT_START, &req, &mc__batch_put_start_response__descriptor,
                   out);
}

int md_batch_put_end(struct mc_rpc_client *c, Mc__Uuid *client, Mc__PutEndItem **items, size_t n,
                     Mc__BatchPutEndResponse **out)
{
    Mc__BatchPutEndRequest req = MC__BATCH_PUT_END_REQUEST__INIT;
    req.client_id = client;
    req.n_items = n;
    req.items = items;
    return md_call(c, MC_METHOD_BATCH_PUT_END, &req, &mc__batch_put_end_response__descriptor, out);
}

int md_batch_put_revoke(struct mc_rpc_client *c, Mc__Uuid *client, char **keys, size_t n,
                        uint64_t *versions, Mc__BatchPutRevokeResponse **out)
{
    Mc__BatchPutRevokeRequest req = MC__BATCH_PUT_REVOKE_REQUEST__INIT;
    req.client_id = client;
    req.n_keys = n;
    req.keys = keys;
    req.n_versions = versions ? n : 0;
    req.versions = versions;
    return md_call(c, MC_METHOD_BATCH_PUT_REVOKE, &req, &mc__batch_put_revoke_response__descriptor,
                   out);
}

int md_get(struct mc_rpc_client *c, const char *key, Mc__GetReplicaListResponse **out)
{
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = (char *)key;
    return md_call(c, MC_METHOD_GET_REPLICA_LIST, &req, &mc__get_replica_list_response__descriptor,
                   out);
}

Mc__GetStatsResponse *md_stats(struct mc_rpc_client *c)
{
    Mc__GetStatsResponse *st = NULL;
    assert_int_equal(
        md_call(c, MC_METHOD_GET_STATS, NULL, &mc__get_stats_response__descriptor, &st), 0);
    return st;
}

void md_check_replica(const Mc__ReplicaDescriptor *r, uint64_t size)
{
    assert_int_equal(r->type, MC__REPLICA_TYPE__RT_MEMORY);
    assert_non_null(r->memory);
    assert_string_equal(r->memory->segment_name, "seg0");
    assert_string_equal(r->memory->endpoint, "127.0.0.1:1");
    assert_int_equal(r->memory->size, size);
    assert_true(r->memory->offset + size <= SEG_SIZE);
    assert_int_equal(r->memory->remote_addr, SEG_BASE + r->memory->offset);
    assert_int_equal(r->memory->segment_id->hi, 7);
    assert_int_equal(r->memory->segment_id->lo, 8);
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

int md_tcp_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* GET path; returns the status and the body (malloc'ed). */
int md_http_get(uint16_t port, const char *path, char **body)
{
    struct mc_http_reply r;
    assert_int_equal(mc_http_fetch("127.0.0.1", port, "GET", path, 5000, &r), 0);
    *body = r.body; /* handed over */
    return r.status;
}

/* Finds an unlabelled sample "name value" in an exposition; checks every sample line parses. */
double md_metric_value(const char *text, const char *name, int *found)
{
    double v = 0;
    assert_int_equal(mc_metrics_check(text), 0);
    *found = mc_metrics_find(text, name, &v) == 0;
    return v;
}

void md_main_init(void)
{
    const char *bin = getenv("MC_BIN_DIR");
    snprintf(md_bin, sizeof(md_bin), "%s/mooncake_master", bin ? bin : ".");
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_WARN); /* the client's "connection lost" at SIGTERM is expected */
}
