/*
 * bench_main.c - mooncake_bench: one subcommand per capability (DESIGN.md §12).
 *
 * Subcommands are weak references: a capability whose bench_<name>.c is not built yet reports
 * "not implemented" instead of failing the link, so modules land independently.
 */
#include <stdio.h>
#include <string.h>

#include "tools/bench_util.h"

typedef int (*mc_bench_fn)(int argc, char **argv);

#define MC_BENCH_DECL(name) int mc_bench_##name(int argc, char **argv) __attribute__((weak));
MC_BENCH_DECL(rpc)
MC_BENCH_DECL(alloc)
MC_BENCH_DECL(objects)
MC_BENCH_DECL(master)
MC_BENCH_DECL(evict)
MC_BENCH_DECL(transfer)
MC_BENCH_DECL(disk)
MC_BENCH_DECL(promotion)
MC_BENCH_DECL(replay)

static const struct {
    const char *name;
    const char *help;
} g_benches[] = {
    {"rpc", "echo calls per second over N connections"},
    {"alloc", "offset allocator: allocations per second and utilisation"},
    {"objects", "in-process object table ops/s and bytes per object"},
    {"master", "metadata ops against a running mooncake_master"},
    {"evict", "BatchEvict: selective vs full path, latency probe"},
    {"transfer", "Put/Get throughput and latency, same-process and between processes"},
    {"disk", "LOCAL_DISK store batched reads (compare with fio)"},
    {"promotion", "promotion on hit: disk-only vs promoted read latency"},
    {"replay", "a Mooncake trace against a cluster: hit ratio vs exact LRU and unbounded"},
};

static mc_bench_fn lookup(const char *name)
{
    if (!strcmp(name, "rpc"))
        return mc_bench_rpc;
    if (!strcmp(name, "alloc"))
        return mc_bench_alloc;
    if (!strcmp(name, "objects"))
        return mc_bench_objects;
    if (!strcmp(name, "master"))
        return mc_bench_master;
    if (!strcmp(name, "evict"))
        return mc_bench_evict;
    if (!strcmp(name, "transfer"))
        return mc_bench_transfer;
    if (!strcmp(name, "disk"))
        return mc_bench_disk;
    if (!strcmp(name, "promotion"))
        return mc_bench_promotion;
    if (!strcmp(name, "replay"))
        return mc_bench_replay;
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mooncake_bench <subcommand> [options]\n\n"
               "Prints a human table on stderr and one JSON object per result on stdout.\n"
               "Common options where they apply: --objects --targets --sizes --runs --seed\n"
               "--conns --op --batch --keys. Run 'mooncake_bench <subcommand> --help'.\n\n"
               "subcommands:\n");
    for (size_t i = 0; i < sizeof(g_benches) / sizeof(g_benches[0]); i++)
        fprintf(f, "  %-10s %s%s\n", g_benches[i].name, g_benches[i].help,
                lookup(g_benches[i].name) ? "" : " (not implemented yet)");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("mooncake_bench version %s (proto %d)\n", MC_VERSION_STRING, MC_PROTO_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(g_benches) / sizeof(g_benches[0]); i++) {
        if (strcmp(argv[1], g_benches[i].name) != 0)
            continue;
        mc_bench_fn fn = lookup(argv[1]);
        if (!fn) {
            fprintf(stderr, "mooncake_bench: '%s' is not implemented yet\n", argv[1]);
            return 3;
        }
        return fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "mooncake_bench: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
