/*
 * ha_fixture.c - the fail-over tests' shared fixture. See ha_fixture.h.
 */
#include "ha_fixture.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/wire.h"
#include "proto/master.pb-c.h"

#define FLAGS_MAX 16

int hx_setup(struct hx *h, const char *prefix, const char *cluster_id)
{
    memset(h, 0, sizeof(*h));
    h->ma.out_fd = h->mb.out_fd = h->holder.out_fd = -1;
    snprintf(h->cluster_id, sizeof(h->cluster_id), "%s", cluster_id);
    h->etcd_rc = eu_start(&h->etcd, 1, 20000);
    if (h->etcd_rc != 0)
        return 0;
    return cu_cluster_init(&h->c, prefix);
}

void hx_teardown(struct hx *h)
{
    cu_stop(&h->holder, SIGKILL, 5000);
    cu_stop(&h->ma, SIGKILL, 5000);
    cu_stop(&h->mb, SIGKILL, 5000);
    eu_stop(&h->etcd);
    cu_cluster_destroy(&h->c);
}

void hx_start_master(struct hx *h, struct cu_proc *p, char *rpc, const char *const *flags)
{
    char ep[300], id[64];
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", h->etcd.endpoints);
    snprintf(id, sizeof(id), "--cluster_id=%s", h->cluster_id);
    const char *argv[FLAGS_MAX] = {"--enable_ha", ep, id, "--ha_lease_ttl_sec=2"};
    size_t n = 4;
    for (size_t i = 0; flags && flags[i]; i++) {
        assert_true(n + 1 < FLAGS_MAX);
        argv[n++] = flags[i];
    }
    argv[n] = NULL;
    assert_int_equal(cu_start_master(&h->c, p, 0, argv, 10000), 0);
    snprintf(rpc, 64, "%s", h->c.rpc);
}

uint64_t hx_start_pair(struct hx *h, const char *const *flags, int timeout_ms)
{
    hx_start_master(h, &h->ma, h->rpc_a, flags);
    uint64_t epoch = hx_wait_leads(h->rpc_a, timeout_ms);
    hx_start_master(h, &h->mb, h->rpc_b, flags);
    hx_name_cluster(h);
    return epoch;
}

void hx_name_cluster(struct hx *h)
{
    snprintf(h->url, sizeof(h->url), "etcd://%s/%s", h->etcd.endpoints, h->cluster_id);
    assert_true(strlen(h->url) < sizeof(h->c.rpc));
    memcpy(h->c.rpc, h->url, strlen(h->url) + 1);
}

struct mc_rpc_client *hx_admin(const char *addr)
{
    struct mc_rpc_client *c = NULL;
    assert_int_equal(cu_admin_open(addr, 3000, &c), 0);
    return c;
}

bool hx_leads(const char *addr, uint64_t *epoch)
{
    struct mc_rpc_client *c = hx_admin(addr);
    Mc__GetLeaderRequest req = MC__GET_LEADER_REQUEST__INIT;
    Mc__GetLeaderResponse *r = NULL;
    bool yes = false;
    if (mc_rpc_client_call_msg(c, MC_METHOD_GET_LEADER, &req.base,
                               &mc__get_leader_response__descriptor, 0,
                               (ProtobufCMessage **)&r) == 0) {
        yes = strcmp(r->role, "leader") == 0;
        *epoch = r->epoch;
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    mc_rpc_client_free(c);
    return yes;
}

uint64_t hx_wait_leads(const char *addr, int timeout_ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)timeout_ms, e = 0;
    while (!hx_leads(addr, &e)) {
        if (cu_now_ms() > deadline)
            fail_msg("%s never led", addr);
        cu_sleep_ms(20);
    }
    return e;
}
