/*
 * bench_master_remove.c - the remove and batch_remove ops of `mooncake_bench master` (see the
 * top of bench_master.c for what they measure): blocking calls timed one at a time, and with
 * --disk_holder a holder thread that stores every offload task and acknowledges every delete.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/id.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/bench_master.h"
#include "tools/bench_util.h"

/* ---- remove, batch_remove: blocking calls, a holder thread ----------------------------------- */

struct holder {
    struct shared *sh;
    struct mc_rpc_client *c;
    _Atomic int stop;
    _Atomic uint64_t stored, acked;
    pthread_t th;
};

/* Reports the offload tasks of r stored (no bytes: the bench's segment is fake). */
static void holder_store(struct holder *h, Mc__Uuid *cu,
                         const Mc__OffloadObjectHeartbeatResponse *r)
{
    size_t n = 0;
    Mc__OffloadResult *items = calloc(r->n_items ? r->n_items : 1, sizeof(*items));
    Mc__OffloadResult **ptrs = calloc(r->n_items ? r->n_items : 1, sizeof(*ptrs));
    for (size_t i = 0; items && ptrs && i < r->n_items; i++) {
        const Mc__OffloadTaskItem *it = r->items[i];
        if (it->drop)
            continue;
        mc__offload_result__init(&items[n]);
        items[n].task_id = it->task_id;
        items[n].key = it->key;
        items[n].size = it->size;
        items[n].version = it->version;
        items[n].crc32c = it->crc32c;
        items[n].crc_valid = it->crc_valid;
        ptrs[n] = &items[n];
        n++;
    }
    if (n) {
        Mc__NotifyOffloadSuccessRequest req = MC__NOTIFY_OFFLOAD_SUCCESS_REQUEST__INIT;
        req.client_id = cu;
        req.n_items = n;
        req.items = ptrs;
        ProtobufCMessage *resp = NULL;
        if (mc_rpc_client_call_msg(h->c, MC_METHOD_NOTIFY_OFFLOAD_SUCCESS, &req.base,
                                   &mc__notify_offload_success_response__descriptor, 0, &resp) == 0)
            atomic_fetch_add(&h->stored, n);
        if (resp)
            protobuf_c_message_free_unpacked(resp, NULL);
    }
    free(items);
    free(ptrs);
}

/* The holder: long-polls, stores offloads, acknowledges deletes on the very next heartbeat. */
static void *holder_main(void *arg)
{
    struct holder *h = arg;
    Mc__Uuid cu = MC__UUID__INIT;
    cu.hi = h->sh->client.hi;
    cu.lo = h->sh->client.lo;
    uint64_t acks[MC_OFFLOAD_MAX_ITEMS_BENCH];
    size_t nacks = 0;
    while (!atomic_load(&h->stop)) {
        Mc__OffloadObjectHeartbeatRequest req = MC__OFFLOAD_OBJECT_HEARTBEAT_REQUEST__INIT;
        req.client_id = &cu;
        req.enable_offloading = true;
        req.wait_ms = 200;
        req.max_items = MC_OFFLOAD_MAX_ITEMS_BENCH;
        req.n_acked_delete_task_ids = nacks;
        req.acked_delete_task_ids = acks;
        Mc__OffloadObjectHeartbeatResponse *r = NULL;
        int rc = mc_rpc_client_call_msg(h->c, MC_METHOD_OFFLOAD_OBJECT_HEARTBEAT, &req.base,
                                        &mc__offload_object_heartbeat_response__descriptor, 0,
                                        (ProtobufCMessage **)&r);
        if (rc != 0) {
            usleep(10000);
            continue;
        }
        atomic_fetch_add(&h->acked, nacks);
        nacks = 0;
        for (size_t i = 0; i < r->n_items && nacks < MC_OFFLOAD_MAX_ITEMS_BENCH; i++)
            if (r->items[i]->drop && r->items[i]->task_id)
                acks[nacks++] = r->items[i]->task_id;
        holder_store(h, &cu, r);
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    return NULL;
}

static int mount_disk(struct mc_rpc_client *c, struct mc_id client)
{
    Mc__Uuid cu = MC__UUID__INIT;
    cu.hi = client.hi;
    cu.lo = client.lo;
    Mc__MountLocalDiskSegmentRequest req = MC__MOUNT_LOCAL_DISK_SEGMENT_REQUEST__INIT;
    req.client_id = &cu;
    req.enable_offloading = true;
    req.endpoint = "127.0.0.1:9";
    req.capacity_bytes = 1ull << 40;
    ProtobufCMessage *resp = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_MOUNT_LOCAL_DISK_SEGMENT, &req.base,
                                    &mc__mount_local_disk_segment_response__descriptor, 0, &resp);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

/* Removes keys [first, first + n) in one call (Remove for n == 1); its latency into *ms. Returns
 * the objects that failed. */
static unsigned remove_call(struct mc_rpc_client *c, const struct opts *o, unsigned first,
                            unsigned n, double *ms)
{
    char(*names)[24] = malloc((size_t)n * sizeof(*names));
    char **keys = malloc((size_t)n * sizeof(*keys));
    unsigned failed = n;
    if (!names || !keys)
        goto out;
    for (unsigned i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), KEY_FMT, first + i);
        keys[i] = names[i];
    }
    ProtobufCMessage *resp = NULL;
    uint64_t t0 = mc_now_ns();
    int rc;
    if (o->op == OP_REMOVE) {
        Mc__RemoveRequest req = MC__REMOVE_REQUEST__INIT;
        req.key = keys[0];
        rc = mc_rpc_client_call_msg(c, MC_METHOD_REMOVE, &req.base,
                                    &mc__remove_response__descriptor, 0, &resp);
        failed = rc == 0 ? 0 : 1;
    } else {
        Mc__BatchRemoveRequest req = MC__BATCH_REMOVE_REQUEST__INIT;
        req.n_keys = n;
        req.keys = keys;
        rc = mc_rpc_client_call_msg(c, MC_METHOD_BATCH_REMOVE, &req.base,
                                    &mc__batch_remove_response__descriptor, 0, &resp);
        if (rc == 0) {
            const Mc__BatchRemoveResponse *r = (const void *)resp;
            failed = 0;
            for (unsigned i = 0; i < n; i++)
                failed += i >= r->n_statuses || r->statuses[i] != 0;
        }
    }
    *ms = (double)(mc_now_ns() - t0) / 1e6;
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
out:
    free(names);
    free(keys);
    return failed;
}

/* The remove ops: per run, prefill --keys objects (and, with --disk_holder, wait until every one
 * has its LOCAL_DISK copy), then remove them all, one call at a time, timing each call. */
int mc_bm_run_remove(struct shared *sh, struct mc_rpc_client *c)
{
    const struct opts *o = sh->o;
    struct holder h = {.sh = sh};
    int rc = 1, holder_up = 0;
    size_t ncalls = (o->keys + (unsigned)o->batch - 1) / (unsigned)o->batch;
    double *lat = malloc((size_t)o->runs * ncalls * sizeof(double));
    double rates[100];
    size_t nlat = 0;
    uint64_t failed = 0;
    if (!lat)
        goto out;
    if (o->disk_holder) {
        if (mount_disk(c, sh->client) != 0) {
            fprintf(stderr, "bench master: MountLocalDiskSegment failed (start the master with "
                            "--enable_offload)\n");
            goto out;
        }
        h.c = mc_bm_new_client(o);
        if (!h.c || pthread_create(&h.th, NULL, holder_main, &h) != 0)
            goto out;
        holder_up = 1;
    }
    for (int r = 0; r < o->runs; r++) {
        uint64_t before = atomic_load(&h.stored);
        if (mc_bm_prefill(sh) != 0)
            goto out;
        uint64_t deadline = mc_now_ms() + 60000;
        while (o->disk_holder && atomic_load(&h.stored) - before < o->keys) {
            if (mc_now_ms() > deadline) {
                fprintf(stderr, "bench master: offloads did not complete (%llu of %u)\n",
                        (unsigned long long)(atomic_load(&h.stored) - before), o->keys);
                goto out;
            }
            usleep(1000);
        }
        uint64_t t0 = mc_now_ns();
        for (unsigned k = 0; k < o->keys; k += (unsigned)o->batch) {
            unsigned n = o->keys - k < (unsigned)o->batch ? o->keys - k : (unsigned)o->batch;
            failed += remove_call(c, o, k, n, &lat[nlat++]);
        }
        double s = (double)(mc_now_ns() - t0) / 1e9;
        rates[r] = s > 0 ? o->keys / s : 0;
        fprintf(stderr, "bench master: run %d: %s %.0f objects/s\n", r + 1, mc_bm_op_names[o->op],
                rates[r]);
    }
    if (failed) {
        fprintf(stderr, "bench master: %llu failed removes\n", (unsigned long long)failed);
        goto out;
    }
    struct mc_bench_result res;
    char cname[96];
    snprintf(cname, sizeof(cname), "%s_b%d%s", mc_bm_op_names[o->op], o->batch,
             o->disk_holder ? "_disk" : "");
    mc_bench_result_init(&res, "master", cname);
    res.runs = o->runs;
    res.ops_per_s = mc_bench_median(rates, (size_t)o->runs);
    res.p50_ms = mc_bench_percentile(lat, nlat, 50);
    res.p99_ms = mc_bench_percentile(lat, nlat, 99);
    mc_bench_add_str(&res, "op", mc_bm_op_names[o->op]);
    mc_bench_add_num(&res, "batch", o->batch);
    mc_bench_add_num(&res, "keys", o->keys);
    mc_bench_add_num(&res, "disk_holder", o->disk_holder);
    mc_bench_add_num(&res, "deletes_acked", (double)atomic_load(&h.acked));
    mc_bench_emit(&res);
    rc = 0;
out:
    if (holder_up) {
        atomic_store(&h.stop, 1);
        pthread_join(h.th, NULL);
    }
    mc_rpc_client_free(h.c);
    free(lat);
    return rc;
}

/* --prefill --disk_holder for the other ops: the prefill, then the holder stores every offload
 * task (the master started with --enable_offload queues one at PutEnd, up to its
 * --offloading_queue_limit) until no task came for 2 s. 0 or -1. */
int mc_bm_prefill_with_disk(struct shared *sh, struct mc_rpc_client *c)
{
    const struct opts *o = sh->o;
    struct holder h = {.sh = sh};
    int rc = -1;
    if (mount_disk(c, sh->client) != 0) {
        fprintf(stderr, "bench master: MountLocalDiskSegment failed (start the master with "
                        "--enable_offload)\n");
        return -1;
    }
    h.c = mc_bm_new_client(o);
    if (!h.c || pthread_create(&h.th, NULL, holder_main, &h) != 0) {
        mc_rpc_client_free(h.c);
        return -1;
    }
    if (mc_bm_prefill(sh) != 0)
        goto out;
    /* every object, or as many as the master queued (its offload queue is bounded): done when
     * no task came for 2 s */
    uint64_t last = 0, last_ms = mc_now_ms();
    while (atomic_load(&h.stored) < o->keys && mc_now_ms() - last_ms < 2000) {
        uint64_t now = atomic_load(&h.stored);
        if (now != last) {
            last = now;
            last_ms = mc_now_ms();
        }
        usleep(1000);
    }
    fprintf(stderr, "bench master: %llu of %u objects have a LOCAL_DISK copy\n",
            (unsigned long long)atomic_load(&h.stored), o->keys);
    rc = 0;
out:
    atomic_store(&h.stop, 1);
    pthread_join(h.th, NULL);
    mc_rpc_client_free(h.c);
    return rc;
}
