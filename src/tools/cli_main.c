/*
 * cli_main.c - mooncake_cli: argument parsing and dispatch (see cli.h for the exit-code contract).
 *
 * getopt_long (not gflags: the CLI is a tool for scripts and people, with sub-commands and short
 * options). GNU getopt permutes argv, so options may stand before or after the command
 * ("mooncake_cli stat KEY --json"). Every option is known to the parser, and each command then
 * rejects the options that do not apply to it, so a typo is a usage error (exit 2), never silently
 * ignored.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/rpc_client.h"
#include "client/master_follow.h"
#include "tools/cli.h"

#define OPT_JSON (1u << 0)
#define OPT_ALL (1u << 1)
#define OPT_FORCE (1u << 2)
#define OPT_OUTPUT (1u << 3)
#define OPT_METRICS (1u << 4)
#define OPT_VALUE (1u << 5)
#define OPT_ITER (1u << 6)

static const struct command {
    const char *name;
    int min_args, max_args;
    unsigned opts; /* command-specific options it accepts */
    int (*fn)(const struct mc_cli_opts *o);
    const char *synopsis;
} g_commands[] = {
    {"put", 1, 2, OPT_VALUE, mc_cli_put,
     "put KEY [FILE|-|--value STRING]  store FILE (or stdin, or STRING) under KEY"},
    {"get", 1, 1, OPT_OUTPUT, mc_cli_get, "get KEY [-o FILE]      read KEY to FILE (or stdout)"},
    {"exist", 1, 1, 0, mc_cli_exist, "exist KEY              print true/false (exit 0/1)"},
    {"rm", 1, 1, OPT_FORCE, mc_cli_rm,
     "rm KEY [--force]       remove KEY (--force: even if leased)"},
    {"stat", 1, 1, OPT_JSON | OPT_ALL, mc_cli_stat,
     "stat KEY [--json] [--all]  size, version, lease and replicas (no lease taken)"},
    {"segments", 0, 0, OPT_JSON, mc_cli_segments,
     "segments [--json]      mounted DRAM segments (and LOCAL_DISK holders)"},
    {"top", 0, 0, OPT_ITER, mc_cli_top,
     "top [--iterations N]   live view: segments, keys, ops/s, evictions (q quits)"},
    {"metrics", 0, 0, OPT_METRICS, mc_cli_metrics,
     "metrics                the master's Prometheus text (/metrics)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: mooncake_cli [--master=HOST:PORT] <command> [args] [options]\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof(g_commands) / sizeof(g_commands[0]); i++)
        fprintf(f, "  %s\n", g_commands[i].synopsis);
    fprintf(f,
            "\noptions:\n"
            "  --master=HOST:PORT     mooncake_master RPC address (default 127.0.0.1:50051), or\n"
            "                         etcd://H1:2379;H2:2379[/CLUSTER] for an HA cluster's leader\n"
            "  --metrics=HOST:PORT    the master's HTTP address for `metrics`; also\n"
            "  --metrics_url=URL      http://HOST:PORT/PATH (default: the master's host and\n"
            "                         the HTTP port the master reports)\n"
            "  --json                 one JSON document on stdout (stat, segments)\n"
            "  --all                  stat: show PROCESSING replicas too\n"
            "  --force                rm: remove even under a read lease\n"
            "  -o, --output=FILE      get: write the value to FILE (-: stdout, even a\n"
            "                         terminal; a binary value is not written to one without it)\n"
            "  --value=STRING         put: store STRING (instead of a file or stdin)\n"
            "  --iterations=N         top: draw N frames, then exit\n"
            "  --timeout=MS           connect and per-call timeout (default: library's)\n"
            "  --auth_token_file=FILE the cluster's shared secret (when the master has one)\n"
            "  --tls_ca_file=FILE     TLS: the CA that signed the master's certificate (PEM);\n"
            "                         the master, peers and (metrics) the HTTP port are\n"
            "                         reached over TLS\n"
            "  --tls_cert_file=FILE   TLS: this tool's certificate (when the master requires\n"
            "  --tls_key_file=FILE    client certificates, and for put/get: peers verify it)\n"
            "  --protocol=tcp|rdma    data plane of put/get (default tcp; rdma needs a device)\n"
            "  --host=ADDR            this machine's address for peers (default 127.0.0.1;\n"
            "                         rdma: the address of the RDMA NIC's interface)\n"
            "  --log_level=LEVEL      debug|info|warn|error|off for library logs on stderr "
            "(default warn)\n"
            "  -h, --help             this text\n"
            "  --version              print the version and exit\n"
            "\nexit status: 0 ok, 1 OBJECT_NOT_FOUND (exist: absent), 2 bad usage, 3 other error\n"
            "(its name on stderr)\n");
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("mooncake_cli: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(try mooncake_cli --help)\n", stderr);
    return MC_CLI_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"master", required_argument, NULL, 'm'},
        {"metrics", required_argument, NULL, 'M'},
        {"metrics_url", required_argument, NULL, 'M'},
        {"json", no_argument, NULL, 'j'},
        {"all", no_argument, NULL, 'a'},
        {"force", no_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, 't'},
        {"log_level", required_argument, NULL, 'L'},
        {"auth_token_file", required_argument, NULL, 'A'},
        {"tls_cert_file", required_argument, NULL, 'C'},
        {"tls_key_file", required_argument, NULL, 'K'},
        {"tls_ca_file", required_argument, NULL, 'R'},
        {"protocol", required_argument, NULL, 'P'},
        {"host", required_argument, NULL, 'H'},
        {"value", required_argument, NULL, 'v'},
        {"iterations", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    struct mc_cli_opts o = {.master = "127.0.0.1:50051"};
    unsigned given = 0;
    enum mc_log_level level = MC_LOG_WARN;
    const struct command *cmd = NULL;
    int c;

    opterr = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            o.master = optarg;
            break;
        case 'M':
            o.metrics = optarg;
            given |= OPT_METRICS;
            break;
        case 'j':
            o.json = true;
            given |= OPT_JSON;
            break;
        case 'a':
            o.all = true;
            given |= OPT_ALL;
            break;
        case 'f':
            o.force = true;
            given |= OPT_FORCE;
            break;
        case 'o':
            o.output = optarg;
            given |= OPT_OUTPUT;
            break;
        case 't': {
            char *end = NULL;
            unsigned long v = strtoul(optarg, &end, 10);
            if (!*optarg || *end || v == 0 || v > 3600000)
                return usage_error("--timeout wants milliseconds (1..3600000), got '%s'", optarg);
            o.timeout_ms = (uint32_t)v;
            break;
        }
        case 'A':
            o.auth_token_file = optarg;
            break;
        case 'C':
            o.tls_cert_file = optarg;
            break;
        case 'K':
            o.tls_key_file = optarg;
            break;
        case 'R':
            o.tls_ca_file = optarg;
            break;
        case 'P':
            if (strcmp(optarg, "tcp") != 0 && strcmp(optarg, "rdma") != 0)
                return usage_error("--protocol wants tcp or rdma, got '%s'", optarg);
            o.protocol = optarg;
            break;
        case 'H':
            o.host = optarg;
            break;
        case 'L':
            if (mc_log_level_parse(optarg, &level))
                return usage_error("unknown --log_level '%s'", optarg);
            break;
        case 'n': {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > 1000000)
                return usage_error("--iterations wants a count (1..1000000), got '%s'", optarg);
            o.iterations = (int)v;
            given |= OPT_ITER;
            break;
        }
        case 'v':
            o.value = optarg;
            given |= OPT_VALUE;
            break;
        case 'h':
            usage(stdout);
            return MC_CLI_EXIT_OK;
        case 'V':
            printf("mooncake_cli version %s (proto %d)\n", MC_VERSION_STRING, MC_PROTO_VERSION);
            return MC_CLI_EXIT_OK;
        default: /* getopt printed the reason */
            fputs("(try mooncake_cli --help)\n", stderr);
            return MC_CLI_EXIT_USAGE;
        }
    }
    mc_log_set_level(level);
    static char leader[128]; /* an etcd:// cluster: its leader's address, read once */
    if (mc_master_follow_is_url(o.master)) {
        if (mc_cli_resolve_leader(o.master, leader, sizeof(leader)) != 0)
            return MC_CLI_EXIT_ERROR;
        o.master = leader;
    }
    {
        struct mc_rpc_client_config rc;
        char host[256];
        if (mc_rpc_parse_endpoint(o.master, host, sizeof(host), &rc) != 0 || rc.port == 0)
            return usage_error("--master wants HOST:PORT or etcd://H1:2379;H2:2379[/CLUSTER], "
                               "got '%s'",
                               o.master);
    }
    if (optind >= argc)
        return usage_error("%s", "no command given");
    o.cmd = argv[optind];
    o.args = argv + optind + 1;
    o.nargs = argc - optind - 1;
    for (size_t i = 0; i < sizeof(g_commands) / sizeof(g_commands[0]); i++)
        if (!strcmp(o.cmd, g_commands[i].name))
            cmd = &g_commands[i];
    if (!cmd)
        return usage_error("unknown command '%s'", o.cmd);
    if (o.nargs < cmd->min_args || o.nargs > cmd->max_args)
        return usage_error("wrong number of arguments; usage: mooncake_cli %s", cmd->synopsis);
    if (given & ~cmd->opts)
        return usage_error("an option given does not apply to '%s'", o.cmd);
    for (int i = 0; i < o.nargs; i++)
        if (!o.args[i][0])
            return usage_error("%s", "empty argument");
    return cmd->fn(&o);
}
