/*
 * master_service_fixture.c - see master_service_fixture.h.
 */
#include "master_service_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

struct mc_master_config msf_master_config(void)
{
    struct mc_master_config mc;
    mc_master_config_init(&mc);
    mc.eviction_threads = 1;
    return mc;
}

struct mc_rpc_server_config msf_server_config(const char *bind_addr)
{
    struct mc_rpc_server_config rc;
    mc_rpc_server_config_init(&rc);
    if (bind_addr)
        rc.bind_addr = bind_addr;
    rc.io_threads = 1;
    return rc;
}

void msf_open(struct msf *x, const struct mc_master_config *mc, struct mc_rpc_server_config rc)
{
    assert_int_equal(mc_master_new(mc, &x->m), 0);
    assert_int_equal(mc_master_service_new(x->m, &x->svc), 0);
    rc.on_close = mc_master_service_on_close;
    rc.on_close_arg = x->svc;
    assert_int_equal(mc_rpc_server_new(&rc, &x->srv), 0);
    assert_int_equal(mc_master_service_register(x->svc, x->srv), 0);
}

uint16_t msf_start(struct msf *x)
{
    assert_int_equal(mc_rpc_server_start(x->srv), 0);
    return mc_rpc_server_port(x->srv);
}

struct mc_rpc_client *msf_client(struct msf *x, const char *host, const struct mc_auth_key *key)
{
    struct mc_rpc_client_config cc;
    mc_rpc_client_config_init(&cc);
    cc.host = host;
    cc.port = mc_rpc_server_port(x->srv);
    cc.auth = key;
    struct mc_rpc_client *c = NULL;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    return c;
}

void msf_close(struct msf *x)
{
    mc_rpc_server_stop(x->srv);
    mc_master_service_free(x->svc);
    mc_rpc_server_free(x->srv);
    mc_master_free(x->m);
}
