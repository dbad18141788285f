/*
 * bench_disk.c - `mooncake_bench disk`: batched random reads through the LOCAL_DISK store
 * (src/client/disk_store.h), to be compared with fio on a file set of the same size
 * (scripts/bench/disk_vs_fio.sh runs both, alternating, and prints the ratio).
 *
 * For each value size (--sizes, default 64KiB,1MiB) the bench fills a store directory with
 * --data bytes of values of exactly that size (once: a later run with the same --dir reuses the
 * records after the store's own recovery scan), then, --runs times, reads --data bytes' worth of
 * uniformly random keys in batches of --batch keys (one mc_disk_store_read call each, the ring
 * keeping --qd reads in flight) into 4 KiB-aligned buffers: the path the promotion worker uses.
 * Every read is CRC-checked by the store, as in production. A synchronous batch ends by
 * draining its ring (the last reads wait for the slowest), which a stream like fio's never does;
 * --readers N runs N such readers at once, each with a ring of --qd / N, so at most --qd reads
 * are in flight as with fio's one job, and the queue stays nearly full while one batch drains
 * (as on a holder serving several Gets at once).
 *
 * JSON per size: bench=disk, case=randread_<size>, ms (median run), p50_ms/p99_ms (per batch),
 * ops_per_s and bytes_per_s (median run), and with --ref <bytes/s> the reference and ratio.
 * --seconds S makes every run time-based (S seconds of reads) instead of --data bytes.
 *
 * --remote: after the local figure, a child process becomes the records' holder (a disk tier
 * and a peer server on loopback, no master) and the bench reads the same random keys through
 * it, one PeerDiskRead per batch (src/client/transport_tcp_disk.c), checking each value's CRC
 * as a Get does: case remote_randread_<size>, reader=remote_holder, ref = the local store's
 * bytes/s and ratio = remote / local.
 *
 * --write: batched appends of fresh keys (the offload worker's path: one append call per
 * batch, up to 64 MiB) into a store of --data bytes that evicts its oldest extents when full:
 * case write_<size>, to be compared with fio's sequential O_DIRECT write of the same block.
 * bytes_per_s counts value bytes (what the offload moves); disk_bytes_per_s counts the record
 * bytes written (values plus the 4 KiB header block each, and padding), the figure fio's
 * write bandwidth corresponds to. With --keep the store directory stays between invocations
 * (as fio's file does between its rounds): a later run reopens the full store and appends
 * over it, the steady state of a disk tier that evicts as it offloads.
 *
 * --evict: the cost of an eviction with second chance. A store of 8 extents of 64 MiB (high
 * watermark 0.5) is appended to in batches of 16 values; after each extent's worth, every live
 * record is read once, so every record of the extent an eviction drops was read and half of
 * that extent moves (the bound). Each append call that evicted an extent is timed, --runs
 * evictions after the store first fills: case evict_<size>, ms and p50_ms = the median append
 * that evicted, p99_ms, moved_records and moved_bytes per eviction, moved_bytes_per_s.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <getopt.h>
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
#include "common/parse.h"
#include "mooncake/errors.h"
#include "tools/bench_util.h"

#define BATCH_BYTES_MAX (64ull << 20)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char p[4500];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mooncake_bench disk [--dir DIR] [--data 1GiB] [--sizes 64KiB,1MiB]\n"
               "       [--runs 3] [--qd 32] [--batch 256] [--seed N] [--ref BYTES_PER_S]\n"
               "       [--keep] [--seconds S] [--readers N] [--remote | --write | --evict]\n"
               "  --dir   directory on the disk under test (default: a new one under $TMPDIR\n"
               "          or /tmp, removed afterwards unless --keep)\n"
               "  --data  bytes of values per size, and bytes read per run\n"
               "  --ref   a reference throughput (e.g. fio's) to report a ratio against\n"
               "  --seconds S  each run lasts S seconds (time-based) instead of --data bytes\n"
               "  --readers N  local reads from N threads at once, each with its own ring of\n"
               "               qd/N: at most --qd reads in flight in all, and one reader's\n"
               "               batch draining does not empty the queue (default 1)\n"
               "  --remote     also read the same records from another process through a\n"
               "               holder (PeerDiskRead over loopback tcp); its line carries the\n"
               "               local store figure as ref and remote/local as ratio\n"
               "  --write      measure batched appends (the offload path) instead of reads,\n"
               "               into a store of --data bytes that evicts its oldest extents\n"
               "               (with --keep the store stays and a later run appends over it)\n"
               "  --evict      time --runs evictions of a 64 MiB extent whose records were all\n"
               "               read, so half of it moves to the newest extent (second chance)\n");
}

/* Opens the store of cfg, or says why not and returns NULL. */
static struct mc_disk_store *open_store(const struct mc_disk_store_config *cfg)
{
    struct mc_disk_store *s = NULL;
    char err[512] = "";
    int rc = mc_disk_store_open(cfg, &s, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "bench disk: %s\n", err[0] ? err : mc_strerror(rc));
    return rc == 0 ? s : NULL;
}

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

struct disk_opts {
    uint64_t data;
    int runs;
    unsigned qd, batch;
    unsigned readers; /* local reads: threads, each with a ring of qd / readers */
    uint64_t seed;
    double ref;
    double seconds; /* > 0: each run lasts this long (time-based) instead of reading data bytes */
    int remote;     /* also read through a holder process (PeerDiskRead over loopback tcp) */
    int write;      /* measure appends (the offload path) instead of reads */
    int keep;       /* --write: keep the store directory (a later run appends over it) */
    int evict;      /* time evictions that move read records (second chance) */
};

static void case_name(char *out, size_t cap, const char *prefix, uint64_t vsize)
{
    if (vsize % (1u << 20) == 0)
        snprintf(out, cap, "%s_%" PRIu64 "MiB", prefix, vsize >> 20);
    else if (vsize % 1024 == 0)
        snprintf(out, cap, "%s_%" PRIu64 "KiB", prefix, vsize >> 10);
    else
        snprintf(out, cap, "%s_%" PRIu64 "B", prefix, vsize);
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

static int bench_size(const char *root, const struct disk_opts *o, uint64_t vsize)
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

/* ---- writes (the offload path) -------------------------------------------------------------- */

/* Appends values of vsize bytes in batches (as the offload worker does: one append call per
 * batch, CRC-checked by the store) into a store of o->data bytes, which evicts its oldest
 * extents once full. */
static int bench_write(const char *root, const struct disk_opts *o, uint64_t vsize)
{
    char dir[4160];
    snprintf(dir, sizeof(dir), "%s/w%" PRIu64, root, vsize);
    if (!o->keep)
        rm_rf(dir);
    uint64_t cap = o->data < (256ull << 20) ? 256ull << 20 : o->data;
    struct mc_disk_store_config cfg = {
        .path = dir, .capacity = cap, .extent_size = 64ull << 20, .queue_depth = o->qd};
    struct mc_disk_store *s = open_store(&cfg);
    if (!s)
        return 1;
    unsigned nb = o->batch;
    if ((uint64_t)nb * vsize > BATCH_BYTES_MAX)
        nb = (unsigned)(BATCH_BYTES_MAX / vsize);
    if (nb == 0)
        nb = 1;
    int ret = 1;
    char *vals = malloc((size_t)nb * vsize);
    struct mc_disk_put *p = calloc(nb, sizeof(*p));
    char(*keys)[32] = calloc(nb, 32);
    uint32_t *crcs = calloc(nb, sizeof(*crcs));
    double *run_bps = calloc((size_t)o->runs, sizeof(double));
    double *run_ms = calloc((size_t)o->runs, sizeof(double));
    double *lat = calloc(1u << 20, sizeof(double));
    size_t nlat = 0;
    if (!vals || !p || !keys || !crcs || !run_bps || !run_ms || !lat)
        goto out;
    uint64_t x = o->seed | 1;
    for (uint64_t i = 0; i < (uint64_t)nb * vsize / 8; i++)
        ((uint64_t *)vals)[i] = mc_bench_rand(&x);
    for (unsigned i = 0; i < nb; i++)
        crcs[i] = mc_crc32c(vals + (size_t)i * vsize, vsize);
    uint64_t seq = 0, total = 0, disk_total = 0;
    unsigned tag = (unsigned)getpid(); /* fresh keys even over a kept store */
    for (int r = 0; r < o->runs; r++) {
        double t0 = now_ms(), el = 0;
        uint64_t bytes = 0;
        while (o->seconds > 0 ? el < o->seconds * 1e3 : bytes < o->data) {
            for (unsigned i = 0; i < nb; i++) {
                snprintf(keys[i], 32, "w%x_%" PRIu64, tag, seq++);
                p[i] = (struct mc_disk_put){keys[i], (uint32_t)strlen(keys[i]), 1,
                                            crcs[i], vals + (size_t)i * vsize,  vsize};
                /* the record on disk: header block (64 B + key) and value, each padded */
                disk_total +=
                    (64 + p[i].key_len + MC_DISK_BLOCK - 1) / MC_DISK_BLOCK * MC_DISK_BLOCK +
                    (vsize + MC_DISK_BLOCK - 1) / MC_DISK_BLOCK * MC_DISK_BLOCK;
            }
            double b0 = now_ms();
            int rc = mc_disk_store_append(s, p, nb, NULL);
            double b1 = now_ms();
            if (nlat < (1u << 20))
                lat[nlat++] = b1 - b0;
            if (rc != 0) {
                fprintf(stderr, "bench disk: append failed: %s\n", mc_strerror(rc));
                goto out;
            }
            bytes += (uint64_t)nb * vsize;
            el = b1 - t0;
        }
        run_ms[r] = now_ms() - t0;
        run_bps[r] = (double)bytes / (run_ms[r] / 1e3);
        total += bytes;
    }
    struct mc_bench_result res;
    char cname[64];
    case_name(cname, sizeof(cname), "write", vsize);
    mc_bench_result_init(&res, "disk", cname);
    res.runs = o->runs;
    res.ms = mc_bench_median(run_ms, (size_t)o->runs);
    res.p50_ms = mc_bench_percentile(lat, nlat, 50);
    res.p99_ms = mc_bench_percentile(lat, nlat, 99);
    res.bytes_per_s = mc_bench_median(run_bps, (size_t)o->runs);
    res.ops_per_s = res.bytes_per_s / (double)vsize;
    if (o->ref > 0)
        mc_bench_set_ref(&res, o->ref, res.bytes_per_s / o->ref);
    mc_bench_add_num(&res, "value_bytes", (double)vsize);
    mc_bench_add_num(&res, "queue_depth", o->qd);
    mc_bench_add_num(&res, "batch", nb);
    mc_bench_add_num(&res, "bytes_written", (double)total);
    mc_bench_add_num(&res, "disk_bytes_written", (double)disk_total);
    mc_bench_add_num(&res, "disk_bytes_per_s",
                     total ? res.bytes_per_s * (double)disk_total / (double)total : 0);
    if (o->seconds > 0)
        mc_bench_add_num(&res, "seconds_per_run", o->seconds);
    struct mc_disk_usage u;
    mc_disk_store_usage(s, &u);
    mc_bench_add_num(&res, "evicted_extents", (double)u.evicted_extents);
    mc_bench_add_num(&res, "recycled_extents", (double)u.recycled_extents);
    mc_bench_add_num(&res, "window_maps", (double)u.window_maps);
    mc_bench_emit(&res);
    ret = 0;
out:
    mc_disk_store_close(s);
    if (!o->keep)
        rm_rf(dir);
    free(vals);
    free(p);
    free(keys);
    free(crcs);
    free(run_bps);
    free(run_ms);
    free(lat);
    return ret;
}

/* --evict: see the header. */
static int bench_evict(const char *root, const struct disk_opts *o, uint64_t vsize)
{
    char dir[4160];
    snprintf(dir, sizeof(dir), "%s/e%" PRIu64, root, vsize);
    rm_rf(dir);
    const uint64_t ext = 64ull << 20;
    if (vsize > ext / 16) {
        fprintf(stderr, "bench disk: --evict takes values of at most 4 MiB (64 MiB extents)\n");
        return 2;
    }
    struct mc_disk_store_config cfg = {.path = dir,
                                       .capacity = 8 * ext,
                                       .high_watermark = 0.5,
                                       .extent_size = ext,
                                       .queue_depth = o->qd};
    struct mc_disk_store *s = open_store(&cfg);
    if (!s)
        return 1;
    enum { B = 16 };
    uint64_t per_ext = ext / (vsize + 2 * MC_DISK_BLOCK) + 1; /* an extent's worth, about */
    int ret = 1, n = 0;
    char *vals = NULL, *rbuf = NULL;
    struct mc_disk_put p[B];
    char keys[B][32], key[32];
    double *ms = calloc((size_t)o->runs, sizeof(double));
    uint64_t *moved = calloc((size_t)o->runs, sizeof(uint64_t)), seq = 0;
    if (!ms || !moved || posix_memalign((void **)&vals, MC_DISK_BLOCK, B * vsize) != 0) {
        vals = NULL;
        goto out;
    }
    if (posix_memalign((void **)&rbuf, MC_DISK_BLOCK, vsize) != 0) {
        rbuf = NULL;
        goto out;
    }
    uint64_t x = o->seed | 1;
    for (uint64_t i = 0; i < B * vsize / 8; i++)
        ((uint64_t *)vals)[i] = mc_bench_rand(&x);
    uint32_t crc[B];
    for (int i = 0; i < B; i++)
        crc[i] = mc_crc32c(vals + (size_t)i * vsize, vsize);
    while (n < o->runs) {
        for (uint64_t k = 0; k < per_ext && n < o->runs; k += B) {
            for (int i = 0; i < B; i++) {
                snprintf(keys[i], sizeof(keys[i]), "e%" PRIu64, seq++);
                p[i] = (struct mc_disk_put){keys[i], (uint32_t)strlen(keys[i]), 1,
                                            crc[i],  vals + (size_t)i * vsize,  vsize};
            }
            struct mc_disk_usage u0, u1;
            mc_disk_store_usage(s, &u0);
            double t0 = now_ms();
            int rc = mc_disk_store_append(s, p, B, NULL);
            double t1 = now_ms();
            if (rc != 0) {
                fprintf(stderr, "bench disk: append failed: %s\n", mc_strerror(rc));
                goto out;
            }
            mc_disk_store_usage(s, &u1);
            if (u1.evicted_extents > u0.evicted_extents) {
                ms[n] = t1 - t0;
                moved[n++] = u1.reinserted_records - u0.reinserted_records;
            }
        }
        /* every live record read once: all of them are "accessed" */
        for (uint64_t i = 0; i < seq; i++) {
            snprintf(key, sizeof(key), "e%" PRIu64, i);
            struct mc_disk_get g = {
                .key = key, .key_len = (uint32_t)strlen(key), .buf = rbuf, .cap = vsize};
            mc_disk_store_read(s, &g, 1);
            if (g.result != 0 && g.result != MC_ERR_OBJECT_NOT_FOUND) {
                fprintf(stderr, "bench disk: read failed: %s\n", mc_strerror(g.result));
                goto out;
            }
        }
    }
    double tot_ms = 0, mv = 0;
    for (int i = 0; i < n; i++) {
        tot_ms += ms[i];
        mv += (double)moved[i];
    }
    struct mc_bench_result res;
    char cname[64];
    case_name(cname, sizeof(cname), "evict", vsize);
    mc_bench_result_init(&res, "disk", cname);
    res.runs = n;
    res.ms = res.p50_ms = mc_bench_percentile(ms, (size_t)n, 50);
    res.p99_ms = mc_bench_percentile(ms, (size_t)n, 99);
    res.ops_per_s = tot_ms > 0 ? n / (tot_ms / 1e3) : 0;
    double rec = (double)((vsize + 2 * MC_DISK_BLOCK - 1) / MC_DISK_BLOCK * MC_DISK_BLOCK);
    res.bytes_per_s = tot_ms > 0 ? mv * rec / (tot_ms / 1e3) : 0;
    mc_bench_add_num(&res, "value_bytes", (double)vsize);
    mc_bench_add_num(&res, "queue_depth", o->qd);
    mc_bench_add_num(&res, "extent_bytes", (double)ext);
    mc_bench_add_num(&res, "moved_records", n ? mv / n : 0);
    mc_bench_add_num(&res, "moved_bytes", n ? mv / n * rec : 0);
    mc_bench_add_num(&res, "moved_bytes_per_s", res.bytes_per_s);
    mc_bench_emit(&res);
    ret = 0;
out:
    mc_disk_store_close(s);
    rm_rf(dir);
    free(vals);
    free(rbuf);
    free(ms);
    free(moved);
    return ret;
}

int mc_bench_disk(int argc, char **argv)
{
    const char *dir = NULL;
    uint64_t data = 1ull << 30, sizes[8] = {64 << 10, 1 << 20};
    int nsizes = 2, runs = 3, keep = 0, remote = 0, wr = 0, ev = 0;
    unsigned qd = 32, batch = 256, readers = 1;
    uint64_t seed = 1;
    double ref = 0, seconds = 0;
    char err[128];
    static const struct option opts[] = {
        {"dir", required_argument, 0, 'd'},   {"data", required_argument, 0, 'D'},
        {"sizes", required_argument, 0, 's'}, {"runs", required_argument, 0, 'r'},
        {"qd", required_argument, 0, 'q'},    {"batch", required_argument, 0, 'b'},
        {"seed", required_argument, 0, 'S'},  {"ref", required_argument, 0, 'R'},
        {"keep", no_argument, 0, 'k'},        {"seconds", required_argument, 0, 'T'},
        {"remote", no_argument, 0, 'm'},      {"write", no_argument, 0, 'w'},
        {"evict", no_argument, 0, 'e'},       {"readers", required_argument, 0, 'n'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            dir = optarg;
            break;
        case 'D':
            if (mc_parse_size(optarg, &data, err, sizeof(err)) != 0 || data == 0) {
                fprintf(stderr, "bench disk: --data: %s\n", err);
                return 2;
            }
            break;
        case 's':
            nsizes = mc_bench_parse_sizes(optarg, sizes, 8);
            if (nsizes <= 0) {
                fprintf(stderr, "bench disk: bad --sizes '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r':
            runs = atoi(optarg);
            break;
        case 'q':
            qd = (unsigned)atoi(optarg);
            break;
        case 'b':
            batch = (unsigned)atoi(optarg);
            break;
        case 'S':
            seed = strtoull(optarg, NULL, 10);
            break;
        case 'R':
            ref = atof(optarg);
            break;
        case 'k':
            keep = 1;
            break;
        case 'T':
            seconds = atof(optarg);
            break;
        case 'm':
            remote = 1;
            break;
        case 'w':
            wr = 1;
            break;
        case 'e':
            ev = 1;
            break;
        case 'n':
            readers = (unsigned)atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    const char *bad = runs < 1               ? "--runs must be at least 1"
                      : qd < 1 || qd > 4096  ? "--qd must be 1..4096"
                      : batch < 1            ? "--batch must be at least 1"
                      : seconds < 0          ? "--seconds must not be negative"
                      : remote + wr + ev > 1 ? "--remote, --write and --evict exclude each other"
                      : readers < 1 || readers > 64 ? "--readers must be 1..64"
                      : qd < readers
                          ? "--readers must not exceed --qd (each reader needs a ring of "
                            "at least one read)"
                          : NULL;
    if (bad) {
        fprintf(stderr, "bench disk: %s (runs=%d qd=%u batch=%u readers=%u)\n", bad, runs, qd,
                batch, readers);
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] == 0 || sizes[i] > (1ull << 30)) {
            fprintf(stderr, "bench disk: value sizes must be 1 B .. 1 GiB\n");
            return 2;
        }
    mc_log_set_level(MC_LOG_WARN);
    char tmp[4096];
    int made = 0;
    if (!dir) {
        const char *t = getenv("TMPDIR");
        snprintf(tmp, sizeof(tmp), "%s/mc_bench_disk_XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmp)) {
            perror("bench disk: mkdtemp");
            return 1;
        }
        dir = tmp;
        made = 1;
    }
    if (!made && mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench disk: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    struct disk_opts o = {data, runs, qd, batch, readers, seed, ref, seconds, remote, wr, keep, ev};
    for (int i = 0; i < nsizes && rc == 0; i++)
        rc = ev   ? bench_evict(dir, &o, sizes[i])
             : wr ? bench_write(dir, &o, sizes[i])
                  : bench_size(dir, &o, sizes[i]);
    if (!keep) {
        char sub[4160];
        for (int i = 0; i < nsizes; i++) {
            snprintf(sub, sizeof(sub), "%s/v%" PRIu64, dir, sizes[i]);
            rm_rf(sub);
        }
        if (made)
            rmdir(dir);
    }
    return rc;
}
