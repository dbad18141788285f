/*
 * test_security_cred.c - a client's id is tied to its credential (README "Security"), with real
 * processes on loopback: a mooncake_master with a data and an admin token, and a
 * mooncake_client daemon (the victim) with the data token and a --disk_path.
 *
 *   hijack             a fresh connection with the data token that names the victim's id in a
 *                      Ping or a PutStart gets ILLEGAL_CLIENT (before: it became the victim); so
 *                      does one that presents a forged credential; the credential the daemon
 *                      kept in disk_path is HMAC(admin key, id), and a new id's Ping answer
 *                      carries its own
 *   listing_admin_only ListSegments with the data token lists only the caller's own segments
 *                      (the admin token: all); RemoveAll with the data token is refused
 *   master_restart     a restarted master hands out the same credential (no state), the daemon
 *                      re-registers, and the hijack is still refused
 *   daemon_restart     a daemon killed and restarted on the same disk_path, while its old
 *                      registration is live, presents the kept credential and comes back
 *
 * Every process dies with the test; the temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cluster_util.h"
#include "common/auth.h"
#include "common/clock.h"
#include "common/id.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define START_MS 20000

static struct {
    char dir[64];
    char master_bin[600], daemon_bin[600];
    char tok[128], admin_tok[128], disk[128];
    char tok_flag[160], admin_flag[160], port_flag[64], disk_flag[160];
    struct cu_proc master, d;
    char rpc[64];
    int rpc_port;
    struct mc_auth_key key, admin;
    struct mc_id victim;
} g;

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int start_master(void)
{
    char log[128];
    const char *argv[] = {g.master_bin,
                          g.port_flag,
                          "--rpc_address=127.0.0.1",
                          "--metrics_port=0",
                          "--metrics_host=127.0.0.1",
                          "--log_level=warn",
                          "--client_ttl=60",
                          g.tok_flag,
                          g.admin_flag,
                          NULL};
    snprintf(log, sizeof(log), "%s/master.log", g.dir);
    if (cu_spawn(&g.master, argv, log) != 0)
        return -1;
    struct mc_proc_ready r;
    return cu_await_ready(&g.master, MC_PROC_READY_MASTER, &r, "master", START_MS);
}

static int start_daemon(void)
{
    char master[128], log[128];
    snprintf(master, sizeof(master), "--master=%s", g.rpc);
    const char *argv[] = {g.daemon_bin,
                          master,
                          "--host=127.0.0.1",
                          "--data_port=0",
                          "--segment_size=16MiB",
                          "--log_level=warn",
                          "--metrics_port=0",
                          g.disk_flag,
                          "--disk_capacity=64MiB",
                          g.tok_flag,
                          NULL};
    snprintf(log, sizeof(log), "%s/daemon.log", g.dir);
    if (cu_spawn(&g.d, argv, log) != 0)
        return -1;
    struct mc_proc_ready r;
    return cu_await_ready(&g.d, MC_PROC_READY_DAEMON, &r, "daemon", START_MS);
}

/* An rpc client to the master with `key` (NULL = none); its credential holder, if any, is the
 * key's. */
static struct mc_rpc_client *master_rpc(const struct mc_auth_key *key)
{
    struct mc_rpc_client_config cc;
    char host[64];
    struct mc_rpc_client *c = NULL;
    mc_rpc_client_config_init(&cc);
    assert_int_equal(mc_rpc_parse_endpoint(g.rpc, host, sizeof(host), &cc), 0);
    cc.auth = key;
    cc.call_timeout_ms = 5000;
    cc.reconnect_min_ms = 1;
    cc.reconnect_max_ms = 1;
    assert_int_equal(mc_rpc_client_new(&cc, &c), 0);
    return c;
}

/* Ping as id on a fresh connection with key; the status, and the answer's credential. */
static int ping_as(const struct mc_auth_key *key, struct mc_id id, uint8_t *cred, size_t *cred_len)
{
    struct mc_rpc_client *c = master_rpc(key);
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = id.hi;
    u.lo = id.lo;
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = &u;
    ProtobufCMessage *m = NULL;
    int rc =
        mc_rpc_client_call_msg(c, MC_METHOD_PING, &req.base, &mc__ping_response__descriptor, 0, &m);
    if (cred_len)
        *cred_len = 0;
    if (m) {
        const Mc__PingResponse *r = (const Mc__PingResponse *)m;
        if (cred && cred_len && r->credential.len <= MC_AUTH_CRED_BYTES) {
            memcpy(cred, r->credential.data, r->credential.len);
            *cred_len = r->credential.len;
        }
        protobuf_c_message_free_unpacked(m, NULL);
    }
    mc_rpc_client_free(c);
    return rc;
}

/* PutStart as id on a fresh connection with key. */
static int put_start_as(const struct mc_auth_key *key, struct mc_id id, const char *k)
{
    struct mc_rpc_client *c = master_rpc(key);
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = id.hi;
    u.lo = id.lo;
    Mc__PutStartRequest ps = MC__PUT_START_REQUEST__INIT;
    ps.client_id = &u;
    ps.key = (char *)k;
    ps.value_length = 4096;
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_PUT_START, &ps.base,
                                    &mc__put_start_response__descriptor, 0, &m);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    mc_rpc_client_free(c);
    return rc;
}

/* The credential the daemon kept (DIR/client_cred: "<id hex> <cred hex>\n"). */
static void kept_cred(uint8_t *cred)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", g.disk, MC_AUTH_CRED_FILE);
    size_t len = 0;
    char *text = NULL;
    for (int i = 0; i < 200 && !(text = cu_slurp(path, &len)); i++)
        usleep(50 * 1000); /* the Mount answer brings it; written as it arrives */
    assert_non_null(text);
    assert_int_equal(len, 32 + 1 + 64 + 1);
    char idhex[33];
    memcpy(idhex, text, 32);
    idhex[32] = '\0';
    struct mc_id id;
    assert_int_equal(mc_id_parse(idhex, &id), 0);
    assert_true(mc_id_eq(id, g.victim));
    for (int i = 0; i < MC_AUTH_CRED_BYTES; i++) {
        unsigned v;
        assert_int_equal(sscanf(text + 33 + 2 * i, "%2x", &v), 1);
        cred[i] = (uint8_t)v;
    }
    free(text);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 077, 0); /* nobody else reads it */
}

/* ListSegments on a fresh connection with key (after a Ping as `as`, unless zero): how many
 * segments and LOCAL_DISK entries it lists, and how many of them are the victim's. */
static int list_as(const struct mc_auth_key *key, struct mc_id as, size_t *n, size_t *victims)
{
    struct mc_rpc_client *c = master_rpc(key);
    ProtobufCMessage *m = NULL;
    int rc = 0;
    if (!mc_id_is_zero(as)) {
        Mc__Uuid u = MC__UUID__INIT;
        u.hi = as.hi;
        u.lo = as.lo;
        Mc__PingRequest ping = MC__PING_REQUEST__INIT;
        ping.client_id = &u;
        rc = mc_rpc_client_call_msg(c, MC_METHOD_PING, &ping.base, &mc__ping_response__descriptor,
                                    0, &m);
        if (m)
            protobuf_c_message_free_unpacked(m, NULL);
        m = NULL;
    }
    Mc__ListSegmentsRequest ls = MC__LIST_SEGMENTS_REQUEST__INIT;
    if (rc == 0)
        rc = mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &ls.base,
                                    &mc__list_segments_response__descriptor, 0, &m);
    *n = *victims = 0;
    if (rc == 0) {
        const Mc__ListSegmentsResponse *r = (const Mc__ListSegmentsResponse *)m;
        *n = r->n_segments + r->n_local_disks;
        for (size_t i = 0; i < r->n_segments; i++)
            *victims += r->segments[i]->owner && r->segments[i]->owner->hi == g.victim.hi &&
                        r->segments[i]->owner->lo == g.victim.lo;
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    mc_rpc_client_free(c);
    return rc;
}

/* An admin tool's key: proves the admin token, accepts the master's data-token proof. */
static struct mc_auth_key admin_tool(void)
{
    struct mc_auth_key tool = g.admin;
    tool.has_alt = true;
    memcpy(tool.alt, g.key.k, sizeof(tool.alt));
    return tool;
}

/* The victim's segment is mounted (an admin ListSegments), at most wait_ms from now. */
static bool victim_mounted(uint32_t wait_ms)
{
    uint64_t end = mc_now_ms() + wait_ms;
    do {
        struct mc_auth_key tool = admin_tool();
        struct mc_rpc_client *c = master_rpc(&tool);
        Mc__ListSegmentsRequest ls = MC__LIST_SEGMENTS_REQUEST__INIT;
        ProtobufCMessage *m = NULL;
        bool found = false;
        int lrc = mc_rpc_client_call_msg(c, MC_METHOD_LIST_SEGMENTS, &ls.base,
                                         &mc__list_segments_response__descriptor, 0, &m);
        if (lrc == 0) {
            const Mc__ListSegmentsResponse *r = (const Mc__ListSegmentsResponse *)m;
            for (size_t i = 0; i < r->n_segments; i++)
                found =
                    found || (r->segments[i]->owner && r->segments[i]->owner->hi == g.victim.hi &&
                              r->segments[i]->owner->lo == g.victim.lo);
        }
        if (m)
            protobuf_c_message_free_unpacked(m, NULL);
        mc_rpc_client_free(c);
        if (found)
            return true;
        usleep(100 * 1000);
    } while (mc_now_ms() < end);
    return false;
}

static void assert_hijack_refused(void)
{
    assert_int_equal(ping_as(&g.key, g.victim, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_start_as(&g.key, g.victim, "cred/hijack"), MC_ERR_ILLEGAL_CLIENT);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_hijack(void **state)
{
    (void)state;
    assert_true(victim_mounted(START_MS));
    uint8_t cred[MC_AUTH_CRED_BYTES], want[MC_AUTH_CRED_BYTES], id[MC_AUTH_ID_BYTES];
    kept_cred(cred);
    mc_id_to_bytes(g.victim, id);
    mc_auth_cred_mint(&g.admin, id, want); /* the admin key's HMAC of the id: no state */
    assert_memory_equal(cred, want, sizeof(want));

    /* the review's attack: a fresh connection names the live victim */
    assert_hijack_refused();

    /* a forged credential checks nothing */
    uint8_t forged[MC_AUTH_CRED_BYTES];
    mc_auth_random(forged, sizeof(forged));
    struct mc_auth_cred *h = mc_auth_cred_new(id, NULL);
    mc_auth_cred_learn(h, forged, sizeof(forged));
    struct mc_auth_key k = g.key;
    k.cred = h;
    assert_int_equal(ping_as(&k, g.victim, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    /* made with the data key (what a data-token holder could compute): refused too */
    mc_auth_cred_mint(&g.key, id, forged);
    mc_auth_cred_learn(h, forged, sizeof(forged));
    assert_int_equal(ping_as(&k, g.victim, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    /* the real one is what proves the id */
    mc_auth_cred_learn(h, cred, sizeof(cred));
    assert_int_equal(ping_as(&k, g.victim, NULL, NULL), 0);
    mc_auth_cred_free(h);

    /* a new id registers and is handed its own credential */
    struct mc_id fresh = mc_id_random();
    uint8_t got[MC_AUTH_CRED_BYTES];
    size_t got_len = 0;
    assert_int_equal(ping_as(&g.key, fresh, got, &got_len), 0);
    assert_int_equal(got_len, MC_AUTH_CRED_BYTES);
    mc_id_to_bytes(fresh, id);
    mc_auth_cred_mint(&g.admin, id, want);
    assert_memory_equal(got, want, sizeof(want));
    /* and is then bound to it: a second connection without it is refused */
    assert_int_equal(ping_as(&g.key, fresh, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
}

/* ListSegments names every client's ids and endpoints: with an admin token, a data connection
 * sees only its own client's segments; RemoveAll is the admin's. */
static void test_listing_admin_only(void **state)
{
    (void)state;
    struct mc_id none = {0, 0}, other = mc_id_random();
    size_t n = 0, victims = 0;
    struct mc_auth_key tool = admin_tool();
    assert_int_equal(list_as(&tool, none, &n, &victims), 0);
    assert_int_equal(victims, 1); /* the admin sees the victim's segment */
    assert_int_equal(list_as(&g.key, none, &n, &victims), 0);
    assert_int_equal(n, 0); /* a data connection acting for nobody sees nothing */
    assert_int_equal(list_as(&g.key, other, &n, &victims), 0);
    assert_int_equal(n, 0); /* nor one acting for a client without segments */
    /* the victim itself (its kept credential) sees its own */
    uint8_t cred[MC_AUTH_CRED_BYTES], id[MC_AUTH_ID_BYTES];
    kept_cred(cred);
    mc_id_to_bytes(g.victim, id);
    struct mc_auth_cred *h = mc_auth_cred_new(id, NULL);
    mc_auth_cred_learn(h, cred, sizeof(cred));
    struct mc_auth_key k = g.key;
    k.cred = h;
    assert_int_equal(list_as(&k, none, &n, &victims), 0);
    assert_int_equal(victims, 1);
    assert_int_equal(n, victims);
    mc_auth_cred_free(h);

    /* RemoveAll with the data token is refused */
    struct mc_rpc_client *c = master_rpc(&g.key);
    Mc__RemoveAllRequest ra = MC__REMOVE_ALL_REQUEST__INIT;
    ra.force = 1;
    ProtobufCMessage *m = NULL;
    assert_int_equal(mc_rpc_client_call_msg(c, MC_METHOD_REMOVE_ALL, &ra.base,
                                            &mc__remove_all_response__descriptor, 0, &m),
                     MC_ERR_UNAUTHENTICATED);
    mc_rpc_client_free(c);
}

static void test_master_restart(void **state)
{
    (void)state;
    assert_int_equal(cu_stop(&g.master, SIGTERM, 10000), 0);
    assert_int_equal(start_master(), 0);
    assert_true(victim_mounted(START_MS)); /* re-registered through its credential */
    assert_hijack_refused();
    /* the new master hands out the same credential for the same id */
    uint8_t cred[MC_AUTH_CRED_BYTES], id[MC_AUTH_ID_BYTES], got[MC_AUTH_CRED_BYTES];
    kept_cred(cred);
    mc_id_to_bytes(g.victim, id);
    struct mc_auth_cred *h = mc_auth_cred_new(id, NULL);
    mc_auth_cred_learn(h, cred, sizeof(cred));
    struct mc_auth_key k = g.key;
    k.cred = h;
    size_t got_len = 0;
    assert_int_equal(ping_as(&k, g.victim, got, &got_len), 0);
    assert_int_equal(got_len, MC_AUTH_CRED_BYTES);
    assert_memory_equal(got, cred, sizeof(cred));
    mc_auth_cred_free(h);
}

static void test_daemon_restart(void **state)
{
    (void)state;
    /* killed: its registration stays live for --client_ttl=60s */
    cu_stop(&g.d, SIGKILL, 10000); /* its status is the signal */
    /* the restarted daemon unmounts its previous segments and mounts anew as the same id: only
     * the kept credential lets it (it would be ILLEGAL_CLIENT for a minute otherwise) */
    assert_int_equal(start_daemon(), 0);
    assert_true(victim_mounted(START_MS));
    assert_hijack_refused();
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    const char *bin = getenv("MC_BIN_DIR");
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.d.out_fd = -1;
    if (!bin)
        return -1;
    snprintf(g.master_bin, sizeof(g.master_bin), "%s/mooncake_master", bin);
    snprintf(g.daemon_bin, sizeof(g.daemon_bin), "%s/mooncake_client", bin);
    snprintf(g.dir, sizeof(g.dir), "/tmp/mc_sec_cred.XXXXXX");
    if (!mkdtemp(g.dir))
        return -1;
    snprintf(g.tok, sizeof(g.tok), "%s/token", g.dir);
    snprintf(g.admin_tok, sizeof(g.admin_tok), "%s/admin_token", g.dir);
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.dir);
    uint8_t r[2][32];
    char tok[2][66];
    if (mc_auth_random(r, sizeof(r)) != 0)
        return -1;
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < 32; i++)
            snprintf(tok[t] + 2 * i, 3, "%02x", r[t][i]);
        tok[t][64] = '\n';
        tok[t][65] = '\0';
    }
    if (cu_write_file(g.tok, tok[0], 65) || cu_write_file(g.admin_tok, tok[1], 65))
        return -1;
    chmod(g.tok, 0600);
    chmod(g.admin_tok, 0600);
    char err[160];
    if (mc_auth_key_load(g.tok, &g.key, err, sizeof(err)) ||
        mc_auth_key_load(g.admin_tok, &g.admin, err, sizeof(err)))
        return -1;
    g.rpc_port = free_port();
    snprintf(g.rpc, sizeof(g.rpc), "127.0.0.1:%d", g.rpc_port);
    snprintf(g.port_flag, sizeof(g.port_flag), "--rpc_port=%d", g.rpc_port);
    snprintf(g.tok_flag, sizeof(g.tok_flag), "--auth_token_file=%s", g.tok);
    snprintf(g.admin_flag, sizeof(g.admin_flag), "--admin_token_file=%s", g.admin_tok);
    snprintf(g.disk_flag, sizeof(g.disk_flag), "--disk_path=%s", g.disk);
    if (start_master() != 0 || start_daemon() != 0)
        return -1;
    char path[160], *text;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/client_id", g.disk);
    if (!(text = cu_slurp(path, &len)) || len < 32)
        return -1;
    text[32] = '\0';
    int rc = mc_id_parse(text, &g.victim);
    free(text);
    return rc;
}

static int group_teardown(void **state)
{
    (void)state;
    cu_stop(&g.d, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    if (g.dir[0])
        cu_rm_rf(g.dir);
    return 0;
}

int main(void)
{
    mc_log_set_level(MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hijack),
        cmocka_unit_test(test_listing_admin_only),
        cmocka_unit_test(test_master_restart),
        cmocka_unit_test(test_daemon_restart),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
