/*
 * bench_disk_read.c - `mooncake_bench disk` reads: the local store's batched random reads from
 * --readers threads, and with --remote the same records through a holder process
 * (PeerDiskRead). What they measure and report: bench_disk.c.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "client/disk_store.h"
#include "client/disk_tier.h"
#include "client/peer_server.h"
#include "client/transport.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"
#include "tools/bench_disk.h"
#include "tools/bench_util.h"

static int populate(struct mc_disk_store *s, uint64_t nvals, uint64_t vsize, uint64_t seed)
{
    /* Skip when a previous run left the same set behind. */
    struct mc_disk_usage u;
    mc_disk_store_usage(s, &u);
    char key[32];
    snprintf(key, sizeof(key), "v%" PRIu64, nvals - 1);
    struct mc_disk_record_info info;
    if (u.records == nvals && mc_disk_store_lookup(s, key, (uint32_t)strlen(key), &info) == 0 &&
        info.size == vsize)
        return 0;
    enum { B = 16 };
    char *vals = malloc(B * vsize);
    struct mc_disk_put p[B];
    char keys[B][32];
    if (!vals)
        return -1;
    uint64_t x = seed | 1;
    for (uint64_t i = 0; i < B * vsize / 8; i++)
        ((uint64_t *)vals)[i] = mc_bench_rand(&x);
    double t0 = now_ms();
    for (uint64_t i = 0; i < nvals; i += B) {
        size_t n = 0;
        for (; n < B && i + n < nvals; n++) {
            snprintf(keys[n], sizeof(keys[n]), "v%" PRIu64, i + n);
            char *v = vals + n * vsize;
            memcpy(v, &i, sizeof(i)); /* distinct values */
            p[n] = (struct mc_disk_put){
                keys[n], (uint32_t)strlen(keys[n]), 1, mc_crc32c(v, vsize), v, vsize};
        }
        int rc = mc_disk_store_append(s, p, n, NULL);
        if (rc != 0) {
            fprintf(stderr, "bench disk: append failed: %s\n", mc_strerror(rc));
            free(vals);
            return -1;
        }
    }
    double ms = now_ms() - t0;
    fprintf(stderr, "populated %" PRIu64 " x %" PRIu64 " B in %.0f ms (%.0f MB/s)\n", nvals, vsize,
            ms, (double)nvals * vsize / ms / 1e3);
    free(vals);
    return 0;
}

/* ---- the holder process of --remote ------------------------------------------------------ */

/* Child: serves dir's records through a disk tier and a peer server on loopback; writes its port
 * to wfd and runs until rfd reaches EOF (the bench closed its end or died). */
static void holder_main(const char *dir, uint64_t capacity, int wfd, int rfd)
{
    struct mc_disk_tier_config dc = {
        .path = dir,
        .capacity = capacity,
        .endpoint = "127.0.0.1:0",
        .max_payload = (64u << 20) - (64u << 10)}; /* the peer server's default frame */
    struct mc_disk_tier *t = NULL;
    struct mc_peer_server *ps = NULL;
    uint16_t port = 0;
    if (mc_disk_tier_open(&dc, &t) == 0) {
        struct mc_peer_server_config pc = {
            .bind_addr = "127.0.0.1", .on_disk_read = mc_disk_tier_on_peer_read, .disk_arg = t};
        if (mc_peer_server_new(&pc, &ps) == 0 && mc_peer_server_start(ps) == 0)
            port = mc_peer_server_port(ps);
    }
    if (write(wfd, &port, sizeof(port)) != (ssize_t)sizeof(port))
        port = 0;
    char c;
    while (port && read(rfd, &c, 1) > 0)
        ;
    if (ps)
        mc_peer_server_stop(ps);
    mc_disk_tier_close(t);
    mc_peer_server_free(ps);
    _exit(0);
}

struct holder_proc {
    pid_t pid;
    int to_child; /* closing it ends the child */
    char ep[64];
};

static int holder_start(struct holder_proc *h, const char *dir, uint64_t capacity)
{
    int up[2], down[2];
    if (pipe(up) != 0)
        return -1;
    if (pipe(down) != 0) {
        close(up[0]);
        close(up[1]);
        return -1;
    }
    pid_t parent = getpid();
    h->pid = fork();
    if (h->pid < 0)
        return -1;
    if (h->pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(125);
        close(up[0]);
        close(down[1]);
        holder_main(dir, capacity, up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    h->to_child = down[1];
    uint16_t port = 0;
    ssize_t n = read(up[0], &port, sizeof(port));
    close(up[0]);
    if (n != (ssize_t)sizeof(port) || port == 0)
        return -1;
    snprintf(h->ep, sizeof(h->ep), "127.0.0.1:%u", port);
    return 0;
}

static void holder_stop(struct holder_proc *h)
{
    if (h->pid <= 0)
        return;
    close(h->to_child);
    int st;
    waitpid(h->pid, &st, 0);
    h->pid = 0;
}

/* ---- reads --------------------------------------------------------------------------------- */

/* One reader: its own buffers, keys and random sequence, batches of nb keys until its share of
 * the reads is done or the run's time is up. */
struct reader {
    const struct disk_opts *o;
    struct mc_disk_store *s;
    struct mc_transport *tcp;
    const char *ep;
    uint64_t nvals, vsize, rng;
    unsigned nb;
    char *bufs;
    struct mc_disk_get *g;
    struct mc_disk_read_item *it;
    char (*keys)[32];
    double *lat;
    size_t nlat, maxlat;
    uint64_t reads; /* this run's share (count-based runs) */
    double t0;      /* this run's start, shared by all readers */
    uint64_t done;  /* this run's reads */
    int rc;
};

static int reader_init(struct reader *rd, uint64_t runs_reads)
{
    rd->maxlat =
        rd->o->seconds > 0 ? 1u << 20 : (size_t)((runs_reads + rd->nb - 1) / rd->nb) * rd->o->runs;
    rd->g = calloc(rd->nb, sizeof(*rd->g));
    rd->it = calloc(rd->nb, sizeof(*rd->it));
    rd->keys = calloc(rd->nb, 32);
    rd->lat = calloc(rd->maxlat ? rd->maxlat : 1, sizeof(double));
    if (posix_memalign((void **)&rd->bufs, 4096, (size_t)rd->nb * rd->vsize) != 0)
        rd->bufs = NULL;
    return rd->g && rd->it && rd->keys && rd->lat && rd->bufs ? 0 : -1;
}

static void reader_free(struct reader *rd)
{
    free(rd->bufs);
    free(rd->g);
    free(rd->it);
    free(rd->keys);
    free(rd->lat);
}

static void *reader_run(void *arg)
{
    struct reader *rd = arg;
    const struct disk_opts *o = rd->o;
    double el = 0;
    rd->done = 0;
    rd->rc = 0;
    for (;;) {
        if (o->seconds > 0 ? el >= o->seconds * 1e3 : rd->done >= rd->reads)
            break;
        unsigned n = o->seconds > 0 || rd->reads - rd->done >= rd->nb
                         ? rd->nb
                         : (unsigned)(rd->reads - rd->done);
        for (unsigned i = 0; i < n; i++) {
            snprintf(rd->keys[i], 32, "v%" PRIu64, mc_bench_rand(&rd->rng) % rd->nvals);
            char *buf = rd->bufs + (size_t)i * rd->vsize;
            rd->g[i] = (struct mc_disk_get){.key = rd->keys[i],
                                            .key_len = (uint32_t)strlen(rd->keys[i]),
                                            .buf = buf,
                                            .cap = rd->vsize};
            rd->it[i] = (struct mc_disk_read_item){
                .key = rd->keys[i], .size = rd->vsize, .version = 1, .buf = buf};
        }
        double b0 = now_ms();
        int rc;
        if (rd->s) {
            rc = mc_disk_store_read(rd->s, rd->g, n);
            for (unsigned i = 0; rc == 0 && i < n; i++)
                rc = rd->g[i].result;
        } else {
            rc = mc_transport_tcp_disk_read(rd->tcp, rd->ep, rd->it, n);
            for (unsigned i = 0; rc == 0 && i < n; i++) {
                rc = rd->it[i].status;
                /* the reader checks what it got, as a Get does */
                if (rc == 0 &&
                    (!rd->it[i].crc_valid || mc_crc32c(rd->it[i].buf, rd->vsize) != rd->it[i].crc))
                    rc = MC_ERR_CHECKSUM_MISMATCH;
            }
        }
        double b1 = now_ms();
        if (rd->nlat < rd->maxlat)
            rd->lat[rd->nlat++] = b1 - b0;
        if (rc != 0) {
            rd->rc = rc;
            break;
        }
        rd->done += n;
        el = b1 - rd->t0;
    }
    return NULL;
}

/* Random batched reads of dir's nvals values of vsize bytes: from the store s (local: --readers
 * threads, each with its own ring of qd / readers), or through the holder at ep with tcp
 * (remote, one reader). One JSON line; *bps gets the median bytes/s. */
static int read_runs(const struct disk_opts *o, struct mc_disk_store *s, struct mc_transport *tcp,
                     const char *ep, uint64_t nvals, uint64_t vsize, const char *cname, double ref,
                     double *bps)
{
    int ret = 1;
    unsigned nb = o->batch;
    if ((uint64_t)nb * vsize > BATCH_BYTES_MAX)
        nb = (unsigned)(BATCH_BYTES_MAX / vsize);
    if (nb == 0)
        nb = 1;
    unsigned nr = s ? o->readers : 1;
    uint64_t reads = nvals; /* per run when not time-based, split among the readers */
    struct reader *rds = calloc(nr, sizeof(*rds));
    pthread_t *th = calloc(nr, sizeof(*th));
    double *run_bps = calloc((size_t)o->runs, sizeof(double));
    double *run_ms = calloc((size_t)o->runs, sizeof(double));
    double *lat = NULL;
    size_t nlat = 0;
    uint64_t total_reads = 0;
    if (!rds || !th || !run_bps || !run_ms)
        goto out;
    for (unsigned k = 0; k < nr; k++) {
        rds[k] = (struct reader){.o = o,
                                 .s = s,
                                 .tcp = tcp,
                                 .ep = ep,
                                 .nvals = nvals,
                                 .vsize = vsize,
                                 .nb = nb,
                                 .rng = (o->seed + k) * 2654435761u + 7};
        if (reader_init(&rds[k], reads / nr + 1) != 0)
            goto out;
    }
    for (int r = 0; r < o->runs; r++) {
        double t0 = now_ms();
        unsigned started = 0;
        int failed = 0;
        for (unsigned k = 0; k < nr; k++) {
            rds[k].t0 = t0;
            rds[k].reads = reads / nr + (k < reads % nr);
        }
        for (; started < nr - 1; started++)
            if (pthread_create(&th[started], NULL, reader_run, &rds[started]) != 0) {
                fprintf(stderr, "bench disk: cannot start a reader thread\n");
                failed = 1;
                break;
            }
        if (!failed)
            reader_run(&rds[nr - 1]);
        for (unsigned k = 0; k < started; k++)
            pthread_join(th[k], NULL);
        if (failed)
            goto out;
        run_ms[r] = now_ms() - t0;
        uint64_t done = 0;
        for (unsigned k = 0; k < nr; k++) {
            if (rds[k].rc != 0) {
                fprintf(stderr, "bench disk: read failed: %s\n", mc_strerror(rds[k].rc));
                goto out;
            }
            done += rds[k].done;
        }
        run_bps[r] = (double)done * vsize / (run_ms[r] / 1e3);
        total_reads += done;
    }
    size_t cap = 0;
    for (unsigned k = 0; k < nr; k++)
        cap += rds[k].nlat;
    lat = calloc(cap ? cap : 1, sizeof(double));
    if (!lat)
        goto out;
    for (unsigned k = 0; k < nr; k++)
        for (size_t i = 0; i < rds[k].nlat; i++)
            lat[nlat++] = rds[k].lat[i];
    struct mc_bench_result res;
    mc_bench_result_init(&res, "disk", cname);
    res.runs = o->runs;
    res.ms = mc_bench_median(run_ms, (size_t)o->runs);
    res.p50_ms = mc_bench_percentile(lat, nlat, 50);
    res.p99_ms = mc_bench_percentile(lat, nlat, 99);
    res.bytes_per_s = mc_bench_median(run_bps, (size_t)o->runs);
    res.ops_per_s = res.bytes_per_s / (double)vsize;
    *bps = res.bytes_per_s;
    if (ref > 0)
        mc_bench_set_ref(&res, ref, res.bytes_per_s / ref);
    mc_bench_add_str(&res, "reader", s ? "local_store" : "remote_holder");
    mc_bench_add_num(&res, "value_bytes", (double)vsize);
    mc_bench_add_num(&res, "queue_depth", s ? (o->qd / nr) * nr : o->qd);
    mc_bench_add_num(&res, "readers", nr);
    mc_bench_add_num(&res, "batch", nb);
    mc_bench_add_num(&res, "data_bytes", (double)nvals * vsize);
    mc_bench_add_num(&res, "reads", (double)total_reads);
    if (o->seconds > 0)
        mc_bench_add_num(&res, "seconds_per_run", o->seconds);
    if (s) {
        struct mc_disk_usage u;
        mc_disk_store_usage(s, &u);
        mc_bench_add_num(&res, "registered_buffers", u.registered_buffers);
        mc_bench_add_num(&res, "registered_files", u.registered_files);
        mc_bench_add_num(&res, "record_unit", u.record_unit); /* the values' alignment */
    }
    mc_bench_emit(&res);
    ret = 0;
out:
    for (unsigned k = 0; rds && k < nr; k++)
        reader_free(&rds[k]);
    free(rds);
    free(th);
    free(run_bps);
    free(run_ms);
    free(lat);
    return ret;
}

int mc_bench_disk_read(const char *root, const struct disk_opts *o, uint64_t vsize)
{
    char dir[4160];
    snprintf(dir, sizeof(dir), "%s/v%" PRIu64, root, vsize);
    uint64_t nvals = o->data / vsize;
    if (nvals == 0)
        nvals = 1;
    struct mc_disk_store_config cfg = {
        .path = dir,
        .capacity = nvals * (vsize + 8192) + (512ull << 20),
        .high_watermark = 1.0,
        .extent_size = 256ull << 20,
        .queue_depth = o->qd / o->readers, /* each reader's ring */
    };
    struct mc_disk_store *s = open_store(&cfg);
    if (!s)
        return 1;
    char cname[64];
    double local = 0, remote = 0;
    case_name(cname, sizeof(cname), "randread", vsize);
    int ret = populate(s, nvals, vsize, o->seed) != 0 ||
              read_runs(o, s, NULL, NULL, nvals, vsize, cname, o->ref, &local) != 0;
    mc_disk_store_close(s);
    if (ret || !o->remote)
        return ret;
    /* the same records read by another process through their holder: PeerDiskRead */
    struct holder_proc h = {0};
    struct mc_transport *tcp = NULL;
    struct mc_tcp_transport_config tc;
    mc_tcp_transport_config_init(&tc);
    if (holder_start(&h, dir, cfg.capacity) != 0 || mc_transport_tcp_new(&tc, &tcp) != 0) {
        fprintf(stderr, "bench disk: cannot start the holder process\n");
        ret = 1;
    } else {
        case_name(cname, sizeof(cname), "remote_randread", vsize);
        ret = read_runs(o, NULL, tcp, h.ep, nvals, vsize, cname, local, &remote);
    }
    mc_transport_free(tcp);
    holder_stop(&h);
    return ret;
}
