/*
 * service_admin.c - RPC adapters of the admin methods: QueryKey, ListSegments, GetStats and
 * RemoveAll (decode -> mc_master_* -> encode; the CLI's stat, segments, top and rm paths).
 *
 * GetStats answers a few counters in fields of their own and every other one by its metric name
 * in `extra`: the gauges and counters of master_counters.h (one table, so a new counter is
 * listed without touching this file), then the offload and promotion funnels.
 */
#include <stdlib.h>

#include "common/clock.h"
#include "common/wire.h"
#include "master/promotion.h"
#include "common/log.h"
#include "master/service_internal.h"
#include "mooncake/errors.h"

/* RemoveAll answers once the delete rule is met (see mc_master_remove_all_wait). */
struct remove_all_wait {
    struct mc_rpc_call *call;
    uint64_t removed;
};

static void remove_all_done(void *arg, int rc)
{
    struct remove_all_wait *w = arg;
    Mc__RemoveAllResponse r = MC__REMOVE_ALL_RESPONSE__INIT;
    r.removed = w->removed;
    mc_rpc_reply_msg(w->call, rc, &r.base);
    free(w);
}

void mc_svc_remove_all(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(RemoveAllRequest, remove_all_request, req);
    if (!mc_rpc_call_is_admin(call)) { /* --admin_token_file: RemoveAll is the admin's */
        mc_warn("master", "RemoveAll refused: the connection did not prove the admin token",
                "conn=%llu", (unsigned long long)mc_rpc_call_conn_id(call));
        FREE_REQ(req);
        mc_rpc_reply_status(call, MC_ERR_UNAUTHENTICATED);
        return;
    }
    struct remove_all_wait *w = calloc(1, sizeof(*w));
    int rc = mc_svc_check_client(svc->m, call, mc_svc_id_from_pb(req->client_id));
    if (rc == 0 && !w)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0) {
        w->call = call;
        rc = mc_master_remove_all_wait(svc->m, req->force, &w->removed, remove_all_done, w);
    }
    FREE_REQ(req);
    if (rc == MC_MASTER_PENDING)
        return; /* remove_all_done answers */
    if (w) {
        w->call = call;
        remove_all_done(w, rc);
    } else {
        mc_rpc_reply_status(call, rc);
    }
}

static int64_t ms_left(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

void mc_svc_query_key(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    UNPACK(QueryKeyRequest, query_key_request, req);
    struct mc_key_info ki;
    struct mc_key_ref key = mc_svc_key_from_pb(call, KEY(query_key_request), req->key);
    int rc = mc_master_query_key(svc->m, key.data, key.len, &ki);
    if (rc != 0) {
        FREE_REQ(req);
        mc_rpc_reply_status(call, rc);
        return;
    }
    Mc__QueryKeyResponse r = MC__QUERY_KEY_RESPONSE__INIT;
    struct mc_svc_pb_replica reps[MC_MAX_REPLICAS];
    Mc__ReplicaInfo infos[MC_MAX_REPLICAS];
    Mc__ReplicaInfo *ptrs[MC_MAX_REPLICAS];
    uint32_t n = ki.nreplicas < MC_MAX_REPLICAS ? ki.nreplicas : MC_MAX_REPLICAS;
    for (uint32_t i = 0; i < n; i++) {
        mc_svc_replica_to_pb(&ki.replicas[i], &reps[i]);
        mc__replica_info__init(&infos[i]);
        infos[i].replica = &reps[i].d;
        infos[i].refcnt = ki.replicas[i].refcnt;
        ptrs[i] = &infos[i];
    }
    ki.group_id[sizeof(ki.group_id) - 1] = '\0';
    r.key = req->key;
    r.size = ki.size;
    r.version = ki.version;
    r.crc32c = ki.crc32c;
    r.crc_valid = ki.has_crc;
    r.lease_ms_left = ms_left(ki.lease_remaining_ms);
    r.soft_pin_ms_left = ms_left(ki.soft_pin_remaining_ms);
    r.hard_pinned = ki.hard_pinned;
    r.put_in_progress = !ki.complete;
    r.group_id = ki.group_id;
    r.offload_pending = ki.offload_pending;
    r.n_replicas = n;
    r.replicas = ptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
    FREE_REQ(req);
}

/* With --admin_token_file, the whole listing (every client's segments, ids and endpoints) is
 * the admin's: a data connection sees only the client it acts for (a restarted client finds
 * its previous incarnation's segments that way), or nothing. */
static void own_only(struct mc_rpc_call *call, struct mc_segment_info *segs, size_t *n,
                     struct mc_local_disk_info *disks, size_t *nd)
{
    struct mc_id me;
    bool known = mc_svc_conn_client(call, &me);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (known && mc_id_eq(segs[i].owner, me))
            segs[k++] = segs[i];
    *n = k;
    k = 0;
    for (size_t i = 0; i < *nd; i++)
        if (known && mc_id_eq(disks[i].client, me))
            disks[k++] = disks[i];
    *nd = k;
}

void mc_svc_list_segments(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_segment_info *segs = NULL;
    struct mc_local_disk_info *disks = NULL;
    size_t n = 0, nd = 0;
    Mc__SegmentInfo *items = NULL, **ptrs = NULL;
    Mc__LocalDiskInfo *ditems = NULL, **dptrs = NULL;
    Mc__Uuid *uuids = NULL;
    int rc = mc_master_list_segments(svc->m, &segs, &n);
    if (rc == 0)
        rc = mc_master_list_local_disks(svc->m, &disks, &nd);
    if (rc == 0 && !mc_rpc_call_is_admin(call))
        own_only(call, segs, &n, disks, &nd);
    if (rc == 0 && n > 0 &&
        (!(items = malloc(n * sizeof(*items))) || !(ptrs = malloc(n * sizeof(*ptrs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && nd > 0 &&
        (!(ditems = malloc(nd * sizeof(*ditems))) || !(dptrs = malloc(nd * sizeof(*dptrs)))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0 && n + nd > 0 && !(uuids = malloc((2 * n + nd) * sizeof(*uuids))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        mc_rpc_reply_status(call, rc);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const struct mc_segment_info *s = &segs[i];
        Mc__SegmentInfo *it = &items[i];
        mc__segment_info__init(it);
        mc_svc_id_to_pb(s->desc.id, &uuids[2 * i]);
        mc_svc_id_to_pb(s->owner, &uuids[2 * i + 1]);
        it->id = &uuids[2 * i];
        it->owner = &uuids[2 * i + 1];
        it->name = (char *)s->desc.name;
        it->endpoint = (char *)s->desc.endpoint;
        it->protocol = mc_svc_protocol_to_pb(s->desc.protocol);
        it->size = s->capacity;
        it->used = s->allocated;
        it->status = MC__SEGMENT_STATUS__SS_OK;
        it->replica_count = s->nallocs;
        ptrs[i] = it;
    }
    for (size_t i = 0; i < nd; i++) {
        const struct mc_local_disk_info *ld = &disks[i];
        Mc__LocalDiskInfo *it = &ditems[i];
        mc__local_disk_info__init(it);
        mc_svc_id_to_pb(ld->client, &uuids[2 * n + i]);
        it->client_id = &uuids[2 * n + i];
        it->endpoint = (char *)ld->endpoint;
        it->capacity_bytes = ld->capacity_bytes;
        it->replica_count = ld->replica_count;
        it->used_bytes = ld->used_bytes;
        it->enable_offloading = ld->enable_offloading;
        dptrs[i] = it;
    }
    Mc__ListSegmentsResponse r = MC__LIST_SEGMENTS_RESPONSE__INIT;
    r.n_segments = n;
    r.segments = ptrs;
    r.n_local_disks = nd;
    r.local_disks = dptrs;
    mc_rpc_reply_msg(call, 0, &r.base);
out:
    free(segs);
    free(disks);
    free(items);
    free(ptrs);
    free(ditems);
    free(dptrs);
    free(uuids);
}

/* GetStats' extra entries, counted from the tables they come from. */
#define ONE(...) +1
enum {
    N_OFFLOAD_EXTRA = 10,
    N_EXTRA = MC_MASTER_GAUGES(ONE) + 1 /* used ratio */ + MC_MASTER_CALL_COUNTERS(ONE) +
              MC_MASTER_EVICTION_COUNTERS(ONE) + N_OFFLOAD_EXTRA + MC_PROMOTION_COUNTERS(ONE) +
              1 /* promotions in flight */ + 1 /* http port */,
};
#undef ONE

struct extras {
    Mc__NamedValue v[N_EXTRA];
    Mc__NamedValue *p[N_EXTRA];
    size_t n;
};

static void extra(struct extras *e, const char *name, double v)
{
    if (e->n == N_EXTRA)
        return; /* cannot happen: N_EXTRA counts every call below */
    Mc__NamedValue *nv = &e->v[e->n];
    mc__named_value__init(nv);
    nv->name = (char *)name;
    nv->value = v;
    e->p[e->n++] = nv;
}

void mc_svc_get_stats(void *arg, struct mc_rpc_call *call)
{
    struct mc_master_service *svc = arg;
    struct mc_master_stats st;
    mc_master_get_stats(svc->m, &st);
    Mc__GetStatsResponse r = MC__GET_STATS_RESPONSE__INIT;
    r.version = (char *)MC_SERVICE_VERSION;
    r.uptime_ms = mc_now_ms() - svc->start_ms;
    r.key_count = st.key_count;
    r.allocated_bytes = st.allocated_bytes;
    r.capacity_bytes = st.total_capacity_bytes;
    r.segment_count = st.segment_count;
    r.client_count = st.active_clients;
    struct mc_offload_stats os;
    mc_master_offload_stats(svc->m, &os);
    r.local_disk_replica_count = os.disk_replicas;
    r.offload_in_flight = os.in_flight;
    struct mc_promotion_stats ps;
    mc_master_promotion_stats(svc->m, &ps);
    /* Everything else by its upstream metric name. */
    struct extras e;
    e.n = 0;
#define GAUGE(f, name, help, listed)                                                               \
    if (listed)                                                                                    \
        extra(&e, name, (double)st.f);
    MC_MASTER_GAUGES(GAUGE)
#undef GAUGE
    extra(&e, "master_used_ratio", st.used_ratio);
#define COUNTER(f, name, ...) extra(&e, name, (double)st.f);
    MC_MASTER_CALL_COUNTERS(COUNTER)
    MC_MASTER_EVICTION_COUNTERS(COUNTER)
#undef COUNTER
    extra(&e, "master_offload_queued_total", (double)os.queued);
    extra(&e, "master_offload_completed_total", (double)os.completed);
    extra(&e, "master_offload_nacked_total", (double)os.nacked);
    extra(&e, "master_offload_expired_total", (double)os.expired);
    extra(&e, "master_offload_cancelled_total", (double)os.cancelled);
    extra(&e, "master_offload_refused_total", (double)os.refused);
    extra(&e, "master_allocated_file_size_bytes", (double)os.file_allocated_bytes);
    extra(&e, "master_total_file_capacity_bytes", (double)os.file_capacity_bytes);
    extra(&e, "master_disk_only_key_count", (double)os.disk_only_keys);
    extra(&e, "master_local_disk_count", (double)os.holders);
#define PROMO(f, help) extra(&e, "master_promotion_" #f "_total", (double)ps.f);
    MC_PROMOTION_COUNTERS(PROMO)
#undef PROMO
    extra(&e, "master_promotion_in_flight", (double)ps.in_flight);
    uint32_t hp = atomic_load(&svc->http_port);
    if (hp)
        extra(&e, "master_http_port", (double)hp);
    r.n_extra = e.n;
    r.extra = e.p;
    mc_rpc_reply_msg(call, 0, &r.base);
}

void mc_master_service_set_http_port(struct mc_master_service *svc, uint16_t port)
{
    if (svc)
        atomic_store(&svc->http_port, port);
}
