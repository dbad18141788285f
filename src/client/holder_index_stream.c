/*
 * holder_index_stream.c - see holder_index_stream.h for the design.
 */
#include "client/holder_index_stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/holder_index.h"
#include "client/master_conn.h"
#include "client/peer_server.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define RETRY_MS 200u
#define REREG_BATCH 4096u

struct mc_hidx_stream {
    struct mc_master_conn *mc;
    struct mc_id client_id;
    struct mc_holder_index *ix;
    struct mc_peer_server *ps;
    uint32_t wait_ms;
    const struct mc_logger *logger;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic bool stop;
    struct mc_hidx_stream_stats st; /* under mu */
    bool rereg_pending;             /* under mu: seg/epoch to re-register */
    struct mc_id rereg_seg;
    uint64_t rereg_epoch;
    uint64_t *acks; /* the thread's: drops to acknowledge in the next poll */
    size_t nacks;
    uint64_t listing; /* the thread's: the number of its last listing (never 0) */
};

static void pause_ms(struct mc_hidx_stream *s, uint32_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    while (!atomic_load(&s->stop) && !s->rereg_pending)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->mu);
}

/* Files one answer's items in order; the ids of the drops that carry one (a Remove waits for
 * them) are appended to acks (room for r->n_items), *nacks counting them. */
static void apply(struct mc_hidx_stream *s, const Mc__HolderIndexHeartbeatResponse *r,
                  uint64_t *acks, size_t *nacks)
{
    uint64_t commits = 0, drops = 0;
    for (size_t i = 0; i < r->n_items; i++) {
        const Mc__OffloadTaskItem *it = r->items[i];
        if (!it || !it->key || !*it->key)
            continue;
        size_t klen = strlen(it->key);
        if (klen > UINT16_MAX)
            continue;
        if (it->drop) {
            drops += mc_holder_index_drop_key(s->ix, it->key, klen, it->version);
            if (it->task_id && acks)
                acks[(*nacks)++] = it->task_id;
            continue;
        }
        const Mc__MemoryLocation *loc = it->source;
        if (!loc || !loc->segment_id || it->size == 0 || it->size > UINT32_MAX)
            continue;
        struct mc_id sid = {loc->segment_id->hi, loc->segment_id->lo};
        struct mc_hidx_entry e = {.key = it->key,
                                  .key_len = (uint16_t)klen,
                                  .version = it->version,
                                  .offset = loc->offset,
                                  .len = (uint32_t)it->size,
                                  .crc32c = it->crc32c,
                                  .crc_valid = it->crc_valid};
        commits += mc_holder_index_commit(s->ix, sid, loc->mount_epoch, &e, 1);
    }
    pthread_mutex_lock(&s->mu);
    s->st.items += r->n_items;
    s->st.commits += commits;
    s->st.drops += drops;
    pthread_mutex_unlock(&s->mu);
}

/* Sends entries e[0..n) of seg (mount epoch) to the master, a batch of listing s->listing
 * (complete: its last); drops the refused ones. */
static void rereg_batch(struct mc_hidx_stream *s, struct mc_id seg, uint64_t epoch,
                        const struct mc_hidx_entry *e, size_t n, bool complete, uint64_t *ok,
                        uint64_t *refused)
{
    Mc__OffloadTaskItem *items = calloc(n ? n : 1, sizeof(*items));
    Mc__OffloadTaskItem **ip = calloc(n ? n : 1, sizeof(*ip));
    Mc__MemoryLocation *locs = calloc(n ? n : 1, sizeof(*locs));
    ProtobufCMessage *m = NULL;
    if (!items || !ip || !locs)
        goto out;
    for (size_t i = 0; i < n; i++) {
        mc__offload_task_item__init(&items[i]);
        mc__memory_location__init(&locs[i]);
        locs[i].offset = e[i].offset;
        locs[i].size = e[i].len;
        items[i].key = (char *)e[i].key;
        items[i].version = e[i].version;
        items[i].size = e[i].len;
        items[i].crc32c = e[i].crc32c;
        items[i].crc_valid = e[i].crc_valid;
        items[i].source = &locs[i];
        ip[i] = &items[i];
    }
    Mc__Uuid cu = MC__UUID__INIT, su = MC__UUID__INIT;
    cu.hi = s->client_id.hi;
    cu.lo = s->client_id.lo;
    su.hi = seg.hi;
    su.lo = seg.lo;
    Mc__HolderReregisterRequest req = MC__HOLDER_REREGISTER_REQUEST__INIT;
    req.client_id = &cu;
    req.segment_id = &su;
    req.mount_epoch = epoch;
    req.n_items = n;
    req.items = ip;
    req.listing = s->listing;
    req.complete = complete;
    int rc = MC_ERR_RPC_FAIL;
    /* the link may still be failing fast just after the re-mount: retry a while (a retry of a
     * batch the master did apply is refused item by item, and those entries are dropped: misses,
     * never a range with two owners) */
    for (int tries = 0; tries < 50 && !atomic_load(&s->stop); tries++) {
        rc = mc_master_conn_call(s->mc, MC_METHOD_HOLDER_REREGISTER, &req.base,
                                 &mc__holder_reregister_response__descriptor, &m);
        if (rc != MC_ERR_RPC_FAIL && rc != MC_ERR_RPC_TIMEOUT)
            break;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    const Mc__HolderReregisterResponse *r = (const Mc__HolderReregisterResponse *)m;
    if (rc || r->n_statuses != n) {
        /* the master may or may not have them: drop them (a miss, never two owners of a range) */
        mc_warn("holder", "re-registration batch failed; its entries are dropped",
                "entries=%zu rc=%s", n, mc_strerror(rc ? rc : MC_ERR_RPC_FAIL));
        for (size_t i = 0; i < n; i++)
            mc_holder_index_drop_exact(s->ix, seg, e[i].key, e[i].key_len, e[i].version,
                                       e[i].offset);
        *refused += n;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (r->statuses[i] == 0) {
            (*ok)++;
            continue;
        }
        (*refused)++;
        mc_holder_index_drop_exact(s->ix, seg, e[i].key, e[i].key_len, e[i].version, e[i].offset);
    }
out:
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    free(items);
    free(ip);
    free(locs);
}

/* Re-registers seg's entries whose bytes still match their CRC (the others are dropped). */
static void reregister(struct mc_hidx_stream *s, struct mc_id seg, uint64_t epoch)
{
    struct mc_hidx_entry *e = NULL;
    size_t n = 0;
    char *keys = NULL;
    uint64_t ok = 0, refused = 0, bad = 0;
    /* an empty index (a fenced holder's) still logs its (empty) re-registration: operators and
     * the process tests see that the re-mount was answered with nothing */
    if (mc_holder_index_list(s->ix, seg, &e, &n, &keys) != 0)
        goto out;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = NULL;
        bool good = mc_peer_server_resolve(s->ps, seg, epoch, e[i].offset, e[i].len, &p) == 0;
        if (good && e[i].crc_valid)
            good = mc_crc32c(p, e[i].len) == e[i].crc32c;
        if (!good) {
            bad++;
            mc_holder_index_drop_exact(s->ix, seg, e[i].key, e[i].key_len, e[i].version,
                                       e[i].offset);
            continue;
        }
        e[k++] = e[i];
    }
    /* one listing, its last batch marked complete (an empty listing is one empty batch): the
     * master then drops what an earlier listing of this mount brought back and this one left
     * out */
    s->listing++;
    size_t sent = 0;
    do {
        size_t b = k - sent < REREG_BATCH ? k - sent : REREG_BATCH;
        rereg_batch(s, seg, epoch, k ? e + sent : NULL, b, sent + b == k, &ok, &refused);
        sent += b;
    } while (sent < k);
    mc_info("holder", "DRAM replicas re-registered",
            "entries=%zu back=%llu refused=%llu "
            "bad_crc=%llu",
            n, (unsigned long long)ok, (unsigned long long)refused, (unsigned long long)bad);
    pthread_mutex_lock(&s->mu);
    s->st.reregistered += ok;
    s->st.rereg_refused += refused;
    s->st.rereg_bad_crc += bad;
    pthread_mutex_unlock(&s->mu);
out:
    free(e);
    free(keys);
}

void mc_hidx_stream_reregister(struct mc_hidx_stream *s, struct mc_id seg, uint64_t epoch)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->rereg_pending = true;
    s->rereg_seg = seg;
    s->rereg_epoch = epoch;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* One poll (wait_ms 0: answered at once; the first one opens this holder's stream at the
 * master): its acks sent, its answer filed. Returns the call's status. */
static int poll_once(struct mc_hidx_stream *s, uint32_t wait_ms)
{
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = s->client_id.hi;
    u.lo = s->client_id.lo;
    Mc__HolderIndexHeartbeatRequest req = MC__HOLDER_INDEX_HEARTBEAT_REQUEST__INIT;
    req.client_id = &u;
    req.wait_ms = wait_ms;
    req.n_acked_delete_task_ids = s->nacks;
    req.acked_delete_task_ids = s->acks;
    ProtobufCMessage *m = NULL;
    int rc =
        mc_master_conn_call_wait(s->mc, MC_METHOD_HOLDER_INDEX_HEARTBEAT, &req.base,
                                 &mc__holder_index_heartbeat_response__descriptor, wait_ms, &m);
    pthread_mutex_lock(&s->mu);
    s->st.polls++;
    if (rc)
        s->st.errors++;
    pthread_mutex_unlock(&s->mu);
    if (rc == 0) {
        /* the acks reached the master; this answer's drops are acked by the next poll, which
         * goes out at once */
        const Mc__HolderIndexHeartbeatResponse *r = (const Mc__HolderIndexHeartbeatResponse *)m;
        free(s->acks);
        s->nacks = 0;
        s->acks = r->n_items ? calloc(r->n_items, sizeof(*s->acks)) : NULL;
        apply(s, r, s->acks, &s->nacks);
        protobuf_c_message_free_unpacked(m, NULL);
        return 0;
    }
    /* a failed poll keeps its acks: they are sent again (an ack twice is harmless) */
    if (rc == MC_ERR_REPLICA_IS_GONE) {
        size_t n = mc_holder_index_clear(s->ix);
        mc_warn("holder", "the master fenced this holder's index", "entries_dropped=%zu", n);
        pthread_mutex_lock(&s->mu);
        s->st.fenced++;
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

static void *loop(void *arg)
{
    struct mc_hidx_stream *s = arg;
    mc_log_set_current(s->logger);
    while (!atomic_load(&s->stop)) {
        pthread_mutex_lock(&s->mu);
        bool rr = s->rereg_pending;
        struct mc_id rseg = s->rereg_seg;
        uint64_t repoch = s->rereg_epoch;
        s->rereg_pending = false;
        pthread_mutex_unlock(&s->mu);
        if (rr) {
            /* open the stream at the new master first: commits of Puts made meanwhile are
             * queued for this holder, not dropped */
            (void)poll_once(s, 0);
            reregister(s, rseg, repoch);
        }
        int rc = poll_once(s, s->wait_ms);
        if (rc == 0 || rc == MC_ERR_REPLICA_IS_GONE)
            continue;
        pause_ms(s, rc == MC_ERR_NOT_SUPPORTED ? s->wait_ms
                    : rc == MC_ERR_RPC_TIMEOUT ? 0
                                               : RETRY_MS);
    }
    return NULL;
}

int mc_hidx_stream_start(struct mc_master_conn *mc, struct mc_id client_id,
                         struct mc_holder_index *ix, struct mc_peer_server *ps, uint32_t wait_ms,
                         struct mc_hidx_stream **out)
{
    *out = NULL;
    if (!mc || !ix || !ps)
        return MC_ERR_INVALID_PARAMS;
    struct mc_hidx_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    s->mc = mc;
    s->client_id = client_id;
    s->ix = ix;
    s->ps = ps;
    s->wait_ms = wait_ms ? wait_ms : 1000;
    s->logger = mc_log_current();
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    /* opens this holder's stream at the master before the caller mounts its segment, so the
     * first commits are not dropped (an older master answers NOT_SUPPORTED: no stream) */
    (void)poll_once(s, 0);
    if (pthread_create(&s->thread, NULL, loop, s) != 0) {
        free(s->acks);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return MC_ERR_INTERNAL_ERROR;
    }
    *out = s;
    return 0;
}

void mc_hidx_stream_stop(struct mc_hidx_stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, true);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    free(s->acks);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void mc_hidx_stream_stats(struct mc_hidx_stream *s, struct mc_hidx_stream_stats *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    pthread_mutex_unlock(&s->mu);
}
