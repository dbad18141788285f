/*
 * bench_master_hstream.c - the fake segment of `mooncake_bench master` answers the DRAM holder
 * stream: one thread long-polls HolderIndexHeartbeat as a real holder does and acknowledges
 * every drop that carries a task id on its very next poll (no index is kept: the segment is
 * fake). So a master with --holder_stream=true pays the stream's cost under the bench (the
 * commits queued and answered, each Remove waiting for the holder's acknowledgement), and
 * scripts/bench/master_ab.sh can set it against --holder_stream=false on the same build. A
 * master with the stream off answers NOT_SUPPORTED: the thread then polls at the long-poll pace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/bench_master.h"

#define HS_WAIT_MS 200
#define HS_MAX_ITEMS 4096

static void *hstream_main(void *arg)
{
    struct mc_bm_hstream *h = arg;
    Mc__Uuid cu = MC__UUID__INIT;
    cu.hi = h->sh->client.hi;
    cu.lo = h->sh->client.lo;
    uint64_t *acks = malloc(HS_MAX_ITEMS * sizeof(*acks));
    size_t nacks = 0;
    if (!acks)
        return NULL;
    while (!atomic_load(&h->stop)) {
        Mc__HolderIndexHeartbeatRequest req = MC__HOLDER_INDEX_HEARTBEAT_REQUEST__INIT;
        req.client_id = &cu;
        req.wait_ms = HS_WAIT_MS;
        req.max_items = HS_MAX_ITEMS;
        req.n_acked_delete_task_ids = nacks;
        req.acked_delete_task_ids = acks;
        Mc__HolderIndexHeartbeatResponse *r = NULL;
        int rc = mc_rpc_client_call_msg(h->c, MC_METHOD_HOLDER_INDEX_HEARTBEAT, &req.base,
                                        &mc__holder_index_heartbeat_response__descriptor,
                                        HS_WAIT_MS, (ProtobufCMessage **)&r);
        atomic_fetch_add(&h->polls, 1);
        if (rc != 0) {
            if (rc == MC_ERR_NOT_SUPPORTED)
                atomic_store(&h->off, 1);
            else if (rc == MC_ERR_REPLICA_IS_GONE)
                atomic_fetch_add(&h->fenced, 1);
            usleep(rc == MC_ERR_NOT_SUPPORTED ? HS_WAIT_MS * 1000 : 10000);
            continue; /* the acks go again with the next poll */
        }
        atomic_fetch_add(&h->acked, nacks);
        nacks = 0;
        atomic_fetch_add(&h->items, r->n_items);
        for (size_t i = 0; i < r->n_items && nacks < HS_MAX_ITEMS; i++)
            if (r->items[i]->drop && r->items[i]->task_id)
                acks[nacks++] = r->items[i]->task_id;
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    free(acks);
    return NULL;
}

int mc_bm_hstream_start(struct mc_bm_hstream *h, struct shared *sh)
{
    h->sh = sh;
    h->c = mc_bm_new_client(sh->o);
    if (!h->c || pthread_create(&h->th, NULL, hstream_main, h) != 0) {
        fprintf(stderr, "bench master: cannot start the holder stream's thread\n");
        mc_rpc_client_free(h->c);
        h->c = NULL;
        return -1;
    }
    h->started = 1;
    return 0;
}

void mc_bm_hstream_stop(struct mc_bm_hstream *h)
{
    if (!h->started)
        return;
    atomic_store(&h->stop, 1);
    pthread_join(h->th, NULL);
    mc_rpc_client_free(h->c);
    h->started = 0;
    fprintf(stderr, "bench master: holder stream %s: %llu polls, %llu items, %llu drops acked\n",
            atomic_load(&h->off) ? "off at the master" : "on",
            (unsigned long long)atomic_load(&h->polls), (unsigned long long)atomic_load(&h->items),
            (unsigned long long)atomic_load(&h->acked));
}
