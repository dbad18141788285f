/*
 * bench_main.c - mooncake_bench: one subcommand per capability (DESIGN.md §12).
 *
 * MC_BENCHES (bench_util.h) is the one list of subcommands: each names its entry point
 * mc_bench_<name> (bench_<name>.c) and its one-line help. A listed bench whose file is missing
 * is a link error.
 */
#include <stdio.h>
#include <string.h>

#include "tools/bench_util.h"

static const struct {
    const char *name;
    const char *help;
    int (*fn)(int argc, char **argv);
} g_benches[] = {
#define BENCH_ROW(name, help) {#name, help, mc_bench_##name},
    MC_BENCHES(BENCH_ROW)
#undef BENCH_ROW
};

static void usage(FILE *f)
{
    fprintf(f, "usage: mooncake_bench <subcommand> [options]\n\n"
               "Prints a human table on stderr and one JSON object per result on stdout.\n"
               "Common options where they apply: --objects --targets --sizes --runs --seed\n"
               "--conns --op --batch --keys. Run 'mooncake_bench <subcommand> --help'.\n\n"
               "subcommands:\n");
    for (size_t i = 0; i < sizeof(g_benches) / sizeof(g_benches[0]); i++)
        fprintf(f, "  %-10s %s\n", g_benches[i].name, g_benches[i].help);
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
    for (size_t i = 0; i < sizeof(g_benches) / sizeof(g_benches[0]); i++)
        if (!strcmp(argv[1], g_benches[i].name))
            return g_benches[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "mooncake_bench: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
