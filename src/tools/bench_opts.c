/*
 * bench_opts.c - a bench's options from one table (bench_util.h): getopt_long's long options,
 * the parsing of each value into its variable, and the usage text with the defaults.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "tools/bench_util.h"

/* "64KiB" for whole KiB/MiB/GiB multiples, else bytes: the form the options take. */
static void size_str(uint64_t v, char *buf, size_t cap)
{
    static const char *const units[] = {"GiB", "MiB", "KiB"};
    for (int i = 0; i < 3; i++) {
        uint64_t u = 1ull << (10 * (3 - i));
        if (v && v % u == 0) {
            snprintf(buf, cap, "%" PRIu64 "%s", v / u, units[i]);
            return;
        }
    }
    snprintf(buf, cap, "%" PRIu64, v);
}

static void default_str(const struct mc_bench_opt *o, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (o->dflt) {
        snprintf(buf, cap, "%s", o->dflt);
        return;
    }
    switch (o->type) {
    case MC_BENCH_FLAG:
        break;
    case MC_BENCH_INT:
        snprintf(buf, cap, "%d", *(const int *)o->dst);
        break;
    case MC_BENCH_UINT:
        snprintf(buf, cap, "%u", *(const unsigned *)o->dst);
        break;
    case MC_BENCH_U64:
        snprintf(buf, cap, "%" PRIu64, *(const uint64_t *)o->dst);
        break;
    case MC_BENCH_SIZE:
        size_str(*(const uint64_t *)o->dst, buf, cap);
        break;
    case MC_BENCH_SIZES: {
        size_t n = 0;
        for (int i = 0; i < *o->count && n + 1 < cap; i++) {
            char one[32];
            size_str(((const uint64_t *)o->dst)[i], one, sizeof(one));
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? "," : "", one);
        }
        break;
    }
    case MC_BENCH_DOUBLE:
        snprintf(buf, cap, "%g", *(const double *)o->dst);
        break;
    case MC_BENCH_STR: {
        const char *v = *(const char *const *)o->dst;
        snprintf(buf, cap, "%s", v ? v : "");
        break;
    }
    }
}

void mc_bench_opts_usage(FILE *f, const struct mc_bench_cli *cli)
{
    fprintf(f, "usage: mooncake_bench %s [options]\n\n%s\n\noptions:\n", cli->bench, cli->about);
    for (size_t i = 0; i < cli->nopts; i++) {
        const struct mc_bench_opt *o = &cli->opts[i];
        char head[64];
        snprintf(head, sizeof(head), "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        const char *h = o->help, *nl;
        fprintf(f, "  %-22s ", head);
        while ((nl = strchr(h, '\n'))) {
            fprintf(f, "%.*s\n  %-22s ", (int)(nl - h), h, "");
            h = nl + 1;
        }
        if (cli->dflt[i][0])
            fprintf(f, "%s (default %s)\n", h, cli->dflt[i]);
        else
            fprintf(f, "%s\n", h);
    }
    fprintf(f, "  %-22s this text\n", "--help");
}

static int bad_value(const struct mc_bench_cli *cli, const struct mc_bench_opt *o, const char *v,
                     const char *why)
{
    fprintf(stderr, "bench %s: --%s: %s: '%s'\n", cli->bench, o->name, why, v);
    return -1;
}

static int parse_long(const char *v, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 0);
    if (errno || end == v || *end || x < min || x > max)
        return -1;
    *out = x;
    return 0;
}

/* Parses v into o's variable: 0, or -1 (said on stderr). */
static int set_value(const struct mc_bench_cli *cli, const struct mc_bench_opt *o, const char *v)
{
    long long x;
    char err[128] = "";
    switch (o->type) {
    case MC_BENCH_FLAG:
        *(int *)o->dst = 1;
        return 0;
    case MC_BENCH_INT:
        if (parse_long(v, INT_MIN, INT_MAX, &x))
            return bad_value(cli, o, v, "not an integer");
        *(int *)o->dst = (int)x;
        return 0;
    case MC_BENCH_UINT:
        if (parse_long(v, 0, UINT_MAX, &x))
            return bad_value(cli, o, v, "not a non-negative integer");
        *(unsigned *)o->dst = (unsigned)x;
        return 0;
    case MC_BENCH_U64: {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(v, &end, 0);
        if (errno || end == v || *end || v[0] == '-')
            return bad_value(cli, o, v, "not a non-negative integer");
        *(uint64_t *)o->dst = u;
        return 0;
    }
    case MC_BENCH_SIZE:
        if (mc_parse_size(v, (uint64_t *)o->dst, err, sizeof(err)) != 0)
            return bad_value(cli, o, v, err);
        return 0;
    case MC_BENCH_SIZES: {
        int n = mc_bench_parse_sizes(v, (uint64_t *)o->dst, o->max);
        if (n <= 0)
            return bad_value(cli, o, v, "not a list of sizes (at most 8, e.g. 64KiB,1MiB)");
        *o->count = n;
        return 0;
    }
    case MC_BENCH_DOUBLE: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || end == v || *end)
            return bad_value(cli, o, v, "not a number");
        *(double *)o->dst = d;
        return 0;
    }
    case MC_BENCH_STR:
        *(const char **)o->dst = v;
        return 0;
    }
    return -1;
}

int mc_bench_opts_parse(struct mc_bench_cli *cli, int argc, char **argv)
{
    struct option lo[MC_BENCH_OPTS_MAX + 2];
    size_t n = cli->nopts < MC_BENCH_OPTS_MAX ? cli->nopts : MC_BENCH_OPTS_MAX;
    for (size_t i = 0; i < n; i++) {
        const struct mc_bench_opt *o = &cli->opts[i];
        lo[i] = (struct option){o->name, o->type == MC_BENCH_FLAG ? no_argument : required_argument,
                                NULL, (int)i + 1};
        default_str(o, cli->dflt[i], sizeof(cli->dflt[i]));
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            mc_bench_opts_usage(stdout, cli);
            return 1;
        }
        if (c < 1 || (size_t)c > n || set_value(cli, &cli->opts[c - 1], optarg) != 0) {
            mc_bench_opts_usage(stderr, cli);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bench %s: unexpected argument '%s'\n", cli->bench, argv[optind]);
        mc_bench_opts_usage(stderr, cli);
        return 2;
    }
    return 0;
}
