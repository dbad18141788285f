/*
 * test_security_cred.c - a client's id is tied to its credential (README "Security"), with real
 * processes on loopback: a mooncake_master with a data and an admin token, and a
 * mooncake_client daemon (the victim) with the data token and a --disk_path.
 *
 *   hijack             a fresh connection with the data token that names the victim's id in a
 *                      Ping or a PutStart gets ILLEGAL_CLIENT (before: it became the victim); so
 *                      does one that presents a forged credential; the credential the daemon
 *                      kept in disk_path is HMAC(admin key, id)
 *   register           an id the master does not know is not given to the first connection that
 *                      names it: RegisterClient mints a fresh id and its credential, binds the
 *                      asking connection, and only that credential proves the id elsewhere
 *   listing_admin_only ListSegments with the data token lists only the caller's own segments
 *                      (the admin token: all); RemoveAll with the data token is refused
 *   master_restart     a restarted master hands out the same credential (no state), the daemon
 *                      re-registers, and the hijack is still refused
 *   master_kill_window the master is SIGKILLed and restarted while the victim is stopped: a
 *                      connection naming the victim's id without its credential is refused even
 *                      before the victim reconnects (before: first-come took it); resumed, the
 *                      victim comes back as itself with its segment and the value put through
 *                      it, byte for byte
 *   daemon_restart     a daemon killed and restarted on the same disk_path, while its old
 *                      registration is live, presents the kept credential and comes back
 *   minted_id          a daemon whose disk_path holds an id but no credential takes the id the
 *                      master mints, and keeps both in disk_path
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
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "security_fixture.h"

static struct {
    struct sec_env e;
    char tok[128], admin_tok[128], disk[128];
    char tok_flag[160], admin_flag[160], port_flag[64];
    struct cu_proc master, d, d2;
    char rpc[64];
    int rpc_port;
    struct mc_auth_key key, admin;
    struct mc_id victim;
} g;

static int start_master(void)
{
    const char *flags[] = {g.port_flag, "--client_ttl=60", g.tok_flag, g.admin_flag, NULL};
    struct mc_proc_ready r;
    return sec_start_master(&g.e, &g.master, flags, &r);
}

/* A daemon on disk directory dir (the victim: g.d on g.disk). */
static int start_daemon_on(struct cu_proc *p, const char *dir, const char *name)
{
    char disk_flag[200];
    snprintf(disk_flag, sizeof(disk_flag), "--disk_path=%s", dir);
    const char *flags[] = {"--segment_size=16MiB",  "--metrics_port=0", disk_flag,
                           "--disk_capacity=64MiB", g.tok_flag,         NULL};
    struct mc_proc_ready r;
    return sec_start_daemon(&g.e, p, name, g.rpc, flags, &r);
}

static int start_daemon(void)
{
    return start_daemon_on(&g.d, g.disk, "daemon");
}

/* An rpc client to the master with `key` (NULL = none); its credential holder, if any, is the
 * key's. */
static struct mc_rpc_client *master_rpc(const struct mc_auth_key *key)
{
    struct mc_rpc_client *c = sec_master_rpc(g.rpc, key);
    assert_non_null(c);
    return c;
}

/* The wire form of id. */
static Mc__Uuid uuid_of(struct mc_id id)
{
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = id.hi;
    u.lo = id.lo;
    return u;
}

/* Ping as id on a fresh connection with key; the status, and the answer's credential. */
static int ping_as(const struct mc_auth_key *key, struct mc_id id, uint8_t *cred, size_t *cred_len)
{
    struct mc_rpc_client *c = master_rpc(key);
    Mc__Uuid u = uuid_of(id);
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
    Mc__Uuid u = uuid_of(id);
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

/* The id a daemon keeps in dir (DIR/client_id). */
static struct mc_id kept_id(const char *dir)
{
    char path[160], *text;
    size_t len = 0;
    struct mc_id id = {0, 0};
    snprintf(path, sizeof(path), "%s/client_id", dir);
    if (!(text = cu_slurp(path, &len)) || len < 32) {
        free(text);
        return id;
    }
    text[32] = '\0';
    if (mc_id_parse(text, &id) != 0)
        id.hi = id.lo = 0;
    free(text);
    return id;
}

/* The credential a daemon kept in dir (DIR/client_cred: "<id hex> <cred hex>\n"), which must
 * be for id. */
static void kept_cred_in(const char *dir, struct mc_id want_id, uint8_t *cred)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, MC_AUTH_CRED_FILE);
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
    assert_true(mc_id_eq(id, want_id));
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

static void kept_cred(uint8_t *cred)
{
    kept_cred_in(g.disk, g.victim, cred);
}

/* The data key that proves the victim's id with its kept credential (copied into cred); *h is
 * the credential holder, freed by the caller (mc_auth_cred_free). */
static struct mc_auth_key victim_key(uint8_t *cred, struct mc_auth_cred **h)
{
    uint8_t id[MC_AUTH_ID_BYTES];
    kept_cred(cred);
    mc_id_to_bytes(g.victim, id);
    *h = mc_auth_cred_new(id, NULL);
    mc_auth_cred_learn(*h, cred, MC_AUTH_CRED_BYTES);
    struct mc_auth_key k = g.key;
    k.cred = *h;
    return k;
}

/* ListSegments on a fresh connection with key (after RegisterClient when reg): how many
 * segments and LOCAL_DISK entries it lists, and how many of them are the victim's. */
static int list_as(const struct mc_auth_key *key, bool reg, size_t *n, size_t *victims)
{
    struct mc_rpc_client *c = master_rpc(key);
    ProtobufCMessage *m = NULL;
    int rc = 0;
    if (reg) {
        struct mc_id as;
        rc = sec_register(c, &as, NULL, NULL);
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
    assert_true(victim_mounted(SEC_START_MS));
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
}

/* An id is never first-come: RegisterClient mints one with its credential; an invented id, or
 * the minted one on another connection without the credential, is refused. */
static void test_register(void **state)
{
    (void)state;
    /* an invented id (first-come before): refused, though no master knows it */
    assert_int_equal(ping_as(&g.key, mc_id_random(), NULL, NULL), MC_ERR_ILLEGAL_CLIENT);

    struct mc_rpc_client *c = master_rpc(&g.key);
    struct mc_id a, b;
    uint8_t cred[MC_AUTH_CRED_BYTES], cred_b[MC_AUTH_CRED_BYTES], want[MC_AUTH_CRED_BYTES];
    uint8_t id[MC_AUTH_ID_BYTES];
    size_t len = 0;
    assert_int_equal(sec_register(c, &a, cred, &len), 0);
    assert_false(mc_id_is_zero(a));
    assert_int_equal(len, MC_AUTH_CRED_BYTES);
    mc_id_to_bytes(a, id);
    mc_auth_cred_mint(&g.admin, id, want); /* HMAC(admin key, id): any master checks it */
    assert_memory_equal(cred, want, sizeof(want));
    /* the asking connection acts for it at once */
    Mc__Uuid u = uuid_of(a);
    Mc__PingRequest req = MC__PING_REQUEST__INIT;
    req.client_id = &u;
    ProtobufCMessage *m = NULL;
    assert_int_equal(
        mc_rpc_client_call_msg(c, MC_METHOD_PING, &req.base, &mc__ping_response__descriptor, 0, &m),
        0);
    protobuf_c_message_free_unpacked(m, NULL);
    /* and takes no second identity */
    assert_int_equal(sec_register(c, &b, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    mc_rpc_client_free(c);

    /* each registration is a new id */
    c = master_rpc(&g.key);
    assert_int_equal(sec_register(c, &b, cred_b, &len), 0);
    assert_false(mc_id_eq(a, b));
    assert_memory_not_equal(cred, cred_b, sizeof(cred));
    mc_rpc_client_free(c);

    /* elsewhere the id needs its credential */
    assert_int_equal(ping_as(&g.key, a, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_start_as(&g.key, a, "cred/reg"), MC_ERR_ILLEGAL_CLIENT);
    struct mc_auth_cred *h = mc_auth_cred_new(id, NULL);
    mc_auth_cred_learn(h, cred_b, sizeof(cred_b)); /* b's credential does not prove a */
    struct mc_auth_key k = g.key;
    k.cred = h;
    assert_int_equal(ping_as(&k, a, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    mc_auth_cred_learn(h, cred, sizeof(cred));
    assert_int_equal(ping_as(&k, a, NULL, NULL), 0);
    /* a connection that proved an id registers no other */
    c = master_rpc(&k);
    assert_int_equal(sec_register(c, &b, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    mc_rpc_client_free(c);
    mc_auth_cred_free(h);
}

/* ListSegments names every client's ids and endpoints: with an admin token, a data connection
 * sees only its own client's segments; RemoveAll is the admin's. */
static void test_listing_admin_only(void **state)
{
    (void)state;
    size_t n = 0, victims = 0;
    struct mc_auth_key tool = admin_tool();
    assert_int_equal(list_as(&tool, false, &n, &victims), 0);
    assert_int_equal(victims, 1); /* the admin sees the victim's segment */
    assert_int_equal(list_as(&g.key, false, &n, &victims), 0);
    assert_int_equal(n, 0); /* a data connection acting for nobody sees nothing */
    assert_int_equal(list_as(&g.key, true, &n, &victims), 0);
    assert_int_equal(n, 0); /* nor one acting for a client without segments */
    /* the victim itself (its kept credential) sees its own */
    uint8_t cred[MC_AUTH_CRED_BYTES];
    struct mc_auth_cred *h;
    struct mc_auth_key k = victim_key(cred, &h);
    assert_int_equal(list_as(&k, false, &n, &victims), 0);
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
    assert_true(victim_mounted(SEC_START_MS)); /* re-registered through its credential */
    assert_hijack_refused();
    /* the new master hands out the same credential for the same id */
    uint8_t cred[MC_AUTH_CRED_BYTES], got[MC_AUTH_CRED_BYTES];
    struct mc_auth_cred *h;
    struct mc_auth_key k = victim_key(cred, &h);
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
    assert_true(victim_mounted(SEC_START_MS));
    assert_true(mc_id_eq(kept_id(g.disk), g.victim)); /* the same client, not a new one */
    assert_hijack_refused();
}

/* An in-test library client with the data token and no DRAM of its own. */
static struct mc_client *data_client(void)
{
    struct mc_client *c = NULL;
    assert_int_equal(sec_data_client(g.rpc, g.tok, &c), 0);
    return c;
}

/* The window the credential closes: after a master crash every id is unknown to the new
 * master until its client reconnects. The victim is stopped across the restart, so the attack
 * surely runs inside that window. */
static void test_master_kill_window(void **state)
{
    (void)state;
    enum { LEN = 64 << 10 };
    static uint8_t val[LEN], back[LEN];
    sec_fill(val, LEN, 37);
    /* settle: after the previous test's restart the victim's holder stream must be open at
     * this master before the Put, or the commit has no stream to go to (a miss after the
     * next restart, never wrong bytes: README Reliability) */
    usleep(1500 * 1000);
    struct mc_client *c = data_client();
    assert_int_equal(mc_put(c, "cred/window", val, LEN, NULL), 0); /* into the victim's DRAM */
    mc_client_close(c);
    /* settle: the commit reaches the victim's holder index through its stream (batches every
     * 10 ms; the stream may still be re-opening after the previous test's restart) */
    usleep(1500 * 1000);

    assert_int_equal(cu_freeze(g.d.pid), 0);
    cu_stop(&g.master, SIGKILL, 10000); /* its status is the signal */
    assert_int_equal(start_master(), 0);
    /* the victim is still stopped: the new master has never seen its id */
    assert_hijack_refused();
    uint8_t cred[MC_AUTH_CRED_BYTES], id[MC_AUTH_ID_BYTES], forged[MC_AUTH_CRED_BYTES];
    kept_cred(cred);
    mc_id_to_bytes(g.victim, id);
    mc_auth_cred_mint(&g.key, id, forged); /* what a data-token holder can compute */
    struct mc_auth_cred *h = mc_auth_cred_new(id, NULL);
    mc_auth_cred_learn(h, forged, sizeof(forged));
    struct mc_auth_key k = g.key;
    k.cred = h;
    assert_int_equal(ping_as(&k, g.victim, NULL, NULL), MC_ERR_ILLEGAL_CLIENT);
    mc_auth_cred_free(h);

    /* resumed, the victim reconnects as itself: its segment and the value come back */
    assert_int_equal(kill(g.d.pid, SIGCONT), 0);
    assert_true(victim_mounted(SEC_START_MS));
    assert_true(mc_id_eq(kept_id(g.disk), g.victim));
    c = data_client();
    int64_t got = -1;
    for (int i = 0; i < 200 && got != LEN; i++) {
        memset(back, 0, sizeof(back));
        got = mc_get(c, "cred/window", back, LEN);
        if (got != LEN)
            usleep(100 * 1000); /* re-registration follows the re-mount */
    }
    assert_int_equal(got, LEN);
    assert_memory_equal(back, val, LEN);
    mc_client_close(c);
    assert_hijack_refused();
}

/* A disk_path written before credentials (an id, no credential) cannot prove its id after a
 * master restart: the daemon takes the id the master mints instead and keeps it with its
 * credential; restarted, it stays that client. */
static void test_minted_id(void **state)
{
    (void)state;
    char dir[160], path[200];
    snprintf(dir, sizeof(dir), "%s/disk2", g.e.dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    struct mc_id old = mc_id_random(), now;
    char text[MC_ID_STRLEN + 1];
    mc_id_format(old, text);
    text[MC_ID_STRLEN - 1] = '\n';
    snprintf(path, sizeof(path), "%s/client_id", dir);
    assert_int_equal(cu_write_file(path, text, MC_ID_STRLEN), 0);
    assert_int_equal(start_daemon_on(&g.d2, dir, "daemon2"), 0);
    now = kept_id(dir);
    assert_false(mc_id_is_zero(now));
    assert_false(mc_id_eq(now, old));
    uint8_t cred[MC_AUTH_CRED_BYTES], want[MC_AUTH_CRED_BYTES], id[MC_AUTH_ID_BYTES];
    kept_cred_in(dir, now, cred);
    mc_id_to_bytes(now, id);
    mc_auth_cred_mint(&g.admin, id, want);
    assert_memory_equal(cred, want, sizeof(want));
    /* restarted on the same directory it presents what it kept: same id */
    assert_int_equal(cu_stop(&g.d2, SIGTERM, 10000), 0);
    assert_int_equal(start_daemon_on(&g.d2, dir, "daemon2"), 0);
    assert_true(mc_id_eq(kept_id(dir), now));
    assert_int_equal(cu_stop(&g.d2, SIGTERM, 10000), 0);
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.d.out_fd = g.d2.out_fd = -1;
    if (sec_env_init(&g.e, "mc_sec_cred") != 0)
        return -1;
    snprintf(g.tok, sizeof(g.tok), "%s/token", g.e.dir);
    snprintf(g.admin_tok, sizeof(g.admin_tok), "%s/admin_token", g.e.dir);
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.e.dir);
    if (sec_make_token(g.tok, NULL, &g.key) || sec_make_token(g.admin_tok, NULL, &g.admin))
        return -1;
    g.rpc_port = cu_free_port();
    snprintf(g.rpc, sizeof(g.rpc), "127.0.0.1:%d", g.rpc_port);
    snprintf(g.port_flag, sizeof(g.port_flag), "--rpc_port=%d", g.rpc_port);
    snprintf(g.tok_flag, sizeof(g.tok_flag), "--auth_token_file=%s", g.tok);
    snprintf(g.admin_flag, sizeof(g.admin_flag), "--admin_token_file=%s", g.admin_tok);
    if (start_master() != 0 || start_daemon() != 0)
        return -1;
    g.victim = kept_id(g.disk);
    return mc_id_is_zero(g.victim) ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (g.d.pid)
        kill(g.d.pid, SIGCONT); /* a failed test may leave it stopped */
    struct cu_proc *const procs[] = {&g.d2, &g.d, &g.master};
    sec_env_close(&g.e, procs, 3);
    return 0;
}

int main(void)
{
    mc_log_set_level(MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hijack),
        cmocka_unit_test(test_listing_admin_only),
        cmocka_unit_test(test_register),
        cmocka_unit_test(test_master_restart),
        cmocka_unit_test(test_master_kill_window),
        cmocka_unit_test(test_daemon_restart),
        cmocka_unit_test(test_minted_id),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
