/*
 * bench_rpc.c - `mooncake_bench rpc`: echo calls per second through the RPC layer.
 *
 * An in-process mc_rpc_server (--io-threads I/O threads; or an external server with --server)
 * and --conns client connections, each driven by --threads-per-conn caller threads doing
 * synchronous Echo calls of --size bytes, for --seconds per run (or --calls per run in total).
 * Each run reports calls/s; the median over --runs is emitted, with p50/p99 call latency over
 * every sampled call. With --ref, redis-benchmark (PING_MBULK, same number of connections, one
 * request in flight per connection) runs against a scratch redis-server beside it and the JSON
 * line carries `ref` (its requests/s) and `ratio` (ours / ref).
 *
 * JSON: bench=rpc case=echo_<size>B_c<conns> runs ms (median run time) p50_ms p99_ms ops_per_s
 * bytes_per_s (echo bytes both ways) conns threads io_threads size [ref ratio].
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_client.h"
#include "common/rpc_server.h"
#include "mooncake/errors.h"
#include "tools/bench_util.h"
#include "tools/proc_harness.h"

#define MAX_SAMPLES_PER_THREAD 200000

struct opts {
    int conns, threads_per_conn, io_threads, runs;
    double seconds;
    long calls;
    size_t size;
    int ref;
    const char *server;
};

struct worker {
    struct mc_rpc_client *c;
    const struct opts *o;
    pthread_barrier_t *start;
    _Atomic int *stop;
    long quota; /* 0 = until stop */
    long done, errors;
    double *lat_ms;
    size_t nlat;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint8_t *buf = malloc(w->o->size ? w->o->size : 1);
    memset(buf, 0xab, w->o->size);
    pthread_barrier_wait(w->start);
    while (!atomic_load_explicit(w->stop, memory_order_relaxed) &&
           (w->quota == 0 || w->done < w->quota)) {
        uint64_t t0 = mc_now_ns();
        void *resp = NULL;
        size_t rl = 0;
        int rc = mc_rpc_client_call(w->c, MC_METHOD_ECHO, buf, w->o->size, 0, &resp, &rl);
        uint64_t t1 = mc_now_ns();
        free(resp);
        if (rc != 0 || rl != w->o->size) {
            if (++w->errors > 1000)
                break;
            continue;
        }
        if (w->nlat < MAX_SAMPLES_PER_THREAD)
            w->lat_ms[w->nlat++] = (double)(t1 - t0) / 1e6;
        w->done++;
    }
    free(buf);
    return NULL;
}

/* One run: returns calls/s (or -1), appends latency samples to *lat. */
static double one_run(const struct opts *o, const char *host, uint16_t port, double **lat,
                      size_t *nlat, double *run_ms)
{
    int nthreads = o->conns * o->threads_per_conn;
    struct mc_rpc_client **cl = calloc((size_t)o->conns, sizeof(*cl));
    struct worker *ws = calloc((size_t)nthreads, sizeof(*ws));
    pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
    pthread_barrier_t start;
    _Atomic int stop = 0;
    double rate = -1;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < o->conns; i++) {
        struct mc_rpc_client_config cfg;
        mc_rpc_client_config_init(&cfg);
        cfg.host = host;
        cfg.port = port;
        if (mc_rpc_client_new(&cfg, &cl[i]) || mc_rpc_client_connect(cl[i])) {
            fprintf(stderr, "bench rpc: cannot connect to %s:%u\n", host, port);
            goto out;
        }
    }
    for (int i = 0; i < nthreads; i++) {
        ws[i].c = cl[i % o->conns];
        ws[i].o = o;
        ws[i].start = &start;
        ws[i].stop = &stop;
        ws[i].quota = o->calls > 0 ? (o->calls + nthreads - 1) / nthreads : 0;
        ws[i].lat_ms = malloc(MAX_SAMPLES_PER_THREAD * sizeof(double));
        pthread_create(&th[i], NULL, worker_main, &ws[i]);
    }
    pthread_barrier_wait(&start);
    uint64_t t0 = mc_now_ns();
    if (o->calls <= 0) {
        uint64_t ns = (uint64_t)(o->seconds * 1e9);
        struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                              .tv_nsec = (long)(ns % 1000000000ull)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        atomic_store(&stop, 1);
    }
    long total = 0, errors = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        total += ws[i].done;
        errors += ws[i].errors;
        double *grown = realloc(*lat, (*nlat + ws[i].nlat) * sizeof(double) + 1);
        if (grown) {
            *lat = grown;
            memcpy(*lat + *nlat, ws[i].lat_ms, ws[i].nlat * sizeof(double));
            *nlat += ws[i].nlat;
        }
        free(ws[i].lat_ms);
    }
    double secs = (double)(mc_now_ns() - t0) / 1e9;
    *run_ms = secs * 1e3;
    if (errors)
        fprintf(stderr, "bench rpc: %ld failed calls\n", errors);
    rate = secs > 0 ? (double)total / secs : 0;
out:
    for (int i = 0; i < o->conns; i++)
        mc_rpc_client_free(cl[i]);
    pthread_barrier_destroy(&start);
    free(cl);
    free(ws);
    free(th);
    return rate;
}

/* ---- reference: redis-benchmark against a scratch redis-server --------------------------- */

static int port_open(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Requests/s of redis-benchmark PING_MBULK with `conns` clients, or -1. */
static double run_ref(const struct opts *o, long calls)
{
    int fp = mc_proc_free_port();
    if (fp <= 0)
        return -1;
    uint16_t port = (uint16_t)fp;
    char ports[8];
    snprintf(ports, sizeof(ports), "%u", port);
    const char *argv[] = {"redis-server", "--port", ports,          "--bind", "127.0.0.1",
                          "--save",       "",       "--appendonly", "no",     NULL};
    const struct mc_proc_io io = {.out_path = "/dev/null", .err_path = "/dev/null"};
    struct mc_proc server;
    if (mc_proc_spawn(&server, argv, &io) != 0)
        return -1;
    double rps = -1;
    uint64_t deadline = mc_now_ms() + 5000;
    while (!port_open(port) && mc_now_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (port_open(port)) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "redis-benchmark -h 127.0.0.1 -p %u -t ping -c %d -n %ld -d %zu --csv 2>/dev/null",
                 port, o->conns, calls, o->size ? o->size : 1);
        FILE *p = popen(cmd, "r");
        char line[512];
        while (p && fgets(line, sizeof(line), p)) {
            if (strncmp(line, "\"PING_MBULK\",\"", 14) == 0)
                rps = strtod(line + 14, NULL);
        }
        if (p)
            pclose(p);
    }
    mc_proc_stop(&server, SIGTERM, 10000);
    return rps;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: mooncake_bench rpc [--conns=N] [--runs=R] [--seconds=S | --calls=C]\n"
            "       [--size=BYTES] [--threads-per-conn=T] [--io-threads=K] [--server=HOST:PORT]\n"
            "       [--ref]   (also run redis-benchmark PING_MBULK as the reference)\n");
}

int mc_bench_rpc(int argc, char **argv)
{
    struct opts o = {
        .conns = 4, .threads_per_conn = 1, .io_threads = 2, .runs = 3, .seconds = 1.0, .size = 16};
    static const struct option lo[] = {{"conns", required_argument, NULL, 'c'},
                                       {"runs", required_argument, NULL, 'r'},
                                       {"seconds", required_argument, NULL, 's'},
                                       {"calls", required_argument, NULL, 'n'},
                                       {"size", required_argument, NULL, 'z'},
                                       {"threads-per-conn", required_argument, NULL, 't'},
                                       {"io-threads", required_argument, NULL, 'i'},
                                       {"server", required_argument, NULL, 'S'},
                                       {"ref", no_argument, NULL, 'R'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'c':
            o.conns = atoi(optarg);
            break;
        case 'r':
            o.runs = atoi(optarg);
            break;
        case 's':
            o.seconds = atof(optarg);
            break;
        case 'n':
            o.calls = atol(optarg);
            break;
        case 'z':
            o.size = (size_t)atol(optarg);
            break;
        case 't':
            o.threads_per_conn = atoi(optarg);
            break;
        case 'i':
            o.io_threads = atoi(optarg);
            break;
        case 'S':
            o.server = optarg;
            break;
        case 'R':
            o.ref = 1;
            break;
        case 'h':
            usage();
            return 0;
        default:
            usage();
            return 2;
        }
    }
    if (o.conns < 1 || o.conns > 4096 || o.runs < 1 || o.threads_per_conn < 1 || o.io_threads < 1 ||
        (o.calls <= 0 && o.seconds <= 0) || o.size > (16u << 20)) {
        usage();
        return 2;
    }
    mc_log_set_level(MC_LOG_WARN);
    struct mc_rpc_server *srv = NULL;
    char hostbuf[256];
    const char *host = "127.0.0.1";
    uint16_t port = 0;
    if (o.server) {
        struct mc_rpc_client_config tmp;
        if (mc_rpc_parse_endpoint(o.server, hostbuf, sizeof(hostbuf), &tmp)) {
            fprintf(stderr, "bench rpc: bad --server '%s'\n", o.server);
            return 2;
        }
        host = tmp.host;
        port = tmp.port;
    } else {
        struct mc_rpc_server_config cfg;
        mc_rpc_server_config_init(&cfg);
        cfg.bind_addr = "127.0.0.1";
        cfg.io_threads = o.io_threads;
        cfg.name = "bench";
        if (mc_rpc_server_new(&cfg, &srv) || mc_rpc_server_start(srv)) {
            fprintf(stderr, "bench rpc: cannot start the server\n");
            mc_rpc_server_free(srv);
            return 1;
        }
        port = mc_rpc_server_port(srv);
    }
    double *rates = calloc((size_t)o.runs, sizeof(double));
    double *ms = calloc((size_t)o.runs, sizeof(double));
    double *lat = NULL;
    size_t nlat = 0;
    int rc = 0;
    long total_calls = 0;
    for (int r = 0; r < o.runs; r++) {
        rates[r] = one_run(&o, host, port, &lat, &nlat, &ms[r]);
        if (rates[r] < 0) {
            rc = 1;
            goto out;
        }
        total_calls += (long)(rates[r] * ms[r] / 1e3);
    }
    struct mc_bench_result res;
    char cname[96];
    snprintf(cname, sizeof(cname), "echo_%zuB_c%d", o.size, o.conns);
    mc_bench_result_init(&res, "rpc", cname);
    res.runs = o.runs;
    res.ops_per_s = mc_bench_median(rates, (size_t)o.runs);
    res.ms = mc_bench_median(ms, (size_t)o.runs);
    res.p50_ms = mc_bench_percentile(lat, nlat, 50);
    res.p99_ms = mc_bench_percentile(lat, nlat, 99);
    res.bytes_per_s = res.ops_per_s * (double)o.size * 2;
    mc_bench_add_num(&res, "conns", o.conns);
    mc_bench_add_num(&res, "threads", o.conns * o.threads_per_conn);
    mc_bench_add_num(&res, "io_threads", o.server ? 0 : o.io_threads);
    mc_bench_add_num(&res, "size", (double)o.size);
    if (o.ref) {
        long n = total_calls / o.runs;
        if (n < 10000)
            n = 10000;
        double ref = run_ref(&o, n);
        if (ref > 0)
            mc_bench_set_ref(&res, ref, res.ops_per_s / ref);
        else
            fprintf(stderr, "bench rpc: reference (redis-benchmark) did not run\n");
    }
    mc_bench_emit(&res);
out:
    free(rates);
    free(ms);
    free(lat);
    mc_rpc_server_free(srv);
    return rc;
}
