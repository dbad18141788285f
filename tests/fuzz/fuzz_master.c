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
 * (master/service_wire.h) and by protobuf-c (the bounded decode the handlers used before;
 * tests/put_end_diff.c compares them): a different verdict or different fields abort, so the
 * fuzzer looks for the bodies where the two part.
 *
 * Seeds: tests/fuzz/corpus/master (valid frames of every method, from fuzz_seeds).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_server.h"
#include "master/master.h"
#include "master/service.h"
#include "../put_end_diff.h"

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
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int end = 0; end < 2; end++) {
        enum put_end_verdict v = put_end_diff(size ? data : NULL, size, end, NULL);
        if (v != PUT_END_REFUSED && v != PUT_END_SAME)
            abort(); /* the in-place decoder parts from protobuf-c on this body */
    }
    mc_rpc_server_test_feed(g_srv, data, size);
    mc_master_tick_eviction(g_m);
    mc_fake_clock_advance_ms(&g_clk, 700000);
    mc_master_tick_monitor(g_m);
    mc_master_tick_reaper(g_m);
    mc_master_tick_eviction(g_m);
    return 0;
}
