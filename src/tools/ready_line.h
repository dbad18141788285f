/*
 * ready_line.h - the one parser, in C, of the READY line the two daemons print on stdout once
 * they serve; the tests, the bench tools and the process harness (proc_harness.h) all use it.
 *
 * READY contract. mooncake_master prints exactly one stdout line once both its listeners are
 * bound, "READY rpc=HOST:PORT metrics=HOST:PORT" (src/master/main.c); mooncake_client prints
 * "READY endpoint=HOST:PORT" once it is mounted (src/client/daemon_main.c). mc_proc_parse_ready
 * accepts exactly these two forms (a port is 1..65535 in decimal, a host is not empty, nothing
 * trails) and refuses anything else, so a changed line fails loudly instead of half-parsing.
 */
#ifndef MC_TOOLS_READY_LINE_H
#define MC_TOOLS_READY_LINE_H

#include <stdint.h>

enum mc_proc_ready_kind { MC_PROC_READY_MASTER = 1, MC_PROC_READY_DAEMON };

struct mc_proc_ready {
    enum mc_proc_ready_kind kind;
    char line[256];    /* the line as read (diagnostics) */
    char rpc_host[64]; /* master: the RPC listener */
    uint16_t rpc_port; /* master */
    char metrics_host[64];
    uint16_t metrics_port;
    char endpoint[256]; /* daemon: "HOST:PORT", byte for byte as printed */
    uint16_t endpoint_port;
};

/* Parses a READY line (no newline). Returns 0, or -1 when it is not one of the two forms. */
int mc_proc_parse_ready(const char *line, struct mc_proc_ready *r);

#endif
