/*
 * bench_trace.c - see bench_trace.h. The parser is a small strict JSON scanner: one object per
 * line, members of any JSON type are skipped, the two it needs are checked for type and range.
 */
#include "tools/bench_trace.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct scan {
    const char *p, *end;
};

static void skip_ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r'))
        s->p++;
}

static bool eat(struct scan *s, char c)
{
    skip_ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

/* A JSON string (escapes skipped over, not decoded); copies up to cap-1 bytes into out. */
static bool scan_string(struct scan *s, char *out, size_t cap)
{
    size_t n = 0;

    skip_ws(s);
    if (s->p >= s->end || *s->p != '"')
        return false;
    s->p++;
    while (s->p < s->end && *s->p != '"') {
        if ((unsigned char)*s->p < 0x20)
            return false;
        if (*s->p == '\\') {
            if (++s->p >= s->end)
                return false;
        }
        if (out && n + 1 < cap)
            out[n++] = *s->p;
        s->p++;
    }
    if (s->p >= s->end)
        return false;
    s->p++;
    if (out)
        out[n] = '\0';
    return true;
}

/* A JSON number as a double; is_uint tells whether it was a plain non-negative integer that fits
 * in 64 bits (its value in *u). */
static bool scan_number(struct scan *s, double *d, bool *is_uint, uint64_t *u)
{
    const char *q;
    char buf[64];
    size_t n;
    char *e;

    skip_ws(s);
    q = s->p;
    while (q < s->end && *q && strchr("+-0123456789.eE", *q))
        q++;
    n = (size_t)(q - s->p);
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s->p, n);
    buf[n] = '\0';
    *d = strtod(buf, &e);
    if (*e)
        return false;
    *is_uint = false;
    if (buf[0] >= '0' && buf[0] <= '9' && !strpbrk(buf, ".eE+-")) {
        errno = 0;
        *u = strtoull(buf, &e, 10);
        *is_uint = errno == 0 && !*e;
    }
    s->p = q;
    return true;
}

static bool skip_value(struct scan *s, int depth);

static bool skip_container(struct scan *s, char close, bool object, int depth)
{
    if (eat(s, close))
        return true;
    for (;;) {
        if (object && (!scan_string(s, NULL, 0) || !eat(s, ':')))
            return false;
        if (!skip_value(s, depth + 1))
            return false;
        if (eat(s, close))
            return true;
        if (!eat(s, ','))
            return false;
    }
}

static bool skip_value(struct scan *s, int depth)
{
    double d;
    bool isu;
    uint64_t u;

    if (depth > 32)
        return false;
    skip_ws(s);
    if (s->p >= s->end)
        return false;
    switch (*s->p) {
    case '"':
        return scan_string(s, NULL, 0);
    case '{':
        s->p++;
        return skip_container(s, '}', true, depth);
    case '[':
        s->p++;
        return skip_container(s, ']', false, depth);
    case 't':
    case 'f':
    case 'n': {
        static const char *const words[] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++) {
            size_t wl = strlen(words[i]);
            if ((size_t)(s->end - s->p) >= wl && !memcmp(s->p, words[i], wl)) {
                s->p += wl;
                return true;
            }
        }
        return false;
    }
    default:
        return scan_number(s, &d, &isu, &u);
    }
}

struct id_vec {
    uint64_t *v;
    size_t n, cap;
};

static int push_id(struct id_vec *iv, uint64_t id)
{
    if (iv->n == iv->cap) {
        size_t nc = iv->cap ? iv->cap * 2 : 4096;
        uint64_t *nv = realloc(iv->v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        iv->v = nv;
        iv->cap = nc;
    }
    iv->v[iv->n++] = id;
    return 0;
}

/* One line's object: appends its ids to iv; *ts and *n set. Returns NULL or a reason. */
static const char *parse_line(struct scan *s, struct id_vec *iv, uint64_t *ts, uint32_t *n)
{
    bool have_ts = false, have_ids = false;
    char key[32];

    if (!eat(s, '{'))
        return "expected '{'";
    if (eat(s, '}'))
        return "no timestamp and hash_ids";
    for (;;) {
        if (!scan_string(s, key, sizeof(key)) || !eat(s, ':'))
            return "expected a member name";
        if (!strcmp(key, "timestamp")) {
            double d;
            bool isu;
            uint64_t u;
            if (!scan_number(s, &d, &isu, &u) || !(d >= 0) || d > 1.8e19)
                return "timestamp is not a non-negative number";
            *ts = (uint64_t)d;
            have_ts = true;
        } else if (!strcmp(key, "hash_ids")) {
            size_t first = iv->n;
            if (have_ids)
                return "hash_ids given twice";
            if (!eat(s, '['))
                return "hash_ids is not an array";
            if (!eat(s, ']')) {
                for (;;) {
                    double d;
                    bool isu;
                    uint64_t u;
                    if (!scan_number(s, &d, &isu, &u) || !isu)
                        return "a hash id is not a non-negative integer";
                    if (push_id(iv, u) != 0)
                        return "out of memory";
                    if (eat(s, ']'))
                        break;
                    if (!eat(s, ','))
                        return "expected ',' or ']' in hash_ids";
                }
            }
            if (iv->n - first > UINT32_MAX)
                return "too many hash ids";
            *n = (uint32_t)(iv->n - first);
            have_ids = true;
        } else if (!skip_value(s, 0)) {
            return "malformed value";
        }
        if (eat(s, '}'))
            break;
        if (!eat(s, ','))
            return "expected ',' or '}'";
    }
    skip_ws(s);
    if (s->p != s->end)
        return "junk after the object";
    if (!have_ts)
        return "no timestamp";
    if (!have_ids)
        return "no hash_ids";
    return NULL;
}

int mc_trace_parse(const char *text, size_t len, size_t limit, struct mc_trace *out, char *err,
                   size_t errlen)
{
    struct id_vec iv = {0};
    struct mc_trace_req *reqs = NULL;
    size_t nreq = 0, rcap = 0, line_no = 0;
    const char *p = text, *end = text + len;
    uint32_t max_n = 0;

    memset(out, 0, sizeof(*out));
    while (p < end && (limit == 0 || nreq < limit)) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        struct scan s = {p, nl ? nl : end};
        uint64_t ts = 0;
        uint32_t n = 0;
        const char *why;

        line_no++;
        p = nl ? nl + 1 : end;
        skip_ws(&s);
        if (s.p == s.end)
            continue;
        if ((why = parse_line(&s, &iv, &ts, &n)) != NULL) {
            snprintf(err, errlen, "line %zu: %s", line_no, why);
            goto fail;
        }
        if (nreq == rcap) {
            size_t nc = rcap ? rcap * 2 : 1024;
            struct mc_trace_req *nr = realloc(reqs, nc * sizeof(*nr));
            if (!nr) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            reqs = nr;
            rcap = nc;
        }
        reqs[nreq].timestamp_ms = ts;
        reqs[nreq].n = n;
        reqs[nreq].ids = NULL; /* set below: iv.v may still move */
        nreq++;
        if (n > max_n)
            max_n = n;
    }
    if (nreq == 0) {
        snprintf(err, errlen, "no requests in the trace");
        goto fail;
    }
    for (size_t i = 0, off = 0; i < nreq; i++) {
        reqs[i].ids = iv.v + off;
        off += reqs[i].n;
    }
    out->nreq = nreq;
    out->reqs = reqs;
    out->ids = iv.v;
    out->nids = iv.n;
    out->max_n = max_n;
    return 0;
fail:
    free(iv.v);
    free(reqs);
    return -1;
}

int mc_trace_load(const char *path, size_t limit, struct mc_trace *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 1 << 20;
            char *nt = realloc(text, nc);
            if (!nt) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto out;
            }
            text = nt;
            cap = nc;
        }
        size_t r = fread(text + len, 1, cap - len, f);
        len += r;
        if (r == 0)
            break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        goto out;
    }
    rc = mc_trace_parse(text, len, limit, out, err, errlen);
out:
    free(text);
    fclose(f);
    return rc;
}

void mc_trace_destroy(struct mc_trace *t)
{
    free(t->ids);
    free(t->reqs);
    memset(t, 0, sizeof(*t));
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The i-th 8-byte word of block id under seed: a counter-mode stream, so any word can be
 * computed on its own. */
static inline uint64_t block_word(uint64_t key, uint64_t i)
{
    return mix64(key ^ (i * 0xd1b54a32d192ed03ull));
}

static uint64_t block_key(uint64_t id, uint64_t seed)
{
    return mix64(id ^ mix64(seed ^ 0x5bd1e9955bd1e995ull));
}

void mc_block_fill(void *buf, size_t len, uint64_t id, uint64_t seed)
{
    uint8_t *b = buf;
    uint64_t key = block_key(id, seed);

    for (size_t off = 0, i = 0; off < len; off += 8, i++) {
        uint64_t w = block_word(key, i);
        size_t k = len - off < 8 ? len - off : 8;
        memcpy(b + off, &w, k);
    }
}

uint64_t mc_block_check(const void *buf, size_t len, uint64_t id, uint64_t seed)
{
    const uint8_t *b = buf;
    uint64_t key = block_key(id, seed), wrong = 0;

    for (size_t off = 0, i = 0; off < len; off += 8, i++) {
        uint64_t w = block_word(key, i);
        size_t k = len - off < 8 ? len - off : 8;
        if (memcmp(b + off, &w, k) == 0)
            continue;
        for (size_t j = 0; j < k; j++)
            wrong += b[off + j] != ((const uint8_t *)&w)[j];
    }
    return wrong;
}
