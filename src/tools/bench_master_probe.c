/*
 * bench_master_probe.c - `mooncake_bench master --probe_hz=N`: the open-loop latency probe
 * (bench_master.h) and the ids derived from --bench_id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/bench_master.h"
#include "tools/bench_util.h"

#define PROBE_MAX_SAMPLES (1u << 20)

static uint64_t fnv1a(const char *a, const char *b)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = a; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h = (h ^ '/') * 0x100000001b3ull;
    for (const char *p = b; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return h;
}

struct mc_id mc_bm_derived_id(const char *name, const char *what)
{
    struct mc_id id = {.hi = fnv1a(name, what), .lo = fnv1a(what, name) | 1};
    return id;
}

static int get_rc(struct mc_rpc_client *c, const char *key)
{
    uint8_t buf[64];
    Mc__GetReplicaListRequest r = MC__GET_REPLICA_LIST_REQUEST__INIT;
    r.key = (char *)key;
    size_t len = mc__get_replica_list_request__pack(&r, buf);
    void *resp = NULL;
    size_t rl = 0;
    int rc = mc_rpc_client_call(c, MC_METHOD_GET_REPLICA_LIST, buf, len, 0, &resp, &rl);
    free(resp);
    return rc;
}

int mc_bm_key_exists(struct mc_rpc_client *c, const char *key)
{
    return get_rc(c, key) == 0;
}

static void sleep_until_ns(uint64_t t)
{
    uint64_t now = mc_now_ns();
    if (t <= now)
        return;
    struct timespec ts = {.tv_sec = (time_t)((t - now) / 1000000000ull),
                          .tv_nsec = (long)((t - now) % 1000000000ull)};
    nanosleep(&ts, NULL);
}

static void *probe_main(void *arg)
{
    struct mc_bm_probe *p = arg;
    const struct opts *o = p->sh->o;
    uint64_t period = (uint64_t)(1e9 / p->hz), next = mc_now_ns(), rng = o->seed ^ 0x5bd1e995ull;
    char key[24];
    while (!atomic_load(&p->stop)) {
        sleep_until_ns(next);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        snprintf(key, sizeof(key), KEY_FMT, (unsigned)(rng % o->keys));
        int rc = get_rc(p->c, key);
        /* from the scheduled time: a call that waited behind a slow one carries that wait */
        double ms = (double)(mc_now_ns() - next) / 1e6;
        if (atomic_load_explicit(&p->sh->measuring, memory_order_relaxed)) {
            p->calls++;
            p->misses += rc == MC_ERR_OBJECT_NOT_FOUND;
            p->errors += rc != 0 && rc != MC_ERR_OBJECT_NOT_FOUND;
            if (ms > p->max_ms)
                p->max_ms = ms;
            if (p->nlat < PROBE_MAX_SAMPLES)
                p->lat_ms[p->nlat++] = ms;
        }
        next += period; /* the schedule does not slip: late calls are issued at once */
    }
    return NULL;
}

int mc_bm_probe_start(struct mc_bm_probe *p, struct shared *sh, double hz)
{
    memset(p, 0, sizeof(*p));
    p->sh = sh;
    p->hz = hz;
    if (hz <= 0)
        return 0;
    p->c = mc_bm_new_client(sh->o);
    p->lat_ms = malloc(PROBE_MAX_SAMPLES * sizeof(double));
    if (!p->c || !p->lat_ms || pthread_create(&p->th, NULL, probe_main, p) != 0) {
        mc_rpc_client_free(p->c);
        free(p->lat_ms);
        p->c = NULL;
        p->lat_ms = NULL;
        return -1;
    }
    p->started = 1;
    return 0;
}

void mc_bm_probe_stop(struct mc_bm_probe *p)
{
    if (p->started) {
        atomic_store(&p->stop, 1);
        pthread_join(p->th, NULL);
        p->started = 0;
        p->p99_ms = mc_bench_percentile(p->lat_ms, p->nlat, 99);
    }
    mc_rpc_client_free(p->c);
    p->c = NULL;
    free(p->lat_ms);
    p->lat_ms = NULL;
}
