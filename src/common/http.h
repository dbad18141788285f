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
 *
 * Who may ask (README "Security"). Routes are *public* or *admin*:
 *   - public: /metrics, /health, /get_all_segments (SGLang polls it) and the paths listed in
 *     cfg.public_paths; every other path the handler serves is admin.
 *   - Connections: without admin_key and unless public_reads or protected_mode_off, only
 *     loopback peers are accepted (others are closed at accept), as the RPC port's protected
 *     mode. At most max_conns_per_addr connections per address (loopback included), and a
 *     connection that sends nothing for header_timeout_s is closed.
 *   - Admin routes: with admin_key, the request must carry "Authorization: Bearer <token>"
 *     (the token file's contents; compared through the key, in constant time), else 401;
 *     without one, loopback peers only (403 for others) unless protected_mode_off.
 * A handler may also ask mc_http_request_is_admin() (a public route with admin-only details).
 */
#ifndef MC_COMMON_HTTP_H
#define MC_COMMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
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
    /* Access (see above); all zero = the safe default: loopback only, admin routes loopback
     * only. */
    const struct mc_auth_key *admin_key; /* copied; NULL or unset = no token */
    const char *const *public_paths;     /* extra public paths, NULL-terminated; may be NULL */
    bool public_reads;                   /* --metrics_public: public routes for any address */
    bool protected_mode_off;             /* --protected_mode=false and no token: all open */
    uint32_t max_conns_per_addr;         /* 0 = MC_HTTP_DEFAULT_CONNS_PER_ADDR */
    uint32_t header_timeout_s;           /* 0 = MC_HTTP_DEFAULT_HEADER_TIMEOUT_S */
    /* HTTPS (microhttpd's TLS, GnuTLS underneath): PEM files of the certificate and its key,
     * read once at start. Both NULL/"" = plain HTTP. No client certificate is asked here: the
     * admin routes need the Bearer token, and Prometheus scrapes need no certificate. */
    const char *tls_cert_file;
    const char *tls_key_file;
};

#define MC_HTTP_DEFAULT_CONNS_PER_ADDR 16
#define MC_HTTP_DEFAULT_HEADER_TIMEOUT_S 5
#define MC_HTTP_MAX_CONNS 512

/* Starts serving. Returns 0 and *out, or a negative mc_error (MC_ERR_INVALID_PARAMS for a bad
 * address, MC_ERR_INTERNAL_ERROR when the port cannot be bound) with a log line saying why. */
int mc_http_server_new(const struct mc_http_config *cfg, struct mc_http_server **out);
/* Stops serving and frees the server (NULL is fine). In-flight requests finish first. */
void mc_http_server_free(struct mc_http_server *s);

/* The bound port (the real one when 0 was asked for). */
uint16_t mc_http_server_port(const struct mc_http_server *s);
/* "ADDR:PORT" as bound, e.g. "127.0.0.1:9003" or "[::1]:9003"; valid until the server is freed. */
const char *mc_http_server_addr(const struct mc_http_server *s);

/* Whether the request being handled has admin rights (the rules above). */
bool mc_http_request_is_admin(const struct mc_http_request *req);
/* Whether path is a public route of s (the built-in ones or cfg.public_paths). */
bool mc_http_path_is_public(const struct mc_http_server *s, const char *path);

/* A query-string argument of the request being handled, or NULL. */
const char *mc_http_request_arg(const struct mc_http_request *req, const char *key);
/* A request header (case-insensitive name), or NULL. */
const char *mc_http_request_header(const struct mc_http_request *req, const char *name);
/* Adds one header to the reply of the request being handled (a second call replaces it;
 * name up to 63 bytes). */
void mc_http_reply_header(const struct mc_http_request *req, const char *name, const char *value);

#endif
