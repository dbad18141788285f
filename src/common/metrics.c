/*
 * metrics.c - see metrics.h.
 *
 * The registry is a list of families (in registration order), each with a list of series.
 * Series are allocated one by one, so the handles given out never move; the public handle
 * struct is embedded in the series. A series' label text ('path="selective",node="a"') is
 * escaped once at registration and reused by every render. Floating-point values are printed
 * with the shortest "%.*g" that reads back exactly; integers as integers.
 */
#include "common/metrics.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum family_type { FAM_COUNTER, FAM_GAUGE, FAM_HISTOGRAM };
enum series_kind { S_COUNTER, S_GAUGE, S_GAUGE_F, S_HISTOGRAM, S_FN, S_COLLECT };

struct series {
    struct series *next;
    enum series_kind kind;
    char *labels; /* escaped 'a="b",c="d"' or "" */
    union {
        struct mc_counter counter;
        struct mc_gauge gauge;
        struct mc_gauge_f gauge_f;
        struct mc_histogram hist;
        struct {
            mc_metrics_value_fn fn;
            void *arg;
        } cb;
        struct {
            mc_metrics_collect_fn fn;
            void *arg;
        } coll;
    } u;
};

struct family {
    struct family *next;
    char *name, *help;
    enum family_type type;
    struct series *first, *last;
};

struct mc_metrics {
    pthread_mutex_t mu;
    struct family *first, *last;
    mc_metrics_hook_fn prescrape;
    void *prescrape_arg;
};

/* ---- text buffer ---------------------------------------------------------------------------- */

void mc_textbuf_init(struct mc_textbuf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

void mc_textbuf_destroy(struct mc_textbuf *b)
{
    free(b->data);
    mc_textbuf_init(b);
}

static int textbuf_reserve(struct mc_textbuf *b, size_t extra)
{
    size_t need, cap;
    char *p;

    if (b->failed)
        return -1;
    if (extra > SIZE_MAX / 2 - b->len)
        goto fail;
    need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    p = realloc(b->data, cap);
    if (!p)
        goto fail;
    b->data = p;
    b->cap = cap;
    return 0;
fail:
    b->failed = 1;
    return -1;
}

int mc_textbuf_append(struct mc_textbuf *b, const char *s, size_t n)
{
    if (textbuf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int mc_textbuf_printf(struct mc_textbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (textbuf_reserve(b, 64) < 0)
        return -1;
    va_start(ap, fmt);
    n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        b->data[b->len] = '\0';
        return -1;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (textbuf_reserve(b, (size_t)n) < 0) {
            b->data[b->len] = '\0';
            return -1;
        }
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
    return 0;
}

char *mc_textbuf_steal(struct mc_textbuf *b, size_t *len)
{
    char *p = b->data;
    if (len)
        *len = b->len;
    mc_textbuf_init(b);
    return p;
}

/* ---- histogram ------------------------------------------------------------------------------ */

void mc_histogram_observe(struct mc_histogram *h, double v)
{
    size_t lo = 0, hi = h->nbounds;

    if (isnan(v))
        return;
    while (lo < hi) { /* first bound >= v */
        size_t mid = lo + (hi - lo) / 2;
        if (h->bounds[mid] >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit(&h->count[lo], 1, memory_order_relaxed);
    mc_metrics_atomic_add_double_(&h->sum_bits, v);
}

uint64_t mc_histogram_count(struct mc_histogram *h)
{
    uint64_t n = 0;
    for (size_t i = 0; i <= h->nbounds; i++)
        n += atomic_load_explicit(&h->count[i], memory_order_relaxed);
    return n;
}

void mc_metrics_exp_buckets(double *out, size_t n, double start, double factor)
{
    double v = start;
    for (size_t i = 0; i < n; i++) {
        out[i] = v;
        v *= factor;
    }
}

/* ---- registration --------------------------------------------------------------------------- */

struct mc_metrics *mc_metrics_new(void)
{
    struct mc_metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

static void series_free(struct series *s)
{
    if (s->kind == S_HISTOGRAM) {
        free(s->u.hist.bounds);
        free((void *)s->u.hist.count);
    }
    free(s->labels);
    free(s);
}

void mc_metrics_free(struct mc_metrics *m)
{
    struct family *f, *fn;
    struct series *s, *sn;

    if (!m)
        return;
    for (f = m->first; f; f = fn) {
        fn = f->next;
        for (s = f->first; s; s = sn) {
            sn = s->next;
            series_free(s);
        }
        free(f->name);
        free(f->help);
        free(f);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static int valid_name(const char *s, int allow_colon)
{
    if (!s || !*s)
        return 0;
    if (!(isalpha((unsigned char)*s) || *s == '_' || (allow_colon && *s == ':')))
        return 0;
    for (s++; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || (allow_colon && *s == ':')))
            return 0;
    return 1;
}

/* Appends s with '\\', '"' (when quote) and newlines escaped as the text format requires. */
static void append_escaped(struct mc_textbuf *b, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            mc_textbuf_append(b, "\\\\", 2);
        else if (*s == '\n')
            mc_textbuf_append(b, "\\n", 2);
        else if (*s == '"' && quote)
            mc_textbuf_append(b, "\\\"", 2);
        else
            mc_textbuf_append(b, s, 1);
    }
}

/* Builds the escaped label text; NULL on bad names or no memory. */
static char *labels_text(const char *const *labels)
{
    struct mc_textbuf b;

    mc_textbuf_init(&b);
    mc_textbuf_append(&b, "", 0);
    for (size_t i = 0; labels && labels[i]; i += 2) {
        if (!labels[i + 1] || !valid_name(labels[i], 0) || strcmp(labels[i], "le") == 0 ||
            strncmp(labels[i], "__", 2) == 0)
            goto fail;
        for (size_t j = 0; j < i; j += 2)
            if (strcmp(labels[j], labels[i]) == 0)
                goto fail;
        mc_textbuf_printf(&b, "%s%s=\"", i ? "," : "", labels[i]);
        append_escaped(&b, labels[i + 1], 1);
        mc_textbuf_append(&b, "\"", 1);
    }
    if (b.failed)
        goto fail;
    return mc_textbuf_steal(&b, NULL);
fail:
    mc_textbuf_destroy(&b);
    return NULL;
}

static enum family_type kind_family(enum series_kind k, enum family_type fn_type)
{
    switch (k) {
    case S_COUNTER:
        return FAM_COUNTER;
    case S_HISTOGRAM:
        return FAM_HISTOGRAM;
    case S_FN:
    case S_COLLECT:
        return fn_type;
    default:
        return FAM_GAUGE;
    }
}

/*
 * Finds or creates the series (name, labels) of the given kind. For S_FN, fn_type says whether
 * it is a counter or a gauge. A new series gets its handle contents from init (when non-NULL)
 * while the registry lock is held, so a concurrent render never sees it half-built. An existing
 * series is returned only for plain kinds; callbacks and histograms are never merged. Returns
 * the series with *created set, or NULL.
 */
static struct series *get_series(struct mc_metrics *m, const char *name, const char *help,
                                 const char *const *labels, enum series_kind kind,
                                 enum family_type fn_type, const struct series *init, int *created)
{
    enum family_type type = kind_family(kind, fn_type);
    struct family *f;
    struct series *s = NULL;
    char *lt = NULL;

    *created = 0;
    if (!m || !valid_name(name, 1))
        return NULL;
    lt = labels_text(labels);
    if (!lt)
        return NULL;
    pthread_mutex_lock(&m->mu);
    for (f = m->first; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            break;
    if (f && f->type != type)
        goto out_fail;
    if (f) {
        for (s = f->first; s; s = s->next) {
            if (strcmp(s->labels, lt) != 0)
                continue;
            if (s->kind != kind || kind == S_FN || kind == S_COLLECT || kind == S_HISTOGRAM)
                s = NULL; /* callbacks and bounds cannot be merged: refuse */
            goto out;
        }
    } else {
        f = calloc(1, sizeof(*f));
        if (!f)
            goto out_fail;
        f->name = strdup(name);
        f->help = strdup(help ? help : "");
        f->type = type;
        if (!f->name || !f->help) {
            free(f->name);
            free(f->help);
            free(f);
            goto out_fail;
        }
        if (m->last)
            m->last->next = f;
        else
            m->first = f;
        m->last = f;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        goto out_fail;
    if (init)
        s->u = init->u;
    s->kind = kind;
    s->labels = lt;
    lt = NULL;
    if (f->last)
        f->last->next = s;
    else
        f->first = s;
    f->last = s;
    *created = 1;
out:
    pthread_mutex_unlock(&m->mu);
    free(lt);
    return s;
out_fail:
    s = NULL;
    goto out;
}

struct mc_counter *mc_metrics_counter(struct mc_metrics *m, const char *name, const char *help,
                                      const char *const *labels)
{
    int created;
    struct series *s = get_series(m, name, help, labels, S_COUNTER, FAM_COUNTER, NULL, &created);
    return s ? &s->u.counter : NULL;
}

struct mc_gauge *mc_metrics_gauge(struct mc_metrics *m, const char *name, const char *help,
                                  const char *const *labels)
{
    int created;
    struct series *s = get_series(m, name, help, labels, S_GAUGE, FAM_GAUGE, NULL, &created);
    return s ? &s->u.gauge : NULL;
}

struct mc_gauge_f *mc_metrics_gauge_f(struct mc_metrics *m, const char *name, const char *help,
                                      const char *const *labels)
{
    struct series init;
    int created;
    atomic_init(&init.u.gauge_f.bits, mc_metrics_dbits_(0.0));
    struct series *s = get_series(m, name, help, labels, S_GAUGE_F, FAM_GAUGE, &init, &created);
    return s ? &s->u.gauge_f : NULL;
}

struct mc_histogram *mc_metrics_histogram(struct mc_metrics *m, const char *name, const char *help,
                                          const char *const *labels, const double *bounds,
                                          size_t nbounds)
{
    double *b = NULL;
    _Atomic uint64_t *c = NULL;
    struct series init, *s;
    int created;

    if (nbounds > 4096 || (nbounds && !bounds))
        return NULL;
    for (size_t i = 0; i < nbounds; i++)
        if (!isfinite(bounds[i]) || (i && !(bounds[i] > bounds[i - 1])))
            return NULL;
    b = malloc((nbounds ? nbounds : 1) * sizeof(*b));
    c = calloc(nbounds + 1, sizeof(*c));
    if (!b || !c)
        goto fail;
    if (nbounds)
        memcpy(b, bounds, nbounds * sizeof(*b));
    init.u.hist.nbounds = nbounds;
    init.u.hist.bounds = b;
    init.u.hist.count = c;
    atomic_init(&init.u.hist.sum_bits, mc_metrics_dbits_(0.0));
    s = get_series(m, name, help, labels, S_HISTOGRAM, FAM_HISTOGRAM, &init, &created);
    if (!s)
        goto fail;
    return &s->u.hist;
fail:
    free(b);
    free((void *)c);
    return NULL;
}

static int register_fn(struct mc_metrics *m, const char *name, const char *help,
                       const char *const *labels, mc_metrics_value_fn fn, void *arg,
                       enum family_type type)
{
    struct series init;
    int created;

    if (!fn)
        return -1;
    init.u.cb.fn = fn;
    init.u.cb.arg = arg;
    return get_series(m, name, help, labels, S_FN, type, &init, &created) ? 0 : -1;
}

int mc_metrics_gauge_fn(struct mc_metrics *m, const char *name, const char *help,
                        const char *const *labels, mc_metrics_value_fn fn, void *arg)
{
    return register_fn(m, name, help, labels, fn, arg, FAM_GAUGE);
}

int mc_metrics_counter_fn(struct mc_metrics *m, const char *name, const char *help,
                          const char *const *labels, mc_metrics_value_fn fn, void *arg)
{
    return register_fn(m, name, help, labels, fn, arg, FAM_COUNTER);
}

static int register_collector(struct mc_metrics *m, const char *name, const char *help,
                              mc_metrics_collect_fn fn, void *arg, enum family_type type)
{
    struct series init;
    int created;

    if (!fn)
        return -1;
    init.u.coll.fn = fn;
    init.u.coll.arg = arg;
    return get_series(m, name, help, NULL, S_COLLECT, type, &init, &created) ? 0 : -1;
}

int mc_metrics_gauge_collector(struct mc_metrics *m, const char *name, const char *help,
                               mc_metrics_collect_fn fn, void *arg)
{
    return register_collector(m, name, help, fn, arg, FAM_GAUGE);
}

int mc_metrics_counter_collector(struct mc_metrics *m, const char *name, const char *help,
                                 mc_metrics_collect_fn fn, void *arg)
{
    return register_collector(m, name, help, fn, arg, FAM_COUNTER);
}

void mc_metrics_set_prescrape(struct mc_metrics *m, mc_metrics_hook_fn fn, void *arg)
{
    pthread_mutex_lock(&m->mu);
    m->prescrape = fn;
    m->prescrape_arg = arg;
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ------------------------------------------------------------------------------ */

static void format_double(char *buf, size_t len, double v)
{
    if (isnan(v)) {
        snprintf(buf, len, "NaN");
    } else if (isinf(v)) {
        snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(buf, len, "%.0f", v);
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, len, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    }
}

/* NAME{labels[,extra]} value */
static void sample_line(struct mc_textbuf *b, const char *name, const char *suffix,
                        const char *labels, const char *extra, const char *value)
{
    mc_textbuf_printf(b, "%s%s", name, suffix);
    if (*labels || extra) {
        mc_textbuf_printf(b, "{%s%s%s}", labels, (*labels && extra) ? "," : "", extra ? extra : "");
    }
    mc_textbuf_printf(b, " %s\n", value);
}

struct mc_metrics_emitter {
    struct mc_textbuf *b;
    const struct family *f;
};

int mc_metrics_emit(struct mc_metrics_emitter *e, const char *const *labels, double value)
{
    char v[64];
    char *lt = labels_text(labels);
    if (!lt)
        return -1;
    format_double(v, sizeof(v), value);
    sample_line(e->b, e->f->name, "", lt, NULL, v);
    free(lt);
    return 0;
}

static void render_series(struct mc_textbuf *b, const struct family *f, struct series *s)
{
    char v[64], le[80];

    switch (s->kind) {
    case S_COLLECT: {
        struct mc_metrics_emitter e = {b, f};
        s->u.coll.fn(s->u.coll.arg, &e);
        return;
    }
    case S_COUNTER:
        snprintf(v, sizeof(v), "%llu", (unsigned long long)mc_counter_get(&s->u.counter));
        break;
    case S_GAUGE:
        snprintf(v, sizeof(v), "%lld", (long long)mc_gauge_get(&s->u.gauge));
        break;
    case S_GAUGE_F:
        format_double(v, sizeof(v), mc_gauge_f_get(&s->u.gauge_f));
        break;
    case S_FN:
        format_double(v, sizeof(v), s->u.cb.fn ? s->u.cb.fn(s->u.cb.arg) : 0.0);
        break;
    case S_HISTOGRAM: {
        struct mc_histogram *h = &s->u.hist;
        uint64_t cum = 0;
        for (size_t i = 0; i <= h->nbounds; i++) {
            char bound[40];
            cum += atomic_load_explicit(&h->count[i], memory_order_relaxed);
            if (i < h->nbounds)
                format_double(bound, sizeof(bound), h->bounds[i]);
            else
                snprintf(bound, sizeof(bound), "+Inf");
            snprintf(le, sizeof(le), "le=\"%s\"", bound);
            snprintf(v, sizeof(v), "%llu", (unsigned long long)cum);
            sample_line(b, f->name, "_bucket", s->labels, le, v);
        }
        format_double(v, sizeof(v),
                      mc_metrics_bitsd_(atomic_load_explicit(&h->sum_bits, memory_order_relaxed)));
        sample_line(b, f->name, "_sum", s->labels, NULL, v);
        snprintf(v, sizeof(v), "%llu", (unsigned long long)cum);
        sample_line(b, f->name, "_count", s->labels, NULL, v);
        return;
    }
    }
    sample_line(b, f->name, "", s->labels, NULL, v);
}

int mc_metrics_render(struct mc_metrics *m, struct mc_textbuf *out)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};

    pthread_mutex_lock(&m->mu);
    if (m->prescrape)
        m->prescrape(m->prescrape_arg);
    for (struct family *f = m->first; f; f = f->next) {
        mc_textbuf_printf(out, "# HELP %s ", f->name);
        append_escaped(out, f->help, 0);
        mc_textbuf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
        for (struct series *s = f->first; s; s = s->next)
            render_series(out, f, s);
    }
    pthread_mutex_unlock(&m->mu);
    return out->failed ? -1 : 0;
}
