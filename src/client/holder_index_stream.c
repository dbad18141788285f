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
#include "common/log.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define RETRY_MS 200u

struct mc_hidx_stream {
    struct mc_master_conn *mc;
    struct mc_id client_id;
    struct mc_holder_index *ix;
    uint32_t wait_ms;
    const struct mc_logger *logger;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic bool stop;
    struct mc_hidx_stream_stats st; /* under mu */
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
    while (!atomic_load(&s->stop))
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->mu);
}

/* Files one answer's items in order. */
static void apply(struct mc_hidx_stream *s, const Mc__HolderIndexHeartbeatResponse *r)
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

static void *loop(void *arg)
{
    struct mc_hidx_stream *s = arg;
    mc_log_set_current(s->logger);
    while (!atomic_load(&s->stop)) {
        Mc__Uuid u = MC__UUID__INIT;
        u.hi = s->client_id.hi;
        u.lo = s->client_id.lo;
        Mc__HolderIndexHeartbeatRequest req = MC__HOLDER_INDEX_HEARTBEAT_REQUEST__INIT;
        req.client_id = &u;
        req.wait_ms = s->wait_ms;
        ProtobufCMessage *m = NULL;
        int rc = mc_master_conn_call_wait(s->mc, MC_METHOD_HOLDER_INDEX_HEARTBEAT, &req.base,
                                          &mc__holder_index_heartbeat_response__descriptor,
                                          s->wait_ms, &m);
        pthread_mutex_lock(&s->mu);
        s->st.polls++;
        if (rc)
            s->st.errors++;
        pthread_mutex_unlock(&s->mu);
        if (rc == 0) {
            apply(s, (const Mc__HolderIndexHeartbeatResponse *)m);
            protobuf_c_message_free_unpacked(m, NULL);
            continue;
        }
        if (rc == MC_ERR_REPLICA_IS_GONE) {
            size_t n = mc_holder_index_clear(s->ix);
            mc_warn("holder", "the master fenced this holder's index (backlog past its limit)",
                    "entries_dropped=%zu", n);
            pthread_mutex_lock(&s->mu);
            s->st.fenced++;
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        pause_ms(s, rc == MC_ERR_NOT_SUPPORTED ? s->wait_ms
                    : rc == MC_ERR_RPC_TIMEOUT ? 0
                                               : RETRY_MS);
    }
    return NULL;
}

int mc_hidx_stream_start(struct mc_master_conn *mc, struct mc_id client_id,
                         struct mc_holder_index *ix, uint32_t wait_ms, struct mc_hidx_stream **out)
{
    *out = NULL;
    if (!mc || !ix)
        return MC_ERR_INVALID_PARAMS;
    struct mc_hidx_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    s->mc = mc;
    s->client_id = client_id;
    s->ix = ix;
    s->wait_ms = wait_ms ? wait_ms : 1000;
    s->logger = mc_log_current();
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&s->thread, NULL, loop, s) != 0) {
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
