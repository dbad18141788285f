/*
 * http.h - the observability HTTP endpoint (libmicrohttpd): /metrics and /health.
 *
 * A daemon starts one server on --metrics_port: mc_http_server_new() binds the address and port
 * (port 0 picks a free one; mc_http_server_port() tells which), and serves on one internal
 * thread until mc_http_server_free(), which stops it cleanly (joins the thread, closes the
 * socket). Routes, for GET and HEAD:
 *   /metrics  200, Content-Type "text/plain; version=0.0.4", the registry rendered by
 *             mc_metrics_render() (see metrics.h)
 *   /health   200 "OK", or whatever the health callback answers (status and body)
 *   anything else: the optional extra handler, else 404.
 * Other methods get 405. The library writes nothing to stdout; microhttpd's own error messages
 * go to the log (comp=http).
 */
#ifndef MC_COMMON_HTTP_H
#define MC_COMMON_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common/metrics.h"

struct mc_http_server;
struct mc_http_request;

/* Fills body (plain text) and returns an HTTP status, e.g. 200, or 503 with "NOT READY". */
typedef int (*mc_http_health_fn)(void *arg, struct mc_textbuf *body);
/* Handles a path the server does not know. Returns an HTTP status (0 = not mine: 404) and fills
 * body; *content_type starts as "text/plain; charset=utf-8" and may be changed to a static
 * string. path excludes the query; use mc_http_request_arg() for "?key=value" arguments. */
typedef int (*mc_http_handler_fn)(void *arg, const char *path, const struct mc_http_request *req,
                                  struct mc_textbuf *body, const char **content_type);

struct mc_http_config {
    const char *addr; /* numeric IPv4/IPv6 address or "localhost"; NULL or "" = "0.0.0.0" */
    uint16_t port;    /* 0 = any free port */
    struct mc_metrics *metrics; /* served on /metrics; NULL = empty exposition */
    mc_http_health_fn health;   /* NULL = always 200 "OK" */
    void *health_arg;
    mc_http_handler_fn handler; /* NULL = 404 for unknown paths */
    void *handler_arg;
};

/* Starts serving. Returns 0 and *out, or a negative mc_error (MC_ERR_INVALID_PARAMS for a bad
 * address, MC_ERR_INTERNAL_ERROR when the port cannot be bound) with a log line saying why. */
int mc_http_server_new(const struct mc_http_config *cfg, struct mc_http_server **out);
/* Stops serving and frees the server (NULL is fine). In-flight requests finish first. */
void mc_http_server_free(struct mc_http_server *s);

/* The bound port (the real one when 0 was asked for). */
uint16_t mc_http_server_port(const struct mc_http_server *s);
/* "ADDR:PORT" as bound, e.g. "127.0.0.1:9003" or "[::1]:9003"; valid until the server is freed. */
const char *mc_http_server_addr(const struct mc_http_server *s);

/* A query-string argument of the request being handled, or NULL. */
const char *mc_http_request_arg(const struct mc_http_request *req, const char *key);
/* A request header (case-insensitive name), or NULL. */
const char *mc_http_request_header(const struct mc_http_request *req, const char *name);
/* Adds one header to the reply of the request being handled (a second call replaces it;
 * name up to 63 bytes). */
void mc_http_reply_header(const struct mc_http_request *req, const char *name, const char *value);

#endif
