/*
 * cli.h - internals of mooncake_cli, the operator's command line (DESIGN.md §2).
 *
 *   mooncake_cli [--master=HOST:PORT] <command> [args] [options]
 *
 * cli_main.c parses the command line (getopt_long, options may come before or after the
 * command) into struct mc_cli_opts and dispatches; one file per kind of command:
 *   cli_data.c   put, get, exist, rm: a real client (libmooncake_client, no DRAM of its own), so
 *                a get takes a read lease and counts as an access, exactly as an engine's would;
 *   cli_admin.c  stat, segments: the master's admin RPCs (QueryKey, ListSegments) over a plain
 *                RPC connection: no lease, no promotion side effect, no client registration;
 *   cli_http.c   metrics: a GET of the master's /metrics over HTTP/1.0;
 *   cli_top.c    top: a live one-screen view (GetStats + ListSegments every second);
 *   cli_out.c    output helpers: JSON strings and aligned tables;
 *   cli_hint.c   error messages that say the limit or the remedy.
 *
 * Exit codes, the contract scripts rely on: 0 ok; 1 OBJECT_NOT_FOUND (for exist: absent or not
 * readable); 2 bad usage (unknown option or command, wrong arguments); 3 any other error, with
 * the error's name (mc_strerror) on stderr.
 */
#ifndef MC_TOOLS_CLI_H
#define MC_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum mc_cli_exit {
    MC_CLI_EXIT_OK = 0,
    MC_CLI_EXIT_NOT_FOUND = 1,
    MC_CLI_EXIT_USAGE = 2,
    MC_CLI_EXIT_ERROR = 3,
};

struct mc_cli_opts {
    const char *master;  /* "host:port" of mooncake_master */
    const char *metrics; /* "host:port" or "http://host:port[/path]"; NULL = ask the master */
    const char *output;  /* get -o FILE ("-" = stdout, even a terminal); NULL = stdout */
    const char *value;   /* put --value STRING; NULL = a file or stdin */
    uint32_t timeout_ms; /* per-call timeout; 0 = the library's default */
    const char *auth_token_file; /* shared secret for every connection; NULL = none */
    const char *tls_cert_file, *tls_key_file, *tls_ca_file; /* TLS (PEM); NULL = plain TCP */
    const char *protocol; /* put/get/exist/rm client: "tcp" (default) or "rdma" */
    const char *host;     /* the client's advertised address (rdma: the RDMA NIC's) */
    bool json, all, force;
    int iterations; /* top: frames to draw, 0 = until q / a signal */
    const char *cmd;
    int nargs; /* positional arguments after the command */
    char **args;
};

/* Prints "mooncake_cli: <what>: <ERROR_NAME>" on stderr and returns the exit code for err
 * (1 for OBJECT_NOT_FOUND, else 3). */
int mc_cli_fail(const char *what, int err);

/* cli_hint.c: errors with the limit or the remedy. The longest key (the library's limit). */
#define MC_CLI_MAX_KEY 4096
/* MC_CLI_EXIT_OK, or a message about an empty or too long key and its exit code. */
int mc_cli_check_key(const char *op, const char *key);
/* mc_cli_fail("put", rc), after a line that says why a value of len bytes found no room. */
int mc_cli_fail_put(const struct mc_cli_opts *o, size_t len, int rc);
struct mc_client;
/* mc_cli_fail("rm", rc), after a line that says how long a reader holds key (c still open). */
int mc_cli_fail_rm(struct mc_client *c, const char *key, int rc);

int mc_cli_put(const struct mc_cli_opts *o);
int mc_cli_get(const struct mc_cli_opts *o);
int mc_cli_exist(const struct mc_cli_opts *o);
int mc_cli_rm(const struct mc_cli_opts *o);
int mc_cli_stat(const struct mc_cli_opts *o);
int mc_cli_segments(const struct mc_cli_opts *o);
int mc_cli_metrics(const struct mc_cli_opts *o);
int mc_cli_top(const struct mc_cli_opts *o);

struct mc_rpc_client;
/* A plain RPC connection to the master for admin calls (version checked, --timeout and
 * --auth_token_file applied). Returns 0 or an error code. */
/* cli_ha.c: the leader's "host:port" of an etcd:// cluster (one read of its leader key).
 * Prints why on stderr when there is none. */
int mc_cli_resolve_leader(const char *url, char *addr, size_t cap);
int mc_cli_admin_connect(const struct mc_cli_opts *o, struct mc_rpc_client **out);
/* "OK", "DRAINING", ... for a segment status. */
const char *mc_cli_segment_status_name(int status);

/* Writes s as a JSON string literal (quotes, escapes for '"', '\\' and control bytes). */
void mc_cli_json_str(FILE *f, const char *s);

/* An aligned text table for people: every cell is copied; columns are padded to the widest cell,
 * numbers are not treated specially. */
struct mc_cli_table {
    int ncols;
    size_t nrows, cap;
    char **cells; /* nrows * ncols */
    bool failed;  /* an allocation failed; printing still shows what was kept */
};
void mc_cli_table_init(struct mc_cli_table *t, int ncols);
/* Appends one row of exactly ncols cells (const char *). */
void mc_cli_table_row(struct mc_cli_table *t, ...);
void mc_cli_table_print(const struct mc_cli_table *t, FILE *f);
void mc_cli_table_destroy(struct mc_cli_table *t);

#endif
