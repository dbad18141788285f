/*
 * security_fixture.c - see security_fixture.h.
 */
#include "security_fixture.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"

int sec_env_init(struct sec_env *e, const char *name)
{
    const char *bin = getenv("MC_BIN_DIR");
    memset(e, 0, sizeof(*e));
    if (!bin)
        return -1;
    snprintf(e->master_bin, sizeof(e->master_bin), "%s/mooncake_master", bin);
    snprintf(e->daemon_bin, sizeof(e->daemon_bin), "%s/mooncake_client", bin);
    snprintf(e->cli_bin, sizeof(e->cli_bin), "%s/mooncake_cli", bin);
    snprintf(e->dir, sizeof(e->dir), "/tmp/%s.XXXXXX", name);
    if (mkdtemp(e->dir))
        return 0;
    e->dir[0] = '\0'; /* nothing to remove */
    return -1;
}

/* argv = fixed (n of them), then flags, NULL-terminated; spawned with stderr to DIR/NAME.log,
 * then its READY line of kind awaited. */
static int spawn(const struct sec_env *e, struct cu_proc *p, const char *name,
                 enum mc_proc_ready_kind kind, const char **argv, int n, const char *const *flags,
                 struct mc_proc_ready *r)
{
    for (int i = 0; flags && flags[i]; i++) {
        if (n >= 23)
            return -1;
        argv[n++] = flags[i];
    }
    argv[n] = NULL;
    char log[128];
    snprintf(log, sizeof(log), "%s/%s.log", e->dir, name);
    if (cu_spawn(p, argv, log) != 0)
        return -1;
    return cu_await_ready(p, kind, r, name, SEC_START_MS);
}

int sec_start_master(const struct sec_env *e, struct cu_proc *p, const char *const *flags,
                     struct mc_proc_ready *r)
{
    const char *argv[24] = {e->master_bin, "--rpc_address=127.0.0.1", "--metrics_port=0",
                            "--metrics_host=127.0.0.1", "--log_level=warn"};
    return spawn(e, p, "master", MC_PROC_READY_MASTER, argv, 5, flags, r);
}

int sec_start_daemon(const struct sec_env *e, struct cu_proc *p, const char *name, const char *rpc,
                     const char *const *flags, struct mc_proc_ready *r)
{
    char master[128];
    snprintf(master, sizeof(master), "--master=%s", rpc);
    const char *argv[24] = {e->daemon_bin, master, "--host=127.0.0.1", "--data_port=0",
                            "--log_level=warn"};
    return spawn(e, p, name, MC_PROC_READY_DAEMON, argv, 5, flags, r);
}

void sec_env_close(struct sec_env *e, struct cu_proc *const *procs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cu_stop(procs[i], SIGTERM, 10000);
    if (e->dir[0])
        cu_rm_rf(e->dir);
}

int sec_data_client(const char *rpc, const char *tok, struct mc_client **out)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = rpc;
    cfg.segment_size = 0;
    cfg.auth_token_file = tok;
    *out = NULL;
    return mc_client_open(&cfg, out);
}

void sec_fill(uint8_t *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed | 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
}

int sec_make_token(const char *path, const char *text, struct mc_auth_key *key)
{
    char hex[66];
    if (!text) {
        uint8_t r[32];
        if (mc_auth_random(r, sizeof(r)) != 0)
            return -1;
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", r[i]);
        hex[64] = '\n';
        hex[65] = '\0';
        text = hex;
    }
    if (cu_write_file(path, text, strlen(text)) != 0 || chmod(path, 0600) != 0)
        return -1;
    char err[160];
    return mc_auth_key_load(path, key, err, sizeof(err)) == 0 ? 0 : -1;
}

struct mc_rpc_client *sec_master_rpc(const char *addr, const struct mc_auth_key *key)
{
    struct mc_rpc_client_config cc;
    char host[64];
    struct mc_rpc_client *c = NULL;
    mc_rpc_client_config_init(&cc);
    if (mc_rpc_parse_endpoint(addr, host, sizeof(host), &cc) != 0)
        return NULL;
    cc.auth = key;
    cc.call_timeout_ms = 5000;
    cc.reconnect_min_ms = 1;
    cc.reconnect_max_ms = 1;
    return mc_rpc_client_new(&cc, &c) == 0 ? c : NULL;
}

int sec_register(struct mc_rpc_client *c, struct mc_id *id, uint8_t *cred, size_t *cred_len)
{
    Mc__RegisterClientRequest req = MC__REGISTER_CLIENT_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_REGISTER_CLIENT, &req.base,
                                    &mc__register_client_response__descriptor, 0, &m);
    id->hi = id->lo = 0;
    if (cred_len)
        *cred_len = 0;
    if (m) {
        const Mc__RegisterClientResponse *r = (const Mc__RegisterClientResponse *)m;
        if (r->client_id) {
            id->hi = r->client_id->hi;
            id->lo = r->client_id->lo;
        }
        if (cred && cred_len && r->credential.len) {
            *cred_len = r->credential.len;
            memcpy(cred, r->credential.data,
                   r->credential.len < MC_AUTH_CRED_BYTES ? r->credential.len : MC_AUTH_CRED_BYTES);
        }
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return rc;
}
