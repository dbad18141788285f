/*
 * test_etcd.c - the etcd gateway client (common/etcd.c, etcd_json.c).
 *
 * Canned replies (exactly what etcd 3.4's gateway sends) check each quirk of the JSON side:
 * int64 fields as strings, base64 keys and values, omitted zero fields (a failed txn has no
 * "succeeded", a keepalive of a dead lease no "TTL", a PUT watch event no "type"), error
 * replies (code 5 on a lease that is gone, "request is too large"), a watch cancelled with
 * compact_revision. Then the same against a real etcd started on loopback ports (data on tmpfs,
 * removed at the end; exit 77 when etcd is not installed): every call of etcd.h, the failures the
 * gateway really produces, a watch that sees PUT and DELETE and one cancelled by compaction,
 * endpoint rotation past a dead endpoint, and TLS with client certificates (an etcd serving
 * https with certificates openssl makes for the test).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <signal.h>
#include <unistd.h>

#include "common/etcd.h"
#include "common/etcd_json.h"
#include "etcd_util.h"
#include "mooncake/errors.h"
#include "test_skip.h"

#define S(x) x, strlen(x)

/* ---- canned -------------------------------------------------------------------------------- */

static void test_base64(void **state)
{
    (void)state;
    const unsigned char bin[] = {0, 1, 2, 0xff, 0xfe, 0, 'a', 'b'};
    for (size_t n = 0; n <= sizeof(bin); n++) {
        char *enc, *dec;
        size_t len;
        assert_int_equal(mc_etcdj_b64enc(bin, n, &enc), 0);
        assert_int_equal(strlen(enc) % 4, 0);
        assert_int_equal(mc_etcdj_b64dec(enc, &dec, &len), 0);
        assert_int_equal(len, n);
        assert_memory_equal(dec, bin, n);
        free(enc);
        free(dec);
    }
    char *enc, *dec;
    size_t len;
    assert_int_equal(mc_etcdj_b64enc("/mooncake-c/a/leader", 20, &enc), 0);
    assert_string_equal(enc, "L21vb25jYWtlLWMvYS9sZWFkZXI=");
    free(enc);
    assert_int_equal(mc_etcdj_b64dec("YWI", &dec, &len), MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(mc_etcdj_b64dec("Y!==", &dec, &len), MC_ERR_DESERIALIZE_FAIL);
}

static void test_int64_strings(void **state)
{
    (void)state;
    struct mc_etcd_kv kv;
    bool found;
    uint64_t rev;
    const char *body =
        "{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":\"1\","
        "\"revision\":\"18446744073709551610\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"YQ==\","
        "\"create_revision\":\"9007199254740993\",\"mod_revision\":\"9007199254740995\","
        "\"version\":\"3\",\"value\":\"AGI=\",\"lease\":\"7587869011418399491\"}],\"count\":\"1\"}";
    assert_int_equal(mc_etcdj_parse_range(S(body), &kv, &found, &rev), 0);
    assert_true(found);
    assert_int_equal(rev, 18446744073709551610ull); /* above int64 and double precision */
    assert_string_equal(kv.key, "a");
    assert_int_equal(kv.value_len, 2);
    assert_memory_equal(kv.value, "\0b", 2);
    assert_int_equal(kv.create_revision, 9007199254740993ull);
    assert_int_equal(kv.mod_revision, 9007199254740995ull);
    assert_int_equal(kv.version, 3);
    assert_int_equal(kv.lease, 7587869011418399491ull);
    mc_etcd_kv_clear(&kv);
    /* numbers are accepted too; a negative revision or junk in the string is not */
    assert_int_equal(mc_etcdj_parse_range(S("{\"header\":{\"revision\":5}}"), &kv, &found, &rev),
                     0);
    assert_int_equal(rev, 5);
    assert_false(found);
    assert_int_equal(
        mc_etcdj_parse_range(S("{\"header\":{\"revision\":\"5x\"}}"), &kv, &found, &rev),
        MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(
        mc_etcdj_parse_range(S("{\"header\":{\"revision\":\"-5\"}}"), &kv, &found, &rev),
        MC_ERR_DESERIALIZE_FAIL);
    assert_int_equal(mc_etcdj_parse_range(S("not json"), &kv, &found, &rev),
                     MC_ERR_DESERIALIZE_FAIL);
    uint64_t id;
    int64_t ttl;
    assert_int_equal(mc_etcdj_parse_grant(S("{\"header\":{},\"ID\":\"7587869011418399491\","
                                            "\"TTL\":\"3\"}"),
                                          &id, &ttl),
                     0);
    assert_int_equal(id, 7587869011418399491ull);
    assert_int_equal(ttl, 3);
}

static void test_omitted_fields(void **state)
{
    (void)state;
    bool ok = true;
    uint64_t rev;
    struct mc_etcd_kv kv;
    /* a failed compare: no "succeeded" at all, the failure branch's range in responses */
    const char *failed = "{\"header\":{\"revision\":\"2\"},\"responses\":[{\"response_range\":{"
                         "\"header\":{\"revision\":\"2\"},\"kvs\":[{\"key\":\"YQ==\","
                         "\"create_revision\":\"2\",\"mod_revision\":\"2\",\"version\":\"1\","
                         "\"value\":\"Yg==\"}],\"count\":\"1\"}}]}";
    assert_int_equal(mc_etcdj_parse_txn(S(failed), &ok, &rev, &kv), 0);
    assert_false(ok);
    assert_string_equal(kv.key, "a");
    assert_int_equal(kv.create_revision, 2);
    assert_int_equal(kv.lease, 0); /* omitted: no lease */
    mc_etcd_kv_clear(&kv);
    assert_int_equal(mc_etcdj_parse_txn(S("{\"header\":{\"revision\":\"3\"},\"succeeded\":true,"
                                          "\"responses\":[{\"response_put\":{}}]}"),
                                        &ok, &rev, &kv),
                     0);
    assert_true(ok);
    assert_int_equal(rev, 3);
    assert_null(kv.key);
    /* keepalive on a lease that is gone: a result without TTL */
    int64_t ttl = 99;
    assert_int_equal(
        mc_etcdj_parse_keepalive(
            S("{\"result\":{\"header\":{\"revision\":\"2\"},\"ID\":\"12345\"}}"), &ttl),
        0);
    assert_int_equal(ttl, 0);
    assert_int_equal(mc_etcdj_parse_keepalive(
                         S("{\"result\":{\"header\":{},\"ID\":\"12345\",\"TTL\":\"3\"}}"), &ttl),
                     0);
    assert_int_equal(ttl, 3);
    /* a PUT watch event has no "type"; a DELETE's kv has no value */
    struct mc_etcd_watch_result r = {0};
    int dropped = 0;
    const char *ev = "{\"result\":{\"header\":{\"revision\":\"4\"},\"events\":[{\"kv\":{\"key\":"
                     "\"YQ==\",\"create_revision\":\"4\",\"mod_revision\":\"4\",\"version\":\"1\","
                     "\"value\":\"Yg==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"YQ==\","
                     "\"mod_revision\":\"5\"}}]}}";
    assert_int_equal(mc_etcdj_parse_watch(S(ev), &r, &dropped), 0);
    assert_int_equal(r.nevents, 2);
    assert_int_equal(r.events[0].type, MC_ETCD_EV_PUT);
    assert_string_equal(r.events[0].kv.value, "b");
    assert_int_equal(r.events[1].type, MC_ETCD_EV_DELETE);
    assert_int_equal(r.events[1].kv.mod_revision, 5);
    assert_int_equal(r.events[1].kv.value_len, 0);
    assert_false(r.canceled);
    mc_etcd_watch_result_clear(&r);
}

static void test_errors(void **state)
{
    (void)state;
    uint64_t rev;
    assert_int_equal(mc_etcdj_parse_status(S("{\"error\":\"etcdserver: requested lease not "
                                             "found\",\"message\":\"etcdserver: requested lease "
                                             "not found\",\"code\":5}"),
                                           &rev),
                     MC_ERR_LEASE_EXPIRED);
    assert_int_equal(mc_etcdj_parse_status(S("{\"error\":\"etcdserver: request is too large\","
                                             "\"message\":\"etcdserver: request is too large\","
                                             "\"code\":3}"),
                                           &rev),
                     MC_ERR_BUFFER_OVERFLOW);
    int64_t ttl;
    /* the streaming endpoints wrap it */
    assert_int_equal(mc_etcdj_parse_keepalive(S("{\"error\":{\"grpc_code\":5,\"http_code\":404,"
                                                "\"message\":\"etcdserver: requested lease not "
                                                "found\"}}"),
                                              &ttl),
                     MC_ERR_LEASE_EXPIRED);
    assert_int_equal(mc_etcdj_parse_status(S("{\"error\":\"x\",\"message\":\"etcdserver: no "
                                             "leader\",\"code\":14}"),
                                           &rev),
                     MC_ERR_RPC_FAIL);
}

static void test_watch_canceled(void **state)
{
    (void)state;
    struct mc_etcd_watch_result r = {0};
    int dropped = 0;
    const char *msg = "{\"result\":{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\","
                      "\"raft_term\":\"2\"},\"canceled\":true,\"compact_revision\":\"4\"}}";
    assert_int_equal(mc_etcdj_parse_watch(S(msg), &r, &dropped), 0);
    assert_true(r.canceled);
    assert_int_equal(r.compact_revision, 4);
    assert_int_equal(r.revision, 0); /* omitted */
    assert_int_equal(r.nevents, 0);
    mc_etcd_watch_result_clear(&r);
}

/* ---- against a real etcd ------------------------------------------------------------------- */

static struct eu_etcd g_etcd;
static int g_etcd_rc = -1;

static struct mc_etcd *client(const char *endpoints)
{
    struct mc_etcd_config cfg = {.endpoints = endpoints};
    struct mc_etcd *e = NULL;
    assert_int_equal(mc_etcd_new(&cfg, &e), 0);
    return e;
}

static int need_etcd(void)
{
    if (g_etcd_rc == -1)
        g_etcd_rc = eu_start(&g_etcd, 1, 20000);
    return g_etcd_rc;
}

#define NEED_ETCD()                                                                                \
    do {                                                                                           \
        int rc_ = need_etcd();                                                                     \
        if (rc_ == 77)                                                                             \
            skip();                                                                                \
        assert_int_equal(rc_, 0);                                                                  \
    } while (0)

static void test_live_kv_and_txn(void **state)
{
    (void)state;
    NEED_ETCD();
    struct mc_etcd *e = client(g_etcd.endpoints);
    const unsigned char val[] = {0, 'x', 0xff, '\n', '"'};
    assert_int_equal(mc_etcd_put(e, "/t/kv", val, sizeof(val), 0), 0);
    struct mc_etcd_kv kv;
    bool found;
    uint64_t rev;
    assert_int_equal(mc_etcd_get(e, "/t/kv", &kv, &found, &rev), 0);
    assert_true(found);
    assert_int_equal(kv.value_len, sizeof(val));
    assert_memory_equal(kv.value, val, sizeof(val));
    assert_true(kv.create_revision > 0 && kv.create_revision <= rev);
    mc_etcd_kv_clear(&kv);
    assert_int_equal(mc_etcd_get(e, "/t/absent", &kv, &found, &rev), 0);
    assert_false(found);

    /* create-if-absent: the first creates, the second finds it (failed txn: no "succeeded") */
    bool created;
    uint64_t crev, crev2;
    assert_int_equal(mc_etcd_create_if_absent(e, "/t/leader", S("A:1"), 0, &created, &crev, &kv),
                     0);
    assert_true(created);
    assert_true(crev > rev);
    assert_int_equal(mc_etcd_create_if_absent(e, "/t/leader", S("B:2"), 0, &created, &crev2, &kv),
                     0);
    assert_false(created);
    assert_string_equal(kv.value, "A:1");
    assert_int_equal(kv.create_revision, crev);
    mc_etcd_kv_clear(&kv);

    /* guarded writes: only while the guard key's create_revision matches */
    bool ok;
    assert_int_equal(mc_etcd_put_guarded(e, "/t/leader", crev, "/t/fence", S("f1"), &ok), 0);
    assert_true(ok);
    assert_int_equal(mc_etcd_put_guarded(e, "/t/leader", crev + 1000, "/t/fence", S("f2"), &ok), 0);
    assert_false(ok);
    assert_int_equal(mc_etcd_get(e, "/t/fence", &kv, &found, NULL), 0);
    assert_string_equal(kv.value, "f1");
    mc_etcd_kv_clear(&kv);
    assert_int_equal(mc_etcd_delete(e, "/t/leader"), 0);
    assert_int_equal(mc_etcd_put_guarded(e, "/t/leader", crev, "/t/fence", S("f3"), &ok), 0);
    assert_false(ok);

    /* above etcd's request limit (1.5 MiB): "request is too large"; above the gateway's own
     * message limit (2 MiB): "received message larger than max" (code 8). Both are refusals
     * of size, not failures of etcd. */
    size_t big = 1800u << 10;
    char *b = calloc(1, 3u << 20);
    assert_int_equal(mc_etcd_put(e, "/t/big", b, big, 0), MC_ERR_BUFFER_OVERFLOW);
    assert_int_equal(mc_etcd_put(e, "/t/big", b, 3u << 20, 0), MC_ERR_BUFFER_OVERFLOW);
    free(b);
    assert_int_equal(mc_etcd_get(e, "/t/big", &kv, &found, NULL), 0);
    assert_false(found);
    mc_etcd_free(e);
}

static void test_live_lease(void **state)
{
    (void)state;
    NEED_ETCD();
    struct mc_etcd *e = client(g_etcd.endpoints);
    uint64_t id;
    int64_t ttl;
    assert_int_equal(mc_etcd_lease_grant(e, 5, &id, &ttl), 0);
    assert_int_equal(ttl, 5);
    assert_int_equal(mc_etcd_put(e, "/t/leased", S("v"), id), 0);
    assert_int_equal(mc_etcd_lease_keepalive(e, id, &ttl), 0);
    assert_int_equal(ttl, 5);
    bool created;
    uint64_t crev;
    struct mc_etcd_kv kv;
    assert_int_equal(mc_etcd_create_if_absent(e, "/t/leased2", S("v"), id, &created, &crev, &kv),
                     0);
    assert_true(created);
    assert_int_equal(mc_etcd_lease_revoke(e, id), 0);
    bool found;
    assert_int_equal(mc_etcd_get(e, "/t/leased", &kv, &found, NULL), 0);
    assert_false(found); /* revoking deleted the keys */
    assert_int_equal(mc_etcd_lease_keepalive(e, id, &ttl), 0);
    assert_int_equal(ttl, 0); /* TTL omitted: gone */
    assert_int_equal(mc_etcd_put(e, "/t/leased", S("v"), id), MC_ERR_LEASE_EXPIRED);
    assert_int_equal(mc_etcd_lease_revoke(e, id), MC_ERR_LEASE_EXPIRED);
    mc_etcd_free(e);
}

/* Polls w until pred holds for what arrived (bounded). */
static void poll_until(struct mc_etcd_watch *w, struct mc_etcd_watch_result *out, int want_events,
                       bool want_cancel)
{
    memset(out, 0, sizeof(*out));
    uint64_t deadline = cu_now_ms() + 10000;
    while (cu_now_ms() < deadline) {
        struct mc_etcd_watch_result r;
        assert_int_equal(mc_etcd_watch_poll(w, 200, &r), 0);
        for (int i = 0; i < r.nevents && out->nevents < 16; i++) {
            out->events[out->nevents++] = r.events[i];
            memset(&r.events[i].kv, 0, sizeof(r.events[i].kv));
        }
        out->created |= r.created;
        out->canceled |= r.canceled;
        if (r.compact_revision)
            out->compact_revision = r.compact_revision;
        out->closed |= r.closed;
        mc_etcd_watch_result_clear(&r);
        if (out->nevents >= want_events && (!want_cancel || out->canceled) && out->created)
            return;
        assert_false(out->closed);
    }
    fail_msg("watch: wanted %d events (cancel %d), got %d", want_events, want_cancel, out->nevents);
}

static void test_live_watch(void **state)
{
    (void)state;
    NEED_ETCD();
    struct mc_etcd *e = client(g_etcd.endpoints);
    struct mc_etcd_watch *w;
    struct mc_etcd_watch_result r;
    assert_int_equal(mc_etcd_watch_new(e, "/t/w", 0, &w), 0);
    poll_until(w, &r, 0, false);
    assert_true(r.created);
    assert_int_equal(mc_etcd_put(e, "/t/w", S("one"), 0), 0);
    assert_int_equal(mc_etcd_put(e, "/t/other", S("x"), 0), 0); /* not watched */
    assert_int_equal(mc_etcd_delete(e, "/t/w"), 0);
    struct mc_etcd_watch_result got;
    memset(&got, 0, sizeof(got));
    got.created = true;
    uint64_t deadline = cu_now_ms() + 10000;
    while (got.nevents < 2 && cu_now_ms() < deadline) {
        assert_int_equal(mc_etcd_watch_poll(w, 200, &r), 0);
        assert_false(r.closed);
        for (int i = 0; i < r.nevents; i++) {
            got.events[got.nevents++] = r.events[i];
            memset(&r.events[i].kv, 0, sizeof(r.events[i].kv));
        }
        mc_etcd_watch_result_clear(&r);
    }
    assert_int_equal(got.nevents, 2);
    assert_int_equal(got.events[0].type, MC_ETCD_EV_PUT);
    assert_string_equal(got.events[0].kv.value, "one");
    assert_int_equal(got.events[1].type, MC_ETCD_EV_DELETE);
    assert_string_equal(got.events[1].kv.key, "/t/w");
    uint64_t old = got.events[0].kv.mod_revision;
    mc_etcd_watch_result_clear(&got);
    mc_etcd_watch_free(w);

    /* compact past the old revision: a watch from it is cancelled with compact_revision */
    uint64_t rev;
    assert_int_equal(mc_etcd_put(e, "/t/w", S("two"), 0), 0);
    struct mc_etcd_kv kv;
    bool found;
    assert_int_equal(mc_etcd_get(e, "/t/w", &kv, &found, &rev), 0);
    mc_etcd_kv_clear(&kv);
    assert_int_equal(mc_etcd_compact(e, rev), 0);
    assert_int_equal(mc_etcd_watch_new(e, "/t/w", old, &w), 0);
    poll_until(w, &r, 0, true);
    assert_true(r.canceled);
    assert_int_equal(r.compact_revision, rev);
    mc_etcd_watch_result_clear(&r);
    mc_etcd_watch_free(w);
    mc_etcd_free(e);
}

static void test_live_rotation(void **state)
{
    (void)state;
    NEED_ETCD();
    char eps[320];
    int dead = cu_free_port(); /* nothing listens there */
    snprintf(eps, sizeof(eps), "127.0.0.1:%d, %s", dead, g_etcd.endpoints);
    struct mc_etcd *e = client(eps);
    assert_int_equal(mc_etcd_endpoint_count(e), 2);
    assert_non_null(strstr(mc_etcd_endpoint(e), "127.0.0.1:"));
    char first[64];
    snprintf(first, sizeof(first), "http://127.0.0.1:%d", dead);
    assert_string_equal(mc_etcd_endpoint(e), first);
    assert_int_equal(mc_etcd_put(e, "/t/rot", S("r"), 0), 0);
    char live[300];
    snprintf(live, sizeof(live), "http://%s", g_etcd.endpoints);
    assert_string_equal(mc_etcd_endpoint(e), live); /* moved on, and stays */
    mc_etcd_free(e);
    /* only dead endpoints: a clear failure, not a hang */
    snprintf(eps, sizeof(eps), "127.0.0.1:%d;127.0.0.1:%d", dead, dead);
    e = client(eps);
    struct mc_etcd_kv kv;
    bool found;
    assert_int_equal(mc_etcd_get(e, "/t/rot", &kv, &found, NULL), MC_ERR_RPC_FAIL);
    mc_etcd_free(e);
    /* bad lists are refused */
    struct mc_etcd_config cfg = {.endpoints = ";;"};
    assert_int_equal(mc_etcd_new(&cfg, &e), MC_ERR_INVALID_PARAMS);
    cfg.endpoints = "host-without-port";
    assert_int_equal(mc_etcd_new(&cfg, &e), MC_ERR_INVALID_PARAMS);
    cfg.endpoints = "h:12x";
    assert_int_equal(mc_etcd_new(&cfg, &e), MC_ERR_INVALID_PARAMS);
}

/* TLS through libcurl: an etcd that serves https and wants client certificates (a CA, a server
 * and a client certificate made with openssl for the test). With the CA and the client pair the
 * calls work; without the client pair, or without the CA, they fail. */
static void test_live_tls(void **state)
{
    (void)state;
    NEED_ETCD();
    if (access("/usr/bin/openssl", X_OK) != 0)
        MC_SKIP("no /usr/bin/openssl to make the test's certificates");
    char dir[64];
    assert_int_equal(mc_proc_mkdtemp(dir, sizeof(dir), NULL, "mc-etcd-tls"), 0);
    char script[2048];
    snprintf(script, sizeof(script),
             "set -e; cd %s; O=/usr/bin/openssl;"
             "$O req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 "
             "-subj /CN=mc-test-ca;"
             "$O req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1;"
             "printf 'subjectAltName=IP:127.0.0.1\\n' > srv.ext;"
             "$O x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt "
             "-days 1 -extfile srv.ext;"
             "$O req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj /CN=mc-client;"
             "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext;"
             "$O x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt "
             "-days 1 -extfile cli.ext",
             dir);
    const char *sh[] = {"/bin/sh", "-c", script, NULL};
    struct cu_run run;
    cu_run(&run, dir, sh, NULL, 60000);
    assert_int_equal(run.status, 0);
    cu_run_free(&run);

    int cp = cu_free_port(), pp = cu_free_port();
    char bin[600] = "etcd", data[128], lc[64], ac[64], lp[64], ap[64], cl[96], cert[128], key[128],
         ca[128], log[128];
    const char *env = getenv("MC_ETCD_BIN");
    if (env && env[0])
        snprintf(bin, sizeof(bin), "%s", env);
    snprintf(data, sizeof(data), "--data-dir=%s/data", dir);
    snprintf(lc, sizeof(lc), "--listen-client-urls=https://127.0.0.1:%d", cp);
    snprintf(ac, sizeof(ac), "--advertise-client-urls=https://127.0.0.1:%d", cp);
    snprintf(lp, sizeof(lp), "--listen-peer-urls=http://127.0.0.1:%d", pp);
    snprintf(ap, sizeof(ap), "--initial-advertise-peer-urls=http://127.0.0.1:%d", pp);
    snprintf(cl, sizeof(cl), "--initial-cluster=default=http://127.0.0.1:%d", pp);
    snprintf(cert, sizeof(cert), "--cert-file=%s/srv.crt", dir);
    snprintf(key, sizeof(key), "--key-file=%s/srv.key", dir);
    snprintf(ca, sizeof(ca), "--trusted-ca-file=%s/ca.crt", dir);
    snprintf(log, sizeof(log), "%s/etcd.log", dir);
    const char *argv[] = {
        bin, data, lc, ac, lp, ap, cl, cert, key, ca, "--client-cert-auth", "--log-level=warn",
        NULL};
    struct cu_proc p = {0};
    assert_int_equal(cu_spawn(&p, argv, log), 0);

    char eps[64], caf[128], cf[128], kf[128];
    snprintf(eps, sizeof(eps), "127.0.0.1:%d", cp);
    snprintf(caf, sizeof(caf), "%s/ca.crt", dir);
    snprintf(cf, sizeof(cf), "%s/cli.crt", dir);
    snprintf(kf, sizeof(kf), "%s/cli.key", dir);
    struct mc_etcd_config cfg = {.endpoints = eps, .ca_file = caf, .cert_file = cf, .key_file = kf};
    struct mc_etcd *e;
    assert_int_equal(mc_etcd_new(&cfg, &e), 0);
    char want[64];
    snprintf(want, sizeof(want), "https://127.0.0.1:%d", cp);
    assert_string_equal(mc_etcd_endpoint(e), want); /* a CA file means https */
    int rc = -1;
    for (uint64_t end = cu_now_ms() + 20000; rc != 0 && cu_now_ms() < end; cu_sleep_ms(50))
        rc = mc_etcd_put(e, "/t/tls", S("over tls"), 0);
    assert_int_equal(rc, 0);
    struct mc_etcd_kv kv;
    bool found;
    assert_int_equal(mc_etcd_get(e, "/t/tls", &kv, &found, NULL), 0);
    assert_true(found);
    assert_string_equal(kv.value, "over tls");
    mc_etcd_kv_clear(&kv);
    mc_etcd_free(e);
    /* no client certificate: refused by the server */
    cfg.cert_file = cfg.key_file = NULL;
    assert_int_equal(mc_etcd_new(&cfg, &e), 0);
    assert_true(mc_etcd_get(e, "/t/tls", &kv, &found, NULL) != 0);
    mc_etcd_free(e);
    /* no CA: the server's certificate is not trusted (and plain http is not served) */
    cfg.ca_file = NULL;
    cfg.cert_file = cf;
    cfg.key_file = kf;
    assert_int_equal(mc_etcd_new(&cfg, &e), 0);
    assert_true(mc_etcd_get(e, "/t/tls", &kv, &found, NULL) != 0);
    mc_etcd_free(e);
    cu_stop(&p, SIGKILL, 2000);
    cu_rm_rf(dir);
}

static int teardown_all(void **state)
{
    (void)state;
    eu_stop(&g_etcd);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64),         cmocka_unit_test(test_int64_strings),
        cmocka_unit_test(test_omitted_fields), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_watch_canceled), cmocka_unit_test(test_live_kv_and_txn),
        cmocka_unit_test(test_live_lease),     cmocka_unit_test(test_live_watch),
        cmocka_unit_test(test_live_rotation),  cmocka_unit_test(test_live_tls),
    };
    int failed = cmocka_run_group_tests(tests, NULL, teardown_all);
    if (failed == 0 && (g_etcd_rc == 77 || mc_test_skipped))
        return MC_SKIP_EXIT; /* the canned half passed; the live half needs etcd (and openssl) */
    return failed;
}
