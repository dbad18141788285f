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
 * bytes written (values plus the header unit each, and padding), the figure fio's
 * write bandwidth corresponds to; disk_bytes_per_value and disk_ratio are what one value takes
 * on disk (live record bytes per record) and that over the value size. With --keep the store
 * directory stays between invocations (as fio's file does between its rounds): a later run reopens
 * the full store and appends over it, the steady state of a disk tier that evicts as it offloads.
 *
 * --evict: the cost of an eviction with second chance. A store of 8 extents of 64 MiB (high
 * watermark 0.5) is appended to in batches of 16 values; after each extent's worth, every live
 * record is read once, so every record of the extent an eviction drops was read and half of
 * that extent moves (the bound). Each append call that evicted an extent is timed, --runs
 * evictions after the store first fills: case evict_<size>, ms and p50_ms = the median append
 * that evicted, p99_ms, moved_records and moved_bytes per eviction, moved_bytes_per_s.
 *
 * Files: this one holds the options (one table: getopt's list and the usage, bench_opts.c) and
 * the dispatch; the reads are in bench_disk_read.c, --write in bench_disk_write.c, --evict in
 * bench_disk_evict.c (what they share: bench_disk.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "tools/bench_disk.h"
#include "tools/bench_util.h"

int mc_bench_disk(int argc, char **argv)
{
    const char *dir = NULL;
    uint64_t data = 1ull << 30, sizes[8] = {64 << 10, 1 << 20};
    int nsizes = 2, runs = 3, keep = 0, remote = 0, wr = 0, ev = 0;
    unsigned qd = 32, batch = 256, readers = 1;
    uint64_t seed = 1;
    double ref = 0, seconds = 0;
    const struct mc_bench_opt opts[] = {
        {.name = "dir",
         .type = MC_BENCH_STR,
         .dst = &dir,
         .arg = "DIR",
         .help = "directory on the disk under test (a new one under $TMPDIR\nor /tmp, removed "
                 "afterwards "
                 "unless --keep)",
         .dflt = ""},
        {.name = "data",
         .type = MC_BENCH_SIZE,
         .dst = &data,
         .arg = "SIZE",
         .help = "bytes of values per size, and bytes read per run"},
        {.name = "sizes",
         .type = MC_BENCH_SIZES,
         .dst = sizes,
         .arg = "LIST",
         .help = "value sizes, one case each",
         .count = &nsizes,
         .max = 8},
        {.name = "runs",
         .type = MC_BENCH_INT,
         .dst = &runs,
         .arg = "N",
         .help = "measured runs per case"},
        {.name = "qd",
         .type = MC_BENCH_UINT,
         .dst = &qd,
         .arg = "N",
         .help = "reads (or writes) in flight, 1..4096"},
        {.name = "batch",
         .type = MC_BENCH_UINT,
         .dst = &batch,
         .arg = "N",
         .help = "keys per store call"},
        {.name = "seed",
         .type = MC_BENCH_U64,
         .dst = &seed,
         .arg = "N",
         .help = "seed of the values and of the random keys"},
        {.name = "ref",
         .type = MC_BENCH_DOUBLE,
         .dst = &ref,
         .arg = "BYTES_PER_S",
         .help = "a reference throughput (e.g. fio's) to report a ratio against",
         .dflt = ""},
        {.name = "keep",
         .type = MC_BENCH_FLAG,
         .dst = &keep,
         .arg = NULL,
         .help =
             "keep the store directory (a later run reuses the records;\nwith --write it appends "
             "over the full store)"},
        {.name = "seconds",
         .type = MC_BENCH_DOUBLE,
         .dst = &seconds,
         .arg = "S",
         .help = "each run lasts S seconds (time-based) instead of --data bytes",
         .dflt = ""},
        {.name = "readers",
         .type = MC_BENCH_UINT,
         .dst = &readers,
         .arg = "N",
         .help =
             "local reads from N threads at once, each with its own ring of\nqd/N: at most --qd "
             "reads in flight in all, and one reader's\nbatch draining does not empty the queue"},
        {.name = "remote",
         .type = MC_BENCH_FLAG,
         .dst = &remote,
         .arg = NULL,
         .help =
             "also read the same records from another process through a\nholder (PeerDiskRead over "
             "loopback tcp); its line carries the\nlocal store figure as ref and remote/local as "
             "ratio"},
        {.name = "write",
         .type = MC_BENCH_FLAG,
         .dst = &wr,
         .arg = NULL,
         .help =
             "measure batched appends (the offload path) instead of reads,\ninto a store of --data "
             "bytes that evicts its oldest extents"},
        {.name = "evict",
         .type = MC_BENCH_FLAG,
         .dst = &ev,
         .arg = NULL,
         .help =
             "time --runs evictions of a 64 MiB extent whose records were all\nread, so half of it "
             "moves to the newest extent (second chance)"},
    };
    struct mc_bench_cli cli = {
        .bench = "disk",
        .about = "LOCAL_DISK store: batched random reads (compare with fio on the same data),\n"
                 "or with --remote the same reads through a holder process, or --write batched\n"
                 "appends, or --evict the cost of an eviction with second chance. One JSON line\n"
                 "per value size on stdout.",
        .opts = opts,
        .nopts = sizeof(opts) / sizeof(opts[0])};
    int prc = mc_bench_opts_parse(&cli, argc, argv);
    if (prc)
        return prc == 1 ? 0 : 2;
    const char *bad = data == 0              ? "--data must be more than 0"
                      : runs < 1             ? "--runs must be at least 1"
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
        mc_bench_opts_usage(stderr, &cli);
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
        rc = ev   ? mc_bench_disk_evict(dir, &o, sizes[i])
             : wr ? mc_bench_disk_write(dir, &o, sizes[i])
                  : mc_bench_disk_read(dir, &o, sizes[i]);
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
