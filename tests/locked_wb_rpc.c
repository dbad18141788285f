/* locked_wb_rpc.c - the RPC client's `_locked` functions (rpc_client.c, rpc_client_conn.c) for
 * test_locked_asserts (locked_wb.h). */
#include "common/rpc_client.c"
#include "common/rpc_client_conn.c"

#include "locked_wb.h"

unsigned short wb_closed_port;

static struct mc_rpc_client *client(void)
{
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    cfg.host = "127.0.0.1";
    cfg.port = wb_closed_port;
    cfg.connect_timeout_ms = 500;
    struct mc_rpc_client *c = NULL;
    if (mc_rpc_client_new(&cfg, &c) != 0)
        _exit(2);
    return c;
}

void wb_rpc_conn_broken_unlocked(void)
{
    struct mc_rpc_client *c = client();
    mc_rpcc_conn_broken_locked(c, c->gen, "test");
}

void wb_rpc_check_idle_unlocked(void)
{
    check_idle_locked(client(), false);
}

void wb_rpc_lead_timeout_unlocked(void)
{
    struct pending p;
    memset(&p, 0, sizeof(p));
    lead_timeout_locked(client(), &p);
}

void wb_rpc_reconnect_without_connect_lock(void)
{
    (void)reconnect_serialized(client());
}

/* Each with its lock: a call left pending times out, and a reconnect to a closed port fails
 * with nothing held afterwards. */
void wb_rpc_all_locked(void)
{
    struct mc_rpc_client *c = client();
    struct pending p;
    memset(&p, 0, sizeof(p));
    p.id = 5;
    rpcc_lock(c);
    check_idle_locked(c, false);
    mc_rpcc_conn_broken_locked(c, c->gen, "test");
    lead_timeout_locked(c, &p);
    rpcc_unlock(c);
    if (!p.done || p.status != MC_ERR_RPC_TIMEOUT)
        _exit(3);
    rpcc_connect_lock(c);
    int rc = reconnect_serialized(c);
    rpcc_connect_unlock(c);
    if (rc == 0 || mc_lo_depth() != 0)
        _exit(4);
    mc_rpc_client_free(c);
}
