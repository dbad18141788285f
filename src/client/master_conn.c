/*
 * master_conn.c - see master_conn.h for the design.
 *
 * Locking: `lock` guards the segment list, the counters, the `stop` flag and the condition the
 * ping thread sleeps on; `up` is atomic so the fast-fail check costs no lock. No RPC is issued
 * while `lock` is held.
 */
#include "client/master_conn.h"
#include "client/master_follow.h"
#include "client/master_follow_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/auth.h"
#include "common/lock_order.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/service_ready.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define BACKOFF_MIN_MS 50u

struct mc_master_conn {
    struct mc_master_conn_config cfg;
    char address[128];
    struct mc_master_link *link; /* master_follow.h: the current master (HA: the leader) */
    _Atomic bool not_leader;     /* a call was answered NOT_LEADER: find the leader */
    _Atomic bool up;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool stop, kick, started;
    pthread_t thread;
    const struct mc_logger *logger; /* the ping thread logs through its starter's logger */
    struct mc_mounted_segment segs[MC_MASTER_CONN_MAX_SEGMENTS];
    int nsegs;
    uint64_t pings, ping_failures, remounts, reconnects;
    _Atomic uint64_t fast_failures;
    struct mc_leader_watch *watch; /* etcd:// only: moves to a new leader at once */
    struct mc_auth_cred *cred;     /* cfg.auth's client credential holder (common/auth.h) */
};

#define RPC(mc) mc_master_link_rpc((mc)->link)

/* mc->lock goes through these: a leaf of the lock order (common/lock_order.h). The ping
 * thread's condition waits keep it recorded as held, which it is again when they return. */
static void link_lock(struct mc_master_conn *mc)
{
    mc_lo_acquire(MC_LO_MASTER_LINK, 0);
    pthread_mutex_lock(&mc->lock);
}

static void link_unlock(struct mc_master_conn *mc)
{
    pthread_mutex_unlock(&mc->lock);
    mc_lo_release(MC_LO_MASTER_LINK, 0);
}

static void set_down(struct mc_master_conn *mc, const char *why, int rc)
{
    bool was = atomic_exchange(&mc->up, false);
    if (was)
        mc_warn("client", "master unreachable, failing calls fast until it is back",
                "master=%s why=%s rc=%s", mc->address, why, mc_strerror(rc));
    link_lock(mc);
    mc->kick = true;
    pthread_cond_signal(&mc->cv);
    link_unlock(mc);
}

/* Whether the connection a call went out on (rpc's generation gen) has been replaced since by
 * one that is up: its failure is then old news. Under load a caller reports a failure late,
 * after the ping thread has already dialled again; taking the link down then would cut the
 * fresh connection and fail every call in flight on it (a heartbeat carrying delete acks, a
 * re-registration chunk), whose callers report in turn: a chain of reconnects. */
static bool replaced(struct mc_master_conn *mc, struct mc_rpc_client *rpc, uint64_t gen)
{
    if (RPC(mc) != rpc)
        return true; /* the link moved to another master meanwhile */
    return mc_rpc_client_generation(rpc) != gen && mc_rpc_client_connected(rpc);
}

#ifdef MC_TEST_HOOKS
static pthread_mutex_t test_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t test_hold_cv = PTHREAD_COND_INITIALIZER;
static bool test_hold;
static int test_held;

void mc_master_conn_test_hold_reports(bool hold)
{
    pthread_mutex_lock(&test_hold_mu);
    test_hold = hold;
    pthread_cond_broadcast(&test_hold_cv);
    pthread_mutex_unlock(&test_hold_mu);
}

int mc_master_conn_test_reports_held(void)
{
    pthread_mutex_lock(&test_hold_mu);
    int n = test_held;
    pthread_mutex_unlock(&test_hold_mu);
    return n;
}

/* While held, a failed call waits before it reports (a caller descheduled on a loaded
 * machine). */
static void test_report_pause(void)
{
    pthread_mutex_lock(&test_hold_mu);
    test_held++;
    while (test_hold)
        pthread_cond_wait(&test_hold_cv, &test_hold_mu);
    test_held--;
    pthread_mutex_unlock(&test_hold_mu);
}
#endif

int mc_master_conn_call(struct mc_master_conn *mc, uint16_t method, const ProtobufCMessage *req,
                        const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp)
{
    return mc_master_conn_call_wait(mc, method, req, resp_desc, 0, resp);
}

int mc_master_conn_call_wait(struct mc_master_conn *mc, uint16_t method,
                             const ProtobufCMessage *req,
                             const ProtobufCMessageDescriptor *resp_desc, uint32_t wait_ms,
                             ProtobufCMessage **resp)
{
    if (resp)
        *resp = NULL;
    if (!atomic_load(&mc->up)) {
        atomic_fetch_add(&mc->fast_failures, 1);
        return MC_ERR_RPC_FAIL;
    }
    struct mc_rpc_client *rpc = RPC(mc);
    uint64_t gen = mc_rpc_client_generation(rpc);
    int rc = mc_rpc_client_call_msg(rpc, method, req, resp_desc, wait_ms, resp);
    if (rc == MC_ERR_NOT_LEADER)
        atomic_store(&mc->not_leader, true);
#ifdef MC_TEST_HOOKS
    if (rc == MC_ERR_RPC_FAIL)
        test_report_pause();
#endif
    if (rc == MC_ERR_NOT_LEADER || (rc == MC_ERR_RPC_FAIL && !replaced(mc, rpc, gen)))
        set_down(mc, mc_method_name(method) ? mc_method_name(method) : "call", rc);
    return rc;
}

int mc_master_conn_register(struct mc_master_conn *mc, struct mc_id *id, uint8_t *cred)
{
    if (mc->started)
        return MC_ERR_INVALID_PARAMS; /* the ping thread reads the id unlocked */
    Mc__RegisterClientRequest req = MC__REGISTER_CLIENT_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rc = mc_master_conn_call(mc, MC_METHOD_REGISTER_CLIENT, &req.base,
                                 &mc__register_client_response__descriptor, &m);
    if (rc)
        return rc;
    const Mc__RegisterClientResponse *r = (const Mc__RegisterClientResponse *)m;
    struct mc_id got = {0, 0};
    if (r->client_id) {
        got.hi = r->client_id->hi;
        got.lo = r->client_id->lo;
    }
    if (mc_id_is_zero(got) || r->credential.len != MC_AUTH_CRED_BYTES) {
        mc_error("client", "RegisterClient answer without an id and a credential", "master=%s",
                 mc->address);
        rc = MC_ERR_INVALID_VERSION;
    } else {
        memcpy(cred, r->credential.data, MC_AUTH_CRED_BYTES);
        *id = got;
        mc->cfg.client_id = got;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* ---- segments ----------------------------------------------------------------------------- */

static void fill_segment(struct mc_master_conn *mc, const struct mc_mounted_segment *s,
                         Mc__Segment *seg, Mc__Uuid *id, Mc__Uuid *owner, Mc__RdmaInfo *ri)
{
    mc__segment__init(seg);
    mc__rdma_info__init(ri);
    mc__uuid__init(id);
    mc__uuid__init(owner);
    id->hi = s->id.hi;
    id->lo = s->id.lo;
    owner->hi = mc->cfg.client_id.hi;
    owner->lo = mc->cfg.client_id.lo;
    seg->id = id;
    seg->name = (char *)s->name;
    seg->base_addr = s->base;
    seg->size = s->size;
    seg->endpoint = (char *)s->endpoint;
    seg->protocol = MC__PROTOCOL__PROTOCOL_TCP;
    if (s->rdma) {
        seg->protocol = MC__PROTOCOL__PROTOCOL_RDMA;
        ri->rkey = s->rkey;
        ri->addr = s->base;
        ri->device = (char *)s->rdma_device;
        seg->rdma = ri;
    }
    seg->owner = owner;
}

int mc_master_conn_mount(struct mc_master_conn *mc, const struct mc_mounted_segment *s)
{
    link_lock(mc);
    bool full = mc->nsegs >= MC_MASTER_CONN_MAX_SEGMENTS;
    link_unlock(mc);
    if (full)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    Mc__Segment seg;
    Mc__RdmaInfo ri;
    Mc__Uuid id, owner, cid = MC__UUID__INIT;
    fill_segment(mc, s, &seg, &id, &owner, &ri);
    cid.hi = mc->cfg.client_id.hi;
    cid.lo = mc->cfg.client_id.lo;
    Mc__MountSegmentRequest req = MC__MOUNT_SEGMENT_REQUEST__INIT;
    req.segment = &seg;
    req.client_id = &cid;
    ProtobufCMessage *resp = NULL;
    int rc = mc_master_conn_call(mc, MC_METHOD_MOUNT_SEGMENT, &req.base,
                                 &mc__mount_segment_response__descriptor, &resp);
    uint64_t epoch = resp ? ((Mc__MountSegmentResponse *)resp)->mount_epoch : 0;
    if (resp) {
        const Mc__MountSegmentResponse *mr = (const Mc__MountSegmentResponse *)resp;
        mc_auth_cred_learn(mc->cred, mr->credential.data, mr->credential.len);
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    if (rc == 0 && epoch == 0) {
        mc_error("client", "MountSegment answer without a mount epoch (master too old?)",
                 "master=%s", mc->address);
        rc = MC_ERR_INVALID_VERSION;
    }
    if (rc == 0 && mc->cfg.on_mount_epoch)
        mc->cfg.on_mount_epoch(mc->cfg.cb_arg, s->id, epoch);
    if (rc == 0) {
        link_lock(mc);
        if (mc->nsegs < MC_MASTER_CONN_MAX_SEGMENTS)
            mc->segs[mc->nsegs++] = *s;
        link_unlock(mc);
    }
    return rc;
}

int mc_master_conn_set_segment_rkey(struct mc_master_conn *mc, struct mc_id segment_id,
                                    uint32_t rkey)
{
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    link_lock(mc);
    for (int i = 0; i < mc->nsegs; i++)
        if (mc_id_eq(mc->segs[i].id, segment_id)) {
            mc->segs[i].rkey = rkey;
            mc->segs[i].rdma = rkey != 0;
            rc = 0;
        }
    link_unlock(mc);
    return rc;
}

int mc_master_conn_unmount(struct mc_master_conn *mc, struct mc_id segment_id)
{
    link_lock(mc);
    for (int i = 0; i < mc->nsegs; i++)
        if (mc_id_eq(mc->segs[i].id, segment_id)) {
            mc->segs[i] = mc->segs[--mc->nsegs];
            break;
        }
    link_unlock(mc);
    Mc__Uuid sid = MC__UUID__INIT, cid = MC__UUID__INIT;
    sid.hi = segment_id.hi;
    sid.lo = segment_id.lo;
    cid.hi = mc->cfg.client_id.hi;
    cid.lo = mc->cfg.client_id.lo;
    Mc__UnmountSegmentRequest req = MC__UNMOUNT_SEGMENT_REQUEST__INIT;
    req.segment_id = &sid;
    req.client_id = &cid;
    ProtobufCMessage *resp = NULL;
    int rc = mc_master_conn_call(mc, MC_METHOD_UNMOUNT_SEGMENT, &req.base,
                                 &mc__unmount_segment_response__descriptor, &resp);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

/* ReMountSegment with every remembered segment; direct (the flag may be down). */
static int remount(struct mc_master_conn *mc)
{
    struct mc_mounted_segment segs[MC_MASTER_CONN_MAX_SEGMENTS];
    link_lock(mc);
    int n = mc->nsegs;
    memcpy(segs, mc->segs, sizeof(segs[0]) * (size_t)n);
    link_unlock(mc);
    Mc__Segment seg[MC_MASTER_CONN_MAX_SEGMENTS], *segp[MC_MASTER_CONN_MAX_SEGMENTS];
    Mc__Uuid ids[MC_MASTER_CONN_MAX_SEGMENTS], owners[MC_MASTER_CONN_MAX_SEGMENTS];
    Mc__RdmaInfo ris[MC_MASTER_CONN_MAX_SEGMENTS];
    for (int i = 0; i < n; i++) {
        fill_segment(mc, &segs[i], &seg[i], &ids[i], &owners[i], &ris[i]);
        segp[i] = &seg[i];
    }
    Mc__Uuid cid = MC__UUID__INIT;
    cid.hi = mc->cfg.client_id.hi;
    cid.lo = mc->cfg.client_id.lo;
    Mc__ReMountSegmentRequest req = MC__RE_MOUNT_SEGMENT_REQUEST__INIT;
    req.n_segments = (size_t)n;
    req.segments = segp;
    req.client_id = &cid;
    ProtobufCMessage *resp = NULL;
    int rc = mc_rpc_client_call_msg(RPC(mc), MC_METHOD_REMOUNT_SEGMENT, &req.base,
                                    &mc__re_mount_segment_response__descriptor, 0, &resp);
    uint64_t epochs[MC_MASTER_CONN_MAX_SEGMENTS] = {0};
    if (rc == 0) {
        const Mc__ReMountSegmentResponse *r = (const Mc__ReMountSegmentResponse *)resp;
        bool ok = r->n_mount_epochs == (size_t)n;
        for (int i = 0; ok && i < n; i++)
            ok = (epochs[i] = r->mount_epochs[i]) != 0;
        if (!ok) {
            /* the segments stay fenced (epoch 0): nothing stale is served */
            mc_error("client", "ReMountSegment answer without one mount epoch per segment",
                     "master=%s segments=%d epochs=%zu", mc->address, n, r->n_mount_epochs);
            rc = MC_ERR_INVALID_VERSION;
        }
    }
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    for (int i = 0; rc == 0 && mc->cfg.on_mount_epoch && i < n; i++)
        mc->cfg.on_mount_epoch(mc->cfg.cb_arg, segs[i].id, epochs[i]);
    if (rc == 0) {
        link_lock(mc);
        mc->remounts++;
        link_unlock(mc);
        mc_info("client", "segments re-mounted", "master=%s segments=%d", mc->address, n);
        if (mc->cfg.on_remounted)
            mc->cfg.on_remounted(mc->cfg.cb_arg);
    } else {
        mc_warn("client", "re-mount failed, retrying at the next ping", "master=%s rc=%s",
                mc->address, mc_strerror(rc));
    }
    return rc;
}

/* ---- ping thread -------------------------------------------------------------------------- */

/* One Ping (and a ReMount when asked). Returns 0 or the failing call's code. */
static int ping_once(struct mc_master_conn *mc)
{
    Mc__Uuid cid = MC__UUID__INIT;
    cid.hi = mc->cfg.client_id.hi;
    cid.lo = mc->cfg.client_id.lo;
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = &cid;
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(RPC(mc), MC_METHOD_PING, &req.base,
                                    &mc__ping_response__descriptor, 0, &m);
    if (rc == 0 &&
        mc_master_link_check_epoch(mc->link, (uint64_t)((Mc__PingResponse *)m)->view_version)) {
        protobuf_c_message_free_unpacked(m, NULL);
        rc = MC_ERR_NOT_LEADER; /* a deposed leader: never accept a lower epoch */
    }
    if (rc == MC_ERR_NOT_LEADER)
        atomic_store(&mc->not_leader, true);
    link_lock(mc);
    mc->pings++;
    if (rc)
        mc->ping_failures++;
    link_unlock(mc);
    if (rc)
        return rc;
    Mc__PingResponse *r = (Mc__PingResponse *)m;
    bool need = r->client_status == MC__CLIENT_STATUS__CS_NEED_REMOUNT;
    mc_auth_cred_learn(mc->cred, r->credential.data, r->credential.len);
    protobuf_c_message_free_unpacked(m, NULL);
    /* The master lost track of us (restart or expiry) and dropped our mounts: descriptors of
     * them must stop working now, before the ReMount creates new mounts (with new epochs) whose
     * offsets the master hands out afresh. Until the answer names those epochs the segments
     * serve nothing (a writer racing with it gets REPLICA_IS_GONE and retries). */
    if (need && mc->cfg.on_mount_epoch) {
        struct mc_id ids[MC_MASTER_CONN_MAX_SEGMENTS];
        link_lock(mc);
        int n = mc->nsegs;
        for (int i = 0; i < n; i++)
            ids[i] = mc->segs[i].id;
        link_unlock(mc);
        for (int i = 0; i < n; i++)
            mc->cfg.on_mount_epoch(mc->cfg.cb_arg, ids[i], 0);
    }
    if (need && mc->cfg.remount_ready && !mc->cfg.remount_ready(mc->cfg.cb_arg))
        return 0; /* fenced; the ReMount goes out once the new key exists (a kick) */
    return need ? remount(mc) : 0;
}

bool mc_master_conn_is_up(struct mc_master_conn *mc)
{
    return atomic_load(&mc->up);
}

void mc_master_conn_kick(struct mc_master_conn *mc)
{
    link_lock(mc);
    mc->kick = true;
    pthread_cond_signal(&mc->cv);
    link_unlock(mc);
}

/* While down: dial, check the version, ping (re-mounting when asked). */
static int try_recover(struct mc_master_conn *mc)
{
    int rc = mc_master_link_follow(mc->link, atomic_exchange(&mc->not_leader, false));
    if (rc)
        return rc;
    mc_rpc_client_disconnect(RPC(mc));
    rc = mc_rpc_client_connect(RPC(mc));
    if (rc == 0)
        rc = mc_service_ready_check(RPC(mc), NULL, 0);
    if (rc == 0)
        rc = ping_once(mc);
    if (rc == 0) {
        link_lock(mc);
        mc->reconnects++;
        link_unlock(mc);
        atomic_store(&mc->up, true);
        mc_info("client", "master reachable again", "master=%s", mc->address);
    }
    return rc;
}

static void deadline_after(struct timespec *ts, uint32_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *ping_main(void *arg)
{
    struct mc_master_conn *mc = arg;
    mc_log_set_current(mc->logger);
    uint32_t backoff = BACKOFF_MIN_MS;
    link_lock(mc);
    for (;;) {
        uint32_t wait = atomic_load(&mc->up) ? mc->cfg.ping_interval_ms : backoff;
        struct timespec ts;
        deadline_after(&ts, wait);
        while (!mc->stop && !mc->kick) {
            if (pthread_cond_timedwait(&mc->cv, &mc->lock, &ts) == ETIMEDOUT)
                break;
        }
        if (mc->stop)
            break;
        mc->kick = false;
        link_unlock(mc);
        if (mc->cfg.on_tick)
            mc->cfg.on_tick(mc->cfg.cb_arg);
        if (atomic_load(&mc->up)) {
            struct mc_rpc_client *rpc = RPC(mc);
            uint64_t gen = mc_rpc_client_generation(rpc);
            int rc = ping_once(mc);
            bool lost = rc == MC_ERR_RPC_FAIL || rc == MC_ERR_RPC_TIMEOUT;
            if (rc == MC_ERR_NOT_LEADER || (lost && !replaced(mc, rpc, gen)))
                set_down(mc, "ping", rc);
            backoff = BACKOFF_MIN_MS;
        } else if (try_recover(mc) != 0) {
            uint32_t cap = mc->cfg.ping_interval_ms;
            if (mc_master_link_ha(mc->link) && cap > 1000)
                cap = 1000; /* HA: a new leader is found within a second of its election */
            backoff = backoff * 2 > cap ? cap : backoff * 2;
        } else {
            backoff = BACKOFF_MIN_MS;
        }
        link_lock(mc);
        mc->kick = false;
    }
    link_unlock(mc);
    return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

int mc_master_conn_open(const struct mc_master_conn_config *cfg, struct mc_master_conn **out)
{
    *out = NULL;
    if (!cfg->address || strlen(cfg->address) >= 128)
        return MC_ERR_INVALID_PARAMS;
    struct mc_master_conn *mc = calloc(1, sizeof(*mc));
    if (!mc)
        return MC_ERR_INTERNAL_ERROR;
    mc->cfg = *cfg;
    mc->cred = cfg->auth ? cfg->auth->cred : NULL; /* Ping/Mount answers refresh it */
    mc->cfg.auth = NULL;                           /* the rpc client keeps its own copy */
    snprintf(mc->address, sizeof(mc->address), "%s", cfg->address);
    mc->cfg.address = mc->address;
    if (!mc->cfg.ping_interval_ms)
        mc->cfg.ping_interval_ms = 1000;
    pthread_mutex_init(&mc->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&mc->cv, &ca);
    pthread_condattr_destroy(&ca);
    struct mc_rpc_client_config rc;
    mc_rpc_client_config_init(&rc);
    int r;
    if (cfg->connect_timeout_ms)
        rc.connect_timeout_ms = cfg->connect_timeout_ms;
    if (cfg->rpc_timeout_ms)
        rc.call_timeout_ms = cfg->rpc_timeout_ms;
    rc.name = "master-conn";
    rc.auth = cfg->auth;
    rc.tls = cfg->tls;
    r = mc_master_link_new(mc->address, &rc, &mc->link);
    if (r)
        goto fail;
    r = mc_rpc_client_connect(RPC(mc));
    if (r == 0)
        r = mc_service_ready_check(RPC(mc), NULL, 0);
    if (r) {
        mc_error("client", "cannot reach the master", "master=%s rc=%s", mc->address,
                 mc_strerror(r));
        goto fail;
    }
    atomic_store(&mc->up, true);
    *out = mc;
    return 0;
fail:
    mc_master_conn_close(mc);
    return r;
}

/* The leader watch saw a new leader: unless the link already talks to it (its Ping epoch),
 * the ping thread re-resolves and reattaches now. */
static void on_new_leader(void *arg, uint64_t epoch)
{
    struct mc_master_conn *mc = arg;
    if (epoch <= mc_master_link_epoch(mc->link))
        return;
    atomic_store(&mc->not_leader, true);
    set_down(mc, "new_leader_watched", MC_ERR_NOT_LEADER);
}

int mc_master_conn_start(struct mc_master_conn *mc)
{
    if (mc->started)
        return 0;
    mc->logger = mc_log_current();
    if (pthread_create(&mc->thread, NULL, ping_main, mc) != 0)
        return MC_ERR_INTERNAL_ERROR;
    mc->started = true;
    if (mc_master_follow_is_url(mc->address) &&
        mc_leader_watch_start(mc->address, on_new_leader, mc, &mc->watch) != 0)
        mc_warn("client", "cannot watch the leader key: following on failed calls only",
                "master=%s", mc->address);
    return 0;
}

void mc_master_conn_close(struct mc_master_conn *mc)
{
    if (!mc)
        return;
    mc_leader_watch_stop(mc->watch); /* its callback uses mc */
    if (mc->started) {
        link_lock(mc);
        mc->stop = true;
        pthread_cond_signal(&mc->cv);
        link_unlock(mc);
        pthread_join(mc->thread, NULL);
    }
    mc_master_link_free(mc->link);
    pthread_cond_destroy(&mc->cv);
    pthread_mutex_destroy(&mc->lock);
    free(mc);
}

void mc_master_conn_get_stats(struct mc_master_conn *mc, struct mc_master_conn_stats *st)
{
    link_lock(mc);
    st->up = atomic_load(&mc->up);
    st->pings = mc->pings;
    st->ping_failures = mc->ping_failures;
    st->remounts = mc->remounts;
    st->reconnects = mc->reconnects;
    st->fast_failures = atomic_load(&mc->fast_failures);
    link_unlock(mc);
}
