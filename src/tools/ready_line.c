/*
 * ready_line.c - the READY line parser. See ready_line.h.
 */
#include "tools/ready_line.h"

#include <stdio.h>
#include <string.h>

/* "HOST:PORT" of s[0..len): host into host (not empty, fits), port 1..65535 in decimal. */
static int split_addr(const char *s, size_t len, char *host, size_t hcap, uint16_t *port)
{
    const char *colon = NULL;
    unsigned long v = 0;

    for (size_t i = 0; i < len; i++)
        if (s[i] == ':')
            colon = s + i;
    if (!colon || colon == s || (size_t)(colon - s) >= hcap)
        return -1;
    const char *d = colon + 1, *end = s + len;
    if (d == end || end - d > 5)
        return -1;
    for (; d < end; d++) {
        if (*d < '0' || *d > '9')
            return -1;
        v = v * 10 + (unsigned long)(*d - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (uint16_t)v;
    return 0;
}

/* A token: the bytes up to the next space or the end. */
static size_t token_len(const char *s)
{
    size_t n = 0;
    while (s[n] && s[n] != ' ')
        n++;
    return n;
}

int mc_proc_parse_ready(const char *line, struct mc_proc_ready *r)
{
    const char *s;
    size_t n;

    memset(r, 0, sizeof(*r));
    if (!line)
        return -1;
    snprintf(r->line, sizeof(r->line), "%s", line);
    if (strncmp(line, "READY ", 6) != 0)
        return -1;
    s = line + 6;
    if (strncmp(s, "endpoint=", 9) == 0) {
        char host[sizeof(r->endpoint)];
        s += 9;
        n = token_len(s);
        if (s[n] != '\0' || n >= sizeof(r->endpoint) ||
            split_addr(s, n, host, sizeof(host), &r->endpoint_port) != 0)
            return -1;
        memcpy(r->endpoint, s, n + 1);
        r->kind = MC_PROC_READY_DAEMON;
        return 0;
    }
    if (strncmp(s, "rpc=", 4) != 0)
        return -1;
    s += 4;
    n = token_len(s);
    if (s[n] != ' ' || split_addr(s, n, r->rpc_host, sizeof(r->rpc_host), &r->rpc_port) != 0)
        return -1;
    s += n + 1;
    if (strncmp(s, "metrics=", 8) != 0)
        return -1;
    s += 8;
    n = token_len(s);
    if (s[n] != '\0' ||
        split_addr(s, n, r->metrics_host, sizeof(r->metrics_host), &r->metrics_port) != 0)
        return -1;
    r->kind = MC_PROC_READY_MASTER;
    return 0;
}
