/*
 * cli_admin.c - `stat KEY` and `segments`: the master's admin queries.
 *
 * Both go over a plain RPC connection (common/rpc_client.h) rather than through a client
 * library instance, so they register no client, take no lease and trigger no promotion: an
 * operator can look at a key without changing what the master will do with it. The connection
 * checks the protocol version first (ServiceReady), then makes one call.
 *
 * JSON shapes (one line on stdout):
 *   stat:     {"key","size","version","lease_ms_left","replicas":[{"id","type","status",
 *              "segment","offset","endpoint","holder","refcnt","rkey"}]}  (COMPLETE replicas only,
 *              unless --all; refcnt = pins: an offload or promotion source; rkey: RDMA segments)
 *   segments: [{"id","name","endpoint","size","used","status","owner"}]
 * Without --json the same facts are printed as aligned tables.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/id.h"
#include "common/parse.h"
#include "common/rpc_client.h"
#include "common/service_ready.h"
#include "common/tls.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/cli.h"

int mc_cli_admin_connect(const struct mc_cli_opts *o, struct mc_rpc_client **out)
{
    struct mc_rpc_client_config cfg;
    char hostbuf[256];
    struct mc_rpc_client *c = NULL;
    int rc;

    mc_rpc_client_config_init(&cfg);
    rc = mc_rpc_parse_endpoint(o->master, hostbuf, sizeof(hostbuf), &cfg);
    if (rc)
        return rc;
    if (o->timeout_ms) {
        cfg.connect_timeout_ms = o->timeout_ms;
        cfg.call_timeout_ms = o->timeout_ms;
    }
    cfg.name = "cli";
    struct mc_auth_key key;
    if (o->auth_token_file) {
        char err[160];
        rc = mc_auth_key_load(o->auth_token_file, &key, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "mooncake_cli: %s: %s\n", o->auth_token_file, err);
            return rc;
        }
        cfg.auth = &key;
    }
    /* one TLS context for the tool's life (it outlives every client it opens) */
    static struct mc_tls_ctx *tls;
    struct mc_tls_files tf = {o->tls_cert_file, o->tls_key_file, o->tls_ca_file};
    if (!tls && mc_tls_files_set(&tf)) {
        char err[256];
        rc = mc_tls_ctx_new(&tf, false, &tls, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "mooncake_cli: TLS: %s\n", err);
            return rc;
        }
    }
    cfg.tls = tls;
    rc = mc_rpc_client_new(&cfg, &c);
    if (rc)
        return rc;
    rc = mc_service_ready_check(c, NULL, 0);
    if (rc) {
        mc_rpc_client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static const char *uuid_str(const Mc__Uuid *u, char *buf)
{
    struct mc_id id = {0, 0};

    if (u) {
        id.hi = u->hi;
        id.lo = u->lo;
    }
    return mc_id_format(id, buf);
}

static const char *replica_type_name(Mc__ReplicaType t)
{
    switch (t) {
    case MC__REPLICA_TYPE__RT_MEMORY:
        return "MEMORY";
    case MC__REPLICA_TYPE__RT_LOCAL_DISK:
        return "LOCAL_DISK";
    default:
        return "UNKNOWN";
    }
}

static const char *replica_status_name(Mc__ReplicaStatus s)
{
    switch (s) {
    case MC__REPLICA_STATUS__RS_UNDEFINED:
        return "UNDEFINED";
    case MC__REPLICA_STATUS__RS_INITIALIZED:
        return "INITIALIZED";
    case MC__REPLICA_STATUS__RS_PROCESSING:
        return "PROCESSING";
    case MC__REPLICA_STATUS__RS_COMPLETE:
        return "COMPLETE";
    case MC__REPLICA_STATUS__RS_REMOVED:
        return "REMOVED";
    case MC__REPLICA_STATUS__RS_FAILED:
        return "FAILED";
    default:
        return "UNKNOWN";
    }
}

const char *mc_cli_segment_status_name(int s)
{
    switch (s) {
    case MC__SEGMENT_STATUS__SS_OK:
        return "OK";
    case MC__SEGMENT_STATUS__SS_DRAINING:
        return "DRAINING";
    case MC__SEGMENT_STATUS__SS_DRAINED:
        return "DRAINED";
    case MC__SEGMENT_STATUS__SS_GRACEFULLY_UNMOUNTING:
        return "GRACEFULLY_UNMOUNTING";
    case MC__SEGMENT_STATUS__SS_UNMOUNTING:
        return "UNMOUNTING";
    default:
        return "UNDEFINED";
    }
}

/* The facts of one replica, flattened for both output forms. */
struct replica_view {
    uint64_t id;
    const char *type, *status, *segment, *endpoint;
    uint64_t offset;
    uint32_t rkey; /* RDMA-mounted segments: the key a peer's READ/WRITE uses (0 otherwise) */
    char holder[MC_ID_STRLEN];
};

static void replica_view(const Mc__ReplicaDescriptor *r, struct replica_view *v)
{
    memset(v, 0, sizeof(*v));
    v->id = r->id;
    v->type = replica_type_name(r->type);
    v->status = replica_status_name(r->status);
    v->segment = "";
    v->endpoint = "";
    if (r->type == MC__REPLICA_TYPE__RT_MEMORY && r->memory) {
        v->segment = r->memory->segment_name ? r->memory->segment_name : "";
        v->endpoint = r->memory->endpoint ? r->memory->endpoint : "";
        v->offset = r->memory->offset;
        v->rkey = r->memory->rkey;
    } else if (r->type == MC__REPLICA_TYPE__RT_LOCAL_DISK && r->local_disk) {
        v->endpoint = r->local_disk->endpoint ? r->local_disk->endpoint : "";
        uuid_str(r->local_disk->holder, v->holder);
    }
}

static void stat_json(const Mc__QueryKeyResponse *q, const char *key, bool all)
{
    bool first = true;

    fputs("{\"key\":", stdout);
    mc_cli_json_str(stdout, q->key && q->key[0] ? q->key : key);
    printf(",\"size\":%" PRIu64 ",\"version\":%" PRIu64 ",\"lease_ms_left\":%" PRId64
           ",\"replicas\":[",
           q->size, q->version, q->lease_ms_left > 0 ? q->lease_ms_left : 0);
    for (size_t i = 0; i < q->n_replicas; i++) {
        const Mc__ReplicaDescriptor *r = q->replicas[i] ? q->replicas[i]->replica : NULL;
        struct replica_view v;
        if (!r || (!all && r->status != MC__REPLICA_STATUS__RS_COMPLETE))
            continue;
        replica_view(r, &v);
        printf("%s{\"id\":%" PRIu64 ",\"type\":\"%s\",\"status\":\"%s\",\"segment\":",
               first ? "" : ",", v.id, v.type, v.status);
        mc_cli_json_str(stdout, v.segment);
        printf(",\"offset\":%" PRIu64 ",\"endpoint\":", v.offset);
        mc_cli_json_str(stdout, v.endpoint);
        fputs(",\"holder\":", stdout);
        mc_cli_json_str(stdout, v.holder);
        printf(",\"refcnt\":%" PRIu32 ",\"rkey\":%" PRIu32 "}", q->replicas[i]->refcnt, v.rkey);
        first = false;
    }
    fputs("]}\n", stdout);
}

static void stat_table(const Mc__QueryKeyResponse *q, const char *key, bool all)
{
    char size[32], sizeh[32], ver[32], lease[32];
    struct mc_cli_table t;
    size_t shown = 0;

    snprintf(size, sizeof(size), "%" PRIu64, q->size);
    mc_format_size(q->size, sizeh, sizeof(sizeh));
    snprintf(ver, sizeof(ver), "%" PRIu64, q->version);
    snprintf(lease, sizeof(lease), "%" PRId64 " ms", q->lease_ms_left > 0 ? q->lease_ms_left : 0);
    printf("key:      %s\nsize:     %s (%s)\nversion:  %s\nlease:    %s\n",
           q->key && q->key[0] ? q->key : key, size, sizeh, ver, lease);
    if (q->hard_pinned || q->soft_pin_ms_left > 0)
        printf("pin:      %s\n", q->hard_pinned ? "hard" : "soft");
    if (q->put_in_progress)
        printf("put:      in progress\n");

    mc_cli_table_init(&t, 7);
    mc_cli_table_row(&t, "ID", "TYPE", "STATUS", "SEGMENT", "OFFSET", "ENDPOINT", "HOLDER");
    for (size_t i = 0; i < q->n_replicas; i++) {
        const Mc__ReplicaDescriptor *r = q->replicas[i] ? q->replicas[i]->replica : NULL;
        struct replica_view v;
        char id[32], off[32];
        if (!r || (!all && r->status != MC__REPLICA_STATUS__RS_COMPLETE))
            continue;
        replica_view(r, &v);
        snprintf(id, sizeof(id), "%" PRIu64, v.id);
        snprintf(off, sizeof(off), "%" PRIu64, v.offset);
        mc_cli_table_row(&t, id, v.type, v.status, v.segment[0] ? v.segment : "-",
                         r->type == MC__REPLICA_TYPE__RT_MEMORY ? off : "-",
                         v.endpoint[0] ? v.endpoint : "-", v.holder[0] ? v.holder : "-");
        shown++;
    }
    printf("replicas: %zu\n", shown);
    if (shown)
        mc_cli_table_print(&t, stdout);
    mc_cli_table_destroy(&t);
}

int mc_cli_stat(const struct mc_cli_opts *o)
{
    const char *key = o->args[0];
    Mc__QueryKeyRequest req = MC__QUERY_KEY_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    struct mc_rpc_client *c = NULL;
    int rc;

    rc = mc_cli_admin_connect(o, &c);
    if (rc)
        return mc_cli_fail("stat", rc);
    req.key = (char *)key;
    rc = mc_rpc_client_call_msg(c, MC_METHOD_QUERY_KEY, &req.base,
                                &mc__query_key_response__descriptor, 0, &resp);
    mc_rpc_client_free(c);
    if (rc)
        return mc_cli_fail("stat", rc);
    if (o->json)
        stat_json((const Mc__QueryKeyResponse *)resp, key, o->all);
    else
        stat_table((const Mc__QueryKeyResponse *)resp, key, o->all);
    protobuf_c_message_free_unpacked(resp, NULL);
    return fflush(stdout) == 0 ? MC_CLI_EXIT_OK : mc_cli_fail("stat", MC_ERR_FILE_WRITE_FAIL);
}

static void segments_json(const Mc__ListSegmentsResponse *l)
{
    char id[MC_ID_STRLEN], owner[MC_ID_STRLEN];

    fputc('[', stdout);
    for (size_t i = 0; i < l->n_segments; i++) {
        const Mc__SegmentInfo *s = l->segments[i];
        printf("%s{\"id\":\"%s\",\"name\":", i ? "," : "", uuid_str(s->id, id));
        mc_cli_json_str(stdout, s->name ? s->name : "");
        fputs(",\"endpoint\":", stdout);
        mc_cli_json_str(stdout, s->endpoint ? s->endpoint : "");
        printf(",\"size\":%" PRIu64 ",\"used\":%" PRIu64 ",\"status\":\"%s\",\"owner\":\"%s\"}",
               s->size, s->used, mc_cli_segment_status_name(s->status), uuid_str(s->owner, owner));
    }
    fputs("]\n", stdout);
}

static void local_disks_table(const Mc__ListSegmentsResponse *l)
{
    struct mc_cli_table t;

    mc_cli_table_init(&t, 5);
    mc_cli_table_row(&t, "LOCAL_DISK HOLDER", "ENDPOINT", "CAPACITY", "USED", "REPLICAS");
    for (size_t i = 0; i < l->n_local_disks; i++) {
        const Mc__LocalDiskInfo *d = l->local_disks[i];
        char id[MC_ID_STRLEN], cap[32], u[32], nrep[32];
        snprintf(nrep, sizeof(nrep), "%" PRIu64, d->replica_count);
        mc_cli_table_row(&t, uuid_str(d->client_id, id), d->endpoint ? d->endpoint : "",
                         mc_format_size(d->capacity_bytes, cap, sizeof(cap)),
                         mc_format_size(d->used_bytes, u, sizeof(u)), nrep);
    }
    fputc('\n', stdout);
    mc_cli_table_print(&t, stdout);
    mc_cli_table_destroy(&t);
}

static void segments_table(const Mc__ListSegmentsResponse *l)
{
    struct mc_cli_table t;
    uint64_t total = 0, used = 0;
    char tot_s[32], used_s[32];

    mc_cli_table_init(&t, 8);
    mc_cli_table_row(&t, "NAME", "ENDPOINT", "SIZE", "USED", "USE%", "STATUS", "ID", "OWNER");
    for (size_t i = 0; i < l->n_segments; i++) {
        const Mc__SegmentInfo *s = l->segments[i];
        char size[32], u[32], pct[16], id[MC_ID_STRLEN], owner[MC_ID_STRLEN];
        mc_format_size(s->size, size, sizeof(size));
        mc_format_size(s->used, u, sizeof(u));
        snprintf(pct, sizeof(pct), "%.1f", s->size ? 100.0 * (double)s->used / (double)s->size : 0);
        mc_cli_table_row(&t, s->name ? s->name : "", s->endpoint ? s->endpoint : "", size, u, pct,
                         mc_cli_segment_status_name(s->status), uuid_str(s->id, id),
                         uuid_str(s->owner, owner));
        total += s->size;
        used += s->used;
    }
    mc_cli_table_print(&t, stdout);
    mc_cli_table_destroy(&t);
    printf("%zu segment(s), %s used of %s\n", l->n_segments,
           mc_format_size(used, used_s, sizeof(used_s)),
           mc_format_size(total, tot_s, sizeof(tot_s)));
    if (l->n_local_disks)
        local_disks_table(l);
}

int mc_cli_segments(const struct mc_cli_opts *o)
{
    Mc__ListSegmentsRequest req = MC__LIST_SEGMENTS_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    struct mc_rpc_client *c = NULL;
    int rc;

    rc = mc_cli_admin_connect(o, &c);
    if (rc)
        return mc_cli_fail("segments", rc);
    rc = mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &req.base,
                                &mc__list_segments_response__descriptor, 0, &resp);
    mc_rpc_client_free(c);
    if (rc)
        return mc_cli_fail("segments", rc);
    if (o->json)
        segments_json((const Mc__ListSegmentsResponse *)resp);
    else
        segments_table((const Mc__ListSegmentsResponse *)resp);
    protobuf_c_message_free_unpacked(resp, NULL);
    return fflush(stdout) == 0 ? MC_CLI_EXIT_OK : mc_cli_fail("segments", MC_ERR_FILE_WRITE_FAIL);
}
