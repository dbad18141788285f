/*
 * test_metrics.c - the metrics registry and its Prometheus text exposition (common/metrics.h).
 *
 * The rendered text is read back by a small parser of the text format (version 0.0.4) written
 * here, which also enforces the format's rules: every line well formed, at most one HELP and
 * one TYPE per family and both before its samples, a family's samples contiguous, no duplicate
 * series, counters non-negative, histogram buckets ascending and cumulative with le="+Inf"
 * equal to _count. Tests then assert values through the parser rather than by string equality
 * (a few exact lines are checked as well, to pin the spelling).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/metrics.h"

/* ---- a Prometheus text-format parser --------------------------------------------------------- */

#define MAXS 1024
#define MAXF 128
#define MAXL 8

struct sample {
    char name[128];
    int nl;
    char lk[MAXL][64], lv[MAXL][256];
    double value;
    int fam;
};
struct fam {
    char name[128], type[16], help[256];
    int has_help, has_type, has_samples, closed;
};
struct expo {
    struct sample s[MAXS];
    int ns;
    struct fam f[MAXF];
    int nf;
    char err[256];
};

static int perr(struct expo *e, int line, const char *why)
{
    snprintf(e->err, sizeof(e->err), "line %d: %s", line, why);
    return -1;
}

static int name_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Reads a metric or label name at *p into out. */
static int read_name(const char **p, char *out, size_t len)
{
    size_t n = 0;
    if (!name_char(**p, 1))
        return -1;
    while (name_char(**p, n == 0) && n + 1 < len)
        out[n++] = *(*p)++;
    out[n] = '\0';
    return name_char(**p, 0) ? -1 : 0;
}

static int read_value(const char *s, double *v)
{
    char *end;
    if (strcmp(s, "+Inf") == 0) {
        *v = INFINITY;
        return 0;
    }
    if (strcmp(s, "-Inf") == 0) {
        *v = -INFINITY;
        return 0;
    }
    if (strcmp(s, "NaN") == 0) {
        *v = NAN;
        return 0;
    }
    if (!*s)
        return -1;
    *v = strtod(s, &end);
    return *end ? -1 : 0;
}

static int find_fam(struct expo *e, const char *name)
{
    for (int i = 0; i < e->nf; i++)
        if (strcmp(e->f[i].name, name) == 0)
            return i;
    return -1;
}

static int get_fam(struct expo *e, const char *name)
{
    int i = find_fam(e, name);
    if (i >= 0 || e->nf == MAXF)
        return i;
    memset(&e->f[e->nf], 0, sizeof(e->f[0]));
    snprintf(e->f[e->nf].name, sizeof(e->f[0].name), "%s", name);
    return e->nf++;
}

/* The family a sample belongs to: itself, or NAME for a histogram's NAME_bucket/_sum/_count. */
static int sample_fam(struct expo *e, const char *name)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    size_t n = strlen(name);
    for (int k = 0; k < 3; k++) {
        size_t m = strlen(sfx[k]);
        if (n > m && strcmp(name + n - m, sfx[k]) == 0) {
            char base[128];
            snprintf(base, sizeof(base), "%.*s", (int)(n - m), name);
            int i = find_fam(e, base);
            if (i >= 0 && strcmp(e->f[i].type, "histogram") == 0)
                return i;
        }
    }
    return get_fam(e, name);
}

static int labels_equal_except_le(const struct sample *a, const struct sample *b)
{
    int na = 0, nb = 0;
    for (int i = 0; i < a->nl; i++) {
        if (strcmp(a->lk[i], "le") == 0)
            continue;
        na++;
        int found = 0;
        for (int j = 0; j < b->nl; j++)
            if (strcmp(a->lk[i], b->lk[j]) == 0 && strcmp(a->lv[i], b->lv[j]) == 0)
                found = 1;
        if (!found)
            return 0;
    }
    for (int j = 0; j < b->nl; j++)
        nb += strcmp(b->lk[j], "le") != 0;
    return na == nb;
}

static const char *label(const struct sample *s, const char *k)
{
    for (int i = 0; i < s->nl; i++)
        if (strcmp(s->lk[i], k) == 0)
            return s->lv[i];
    return NULL;
}

/* Histogram rules for family fi. */
static int check_histogram(struct expo *e, int fi)
{
    char nb[160], ns[160], nc[160];
    snprintf(nb, sizeof(nb), "%s_bucket", e->f[fi].name);
    snprintf(ns, sizeof(ns), "%s_sum", e->f[fi].name);
    snprintf(nc, sizeof(nc), "%s_count", e->f[fi].name);
    for (int i = 0; i < e->ns; i++) {
        struct sample *c = &e->s[i];
        if (c->fam != fi || strcmp(c->name, nc) != 0)
            continue;
        double prev_le = -INFINITY, prev_v = 0, inf_v = -1;
        int has_sum = 0;
        for (int j = 0; j < e->ns; j++) {
            struct sample *b = &e->s[j];
            if (b->fam != fi || !labels_equal_except_le(b, c))
                continue;
            if (strcmp(b->name, ns) == 0)
                has_sum = 1;
            if (strcmp(b->name, nb) != 0)
                continue;
            double le;
            if (!label(b, "le") || read_value(label(b, "le"), &le) < 0)
                return perr(e, 0, "bucket without a valid le");
            if (!(le > prev_le))
                return perr(e, 0, "bucket bounds not ascending");
            if (b->value < prev_v)
                return perr(e, 0, "bucket counts not cumulative");
            prev_le = le;
            prev_v = b->value;
            if (isinf(le))
                inf_v = b->value;
        }
        if (inf_v < 0)
            return perr(e, 0, "histogram without le=\"+Inf\"");
        if (inf_v != c->value)
            return perr(e, 0, "le=\"+Inf\" differs from _count");
        if (!has_sum)
            return perr(e, 0, "histogram without _sum");
    }
    return 0;
}

static int parse_expo(const char *text, struct expo *e)
{
    int line = 0, cur = -1;
    memset(e, 0, sizeof(*e));
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        char buf[1024];
        line++;
        if (!nl)
            return perr(e, line, "last line not terminated");
        if ((size_t)(nl - p) >= sizeof(buf))
            return perr(e, line, "line too long");
        memcpy(buf, p, (size_t)(nl - p));
        buf[nl - p] = '\0';
        p = nl + 1;
        if (buf[0] == '#') {
            char kind[8], name[128];
            const char *q = buf + 1;
            int n = 0;
            if (sscanf(q, " %7s %n", kind, &n) != 1)
                return perr(e, line, "bad comment");
            q += n;
            if (strcmp(kind, "HELP") != 0 && strcmp(kind, "TYPE") != 0)
                continue; /* a plain comment */
            if (read_name(&q, name, sizeof(name)) < 0 || (*q != ' ' && *q != '\0'))
                return perr(e, line, "bad metric name in HELP/TYPE");
            if (*q == ' ')
                q++;
            int fi = get_fam(e, name);
            if (fi < 0)
                return perr(e, line, "too many families");
            struct fam *f = &e->f[fi];
            if (f->has_samples)
                return perr(e, line, "HELP/TYPE after samples");
            if (strcmp(kind, "HELP") == 0) {
                size_t k = 0;
                if (f->has_help++)
                    return perr(e, line, "second HELP");
                for (; *q && k + 1 < sizeof(f->help); q++) {
                    if (*q == '\\') {
                        q++;
                        if (*q == 'n')
                            f->help[k++] = '\n';
                        else if (*q == '\\')
                            f->help[k++] = '\\';
                        else
                            return perr(e, line, "bad escape in HELP");
                    } else {
                        f->help[k++] = *q;
                    }
                }
                f->help[k] = '\0';
            } else {
                if (f->has_type++)
                    return perr(e, line, "second TYPE");
                if (strcmp(q, "counter") && strcmp(q, "gauge") && strcmp(q, "histogram") &&
                    strcmp(q, "summary") && strcmp(q, "untyped"))
                    return perr(e, line, "unknown TYPE");
                snprintf(f->type, sizeof(f->type), "%s", q);
            }
            if (cur >= 0 && cur != fi)
                e->f[cur].closed = 1;
            if (f->closed)
                return perr(e, line, "family reopened");
            cur = fi;
            continue;
        }
        if (e->ns == MAXS)
            return perr(e, line, "too many samples");
        struct sample *s = &e->s[e->ns];
        const char *q = buf;
        memset(s, 0, sizeof(*s));
        if (read_name(&q, s->name, sizeof(s->name)) < 0)
            return perr(e, line, "bad sample name");
        if (*q == '{') {
            q++;
            while (*q != '}') {
                if (s->nl == MAXL)
                    return perr(e, line, "too many labels");
                if (read_name(&q, s->lk[s->nl], sizeof(s->lk[0])) < 0 || *q++ != '=' || *q++ != '"')
                    return perr(e, line, "bad label");
                size_t k = 0;
                for (; *q && *q != '"'; q++) {
                    char c = *q;
                    if (c == '\\') {
                        q++;
                        c = *q == 'n' ? '\n' : *q;
                        if (*q != 'n' && *q != '\\' && *q != '"')
                            return perr(e, line, "bad escape in label value");
                    }
                    if (k + 1 >= sizeof(s->lv[0]))
                        return perr(e, line, "label value too long");
                    s->lv[s->nl][k++] = c;
                }
                if (*q++ != '"')
                    return perr(e, line, "unterminated label value");
                s->lv[s->nl][k] = '\0';
                for (int j = 0; j < s->nl; j++)
                    if (strcmp(s->lk[j], s->lk[s->nl]) == 0)
                        return perr(e, line, "duplicate label");
                s->nl++;
                if (*q == ',')
                    q++;
                else if (*q != '}')
                    return perr(e, line, "bad label separator");
            }
            q++;
        }
        if (*q++ != ' ')
            return perr(e, line, "no space before the value");
        if (strchr(q, ' '))
            return perr(e, line, "timestamps are not expected");
        if (read_value(q, &s->value) < 0)
            return perr(e, line, "bad value");
        s->fam = sample_fam(e, s->name);
        if (s->fam < 0)
            return perr(e, line, "too many families");
        struct fam *f = &e->f[s->fam];
        if (cur >= 0 && cur != s->fam)
            e->f[cur].closed = 1;
        if (f->closed)
            return perr(e, line, "family samples not contiguous");
        cur = s->fam;
        f->has_samples = 1;
        if (strcmp(f->type, "counter") == 0 && !(s->value >= 0))
            return perr(e, line, "negative counter");
        for (int i = 0; i < e->ns; i++) {
            if (strcmp(e->s[i].name, s->name) != 0 || e->s[i].nl != s->nl)
                continue;
            int same = 1;
            for (int j = 0; j < s->nl; j++) {
                const char *v = label(&e->s[i], s->lk[j]);
                same &= v && strcmp(v, s->lv[j]) == 0;
            }
            if (same)
                return perr(e, line, "duplicate series");
        }
        e->ns++;
    }
    for (int i = 0; i < e->nf; i++)
        if (strcmp(e->f[i].type, "histogram") == 0 && check_histogram(e, i) < 0)
            return -1;
    return 0;
}

/* Renders m, parses it (failing the test on any format error) and returns the text. */
static char *render_parse(struct mc_metrics *m, struct expo *e)
{
    struct mc_textbuf b;
    mc_textbuf_init(&b);
    assert_int_equal(mc_metrics_render(m, &b), 0);
    char *text = mc_textbuf_steal(&b, NULL);
    if (!text)
        text = strdup("");
    if (parse_expo(text, e) < 0)
        fail_msg("bad exposition: %s\n%s", e->err, text);
    return text;
}

/* The sample NAME with exactly the labels "k=v,k2=v2" (any order); NULL when absent. */
static const struct sample *find(const struct expo *e, const char *name, const char *labels)
{
    for (int i = 0; i < e->ns; i++) {
        const struct sample *s = &e->s[i];
        int want = 0, ok = 1;
        if (strcmp(s->name, name) != 0)
            continue;
        char tmp[512];
        snprintf(tmp, sizeof(tmp), "%s", labels ? labels : "");
        for (char *tok = strtok(tmp, ","); tok; tok = strtok(NULL, ",")) {
            char *eq = strchr(tok, '=');
            want++;
            *eq = '\0';
            const char *v = label(s, tok);
            ok &= v && strcmp(v, eq + 1) == 0;
        }
        if (ok && want == s->nl)
            return s;
    }
    return NULL;
}

static double value(const struct expo *e, const char *name, const char *labels)
{
    const struct sample *s = find(e, name, labels);
    if (!s)
        fail_msg("no sample %s{%s}", name, labels ? labels : "");
    return s->value;
}

static const struct fam *family(const struct expo *e, const char *name)
{
    for (int i = 0; i < e->nf; i++)
        if (strcmp(e->f[i].name, name) == 0)
            return &e->f[i];
    fail_msg("no family %s", name);
    return NULL;
}

/* ---- tests ----------------------------------------------------------------------------------- */

static struct expo g_e;

static void test_parser_rejects_bad_text(void **state)
{
    static const char *const bad[] = {
        "x 1",                                       /* no newline */
        "x{a=\"1\" 1\n",                             /* unterminated labels */
        "# TYPE x counter\nx -1\n",                  /* negative counter */
        "x 1\ny 1\nx 2\n",                           /* family not contiguous */
        "x 1\nx 2\n",                                /* duplicate series */
        "# TYPE x counter\n# TYPE x counter\nx 1\n", /* two TYPEs */
        "x 1\n# HELP x late\n",                      /* HELP after samples */
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
        "x abc\n",
        "9x 1\n",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (parse_expo(bad[i], &g_e) == 0)
            fail_msg("parser accepted bad text #%zu:\n%s", i, bad[i]);
    assert_int_equal(parse_expo("# a comment\nx{a=\"q\\\"\"} +Inf\ny NaN\n", &g_e), 0);
    assert_string_equal(g_e.s[0].lv[0], "q\"");
}

static void test_empty_and_zero_values(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    assert_non_null(m);
    char *t = render_parse(m, &g_e);
    assert_string_equal(t, "");
    free(t);

    static const double bounds[] = {0.5, 1, 2.5};
    assert_non_null(
        mc_metrics_counter(m, "master_put_start_requests_total", "PutStart calls", NULL));
    assert_non_null(mc_metrics_gauge(m, "master_key_count", "objects", NULL));
    assert_non_null(mc_metrics_gauge_f(m, "master_used_ratio", "allocated / capacity", NULL));
    assert_non_null(mc_metrics_histogram(m, "rpc_latency_ms", "RPC latency", NULL, bounds, 3));
    t = render_parse(m, &g_e);
    /* every series is present although nothing was ever recorded */
    assert_true(value(&g_e, "master_put_start_requests_total", NULL) == 0);
    assert_true(value(&g_e, "master_key_count", NULL) == 0);
    assert_true(value(&g_e, "master_used_ratio", NULL) == 0);
    assert_true(value(&g_e, "rpc_latency_ms_bucket", "le=0.5") == 0);
    assert_true(value(&g_e, "rpc_latency_ms_bucket", "le=+Inf") == 0);
    assert_true(value(&g_e, "rpc_latency_ms_sum", NULL) == 0);
    assert_true(value(&g_e, "rpc_latency_ms_count", NULL) == 0);
    assert_string_equal(family(&g_e, "master_put_start_requests_total")->type, "counter");
    assert_string_equal(family(&g_e, "master_key_count")->type, "gauge");
    assert_string_equal(family(&g_e, "master_used_ratio")->type, "gauge");
    assert_string_equal(family(&g_e, "rpc_latency_ms")->type, "histogram");
    assert_string_equal(family(&g_e, "master_key_count")->help, "objects");
    /* registration order is kept, and the exact spelling of a few lines */
    static const char head[] = "# HELP master_put_start_requests_total PutStart calls\n"
                               "# TYPE master_put_start_requests_total counter\n"
                               "master_put_start_requests_total 0\n"
                               "# HELP master_key_count objects\n";
    assert_true(strncmp(t, head, strlen(head)) == 0);
    assert_non_null(strstr(t, "rpc_latency_ms_bucket{le=\"2.5\"} 0\n"));
    free(t);
    mc_metrics_free(m);
}

static void test_values(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    static const double bounds[] = {1, 10, 100};
    struct mc_counter *c = mc_metrics_counter(m, "ops_total", "ops", NULL);
    struct mc_gauge *g = mc_metrics_gauge(m, "in_flight", "in flight", NULL);
    struct mc_gauge_f *gf = mc_metrics_gauge_f(m, "ratio", "a ratio", NULL);
    struct mc_histogram *h = mc_metrics_histogram(m, "lat_ms", "latency", NULL, bounds, 3);

    mc_counter_inc(c);
    mc_counter_add(c, UINT64_C(10000000000));
    mc_gauge_set(g, 5);
    mc_gauge_dec(g);
    mc_gauge_add(g, -10);
    mc_gauge_f_set(gf, 0.1);
    mc_gauge_f_add(gf, 0.2);
    mc_histogram_observe(h, 0.5);
    mc_histogram_observe(h, 1); /* le is inclusive */
    mc_histogram_observe(h, 5);
    mc_histogram_observe(h, 1000);
    mc_histogram_observe(h, NAN); /* dropped */
    assert_int_equal(mc_histogram_count(h), 4);
    assert_int_equal(mc_counter_get(c), 10000000001ull);
    assert_int_equal(mc_gauge_get(g), -6);

    char *t = render_parse(m, &g_e);
    assert_true(value(&g_e, "ops_total", NULL) == 10000000001.0);
    assert_non_null(strstr(t, "ops_total 10000000001\n")); /* integers stay integers */
    assert_true(value(&g_e, "in_flight", NULL) == -6);
    assert_true(value(&g_e, "ratio", NULL) == 0.1 + 0.2); /* printed so it reads back exactly */
    assert_true(value(&g_e, "lat_ms_bucket", "le=1") == 2);
    assert_true(value(&g_e, "lat_ms_bucket", "le=10") == 3);
    assert_true(value(&g_e, "lat_ms_bucket", "le=100") == 3);
    assert_true(value(&g_e, "lat_ms_bucket", "le=+Inf") == 4);
    assert_true(value(&g_e, "lat_ms_count", NULL) == 4);
    assert_true(value(&g_e, "lat_ms_sum", NULL) == 1006.5);
    free(t);

    mc_gauge_f_set(gf, INFINITY);
    t = render_parse(m, &g_e);
    assert_true(isinf(value(&g_e, "ratio", NULL)));
    free(t);
    mc_metrics_free(m);
}

static void test_labels(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    struct mc_counter *sel = mc_metrics_counter(m, "master_evict_total", "evictions by path",
                                                MC_LABELS("path", "selective"));
    struct mc_counter *full = mc_metrics_counter(m, "master_evict_total", "ignored second help",
                                                 MC_LABELS("path", "full"));
    struct mc_gauge *odd = mc_metrics_gauge(m, "weird", "help with \\ and\nnewline",
                                            MC_LABELS("v", "a\"b\\c\nd", "node", "n1"));
    static const double b[] = {1};
    struct mc_histogram *h =
        mc_metrics_histogram(m, "bytes", "sizes", MC_LABELS("tier", "disk"), b, 1);
    struct mc_histogram *h2 =
        mc_metrics_histogram(m, "bytes", "sizes", MC_LABELS("tier", "dram"), b, 1);

    assert_non_null(sel);
    assert_non_null(full);
    assert_ptr_not_equal(sel, full);
    assert_non_null(odd);
    assert_non_null(h);
    assert_non_null(h2);
    mc_counter_add(sel, 3);
    mc_counter_add(full, 4);
    mc_gauge_set(odd, 9);
    mc_histogram_observe(h, 2);
    mc_histogram_observe(h2, 0.5);

    char *t = render_parse(m, &g_e);
    assert_true(value(&g_e, "master_evict_total", "path=selective") == 3);
    assert_true(value(&g_e, "master_evict_total", "path=full") == 4);
    assert_null(find(&g_e, "master_evict_total", NULL));
    assert_string_equal(family(&g_e, "master_evict_total")->help, "evictions by path");
    const struct sample *w = find(&g_e, "weird", "node=n1,v=a\"b\\c\nd");
    assert_non_null(w);
    assert_true(w->value == 9);
    assert_string_equal(family(&g_e, "weird")->help, "help with \\ and\nnewline");
    assert_true(value(&g_e, "bytes_bucket", "tier=disk,le=1") == 0);
    assert_true(value(&g_e, "bytes_bucket", "tier=disk,le=+Inf") == 1);
    assert_true(value(&g_e, "bytes_bucket", "tier=dram,le=1") == 1);
    assert_true(value(&g_e, "bytes_count", "tier=dram") == 1);
    /* exactly one HELP/TYPE pair for the two evict series */
    const char *first = strstr(t, "# TYPE master_evict_total");
    assert_non_null(first);
    assert_null(strstr(first + 1, "# TYPE master_evict_total"));
    assert_non_null(strstr(t, "bytes_bucket{tier=\"disk\",le=\"+Inf\"} 1\n"));
    free(t);
    mc_metrics_free(m);
}

static void test_registration_rules(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    static const double ok[] = {1, 2}, unsorted[] = {2, 1}, dup[] = {1, 1};
    const double inf[] = {1, INFINITY};

    struct mc_counter *c = mc_metrics_counter(m, "a_total", "a", MC_LABELS("k", "v"));
    assert_non_null(c);
    /* same name and labels: the same handle */
    assert_ptr_equal(mc_metrics_counter(m, "a_total", "a", MC_LABELS("k", "v")), c);
    /* same name, other type: refused */
    assert_null(mc_metrics_gauge(m, "a_total", "a", NULL));
    assert_null(mc_metrics_histogram(m, "a_total", "a", NULL, ok, 2));
    /* bad metric names */
    assert_null(mc_metrics_counter(m, "", "x", NULL));
    assert_null(mc_metrics_counter(m, NULL, "x", NULL));
    assert_null(mc_metrics_counter(m, "9lives", "x", NULL));
    assert_null(mc_metrics_counter(m, "has space", "x", NULL));
    assert_null(mc_metrics_counter(m, "dash-name", "x", NULL));
    assert_non_null(mc_metrics_counter(m, "ns:sub_total", "colons are fine", NULL));
    /* bad labels: reserved, duplicated, badly named, missing value */
    assert_null(mc_metrics_counter(m, "b_total", "b", MC_LABELS("le", "1")));
    assert_null(mc_metrics_counter(m, "b_total", "b", MC_LABELS("__x", "1")));
    assert_null(mc_metrics_counter(m, "b_total", "b", MC_LABELS("k", "1", "k", "2")));
    assert_null(mc_metrics_counter(m, "b_total", "b", MC_LABELS("k-1", "1")));
    assert_null(mc_metrics_counter(m, "b_total", "b", MC_LABELS("k")));
    /* histogram bounds must ascend strictly and be finite; a series is registered once */
    assert_null(mc_metrics_histogram(m, "h", "h", NULL, unsorted, 2));
    assert_null(mc_metrics_histogram(m, "h", "h", NULL, dup, 2));
    assert_null(mc_metrics_histogram(m, "h", "h", NULL, inf, 2));
    assert_null(mc_metrics_histogram(m, "h", "h", NULL, NULL, 2));
    assert_non_null(mc_metrics_histogram(m, "h", "h", NULL, ok, 2));
    assert_null(mc_metrics_histogram(m, "h", "h", NULL, ok, 2));
    assert_non_null(mc_metrics_histogram(m, "h0", "no bounds: only +Inf", NULL, NULL, 0));
    /* callbacks need a function and are never merged */
    assert_int_equal(mc_metrics_gauge_fn(m, "cb", "cb", NULL, NULL, NULL), -1);
    assert_null(mc_metrics_counter(NULL, "x_total", "x", NULL));

    char *t = render_parse(m, &g_e);
    assert_null(find(&g_e, "b_total", NULL));
    assert_true(value(&g_e, "h0_bucket", "le=+Inf") == 0);
    free(t);
    mc_metrics_free(m);
    mc_metrics_free(NULL);
}

struct funnel {
    pthread_mutex_t mu;
    uint64_t admitted, completed, in_flight; /* changed together under mu */
    uint64_t snap_admitted, snap_completed, snap_in_flight;
    int hooks, calls;
};

static void funnel_snapshot(void *arg)
{
    struct funnel *f = arg;
    pthread_mutex_lock(&f->mu);
    f->snap_admitted = f->admitted;
    f->snap_completed = f->completed;
    f->snap_in_flight = f->in_flight;
    pthread_mutex_unlock(&f->mu);
    f->hooks++;
}
static double read_admitted(void *arg)
{
    struct funnel *f = arg;
    f->calls++;
    return (double)f->snap_admitted;
}
static double read_completed(void *arg)
{
    return (double)((struct funnel *)arg)->snap_completed;
}
static double read_in_flight(void *arg)
{
    return (double)((struct funnel *)arg)->snap_in_flight;
}

static void test_callbacks_and_prescrape(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    struct funnel f = {
        .mu = PTHREAD_MUTEX_INITIALIZER, .admitted = 5, .completed = 3, .in_flight = 2};

    assert_int_equal(mc_metrics_counter_fn(m, "master_promotion_admitted_total", "admitted", NULL,
                                           read_admitted, &f),
                     0);
    assert_int_equal(mc_metrics_counter_fn(m, "master_promotion_completed_total", "completed", NULL,
                                           read_completed, &f),
                     0);
    assert_int_equal(
        mc_metrics_gauge_fn(m, "master_promotion_in_flight", "in flight", NULL, read_in_flight, &f),
        0);
    /* a callback series is not merged with a second registration */
    assert_int_equal(
        mc_metrics_gauge_fn(m, "master_promotion_in_flight", "x", NULL, read_in_flight, &f), -1);
    mc_metrics_set_prescrape(m, funnel_snapshot, &f);

    char *t = render_parse(m, &g_e);
    assert_int_equal(f.hooks, 1);
    assert_int_equal(f.calls, 1);
    assert_string_equal(family(&g_e, "master_promotion_admitted_total")->type, "counter");
    assert_string_equal(family(&g_e, "master_promotion_in_flight")->type, "gauge");
    assert_true(value(&g_e, "master_promotion_admitted_total", NULL) ==
                value(&g_e, "master_promotion_completed_total", NULL) +
                    value(&g_e, "master_promotion_in_flight", NULL));
    free(t);

    f.admitted = 9;
    f.completed = 9;
    f.in_flight = 0;
    t = render_parse(m, &g_e);
    assert_int_equal(f.hooks, 2);
    assert_true(value(&g_e, "master_promotion_admitted_total", NULL) == 9);
    assert_true(value(&g_e, "master_promotion_in_flight", NULL) == 0);
    free(t);

    mc_metrics_set_prescrape(m, NULL, NULL);
    t = render_parse(m, &g_e);
    assert_int_equal(f.hooks, 2);
    free(t);
    mc_metrics_free(m);
}

/* A collector emitting one series per "segment" it knows at scrape time. */
struct segs {
    int n;
    const char *names[4];
    double bytes[4];
    int bad_emits; /* mc_metrics_emit results of the invalid label list (must be -1) */
};

static void collect_segs(void *arg, struct mc_metrics_emitter *e)
{
    struct segs *sg = arg;
    for (int i = 0; i < sg->n; i++)
        mc_metrics_emit(e, MC_LABELS("segment", sg->names[i]), sg->bytes[i]);
    sg->bad_emits += mc_metrics_emit(e, MC_LABELS("le", "x"), 1.0); /* reserved label */
}

static void test_collectors(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    struct segs sg = {.n = 2, .names = {"seg-a", "we\"ird"}, .bytes = {10, 2.5}};
    assert_int_equal(
        mc_metrics_gauge_collector(m, "segment_allocated_bytes", "per segment", collect_segs, &sg),
        0);
    assert_int_equal(mc_metrics_counter_collector(m, "segment_ops_total", "x", collect_segs, &sg),
                     0);
    /* a second collector of the same name, a NULL fn, a bad name: refused */
    assert_int_equal(
        mc_metrics_gauge_collector(m, "segment_allocated_bytes", "x", collect_segs, &sg), -1);
    assert_int_equal(mc_metrics_gauge_collector(m, "other", "x", NULL, &sg), -1);
    assert_int_equal(mc_metrics_gauge_collector(m, "1bad", "x", collect_segs, &sg), -1);

    char *t = render_parse(m, &g_e);
    assert_string_equal(family(&g_e, "segment_allocated_bytes")->type, "gauge");
    assert_string_equal(family(&g_e, "segment_ops_total")->type, "counter");
    assert_true(value(&g_e, "segment_allocated_bytes", "segment=seg-a") == 10);
    assert_true(value(&g_e, "segment_allocated_bytes", "segment=we\"ird") == 2.5);
    assert_null(find(&g_e, "segment_allocated_bytes", "le=x"));
    assert_int_equal(sg.bad_emits, -2);
    free(t);

    /* The label sets follow what the collector knows at each scrape. */
    sg.n = 1;
    sg.bytes[0] = 7;
    t = render_parse(m, &g_e);
    assert_true(value(&g_e, "segment_allocated_bytes", "segment=seg-a") == 7);
    assert_null(find(&g_e, "segment_allocated_bytes", "segment=we\"ird"));
    free(t);
    sg.n = 0; /* no series at all: HELP and TYPE only, still a valid exposition */
    t = render_parse(m, &g_e);
    assert_null(find(&g_e, "segment_allocated_bytes", "segment=seg-a"));
    free(t);
    mc_metrics_free(m);
}

static void test_registries_are_isolated(void **state)
{
    (void)state;
    struct mc_metrics *a = mc_metrics_new(), *b = mc_metrics_new();
    mc_counter_add(mc_metrics_counter(a, "x_total", "x", NULL), 7);
    mc_metrics_gauge(b, "x_total", "a gauge here is fine", NULL);
    char *t = render_parse(a, &g_e);
    assert_true(value(&g_e, "x_total", NULL) == 7);
    free(t);
    t = render_parse(b, &g_e);
    assert_string_equal(family(&g_e, "x_total")->type, "gauge");
    assert_true(value(&g_e, "x_total", NULL) == 0);
    free(t);
    mc_metrics_free(a);
    mc_metrics_free(b);
}

static void test_textbuf(void **state)
{
    (void)state;
    struct mc_textbuf b;
    char big[3000];
    mc_textbuf_init(&b);
    memset(big, 'y', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 100; i++)
        assert_int_equal(mc_textbuf_printf(&b, "%d:%s;", i, i % 10 ? "" : big), 0);
    assert_int_equal(b.len, strlen(b.data));
    assert_non_null(strstr(b.data, "99:;"));
    assert_int_equal(mc_textbuf_append(&b, "end", 3), 0);
    size_t len;
    char *p = mc_textbuf_steal(&b, &len);
    assert_null(b.data);
    assert_int_equal(len, strlen(p));
    assert_string_equal(p + len - 3, "end");
    free(p);
    mc_textbuf_destroy(&b);
}

/* Threads update shared series while the main thread renders and registers more. */
#define THREADS 4
#define ITERS 20000

struct hot {
    struct mc_metrics *m;
    struct mc_counter *c;
    struct mc_gauge *g;
    struct mc_gauge_f *gf;
    struct mc_histogram *h;
};

static void *hot_loop(void *arg)
{
    struct hot *x = arg;
    for (int i = 0; i < ITERS; i++) {
        mc_counter_inc(x->c);
        mc_gauge_inc(x->g);
        mc_gauge_f_add(x->gf, 0.5);
        mc_histogram_observe(x->h, (double)(i % 4));
        if (i % 5000 == 0)
            mc_counter_inc(mc_metrics_counter(x->m, "late_total", "registered while hot", NULL));
    }
    return NULL;
}

static void test_concurrent_updates(void **state)
{
    (void)state;
    static const double b[] = {0, 1, 2};
    struct hot x;
    pthread_t th[THREADS];
    x.m = mc_metrics_new();
    x.c = mc_metrics_counter(x.m, "hot_total", "hot", NULL);
    x.g = mc_metrics_gauge(x.m, "hot_gauge", "hot", NULL);
    x.gf = mc_metrics_gauge_f(x.m, "hot_gauge_f", "hot", NULL);
    x.h = mc_metrics_histogram(x.m, "hot_hist", "hot", NULL, b, 3);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hot_loop, &x), 0);
    for (int r = 0; r < 20; r++) {
        char *t = render_parse(x.m, &g_e); /* always a valid exposition mid-update */
        free(t);
        char name[32];
        snprintf(name, sizeof(name), "extra_%d", r);
        assert_non_null(mc_metrics_gauge(x.m, name, "registered mid-update", NULL));
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    char *t = render_parse(x.m, &g_e);
    assert_true(value(&g_e, "hot_total", NULL) == THREADS * ITERS);
    assert_true(value(&g_e, "hot_gauge", NULL) == THREADS * ITERS);
    assert_true(value(&g_e, "hot_gauge_f", NULL) == THREADS * ITERS * 0.5);
    assert_true(value(&g_e, "hot_hist_count", NULL) == THREADS * ITERS);
    assert_true(value(&g_e, "hot_hist_bucket", "le=0") == THREADS * ITERS / 4);
    assert_true(value(&g_e, "hot_hist_sum", NULL) == THREADS * (ITERS / 4) * 6.0);
    assert_true(value(&g_e, "late_total", NULL) == THREADS * 4);
    free(t);
    mc_metrics_free(x.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser_rejects_bad_text),
        cmocka_unit_test(test_empty_and_zero_values),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_collectors),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_registration_rules),
        cmocka_unit_test(test_callbacks_and_prescrape),
        cmocka_unit_test(test_registries_are_isolated),
        cmocka_unit_test(test_textbuf),
        cmocka_unit_test(test_concurrent_updates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
