/*
 * metrics.h - counters, gauges and histograms in a registry owned by its user, exposed in the
 * Prometheus text format (version 0.0.4).
 *
 * No globals: each component that exports metrics (a master, a client) creates its own
 * struct mc_metrics with mc_metrics_new() and registers its series there, so two of them in one
 * process (as in tests) never mix. Registration returns a handle the owner keeps; updating a
 * handle is one relaxed atomic operation (inline below), never a lock, so it is fine on hot
 * paths. Registration and rendering take the registry's mutex; they are rare.
 *
 * A family is one metric name with its HELP text and TYPE; a series is one family member with
 * its constant labels, e.g. master_evict_total{path="selective"}. Labels are given as a
 * NULL-terminated list of name, value pairs (MC_LABELS("path", "selective")) or NULL for none,
 * and are copied. Registering the same name and labels twice returns the same handle (when the
 * kind matches), so optional code paths need not coordinate; a name reused with another TYPE, an
 * invalid metric or label name, or bad histogram bounds gives NULL.
 *
 * Kinds:
 *   counter   uint64, only goes up                       mc_counter_inc / _add
 *   gauge     int64                                      mc_gauge_set / _add / _inc / _dec
 *   gauge_f   double                                     mc_gauge_f_set / _add
 *   gauge_fn, counter_fn: a callback computes the value at scrape time (e.g. a queue length)
 *   gauge_collector, counter_collector: a callback emits the family's series (label sets
 *             known only at scrape time, e.g. one per mounted segment)
 *   histogram fixed upper bounds given at registration; +Inf is implicit. Exposed as
 *             NAME_bucket{le="..."} (cumulative), NAME_sum, NAME_count. NaN observations are
 *             dropped.
 *
 * Rendering (mc_metrics_render) walks families in registration order and prints every series,
 * zero-valued ones included, after "# HELP" and "# TYPE" lines. An optional pre-scrape hook runs
 * first, under the registry mutex: a component whose numbers must agree with each other (e.g. a
 * promotion funnel: admitted = completed + failed + ... + in_flight) takes its own lock there,
 * copies the numbers into a snapshot, and registers callback series that read the snapshot.
 * Callbacks and the hook must not call back into the registry.
 *
 * Handles stay valid until mc_metrics_free(); series cannot be removed.
 */
#ifndef MC_COMMON_METRICS_H
#define MC_COMMON_METRICS_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- a growable text buffer (rendering target) ------------------------------------------- */

/* data is NUL-terminated whenever it is non-NULL; failed is set once an allocation failed. */
struct mc_textbuf {
    char *data;
    size_t len, cap;
    int failed;
};

void mc_textbuf_init(struct mc_textbuf *b);
void mc_textbuf_destroy(struct mc_textbuf *b);
/* Both return 0, or -1 (and set b->failed) when memory ran out. */
int mc_textbuf_append(struct mc_textbuf *b, const char *s, size_t n);
int mc_textbuf_printf(struct mc_textbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hands the buffer to the caller (free() it); b is left empty. */
char *mc_textbuf_steal(struct mc_textbuf *b, size_t *len);

/* ---- series handles and their lock-free updates ------------------------------------------ */

struct mc_counter {
    _Atomic uint64_t v;
};
struct mc_gauge {
    _Atomic int64_t v;
};
struct mc_gauge_f {
    _Atomic uint64_t bits; /* a double's bit pattern */
};
struct mc_histogram {
    size_t nbounds;
    double *bounds;          /* ascending, finite */
    _Atomic uint64_t *count; /* nbounds + 1 per-bucket (non-cumulative) counts; last is +Inf */
    _Atomic uint64_t sum_bits;
};

static inline void mc_counter_add(struct mc_counter *c, uint64_t n)
{
    atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}
static inline void mc_counter_inc(struct mc_counter *c)
{
    mc_counter_add(c, 1);
}
static inline uint64_t mc_counter_get(struct mc_counter *c)
{
    return atomic_load_explicit(&c->v, memory_order_relaxed);
}

static inline void mc_gauge_set(struct mc_gauge *g, int64_t v)
{
    atomic_store_explicit(&g->v, v, memory_order_relaxed);
}
static inline void mc_gauge_add(struct mc_gauge *g, int64_t d)
{
    atomic_fetch_add_explicit(&g->v, d, memory_order_relaxed);
}
static inline void mc_gauge_inc(struct mc_gauge *g)
{
    mc_gauge_add(g, 1);
}
static inline void mc_gauge_dec(struct mc_gauge *g)
{
    mc_gauge_add(g, -1);
}
static inline int64_t mc_gauge_get(struct mc_gauge *g)
{
    return atomic_load_explicit(&g->v, memory_order_relaxed);
}

static inline uint64_t mc_metrics_dbits_(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}
static inline double mc_metrics_bitsd_(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}
/* Adds d to a double kept as bits in *a (a CAS loop; lock-free). */
static inline void mc_metrics_atomic_add_double_(_Atomic uint64_t *a, double d)
{
    uint64_t old = atomic_load_explicit(a, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(a, &old,
                                                  mc_metrics_dbits_(mc_metrics_bitsd_(old) + d),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

static inline void mc_gauge_f_set(struct mc_gauge_f *g, double v)
{
    atomic_store_explicit(&g->bits, mc_metrics_dbits_(v), memory_order_relaxed);
}
static inline void mc_gauge_f_add(struct mc_gauge_f *g, double d)
{
    mc_metrics_atomic_add_double_(&g->bits, d);
}
static inline double mc_gauge_f_get(struct mc_gauge_f *g)
{
    return mc_metrics_bitsd_(atomic_load_explicit(&g->bits, memory_order_relaxed));
}

/* Records one observation: the first bucket whose bound is >= v (le semantics), else +Inf. */
void mc_histogram_observe(struct mc_histogram *h, double v);
/* Observations so far (sum of every bucket). */
uint64_t mc_histogram_count(struct mc_histogram *h);

/* ---- the registry -------------------------------------------------------------------------- */

struct mc_metrics;

/* NULL-terminated label list for the registration calls: MC_LABELS("path", "selective"). */
#define MC_LABELS(...) ((const char *const[]){__VA_ARGS__, NULL})

typedef double (*mc_metrics_value_fn)(void *arg);
typedef void (*mc_metrics_hook_fn)(void *arg);

struct mc_metrics *mc_metrics_new(void);
void mc_metrics_free(struct mc_metrics *m);

struct mc_counter *mc_metrics_counter(struct mc_metrics *m, const char *name, const char *help,
                                      const char *const *labels);
struct mc_gauge *mc_metrics_gauge(struct mc_metrics *m, const char *name, const char *help,
                                  const char *const *labels);
struct mc_gauge_f *mc_metrics_gauge_f(struct mc_metrics *m, const char *name, const char *help,
                                      const char *const *labels);
/* bounds: nbounds strictly ascending finite upper bounds (copied). */
struct mc_histogram *mc_metrics_histogram(struct mc_metrics *m, const char *name, const char *help,
                                          const char *const *labels, const double *bounds,
                                          size_t nbounds);
/* Series whose value fn(arg) computes at scrape time. Return 0, or -1 on bad arguments. */
int mc_metrics_gauge_fn(struct mc_metrics *m, const char *name, const char *help,
                        const char *const *labels, mc_metrics_value_fn fn, void *arg);
int mc_metrics_counter_fn(struct mc_metrics *m, const char *name, const char *help,
                          const char *const *labels, mc_metrics_value_fn fn, void *arg);
/* Collectors: families whose label sets are only known at scrape time (one series per
 * mounted segment, say). At every render, after the family's HELP/TYPE lines, fn(arg, e) calls
 * mc_metrics_emit(e, labels, value) once per series (labels as for registration, copied and
 * escaped; an invalid label list is skipped). fn runs under the registry mutex like the other
 * callbacks. One collector per name; registering it twice fails. 0, or -1 on bad arguments. */
struct mc_metrics_emitter;
typedef void (*mc_metrics_collect_fn)(void *arg, struct mc_metrics_emitter *e);
int mc_metrics_gauge_collector(struct mc_metrics *m, const char *name, const char *help,
                               mc_metrics_collect_fn fn, void *arg);
int mc_metrics_counter_collector(struct mc_metrics *m, const char *name, const char *help,
                                 mc_metrics_collect_fn fn, void *arg);
/* 0, or -1 when the labels are invalid (nothing emitted). */
int mc_metrics_emit(struct mc_metrics_emitter *e, const char *const *labels, double value);

/* Runs fn(arg) at the start of every render (one hook per registry; NULL removes it). */
void mc_metrics_set_prescrape(struct mc_metrics *m, mc_metrics_hook_fn fn, void *arg);

/* Fills out[0..n) with start, start*factor, start*factor^2, ... (histogram bounds). */
void mc_metrics_exp_buckets(double *out, size_t n, double start, double factor);

/* Appends the Prometheus text exposition of every series to out. 0, or -1 when out of memory. */
int mc_metrics_render(struct mc_metrics *m, struct mc_textbuf *out);

/* Content-Type of the rendered text. */
#define MC_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
