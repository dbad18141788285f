/*
 * service_segments.c - RPC adapters of the handshake, liveness and DRAM segments
 * (ServiceReady, Ping, MountSegment, ReMountSegment, UnmountSegment), and the connection's
 * client binding (service.h) that every adapter checks.
 *
 * Mount epochs (DESIGN.md §6) belong to the core: every mount that creates a segment gets a
 * fresh one (segments.h). A MountSegment answer carries its segment's epoch, a ReMountSegment
 * answer one per segment, in request order.
 *
 * The binding is the rpc_server's per-connection context: the first non-zero client id a
 * request names binds the connection, whatever the method, and mc_master_service_on_close
 * frees it. With a token the id must be the one the connection proved with its credential;
 * RegisterClient mints an id and its credential for a client that holds none.
 */
#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/service_ready.h"
#include "common/wire.h"
#include "master/clients.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

#define COMP "service"

/* ---- client binding ------------------------------------------------------------------------ */

/* What a connection is bound to (rpc_server per-connection context). */
struct conn_bind {
    struct mc_id client;
};

static void bind_client(struct mc_rpc_call *call, struct mc_id id)
{
    void **ctx = mc_rpc_call_conn_ctx(call);
    if (*ctx || mc_id_is_zero(id))
        return;
    struct conn_bind *b = malloc(sizeof(*b));
    if (!b) {
        mc_warn(COMP, "cannot bind client to connection (out of memory)", "conn=%llu",
                (unsigned long long)mc_rpc_call_conn_id(call));
        return;
    }
    b->client = id;
    *ctx = b;
}

/* With a token, who an unbound connection may act for (auth.h, client credentials): only the
 * id it proved in its handshake. An id is never given to a connection that did not prove it,
 * live here or not: after a master restart or a failover every id is unknown to the new master
 * until its client reconnects, and first-come would let any data-token holder take it then. A
 * client that holds no credential asks RegisterClient for a fresh id and its credential. */
static int cred_gate(struct mc_rpc_call *call, struct mc_id id)
{
    if (mc_id_is_zero(id) || !mc_rpc_call_creds_on(call))
        return 0;
    uint8_t want[MC_AUTH_ID_BYTES], proven[MC_AUTH_ID_BYTES];
    mc_id_to_bytes(id, want);
    bool has = mc_rpc_call_proven_client(call, proven);
    if (has && memcmp(want, proven, sizeof(want)) == 0)
        return 0;
    char buf[MC_ID_STRLEN];
    mc_warn(COMP,
            has ? "request names another client than the connection's credential"
                : "request names a client id without its credential (hijack, or a client too "
                  "old to register: it must call RegisterClient first)",
            "method=%s conn=%llu named=%s", mc_method_name(mc_rpc_call_method(call)),
            (unsigned long long)mc_rpc_call_conn_id(call), mc_id_format(id, buf));
    return MC_ERR_ILLEGAL_CLIENT;
}

/* A connection is bound by the first request that names a client id, whatever the method: one
 * that has not pinged or mounted yet cannot act for one client and then another. With a token,
 * the first one must pass cred_gate. */
int mc_svc_check_client(struct mc_master *m, struct mc_rpc_call *call, struct mc_id id)
{
    (void)m;
    struct conn_bind *b = *mc_rpc_call_conn_ctx(call);
    if (!b) {
        int rc = cred_gate(call, id);
        if (rc == 0)
            bind_client(call, id);
        return rc;
    }
    if (mc_id_is_zero(id) || mc_id_eq(b->client, id))
        return 0;
    char want[MC_ID_STRLEN], got[MC_ID_STRLEN];
    mc_warn(COMP, "request names another client than the connection's",
            "method=%s conn=%llu "
            "bound=%s named=%s",
            mc_method_name(mc_rpc_call_method(call)), (unsigned long long)mc_rpc_call_conn_id(call),
            mc_id_format(b->client, want), mc_id_format(id, got));
    return MC_ERR_ILLEGAL_CLIENT;
}

bool mc_svc_conn_client(struct mc_rpc_call *call, struct mc_id *out)
{
    const struct conn_bind *b = *mc_rpc_call_conn_ctx(call);
    uint8_t id[MC_AUTH_ID_BYTES];
    if (b) {
        *out = b->client;
        return true;
    }
    if (!mc_rpc_call_proven_client(call, id))
        return false;
    out->hi = out->lo = 0;
    for (int i = 0; i < 8; i++) {
        out->hi = out->hi << 8 | id[i];
        out->lo = out->lo << 8 | id[8 + i];
    }
    return true;
}

void mc_master_service_on_close(void *arg, uint64_t conn_id, void *conn_ctx)
{
    struct mc_master_service *svc = arg;
    (void)conn_id;
    free(conn_ctx);
    if (svc && svc->m) /* a holder's parked heartbeat on it must take no task */
        mc_svc_drop_dead_polls(svc->m);
}

/* ---- segment descriptors ------------------------------------------------------------------- */

/* Copies a protobuf string into a fixed field; -1 if it does not fit. */
static int copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return -1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return 0;
}

static int segment_from_pb(const Mc__Segment *s, struct mc_segment_desc *d)
{
    memset(d, 0, sizeof(*d));
    if (!s)
        return MC_ERR_INVALID_PARAMS;
    d->id = mc_svc_id_from_pb(s->id);
    d->base = s->base_addr;
    d->size = s->size;
    if (copy_str(d->name, sizeof(d->name), s->name) ||
        copy_str(d->endpoint, sizeof(d->endpoint), s->endpoint))
        return MC_ERR_INVALID_PARAMS;
    switch (s->protocol) {
    case MC__PROTOCOL__PROTOCOL_TCP:
        strcpy(d->protocol, "tcp");
        break;
    case MC__PROTOCOL__PROTOCOL_RDMA:
        strcpy(d->protocol, "rdma");
        if (s->rdma) {
            d->rkey = s->rdma->rkey;
            if (copy_str(d->transport_meta, sizeof(d->transport_meta), s->rdma->device))
                return MC_ERR_INVALID_PARAMS;
        }
        break;
    default:
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

/* ---- handlers ------------------------------------------------------------------------------ */

void mc_svc_service_ready(void *arg, struct mc_rpc_call *call)
{
    mc_service_ready_reply(arg, call); /* the answer lives with its check (service_ready.h) */
}

void mc_svc_ping(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(PingRequest, ping_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    FREE_REQ(req);
    struct mc_ping_result pr;
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0)
        rc = mc_master_ping(svc->m, client, &pr);
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        return;
    }
    bind_client(call, client);
    Mc__PingResponse r = MC__PING_RESPONSE__INIT;
    r.view_version = pr.view_version;
    r.client_status = (Mc__ClientStatus)pr.status;
    r.client_ttl_ms = mc_master_config_get(svc->m)->client_ttl_ms;
    uint8_t id[MC_AUTH_ID_BYTES], cred[MC_AUTH_CRED_BYTES];
    mc_id_to_bytes(client, id);
    if (mc_rpc_call_mint_cred(call, id, cred)) {
        r.credential.data = cred;
        r.credential.len = sizeof(cred);
    }
    mc_rpc_reply_msg(call, 0, &r.base);
}

/* RegisterClient: a fresh id (random, never zero) and, with a token, its credential; the
 * connection acts for that id from now on. A connection that already acts for a client may
 * not take another identity. */
void mc_svc_register_client(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    UNPACK(RegisterClientRequest, register_client_request, req);
    FREE_REQ(req);
    struct mc_id bound;
    if (mc_svc_conn_client(call, &bound)) {
        char buf[MC_ID_STRLEN];
        mc_warn(COMP, "RegisterClient refused: the connection already acts for a client",
                "conn=%llu client=%s", (unsigned long long)mc_rpc_call_conn_id(call),
                mc_id_format(bound, buf));
        mc_rpc_reply_status(call, MC_ERR_ILLEGAL_CLIENT);
        return;
    }
    struct mc_id id = mc_id_random();
    bind_client(call, id);
    if (!*mc_rpc_call_conn_ctx(call)) {
        mc_rpc_reply_status(call, MC_ERR_INTERNAL_ERROR); /* logged by bind_client */
        return;
    }
    Mc__RegisterClientResponse r = MC__REGISTER_CLIENT_RESPONSE__INIT;
    Mc__Uuid u = MC__UUID__INIT;
    mc_svc_id_to_pb(id, &u);
    r.client_id = &u;
    uint8_t idb[MC_AUTH_ID_BYTES], cred[MC_AUTH_CRED_BYTES];
    mc_id_to_bytes(id, idb);
    if (mc_rpc_call_mint_cred(call, idb, cred)) {
        r.credential.data = cred;
        r.credential.len = sizeof(cred);
    }
    char buf[MC_ID_STRLEN];
    mc_info(COMP, "client registered with a minted id", "conn=%llu client=%s",
            (unsigned long long)mc_rpc_call_conn_id(call), mc_id_format(id, buf));
    mc_rpc_reply_msg(call, 0, &r.base);
}

/* The per-client cap: INVALID_PARAMS when client already has the maximum of other segments
 * (a remount of one it has is fine). Counted over the admin listing: mounts are rare. */
static int segment_cap(struct mc_master_service *svc, struct mc_id client, struct mc_id seg)
{
    if (!svc->max_segments_per_client)
        return 0;
    struct mc_segment_info *all = NULL;
    size_t n = 0, mine = 0;
    if (mc_master_list_segments(svc->m, &all, &n) != 0)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++) {
        if (!mc_id_eq(all[i].owner, client))
            continue;
        if (mc_id_eq(all[i].desc.id, seg)) {
            mine = 0; /* already mounted: not a new one */
            break;
        }
        mine++;
    }
    free(all);
    if (mine < svc->max_segments_per_client)
        return 0;
    char buf[MC_ID_STRLEN];
    mc_warn("master", "mount refused: the client has the most segments allowed", "client=%s max=%u",
            mc_id_format(client, buf), svc->max_segments_per_client);
    return MC_ERR_INVALID_PARAMS;
}

void mc_svc_mount_segment(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(MountSegmentRequest, mount_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_segment_desc d;
    int rc = segment_from_pb(req->segment, &d);
    FREE_REQ(req);
    if (rc == 0)
        rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0) /* others will send their values there: it must be the caller's address */
        rc = mc_rpc_call_check_endpoint(call, d.endpoint);
    if (rc == 0)
        rc = segment_cap(svc, client, d.id);
    uint64_t epoch = 0;
    if (rc == 0)
        rc = mc_master_mount_segment(svc->m, client, &d, &epoch);
    if (rc == 0)
        bind_client(call, client);
    Mc__MountSegmentResponse r = MC__MOUNT_SEGMENT_RESPONSE__INIT;
    r.mount_epoch = epoch;
    uint8_t id[MC_AUTH_ID_BYTES], cred[MC_AUTH_CRED_BYTES];
    mc_id_to_bytes(client, id);
    if (rc == 0 && mc_rpc_call_mint_cred(call, id, cred)) {
        r.credential.data = cred;
        r.credential.len = sizeof(cred);
    }
    mc_rpc_reply_msg(call, rc, &r.base);
}

/* ReMountSegment as a batch of segments: res = their descriptors, views = their epochs. */
static int remount_check(struct mc_svc_batch *b)
{
    const struct mc_master_service *svc = b->ctx;
    if (svc && svc->max_segments_per_client && b->n > svc->max_segments_per_client)
        return MC_ERR_INVALID_PARAMS; /* more than a client may have mounted */
    const Mc__ReMountSegmentRequest *req = (const void *)b->req;
    struct mc_segment_desc *d = b->res;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < b->n; i++) {
        rc = segment_from_pb(req->segments[i], &d[i]);
        if (rc == 0)
            rc = mc_rpc_call_check_endpoint(b->call, d[i].endpoint);
    }
    return rc;
}

static int remount_core(struct mc_svc_batch *b)
{
    int rc = mc_master_remount_segments(b->m, b->client, b->res, b->n, b->views);
    if (rc == 0)
        bind_client(b->call, b->client);
    return rc;
}

static void remount_encode(struct mc_svc_batch *b, ProtobufCMessage *resp)
{
    mc_svc_set_repeated(resp, "mount_epochs", b->n, b->views);
}

void mc_svc_remount_segment(void *arg, struct mc_rpc_call *call)
{
    static const struct mc_svc_batch_spec spec = {
        .req = &mc__re_mount_segment_request__descriptor,
        .resp = &mc__re_mount_segment_response__descriptor,
        .items = "segments",
        .res_size = sizeof(struct mc_segment_desc),
        .view_size = sizeof(uint64_t),
        .check = remount_check,
        .core = remount_core,
        .encode = remount_encode,
    };
    mc_svc_batch(arg, call, &spec, arg); /* ctx: the service (its segment cap) */
}

void mc_svc_unmount_segment(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(UnmountSegmentRequest, unmount_segment_request, req);
    struct mc_id client = mc_svc_id_from_pb(req->client_id);
    struct mc_id seg = mc_svc_id_from_pb(req->segment_id);
    FREE_REQ(req);
    int rc = mc_svc_check_client(svc->m, call, client);
    if (rc == 0)
        rc = mc_master_unmount_segment(svc->m, client, seg);
    Mc__UnmountSegmentResponse r = MC__UNMOUNT_SEGMENT_RESPONSE__INIT;
    mc_rpc_reply_msg(call, rc, &r.base);
}
