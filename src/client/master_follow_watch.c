/*
 * master_follow_watch.c - the leader key's watch (see master_follow_watch.h). Its own etcd
 * handle (handles are single-threaded): read the key, watch from the read's revision + 1,
 * re-read after any break of the stream.
 */
#include "client/master_follow_watch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "client/master_follow.h"
#include "common/etcd.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define POLL_MS 200
#define RETRY_MS 200

struct mc_leader_watch {
    struct mc_master_follow *f;
    void (*cb)(void *arg, uint64_t epoch);
    void *arg;
    pthread_t th;
    _Atomic bool stop;
    uint64_t seen; /* the create_revision of the leader last seen */
};

static void nap(struct mc_leader_watch *w, int ms)
{
    for (int t = 0; t < ms && !atomic_load(&w->stop); t += 10) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void saw(struct mc_leader_watch *w, uint64_t create_revision)
{
    if (create_revision == 0 || create_revision == w->seen)
        return;
    w->seen = create_revision;
    w->cb(w->arg, create_revision); /* the first too: the caller knows whether it is news */
}

/* One watch stream, from rev + 1, until it breaks or stop. */
static void watch_once(struct mc_leader_watch *w, struct mc_etcd *e, const char *key, uint64_t rev)
{
    struct mc_etcd_watch *ws = NULL;
    if (mc_etcd_watch_new(e, key, rev + 1, &ws) != 0) {
        nap(w, RETRY_MS);
        return;
    }
    while (!atomic_load(&w->stop)) {
        struct mc_etcd_watch_result r;
        if (mc_etcd_watch_poll(ws, POLL_MS, &r) != 0)
            break;
        for (int i = 0; i < r.nevents; i++)
            if (r.events[i].type == MC_ETCD_EV_PUT)
                saw(w, r.events[i].kv.create_revision);
        bool broken = r.canceled || r.closed;
        mc_etcd_watch_result_clear(&r);
        if (broken)
            break;
    }
    mc_etcd_watch_free(ws);
}

static void *watch_main(void *arg)
{
    struct mc_leader_watch *w = arg;
    struct mc_etcd *e = mc_master_follow_etcd(w->f);
    const char *key = mc_master_follow_key(w->f);
    while (!atomic_load(&w->stop)) {
        struct mc_etcd_kv kv;
        bool found = false;
        uint64_t rev = 0;
        if (mc_etcd_get(e, key, &kv, &found, &rev) != 0) {
            nap(w, RETRY_MS);
            continue;
        }
        if (found)
            saw(w, kv.create_revision);
        mc_etcd_kv_clear(&kv);
        watch_once(w, e, key, rev);
    }
    return NULL;
}

int mc_leader_watch_start(const char *url, void (*on_new_leader)(void *arg, uint64_t epoch),
                          void *arg, struct mc_leader_watch **out)
{
    *out = NULL;
    if (!on_new_leader)
        return MC_ERR_INVALID_PARAMS;
    struct mc_leader_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return MC_ERR_INTERNAL_ERROR;
    w->cb = on_new_leader;
    w->arg = arg;
    int rc = mc_master_follow_new(url, &w->f);
    if (rc == 0 && pthread_create(&w->th, NULL, watch_main, w) != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc) {
        mc_master_follow_free(w->f);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void mc_leader_watch_stop(struct mc_leader_watch *w)
{
    if (!w)
        return;
    atomic_store(&w->stop, true);
    pthread_join(w->th, NULL);
    mc_master_follow_free(w->f);
    free(w);
}
