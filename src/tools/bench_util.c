/* bench_util.c - see bench_util.h. */
#include "tools/bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/parse.h"

void mc_bench_result_init(struct mc_bench_result *r, const char *bench, const char *case_name)
{
    memset(r, 0, sizeof(*r));
    r->bench = bench;
    snprintf(r->case_name, sizeof(r->case_name), "%s", case_name ? case_name : "");
}

static struct mc_bench_extra *extra_slot(struct mc_bench_result *r, const char *key)
{
    if (r->nextra >= MC_BENCH_EXTRA_MAX)
        return NULL;
    struct mc_bench_extra *e = &r->extra[r->nextra++];
    snprintf(e->key, sizeof(e->key), "%s", key);
    return e;
}

void mc_bench_add_num(struct mc_bench_result *r, const char *key, double v)
{
    struct mc_bench_extra *e = extra_slot(r, key);
    if (e) {
        e->is_str = 0;
        e->num = v;
    }
}

void mc_bench_add_str(struct mc_bench_result *r, const char *key, const char *v)
{
    struct mc_bench_extra *e = extra_slot(r, key);
    if (e) {
        e->is_str = 1;
        snprintf(e->str, sizeof(e->str), "%s", v);
    }
}

void mc_bench_set_ref(struct mc_bench_result *r, double ref, double ratio)
{
    r->has_ref = 1;
    r->ref = ref;
    r->ratio = ratio;
}

static void json_num(FILE *f, const char *key, double v)
{
    if (!isfinite(v))
        fprintf(f, ",\"%s\":null", key);
    else if (v == floor(v) && fabs(v) < 9e15)
        fprintf(f, ",\"%s\":%.0f", key, v);
    else
        fprintf(f, ",\"%s\":%.6g", key, v);
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, ",\"%s\":\"", key);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', f);
        if ((unsigned char)*p >= 0x20)
            fputc(*p, f);
    }
    fputc('"', f);
}

void mc_bench_emit(const struct mc_bench_result *r)
{
    fprintf(stdout, "{\"bench\":\"%s\"", r->bench);
    json_str(stdout, "case", r->case_name);
    json_num(stdout, "runs", r->runs);
    json_num(stdout, "ms", r->ms);
    json_num(stdout, "p50_ms", r->p50_ms);
    json_num(stdout, "p99_ms", r->p99_ms);
    json_num(stdout, "ops_per_s", r->ops_per_s);
    json_num(stdout, "bytes_per_s", r->bytes_per_s);
    if (r->has_ref) {
        json_num(stdout, "ref", r->ref);
        json_num(stdout, "ratio", r->ratio);
    }
    for (int i = 0; i < r->nextra; i++) {
        if (r->extra[i].is_str)
            json_str(stdout, r->extra[i].key, r->extra[i].str);
        else
            json_num(stdout, r->extra[i].key, r->extra[i].num);
    }
    fputs("}\n", stdout);
    fflush(stdout);

    fprintf(stderr, "%-10s %-40s runs=%-3d ms=%-10.3f p50=%-9.3f p99=%-9.3f ops/s=%-12.0f",
            r->bench, r->case_name, r->runs, r->ms, r->p50_ms, r->p99_ms, r->ops_per_s);
    if (r->bytes_per_s > 0)
        fprintf(stderr, " MB/s=%-9.1f", r->bytes_per_s / 1e6);
    if (r->has_ref)
        fprintf(stderr, " ref=%-12.1f ratio=%.3f", r->ref, r->ratio);
    for (int i = 0; i < r->nextra; i++) {
        if (r->extra[i].is_str)
            fprintf(stderr, " %s=%s", r->extra[i].key, r->extra[i].str);
        else
            fprintf(stderr, " %s=%.6g", r->extra[i].key, r->extra[i].num);
    }
    fputc('\n', stderr);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mc_bench_percentile(double *vals, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(vals, n, sizeof(double), cmp_double);
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return vals[rank - 1];
}

double mc_bench_median(double *vals, size_t n)
{
    if (n == 0)
        return 0;
    qsort(vals, n, sizeof(double), cmp_double);
    return (n & 1) ? vals[n / 2] : (vals[n / 2 - 1] + vals[n / 2]) / 2.0;
}

int mc_bench_parse_doubles(const char *s, double *out, int max)
{
    int n = 0;
    const char *p = s;
    while (p && *p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || n >= max)
            return -1;
        out[n++] = v;
        p = (*end == ',') ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return n;
}

int mc_bench_parse_sizes(const char *s, uint64_t *out, int max)
{
    int n = 0;
    char buf[64];
    const char *p = s;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= sizeof(buf) || n >= max)
            return -1;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (mc_parse_size(buf, &out[n], NULL, 0) < 0)
            return -1;
        n++;
        p = comma ? comma + 1 : NULL;
    }
    return n;
}

uint64_t mc_bench_rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}
