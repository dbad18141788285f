/*
 * metrics_scrape.h - the one HTTP client and the one Prometheus-text reader of the tests and
 * the bench tools (the CLI's `metrics` command has its own, user-facing client in cli_http.c).
 *
 * HTTP. mc_http_fetch sends one HTTP/1.1 request with "Connection: close" to HOST:PORT and
 * reads the reply to EOF. The whole exchange (connect, send, every read) is bounded by one
 * deadline, so a server that accepts and never answers costs timeout_ms, never a hung test.
 * The reply is split into its status, its Content-Type and its body.
 *
 * Metrics. Prometheus text exposition: "# ..." comment lines and "SERIES VALUE" samples, where
 * SERIES is a name with an optional {labels} part. mc_metrics_value returns the value of the
 * first unlabelled sample of a name (a labelled series of the same name, or a longer name that
 * starts with it, is not it). mc_metrics_check says whether every sample line parses.
 */
#ifndef MC_TOOLS_METRICS_SCRAPE_H
#define MC_TOOLS_METRICS_SCRAPE_H

#include <stddef.h>
#include <stdint.h>

struct mc_http_reply {
    int status;             /* the status code of the reply */
    int http_minor;         /* x of the reply's "HTTP/1.x" */
    char content_type[128]; /* the Content-Type header's value; "" when absent */
    char *body;             /* malloc'd, NUL-terminated (a body may hold NULs: see body_len) */
    size_t body_len;
};

/* Results of mc_http_fetch besides 0. */
#define MC_HTTP_FETCH_IO (-1)        /* no connection, or it broke, or the deadline passed */
#define MC_HTTP_FETCH_MALFORMED (-2) /* the reply is not "HTTP/1.x CODE ...\r\n...\r\n\r\n" */

/* METHOD PATH to host:port (an IPv4/IPv6 literal or a name) within timeout_ms. Returns 0 with r
 * filled (free with mc_http_reply_free), or MC_HTTP_FETCH_IO / MC_HTTP_FETCH_MALFORMED with r
 * empty. */
int mc_http_fetch(const char *host, uint16_t port, const char *method, const char *path,
                  int timeout_ms, struct mc_http_reply *r);
void mc_http_reply_free(struct mc_http_reply *r);

/* GET /metrics from addr "HOST:PORT" within timeout_ms. Returns 0 with *text (malloc'd) when
 * the status is 200; -1 otherwise (*text NULL). */
int mc_metrics_scrape(const char *addr, int timeout_ms, char **text);

/* The value of the first unlabelled sample "NAME VALUE" of text into *value. Returns 0, or -1
 * when there is none (*value untouched). */
int mc_metrics_find(const char *text, const char *name, double *value);
/* mc_metrics_find's value, or -1 when there is none (for counters and gauges that cannot be
 * negative). */
double mc_metrics_value(const char *text, const char *name);
/* 0 when every line of text is empty, a comment, or "SERIES VALUE" with a number (strtod's
 * forms, +Inf and NaN included) and nothing after it; -1 otherwise. */
int mc_metrics_check(const char *text);

#endif
