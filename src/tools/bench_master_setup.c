/*
 * bench_master_setup.c - the set-up half of `mooncake_bench master`: the blocking client, the
 * fake segment's mount, the prefill of --keys objects, the pinger that keeps the bench's client
 * alive, and the sample call that measures response bytes per object. The load itself is in
 * bench_master.c; what the files share is in bench_master.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/id.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/bench_master.h"

#define SAMPLE_KEYS 64 /* keys in the sample call of batch_get */

struct mc_rpc_client *mc_bm_new_client(const struct opts *o)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = o->host;
    cc.port = o->port;
    cc.call_timeout_ms = 30000;
    struct mc_rpc_client *c = NULL;
    if (mc_rpc_client_new(&cc, &c) != 0 || mc_rpc_client_connect(c) != 0) {
        mc_rpc_client_free(c);
        return NULL;
    }
    return c;
}

int mc_bm_mount_segment(struct mc_rpc_client *c, struct mc_id client, const char *bench_id,
                        uint64_t segment_bytes)
{
    struct mc_id sid = mc_bm_derived_id(bench_id, "segment");
    Mc__Uuid cu = MC__UUID__INIT, su = MC__UUID__INIT;
    cu.hi = client.hi;
    cu.lo = client.lo;
    su.hi = sid.hi;
    su.lo = sid.lo;
    char name[64];
    snprintf(name, sizeof(name), "bench-%.56s", bench_id);
    Mc__Segment seg = MC__SEGMENT__INIT;
    seg.id = &su;
    seg.name = name;
    seg.base_addr = FAKE_BASE;
    seg.size = segment_bytes;
    seg.endpoint = "127.0.0.1:9";
    Mc__MountSegmentRequest req = MC__MOUNT_SEGMENT_REQUEST__INIT;
    req.segment = &seg;
    req.client_id = &cu;
    ProtobufCMessage *resp = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_MOUNT_SEGMENT, &req.base,
                                    &mc__mount_segment_response__descriptor, 0, &resp);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

struct prefill_arg {
    const struct shared *sh;
    unsigned first, last; /* [first, last) */
    unsigned created, existed, failed;
};

static void *prefill_main(void *arg)
{
    struct prefill_arg *p = arg;
    const struct opts *o = p->sh->o;
    struct mc_rpc_client *c = mc_bm_new_client(o);
    char(*names)[24] = malloc(PREFILL_BATCH * sizeof(*names));
    char *keys[PREFILL_BATCH];
    uint64_t lens[PREFILL_BATCH];
    Mc__PutEndItem items[PREFILL_BATCH], *itemp[PREFILL_BATCH];
    Mc__Uuid cu = MC__UUID__INIT;
    cu.hi = p->sh->client.hi;
    cu.lo = p->sh->client.lo;
    if (!c || !names) {
        p->failed = p->last - p->first;
        goto out;
    }
    for (unsigned i = p->first; i < p->last; i += PREFILL_BATCH) {
        unsigned n = p->last - i < PREFILL_BATCH ? p->last - i : PREFILL_BATCH;
        for (unsigned j = 0; j < n; j++) {
            snprintf(names[j], sizeof(names[j]), KEY_FMT, i + j);
            keys[j] = names[j];
            lens[j] = o->value_size;
        }
        Mc__BatchPutStartRequest ps = MC__BATCH_PUT_START_REQUEST__INIT;
        ps.client_id = &cu;
        ps.n_keys = n;
        ps.keys = keys;
        ps.n_value_lengths = n;
        ps.value_lengths = lens;
        Mc__BatchPutStartResponse *psr = NULL;
        int rc = mc_rpc_client_call_msg(c, MC_METHOD_BATCH_PUT_START, &ps.base,
                                        &mc__batch_put_start_response__descriptor, 0,
                                        (ProtobufCMessage **)&psr);
        if (rc != 0 || psr->n_results != n) {
            p->failed += n;
            if (psr)
                protobuf_c_message_free_unpacked(&psr->base, NULL);
            continue;
        }
        unsigned m = 0;
        for (unsigned j = 0; j < n; j++) {
            int st = psr->results[j]->status;
            if (st == MC_ERR_OBJECT_ALREADY_EXISTS) {
                p->existed++;
            } else if (st != 0) {
                p->failed++;
            } else {
                mc__put_end_item__init(&items[m]);
                items[m].key = names[j];
                itemp[m] = &items[m];
                m++;
            }
        }
        protobuf_c_message_free_unpacked(&psr->base, NULL);
        if (m == 0)
            continue;
        Mc__BatchPutEndRequest pe = MC__BATCH_PUT_END_REQUEST__INIT;
        pe.client_id = &cu;
        pe.n_items = m;
        pe.items = itemp;
        Mc__BatchPutEndResponse *per = NULL;
        rc = mc_rpc_client_call_msg(c, MC_METHOD_BATCH_PUT_END, &pe.base,
                                    &mc__batch_put_end_response__descriptor, 0,
                                    (ProtobufCMessage **)&per);
        if (rc != 0 || per->n_statuses != m) {
            p->failed += m;
        } else {
            for (unsigned j = 0; j < m; j++) {
                if (per->statuses[j] == 0)
                    p->created++;
                else
                    p->failed++;
            }
        }
        if (per)
            protobuf_c_message_free_unpacked(&per->base, NULL);
    }
out:
    free(names);
    mc_rpc_client_free(c);
    return NULL;
}

int mc_bm_prefill(struct shared *sh)
{
    const struct opts *o = sh->o;
    int nt = o->conns < 4 ? o->conns : 4;
    struct prefill_arg pa[4];
    pthread_t th[4];
    uint64_t t0 = mc_now_ms();
    for (int i = 0; i < nt; i++) {
        memset(&pa[i], 0, sizeof(pa[i]));
        pa[i].sh = sh;
        pa[i].first = (unsigned)((uint64_t)o->keys * (unsigned)i / (unsigned)nt);
        pa[i].last = (unsigned)((uint64_t)o->keys * (unsigned)(i + 1) / (unsigned)nt);
        pthread_create(&th[i], NULL, prefill_main, &pa[i]);
    }
    unsigned created = 0, existed = 0, failed = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        created += pa[i].created;
        existed += pa[i].existed;
        failed += pa[i].failed;
    }
    fprintf(stderr, "bench master: prefill %u keys: %u created, %u existed, %u failed (%.1f s)\n",
            o->keys, created, existed, failed, (double)(mc_now_ms() - t0) / 1e3);
    return failed ? -1 : 0;
}

static void *pinger_main(void *arg)
{
    struct mc_bm_pinger *p = arg;
    Mc__Uuid cu = MC__UUID__INIT;
    cu.hi = p->sh->client.hi;
    cu.lo = p->sh->client.lo;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        Mc__PingRequest req = MC__PING_REQUEST__INIT;
        req.client_id = &cu;
        ProtobufCMessage *resp = NULL;
        mc_rpc_client_call_msg(p->c, MC_METHOD_PING, &req.base, &mc__ping_response__descriptor, 0,
                               &resp);
        if (resp)
            protobuf_c_message_free_unpacked(resp, NULL);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int mc_bm_pinger_start(struct mc_bm_pinger *p)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->th, NULL, pinger_main, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        return -1;
    }
    p->started = 1;
    return 0;
}

void mc_bm_pinger_stop(struct mc_bm_pinger *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    p->started = 0;
}

/* Response bytes per object of one sample call (header included), for redis-benchmark -d. */
double mc_bm_sample_bytes_per_object(struct mc_rpc_client *c, const struct opts *o)
{
    Mc__BatchGetReplicaListRequest bg = MC__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    char names[SAMPLE_KEYS][24];
    char *keys[SAMPLE_KEYS];
    int n = o->op == OP_BATCH_GET ? (o->batch < SAMPLE_KEYS ? o->batch : SAMPLE_KEYS) : 1;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), KEY_FMT, (unsigned)i % o->keys);
        keys[i] = names[i];
    }
    /* a key evicted since the prefill is a miss, not a failure: sample the first one found */
    for (unsigned k = 0; n == 1 && k < 64 && k < o->keys; k++) {
        snprintf(names[0], sizeof(names[0]), KEY_FMT, k);
        if (mc_bm_key_exists(c, names[0]))
            break;
    }
    uint16_t method = MC_METHOD_BATCH_GET_REPLICA_LIST;
    uint8_t buf[64 * 32];
    size_t len;
    if (o->op == OP_BATCH_GET) {
        bg.n_keys = (size_t)n;
        bg.keys = keys;
        len = mc__batch_get_replica_list_request__pack(&bg, buf);
    } else if (o->op == OP_EXIST) {
        Mc__ExistKeyRequest r = MC__EXIST_KEY_REQUEST__INIT;
        r.key = keys[0];
        method = MC_METHOD_EXIST_KEY;
        len = mc__exist_key_request__pack(&r, buf);
    } else { /* get, and put's readers */
        Mc__GetReplicaListRequest r = MC__GET_REPLICA_LIST_REQUEST__INIT;
        r.key = keys[0];
        method = MC_METHOD_GET_REPLICA_LIST;
        len = mc__get_replica_list_request__pack(&r, buf);
    }
    void *resp = NULL;
    size_t rl = 0;
    int rc = mc_rpc_client_call(c, method, buf, len, 0, &resp, &rl);
    free(resp);
    if (rc == MC_ERR_OBJECT_NOT_FOUND) {
        fprintf(stderr,
                "bench master: sample %s: no key found among the first ones (evicted?); "
                "bytes_per_object not measured, misses counted\n",
                mc_bm_op_names[o->op]);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "bench master: sample %s of %s failed: %s (prefill first: --prefill)\n",
                mc_bm_op_names[o->op], names[0], mc_strerror(rc));
        return -1;
    }
    return (double)(rl + MC_WIRE_HEADER_SIZE) / n;
}
