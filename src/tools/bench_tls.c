/*
 * bench_tls.c - `mooncake_bench tls`: what TLS costs, measured side by side with plain TCP in
 * one invocation. Two clusters run at once on loopback (a master and a daemon each; one pair
 * with --tls_cert_file/--tls_key_file/--tls_ca_file, certificates made with the openssl tool
 * in a temporary directory), and rounds alternate between them:
 *   get   a 4 MiB value held by the daemon, read by this process (a library client with no
 *         segment of its own): the bytes cross the daemon's peer port. GiB/s.
 *   grl   GetReplicaList of one key on --conns connections (one thread each) to the master,
 *         closed loop: ops/s.
 * One JSON result per op and cluster, with the plain figure as the reference and the ratio.
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/rpc_client.h"
#include "common/tls.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/bench_util.h"
#include "tools/proc_harness.h"

#define VALUE_BYTES (4u << 20)

struct side {
    const char *name;
    bool tls;
    struct mc_proc master, daemon;
    char addr[64];
    struct mc_client *client;
    struct mc_tls_ctx *ctx;
    double get_gibs, grl_ops; /* sums over rounds */
};

static struct {
    char dir[PATH_MAX];
    char bin[PATH_MAX];
    char ca[PATH_MAX + 16], cert[PATH_MAX + 16], key[PATH_MAX + 16];
    int rounds, gets, conns;
    double seconds;
} g;

static int sh(const char *cmd)
{
    return system(cmd) == 0 ? 0 : -1;
}

static int make_certs(void)
{
    char cmd[8 * PATH_MAX];
    snprintf(g.ca, sizeof(g.ca), "%s/ca.pem", g.dir);
    snprintf(g.cert, sizeof(g.cert), "%s/node.pem", g.dir);
    snprintf(g.key, sizeof(g.key), "%s/node.key", g.dir);
    snprintf(cmd, sizeof(cmd),
             "cd %s && printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca >/dev/null 2>&1 && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "
             "node.key -out node.csr -subj /CN=node >/dev/null 2>&1 && openssl x509 -req -in "
             "node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -extfile san.ext -out node.pem "
             "-days 1 >/dev/null 2>&1",
             g.dir);
    return sh(cmd);
}

static int start(struct side *s)
{
    char path[PATH_MAX + 32], c[PATH_MAX + 32], k[PATH_MAX + 32], a[PATH_MAX + 32];
    snprintf(c, sizeof(c), "--tls_cert_file=%s", g.cert);
    snprintf(k, sizeof(k), "--tls_key_file=%s", g.key);
    snprintf(a, sizeof(a), "--tls_ca_file=%s", g.ca);
    snprintf(path, sizeof(path), "%s/mooncake_master", g.bin);
    const char *margv[] = {path,
                           "--rpc_port=0",
                           "--rpc_address=127.0.0.1",
                           "--metrics_port=0",
                           "--metrics_host=127.0.0.1",
                           "--log_level=warn",
                           s->tls ? c : NULL,
                           k,
                           a,
                           NULL};
    struct mc_proc_ready r;
    if (mc_proc_start(&s->master, margv, NULL, MC_PROC_READY_MASTER, &r, 20000) != 0)
        return -1;
    snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%u", r.rpc_port);
    char m[128];
    snprintf(path, sizeof(path), "%s/mooncake_client", g.bin);
    snprintf(m, sizeof(m), "--master=%s", s->addr);
    const char *dargv[] = {path,
                           m,
                           "--host=127.0.0.1",
                           "--data_port=0",
                           "--segment_size=256MiB",
                           "--log_level=warn",
                           s->tls ? c : NULL,
                           k,
                           a,
                           NULL};
    if (mc_proc_start(&s->daemon, dargv, NULL, MC_PROC_READY_DAEMON, &r, 20000) != 0)
        return -1;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = s->addr;
    cfg.host = "127.0.0.1";
    if (s->tls) {
        cfg.tls_cert_file = g.cert;
        cfg.tls_key_file = g.key;
        cfg.tls_ca_file = g.ca;
        struct mc_tls_files f = {g.cert, g.key, g.ca};
        char err[256];
        if (mc_tls_ctx_new(&f, false, &s->ctx, err, sizeof(err)) != 0) {
            fprintf(stderr, "tls: %s\n", err);
            return -1;
        }
    }
    int rc = mc_client_open(&cfg, &s->client);
    if (rc) {
        fprintf(stderr, "tls: cannot open a client on %s: %s\n", s->addr, mc_strerror(rc));
        return -1;
    }
    uint8_t *v = malloc(VALUE_BYTES);
    if (!v)
        return -1;
    for (size_t i = 0; i < VALUE_BYTES; i++)
        v[i] = (uint8_t)(i * 131u + 7u);
    rc = mc_put(s->client, "bench/tls", v, VALUE_BYTES, NULL);
    free(v);
    return rc ? -1 : 0;
}

static double measure_get(struct side *s, uint8_t *buf)
{
    uint64_t t0 = mc_now_ns();
    for (int i = 0; i < g.gets; i++)
        if (mc_get(s->client, "bench/tls", buf, VALUE_BYTES) != (int64_t)VALUE_BYTES)
            return -1;
    double sec = (double)(mc_now_ns() - t0) / 1e9;
    return (double)VALUE_BYTES * g.gets / sec / (double)(1u << 30);
}

struct grl_thread {
    struct side *s;
    pthread_t tid;
    uint64_t ops;
    int rc;
    uint64_t until_ns;
};

static void *grl_main(void *arg)
{
    struct grl_thread *t = arg;
    char host[64];
    struct mc_rpc_client_config cfg;
    mc_rpc_client_config_init(&cfg);
    struct mc_rpc_client *c = NULL;
    t->rc = mc_rpc_parse_endpoint(t->s->addr, host, sizeof(host), &cfg);
    cfg.tls = t->s->ctx;
    if (!t->rc)
        t->rc = mc_rpc_client_new(&cfg, &c);
    if (!t->rc)
        t->rc = mc_rpc_client_connect(c);
    Mc__GetReplicaListRequest req = MC__GET_REPLICA_LIST_REQUEST__INIT;
    req.key = "bench/tls";
    while (!t->rc && mc_now_ns() < t->until_ns) {
        ProtobufCMessage *m = NULL;
        t->rc = mc_rpc_client_call_msg(c, MC_METHOD_GET_REPLICA_LIST, &req.base,
                                       &mc__get_replica_list_response__descriptor, 0, &m);
        if (m)
            protobuf_c_message_free_unpacked(m, NULL);
        t->ops++;
    }
    mc_rpc_client_free(c);
    return NULL;
}

static double measure_grl(struct side *s)
{
    struct grl_thread t[64];
    int n = g.conns < 64 ? g.conns : 64;
    uint64_t t0 = mc_now_ns();
    for (int i = 0; i < n; i++) {
        t[i] = (struct grl_thread){.s = s, .until_ns = t0 + (uint64_t)(g.seconds * 1e9)};
        pthread_create(&t[i].tid, NULL, grl_main, &t[i]);
    }
    uint64_t ops = 0;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i].tid, NULL);
        ops += t[i].ops;
        rc = rc ? rc : t[i].rc;
    }
    if (rc) {
        fprintf(stderr, "tls: GetReplicaList failed on %s: %s\n", s->name, mc_strerror(rc));
        return -1;
    }
    return (double)ops / ((double)(mc_now_ns() - t0) / 1e9);
}

static void stop(struct side *s)
{
    mc_client_close(s->client);
    mc_proc_stop(&s->daemon, SIGTERM, 10000);
    mc_proc_stop(&s->master, SIGTERM, 10000);
    mc_tls_ctx_free(s->ctx);
}

/* get: v in GiB/s (bytes_per_s and ops_per_s filled); grl: v in ops/s. */
static void emit(const char *op, bool get, const struct side *s, double v, double ref)
{
    struct mc_bench_result r;
    mc_bench_result_init(&r, "tls", op);
    r.runs = get ? g.gets * g.rounds : 0;
    r.bytes_per_s = get ? v * (double)(1u << 30) : 0;
    r.ops_per_s = get ? r.bytes_per_s / VALUE_BYTES : v;
    mc_bench_add_str(&r, "transport", s->name);
    if (get)
        mc_bench_add_num(&r, "gibps", v);
    mc_bench_add_num(&r, "rounds", g.rounds);
    mc_bench_set_ref(&r, ref, ref > 0 ? v / ref : 0);
    mc_bench_emit(&r);
}

int mc_bench_tls(int argc, char **argv)
{
    g.rounds = 3;
    g.gets = 64;
    g.conns = 4;
    g.seconds = 1.0;
    snprintf(g.bin, sizeof(g.bin), ".");
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--bin=", 6) == 0)
            snprintf(g.bin, sizeof(g.bin), "%s", argv[i] + 6);
        else if (strncmp(argv[i], "--rounds=", 9) == 0)
            g.rounds = atoi(argv[i] + 9);
        else if (strncmp(argv[i], "--gets=", 7) == 0)
            g.gets = atoi(argv[i] + 7);
        else if (strncmp(argv[i], "--conns=", 8) == 0)
            g.conns = atoi(argv[i] + 8);
        else if (strncmp(argv[i], "--seconds=", 10) == 0)
            g.seconds = atof(argv[i] + 10);
        else {
            fprintf(argc > 1 && strcmp(argv[i], "--help") == 0 ? stdout : stderr,
                    "usage: mooncake_bench tls --bin=DIR [--rounds=3] [--gets=64] [--conns=4] "
                    "[--seconds=1]\n"
                    "  TLS vs plain TCP side by side (two clusters, alternating rounds):\n"
                    "  4 MiB Get between processes (GiB/s) and GetReplicaList on --conns\n"
                    "  connections (ops/s); needs the openssl tool\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (g.rounds < 1 || g.gets < 1 || g.conns < 1 || g.seconds <= 0)
        return 2;
    if (mc_proc_mkdtemp(g.dir, sizeof(g.dir), NULL, "mc_bench_tls") != 0)
        return 1;
    int status = 1;
    struct side sides[2] = {{.name = "plain"}, {.name = "tls", .tls = true}};
    uint8_t *buf = malloc(VALUE_BYTES);
    if (!buf || make_certs() != 0) {
        fprintf(stderr, "tls: cannot make certificates (is the openssl tool installed?)\n");
        goto out;
    }
    for (int i = 0; i < 2; i++)
        if (start(&sides[i]) != 0)
            goto out;
    for (int r = 0; r < g.rounds; r++)
        for (int i = 0; i < 2; i++) {
            double gb = measure_get(&sides[i], buf);
            double ops = measure_grl(&sides[i]);
            if (gb < 0 || ops < 0)
                goto out;
            sides[i].get_gibs += gb / g.rounds;
            sides[i].grl_ops += ops / g.rounds;
        }
    for (int i = 0; i < 2; i++) {
        emit("get_4MiB_between", true, &sides[i], sides[i].get_gibs, sides[0].get_gibs);
        emit("get_replica_list", false, &sides[i], sides[i].grl_ops, sides[0].grl_ops);
    }
    fprintf(stderr, "%-6s %14s %18s\n", "", "4MiB Get GiB/s", "GetReplicaList/s");
    for (int i = 0; i < 2; i++)
        fprintf(stderr, "%-6s %14.2f %18.0f\n", sides[i].name, sides[i].get_gibs, sides[i].grl_ops);
    fprintf(stderr, "tls/plain: get %.2fx, GetReplicaList %.2fx\n",
            sides[1].get_gibs / sides[0].get_gibs, sides[1].grl_ops / sides[0].grl_ops);
    status = 0;
out:
    for (int i = 0; i < 2; i++)
        stop(&sides[i]);
    free(buf);
    mc_proc_rm_rf(g.dir);
    return status;
}
