/*
 * fuzz_master.c - libFuzzer target: the bytes of one client connection to mooncake_master.
 *
 * Each input is a byte stream fed to a master RPC server that never listens
 * (mc_rpc_server_test_feed): frame headers are parsed and checked, every registered method's
 * decoder and handler runs (service.c on a manual-ticks master with a fake clock), and
 * the connection closes at the end (its client binding is released). After the stream the
 * clock jumps and the eviction, monitor and reaper ticks run, so state the stream left behind
 * (mounted segments, half-done Puts, leases) goes through expiry too. A crash, a sanitizer
 * report or a leak is a finding.
 *
 * Each input is also read as a PutEndRequest and a PutRevokeRequest body by the in-place decoder
 * (master/service_wire.h) and by protobuf-c (the bounded decode the handlers used before): a
 * different verdict or different fields abort, so the fuzzer looks for the bodies where the two
 * part.
 *
 * Seeds: tests/fuzz/corpus/master (valid frames of every method, from fuzz_seeds).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "master/master.h"
#include "common/pb_budget.h"
#include "master/service.h"
#include "master/service_internal.h"
#include "master/service_wire.h"

static struct mc_fake_clock g_clk;
static struct mc_master *g_m;
static struct mc_master_service *g_svc;
static struct mc_rpc_server *g_srv;

/* libFuzzer's entry points (also called by fuzz_replay.c) */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(MC_LOG_OFF);
    mc_fake_clock_init(&g_clk, 1000000000ull);
    struct mc_master_config mc;
    mc_master_config_init(&mc);
    mc.clock = &g_clk.clock;
    mc.manual_ticks = true;
    mc.eviction_threads = 1;
    mc.client_ttl_ms = 1000;
    if (mc_master_new(&mc, &g_m) != 0 || mc_master_service_new(g_m, &g_svc) != 0)
        abort();
    struct mc_rpc_server_config rc;
    mc_rpc_server_config_init(&rc);
    rc.io_threads = 1;
    rc.name = "fuzz";
    rc.on_close = mc_master_service_on_close;
    rc.on_close_arg = g_svc;
    if (mc_rpc_server_new(&rc, &g_srv) != 0 || mc_master_service_register(g_svc, g_srv) != 0)
        abort();
    return 0;
}

/* One master for the whole run (creating one per input costs more than the input itself);
 * what an input leaves behind is expired after it: the clock jumps past every TTL, lease and
 * release timeout, so its clients expire, their segments unmount and their objects go. */
/* The in-place PutEnd/PutRevoke decoder against protobuf-c on the same body. */
static void diff_put_end(const uint8_t *b, size_t len, bool end)
{
    struct mc_pb_limits lim = {0};
    ProtobufCMessage *m = mc_pb_unpack_bounded(end ? &mc__put_end_request__descriptor
                                                   : &mc__put_revoke_request__descriptor,
                                               b, len, &lim, NULL);
    struct mc_svc_put_end_req r;
    const char *why = mc_svc_decode_put_end(b, len, end, &r);
    if (!m != !!why)
        abort();
    if (!m)
        return;
    const char *k;
    struct mc_id id;
    int32_t type;
    uint64_t version;
    uint32_t crc = 0;
    bool crc_valid = false;
    if (end) {
        const Mc__PutEndRequest *q = (const void *)m;
        k = q->key;
        id = mc_svc_id_from_pb(q->client_id);
        type = q->replica_type;
        version = q->version;
        crc = q->crc32c;
        crc_valid = q->crc_valid;
    } else {
        const Mc__PutRevokeRequest *q = (const void *)m;
        k = q->key;
        id = mc_svc_id_from_pb(q->client_id);
        type = q->replica_type;
        version = q->version;
    }
    struct mc_key_ref ref = {.data = k ? k : "", .len = k ? strlen(k) : 0};
    mc_svc_mark_nul_strings(b, len, MC_SVC_PUT_END_KEY_FIELD, 0, true, &ref, 1);
    if (r.key.len != ref.len || memcmp(r.key.data, ref.data, ref.len) != 0 ||
        r.client.hi != id.hi || r.client.lo != id.lo || r.replica_type != type ||
        r.version != version || r.crc32c != crc || r.crc_valid != crc_valid)
        abort();
    protobuf_c_message_free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    diff_put_end(size ? data : NULL, size, true);
    diff_put_end(size ? data : NULL, size, false);
    mc_rpc_server_test_feed(g_srv, data, size);
    mc_master_tick_eviction(g_m);
    mc_fake_clock_advance_ms(&g_clk, 700000);
    mc_master_tick_monitor(g_m);
    mc_master_tick_reaper(g_m);
    mc_master_tick_eviction(g_m);
    return 0;
}
