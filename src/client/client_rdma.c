/*
 * client_rdma.c - what the client does with protocol rdma, in an RDMA build (MC_WITH_RDMA).
 * client_rdma_off.c answers the same calls in a build without RDMA, so client.c's open path,
 * mount fence and registered buffers call them with no #ifdef. Every call but
 * mc_client_rdma_open is a no-op for a client without an rdma transport (protocol tcp).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/client_internal.h"
#include "common/log.h"
#include "mooncake/errors.h"

/* The rdma settings of the config, in range (checked before any device is looked at, so a bad
 * value is refused the same way on every host): 0 or INVALID_PARAMS (logged, naming it). */
static int check_settings(const struct mc_client_config *cfg)
{
    const char *bad = NULL;
    long long v = 0;
    if (cfg->rdma_ack_timeout < -1 || cfg->rdma_ack_timeout > 31)
        bad = "rdma_ack_timeout (-1 .. 31)", v = cfg->rdma_ack_timeout;
    else if (cfg->rdma_tos < 0 || cfg->rdma_tos > 255)
        bad = "rdma_tos (0 .. 255)", v = cfg->rdma_tos;
    else if (cfg->rdma_qp_pool > 1024)
        bad = "rdma_qp_pool (0 .. 1024)", v = cfg->rdma_qp_pool;
    if (!bad)
        return 0;
    mc_error("client", "rdma setting out of range", "setting=%s value=%lld", bad, v);
    return MC_ERR_INVALID_PARAMS;
}

int mc_client_rdma_open(struct mc_client *c, const struct mc_rdma_ops *ops)
{
    int rc = check_settings(&c->cfg);
    if (rc)
        return rc;
    /* before anything else: a host without a device fails here, never falls back to tcp */
    struct mc_rdma_transport_config rc_cfg;
    mc_rdma_transport_config_init(&rc_cfg);
    rc_cfg.connect_timeout_ms = c->cfg.connect_timeout_ms;
    rc_cfg.io_timeout_ms = c->cfg.rpc_timeout_ms;
    rc_cfg.client_id = c->id;
    rc_cfg.auth = &c->auth; /* every rdma_cm connection proves the token too */
    rc_cfg.host = c->host;  /* rdma_cm cannot use a loopback address */
    rc_cfg.bind_address = c->bind_address;
    rc_cfg.devices = c->cfg.rdma_devices; /* the caller's strings, read during this call */
    rc_cfg.ack_timeout = c->cfg.rdma_ack_timeout;
    rc_cfg.tos = c->cfg.rdma_tos;
    rc_cfg.max_idle_per_peer = c->cfg.rdma_qp_pool;
    rc = mc_transport_rdma_new(&rc_cfg, ops, &c->rdma);
    if (rc)
        mc_error("client", "protocol rdma cannot start (no fallback to tcp)",
                 "rc=%s hint=--protocol=tcp", mc_strerror(rc));
    return rc;
}

int mc_client_rdma_listen(struct mc_client *c)
{
    if (!c->rdma)
        return 0;
    mc_transport_rdma_serve_on(c->rdma, c->host); /* the device peers reach us on */
    return mc_transport_rdma_listen(c->rdma, c->bind_address, mc_peer_server_port(c->ps),
                                    c->cfg.protected_mode);
}

int mc_client_rdma_mount_keys(struct mc_client *c, struct mc_mounted_segment *ms)
{
    if (!c->rdma)
        return 0;
    int rc = mc_transport_rdma_register(c->rdma, c->seg.base, c->seg.map_len, &ms->rkey);
    if (rc)
        return rc;
    ms->rdma = true;
    snprintf(ms->rdma_device, sizeof(ms->rdma_device), "%s", mc_transport_rdma_device(c->rdma));
    return 0;
}

/* The re-registration worker ended: the held-back ReMount can go out now. */
static void rereg_done(void *arg)
{
    struct mc_client *c = arg;
    mc_master_conn_kick(c->mc);
}

static void fence_now(struct mc_client *c, struct mc_id segment_id)
{
    uint32_t rkey = 0;
    int rc = mc_transport_rdma_reregister(c->rdma, c->seg.base, &rkey);
    if (rc) {
        mc_error("client", "cannot register the segment again: it is re-mounted for tcp only",
                 "rc=%s", mc_strerror(rc));
        rkey = 0;
    }
    mc_master_conn_set_segment_rkey(c->mc, segment_id, rkey);
}

void mc_client_rdma_fence(struct mc_client *c, struct mc_id segment_id, uint64_t epoch)
{
    if (!c->rdma || !mc_id_eq(segment_id, c->seg_id))
        return;
    if (epoch != 0) {
        mc_transport_rdma_rereg_settle(c->rdma); /* the new key is announced: done with it */
        return;
    }
    /* registering a large segment takes seconds: a worker does it, the ping thread goes on
     * and the ReMount waits for it (mc_client_rdma_remount_ready) */
    int rc = mc_transport_rdma_rereg_start(c->rdma, c->seg.base, rereg_done, c);
    if (rc == MC_ERR_INTERNAL_ERROR)
        fence_now(c, segment_id); /* no thread: on this one, as before */
}

bool mc_client_rdma_remount_ready(void *arg)
{
    struct mc_client *c = arg;
    int rc = 0;
    uint32_t rkey = 0;
    if (!c->rdma)
        return true;
    if (!mc_transport_rdma_rereg_ready(c->rdma, &rc, &rkey))
        return false;
    if (rc)
        mc_error("client", "cannot register the segment again: it is re-mounted for tcp only",
                 "rc=%s", mc_strerror(rc));
    if (rc || rkey)
        mc_master_conn_set_segment_rkey(c->mc, c->seg_id, rkey);
    return true;
}

void mc_client_rdma_stop(struct mc_client *c)
{
    if (c->rdma)
        mc_transport_rdma_rereg_stop(c->rdma);
}

int mc_client_rdma_register_buffer(struct mc_client *c, void *addr, size_t len)
{
    return c->rdma ? mc_transport_rdma_register(c->rdma, addr, len, NULL) : 0;
}

void mc_client_rdma_unregister_buffer(struct mc_client *c, void *addr)
{
    if (c->rdma)
        mc_transport_rdma_unregister(c->rdma, addr);
}

void mc_client_rdma_disk_group(struct mc_client *c, const char *ep, struct mc_disk_read_item *items,
                               size_t m)
{
    for (size_t i = 0; i < m; i++)
        items[i].status = 1; /* not taken: tcp */
    uint32_t *rkeys = calloc(m, sizeof(*rkeys));
    void **temp = calloc(m, sizeof(*temp));
    struct mc_disk_read_item *sub = calloc(m, sizeof(*sub));
    size_t *at = calloc(m, sizeof(*at));
    if (!rkeys || !temp || !sub || !at)
        goto out;
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (!items[i].size || !items[i].buf)
            continue;
        uint32_t rk = 0;
        /* an rkey for this call only: a late write after the revoke is refused by the device */
        if (mc_transport_rdma_expose(c->rdma, items[i].buf, items[i].size, &rk, &temp[i]) != 0)
            continue;
        rkeys[k] = rk;
        at[k] = i;
        sub[k++] = items[i];
    }
    if (k) {
        int rc = mc_transport_tcp_disk_read_rdma(c->tcp, ep, c->endpoint, rkeys, sub, k);
        for (size_t j = 0; j < k; j++) {
            int st = rc ? rc : sub[j].status;
            if (st == MC_ERR_NOT_SUPPORTED || st == MC_ERR_INVALID_PARAMS)
                continue; /* the holder cannot push it: tcp */
            items[at[j]] = sub[j];
            items[at[j]].status = st;
        }
    }
    for (size_t i = 0; i < m; i++)
        mc_transport_rdma_revoke(c->rdma, temp[i]);
out:
    free(rkeys);
    free(temp);
    free(sub);
    free(at);
}
