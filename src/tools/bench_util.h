/*
 * bench_util.h - shared plumbing of mooncake_bench (DESIGN.md §12 contract).
 *
 * Each capability is one subcommand implemented in bench_<name>.c as
 *     int mc_bench_<name>(int argc, char **argv);   (argv[0] is the subcommand name)
 * returning a process exit code. Results are reported with mc_bench_emit(): a human-readable
 * row goes to stderr, one JSON object per line goes to stdout with the fields
 *   bench, case, runs, ms (median), p50_ms, p99_ms, ops_per_s, bytes_per_s,
 *   [ref, ratio] when a reference ran beside it, and any per-bench extras.
 * A bench's options are one table (struct mc_bench_opt, bench_opts.c): getopt_long's list,
 * the value parsing and the usage text all come from it.
 */
#ifndef MC_TOOLS_BENCH_UTIL_H
#define MC_TOOLS_BENCH_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define MC_BENCH_EXTRA_MAX 64

struct mc_bench_extra {
    char key[32];
    int is_str;
    double num;
    char str[256];
};

struct mc_bench_result {
    const char *bench;
    char case_name[96];
    int runs;
    double ms, p50_ms, p99_ms;
    double ops_per_s, bytes_per_s;
    int has_ref;
    double ref, ratio;
    int nextra;
    struct mc_bench_extra extra[MC_BENCH_EXTRA_MAX];
};

void mc_bench_result_init(struct mc_bench_result *r, const char *bench, const char *case_name);
void mc_bench_add_num(struct mc_bench_result *r, const char *key, double v);
void mc_bench_add_str(struct mc_bench_result *r, const char *key, const char *v);
void mc_bench_set_ref(struct mc_bench_result *r, double ref, double ratio);
void mc_bench_emit(const struct mc_bench_result *r);

/* Sorts vals in place and returns the p-th percentile (0..100) with nearest-rank. 0 if n==0. */
double mc_bench_percentile(double *vals, size_t n, double p);
double mc_bench_median(double *vals, size_t n);

/* "a,b,c" parsers for --targets / --sizes / --objects; return count or -1 (max entries). */
int mc_bench_parse_doubles(const char *s, double *out, int max);
int mc_bench_parse_sizes(const char *s, uint64_t *out, int max);

/* Seeded xorshift random generator for reproducible workloads. */
static inline uint64_t mc_bench_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* ---- options: one table per bench gives getopt_long's options and the usage text ---------- */

enum mc_bench_opt_type {
    MC_BENCH_FLAG,   /* int set to 1 when given (no argument) */
    MC_BENCH_INT,    /* int */
    MC_BENCH_UINT,   /* unsigned */
    MC_BENCH_U64,    /* uint64_t, a plain number (0x... accepted) */
    MC_BENCH_SIZE,   /* uint64_t, "64KiB" style (common/parse.h) */
    MC_BENCH_SIZES,  /* uint64_t[max], "64KiB,1MiB"; how many in *count */
    MC_BENCH_DOUBLE, /* double */
    MC_BENCH_STR,    /* const char * pointing into argv */
};

struct mc_bench_opt {
    const char *name; /* the long option, without "--" */
    enum mc_bench_opt_type type;
    void *dst;        /* where the value goes; its value before parsing is the default shown */
    const char *arg;  /* the argument's name in the usage ("N", "DIR"); NULL for a flag */
    const char *help; /* the usage text; '\n' starts a continuation line */
    int *count;       /* MC_BENCH_SIZES: entries parsed */
    int max;          /* MC_BENCH_SIZES: capacity of dst */
    const char *dflt; /* shown instead of dst's value when set ("" shows none) */
};

#define MC_BENCH_OPTS_MAX 32

/* One bench's command line: its name, what it measures (printed under the usage line), its
 * options, and the defaults captured when parsing starts. */
struct mc_bench_cli {
    const char *bench;
    const char *about;
    const struct mc_bench_opt *opts;
    size_t nopts;
    char dflt[MC_BENCH_OPTS_MAX][48];
};

/* Parses argv (argv[0] is the bench's name) against cli->opts plus --help/-h. Returns 0 to run,
 * 1 when --help printed the usage on stdout (exit 0), 2 after an unknown option, a bad value or
 * a stray argument (said on stderr, with the usage). */
int mc_bench_opts_parse(struct mc_bench_cli *cli, int argc, char **argv);
/* The usage text: "usage: mooncake_bench NAME [options]", the about text, then one line per
 * option with its argument, help and default (as captured by mc_bench_opts_parse). */
void mc_bench_opts_usage(FILE *f, const struct mc_bench_cli *cli);

/* Resident set size of this process in bytes (from /proc/self/statm). */
uint64_t mc_bench_rss_bytes(void);

/* The one list of subcommands (bench_main.c's table) and so the entry points' prototypes. */
#define MC_BENCHES(X)                                                                              \
    X(rpc, "echo calls per second over N connections")                                             \
    X(alloc, "offset allocator: allocations per second and utilisation")                           \
    X(objects, "in-process object table ops/s and bytes per object")                               \
    X(master, "metadata ops against a running mooncake_master")                                    \
    X(evict, "BatchEvict: selective vs full path, latency probe")                                  \
    X(transfer, "Put/Get throughput and latency, same-process and between processes")              \
    X(disk, "LOCAL_DISK store batched reads (compare with fio)")                                   \
    X(promotion, "promotion on hit: disk-only vs promoted read latency")                           \
    X(replay, "a Mooncake trace against a cluster: hit ratio vs exact LRU and unbounded")          \
    X(failover, "HA: leader SIGKILL -> first Put, -> all objects back (etcd + two masters)")       \
    X(restart, "master SIGKILL + restart: -> first Get, -> all DRAM objects back")                 \
    X(crc, "CRC32C, copy then CRC, and the copy fused with the CRC, vs memcpy")                    \
    X(tls, "TLS vs plain TCP side by side: 4 MiB Get between processes, GetReplicaList ops/s")

#define BENCH_DECL(name, help) int mc_bench_##name(int argc, char **argv);
MC_BENCHES(BENCH_DECL)
#undef BENCH_DECL

#endif
