/*
 * cluster_util.c - child processes (on the shared harness, tools/proc_harness.h) and a strict
 * JSON reader for the multi-process tests. See cluster_util.h.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_util.h"
#include "common/rpc_client.h"

uint64_t cu_now_ms(void)
{
    return mc_proc_now_ms();
}

void cu_sleep_ms(int ms)
{
    mc_proc_sleep_ms(ms);
}

int cu_spawn(struct cu_proc *p, const char *const *argv, const char *log_path)
{
    const struct mc_proc_io io = {.err_path = log_path, .err_append = true};
    return mc_proc_spawn(p, argv, &io);
}

int cu_read_line(struct cu_proc *p, char *line, size_t cap, int timeout_ms)
{
    return mc_proc_read_line(p, line, cap, timeout_ms);
}

int cu_freeze(pid_t pid)
{
    if (kill(pid, SIGSTOP) != 0)
        return -1;
    int st;
    pid_t r;
    while ((r = waitpid(pid, &st, WUNTRACED)) < 0 && errno == EINTR)
        ;
    return r == pid && WIFSTOPPED(st) ? 0 : -1;
}

int cu_stop(struct cu_proc *p, int sig, int timeout_ms)
{
    return mc_proc_stop(p, sig, timeout_ms);
}

void cu_dump_log(const struct cu_proc *p, const char *what)
{
    mc_proc_dump_log(p, what, 4000);
}

int cu_await_ready(struct cu_proc *p, enum mc_proc_ready_kind kind, struct mc_proc_ready *r,
                   const char *what, int timeout_ms)
{
    int rc = mc_proc_await_ready(p, r, timeout_ms);
    if (rc == 0 && r->kind == kind)
        return 0;
    fprintf(stderr, "%s: no READY line of the expected form within %d ms (got \"%s\")\n", what,
            timeout_ms, r->line);
    cu_dump_log(p, what);
    return -1;
}

void cu_run(struct cu_run *r, const char *dir, const char *const *argv, const char *in_path,
            int timeout_ms)
{
    char out_path[512], err_path[512];
    struct mc_proc_io io = {.in_path = in_path, .out_path = out_path, .err_path = err_path};

    memset(r, 0, sizeof(*r));
    snprintf(out_path, sizeof(out_path), "%s/run.out", dir);
    snprintf(err_path, sizeof(err_path), "%s/run.err", dir);
    r->status = mc_proc_run(argv, &io, timeout_ms);
    if (r->status < 0)
        r->status = -1; /* overran the deadline (killed), or could not start */
    r->out = cu_slurp(out_path, NULL);
    r->err = cu_slurp(err_path, NULL);
    if (!r->out)
        r->out = strdup("");
    if (!r->err)
        r->err = strdup("");
}

void cu_run_free(struct cu_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

char *cu_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
            if (len)
                *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

int cu_write_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    int rc = 0;

    if (!f)
        return -1;
    if (len && fwrite(buf, 1, len, f) != len)
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

void cu_rm_rf(const char *path)
{
    mc_proc_rm_rf(path);
}

/* ---- a cluster on loopback ------------------------------------------------------------------ */

int cu_cluster_init(struct cu_cluster *c, const char *prefix)
{
    const char *bin = getenv("MC_BIN_DIR");

    memset(c, 0, sizeof(*c));
    if (!bin) {
        fprintf(stderr, "MC_BIN_DIR is not set\n");
        return -1;
    }
    snprintf(c->master_bin, sizeof(c->master_bin), "%s/mooncake_master", bin);
    snprintf(c->daemon_bin, sizeof(c->daemon_bin), "%s/mooncake_client", bin);
    snprintf(c->cli_bin, sizeof(c->cli_bin), "%s/mooncake_cli", bin);
    if (mc_proc_mkdtemp(c->dir, sizeof(c->dir), NULL, prefix) != 0 &&
        mc_proc_mkdtemp(c->dir, sizeof(c->dir), "/tmp", prefix) != 0) {
        fprintf(stderr, "cannot make a temporary directory %s: %s\n", prefix, strerror(errno));
        return -1;
    }
    return 0;
}

void cu_cluster_destroy(struct cu_cluster *c)
{
    if (c->dir[0])
        mc_proc_rm_rf(c->dir);
    c->dir[0] = '\0';
}

/* base[0..nbase) then flags, NULL-terminated, into argv[cap]. */
static void join_argv(const char **argv, size_t cap, const char *const *base, size_t nbase,
                      const char *const *flags)
{
    size_t n = 0;
    for (size_t i = 0; i < nbase && n + 1 < cap; i++)
        argv[n++] = base[i];
    for (size_t i = 0; flags && flags[i] && n + 1 < cap; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
}

static int start_ready(struct cu_proc *p, const char *const *argv, const char *log,
                       enum mc_proc_ready_kind kind, struct mc_proc_ready *r, int timeout_ms)
{
    const struct mc_proc_io io = {.err_path = log, .err_append = true};
    return mc_proc_start(p, argv, &io, kind, r, timeout_ms);
}

int cu_start_master(struct cu_cluster *c, struct cu_proc *p, int rpc_port, const char *const *flags,
                    int timeout_ms)
{
    char port[32], log[320];
    const char *base[] = {c->master_bin, port, "--rpc_address=127.0.0.1", "--metrics_port=0",
                          "--metrics_host=127.0.0.1"};
    const char *argv[64];
    struct mc_proc_ready r;

    snprintf(port, sizeof(port), "--rpc_port=%d", rpc_port);
    snprintf(log, sizeof(log), "%s/master.log", c->dir);
    join_argv(argv, 64, base, sizeof(base) / sizeof(base[0]), flags);
    if (start_ready(p, argv, log, MC_PROC_READY_MASTER, &r, timeout_ms) != 0)
        return -1;
    snprintf(c->rpc, sizeof(c->rpc), "127.0.0.1:%u", r.rpc_port);
    snprintf(c->metrics, sizeof(c->metrics), "127.0.0.1:%u", r.metrics_port);
    return 0;
}

int cu_start_daemon(struct cu_cluster *c, struct cu_proc *p, const char *name,
                    const char *const *flags, char *ep, size_t cap, int timeout_ms)
{
    char master[128], log[320];
    const char *base[] = {c->daemon_bin, master, "--host=127.0.0.1", "--data_port=0"};
    const char *argv[64];
    struct mc_proc_ready r;

    snprintf(master, sizeof(master), "--master=%s", c->rpc);
    snprintf(log, sizeof(log), "%s/%s.log", c->dir, name);
    join_argv(argv, 64, base, sizeof(base) / sizeof(base[0]), flags);
    if (start_ready(p, argv, log, MC_PROC_READY_DAEMON, &r, timeout_ms) != 0)
        return -1;
    snprintf(ep, cap, "%s", r.endpoint);
    return 0;
}

double cu_master_metric(const struct cu_cluster *c, const char *name)
{
    char opt[128];
    struct cu_run r;
    double v = -1;

    snprintf(opt, sizeof(opt), "--metrics=%s", c->metrics);
    const char *argv[] = {c->cli_bin, "metrics", opt, NULL};
    cu_run(&r, c->dir, argv, NULL, 20000);
    if (r.status == 0)
        v = mc_metrics_value(r.out, name);
    else
        fprintf(stderr, "mooncake_cli metrics: status %d: %s\n", r.status, r.err);
    cu_run_free(&r);
    return v;
}

bool cu_wait_master_metric(const struct cu_cluster *c, const char *name, double want,
                           int timeout_ms)
{
    uint64_t deadline = cu_now_ms() + (uint64_t)timeout_ms;
    while (cu_master_metric(c, name) != want) {
        if (cu_now_ms() >= deadline)
            return false;
        cu_sleep_ms(50);
    }
    return true;
}

int cu_start_holder(struct cu_cluster *c, struct cu_proc *p, const char *disk_path,
                    const struct cu_holder_opts *o, char *ep, size_t cap, int timeout_ms)
{
    char seg[64], disk[256], level[48], mport[48], stall[32];
    const char *flags[] = {seg,  disk, "--disk_capacity=1GiB", level, "--master_wait=20s",
                           NULL, NULL};
    snprintf(seg, sizeof(seg), "--segment_size=%s", o->segment_size);
    snprintf(disk, sizeof(disk), "--disk_path=%s", disk_path);
    snprintf(level, sizeof(level), "--log_level=%s", o->log_level ? o->log_level : "info");
    if (o->metrics_port > 0) {
        snprintf(mport, sizeof(mport), "--metrics_port=%d", o->metrics_port);
        flags[5] = mport;
    }
    snprintf(stall, sizeof(stall), "%d", o->stall_ms);
    if (o->stall_ms > 0)
        setenv("MC_TEST_PROMOTION_STALL_MS", stall, 1);
    int rc = cu_start_daemon(c, p, "holder", flags, ep, cap, timeout_ms);
    unsetenv("MC_TEST_PROMOTION_STALL_MS");
    return rc;
}

int cu_free_port(void)
{
    return mc_proc_free_port();
}

int cu_admin_open(const char *addr, int call_timeout_ms, struct mc_rpc_client **out)
{
    struct mc_rpc_client_config rc;
    char host[64]; /* copied by mc_rpc_client_new */

    *out = NULL;
    mc_rpc_client_config_init(&rc);
    if (mc_rpc_parse_endpoint(addr, host, sizeof(host), &rc) != 0)
        return -1;
    rc.call_timeout_ms = call_timeout_ms;
    return mc_rpc_client_new(&rc, out) == 0 ? 0 : -1;
}

void cu_fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed;

    for (size_t k = 0; k < len; k += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + k, &x, len - k < 8 ? len - k : 8);
    }
}

/* ---- JSON ---------------------------------------------------------------------------------- */

struct jp {
    const char *s;
    int depth;
};

static void skip_ws(struct jp *p)
{
    while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
        p->s++;
}

static bool parse_value(struct jp *p, struct cu_json *v);

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Appends code point cp as UTF-8. */
static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

static bool parse_string(struct jp *p, char **out)
{
    const char *s = p->s;
    char *buf, *o;

    if (*s != '"')
        return false;
    buf = malloc(strlen(s) + 1); /* the decoded form is never longer */
    if (!buf)
        return false;
    o = buf;
    for (s++;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"')
            break;
        if (c < 0x20) /* includes the terminating NUL: unterminated string */
            goto bad;
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        s++;
        switch (*s) {
        case '"':
        case '\\':
        case '/':
            *o++ = *s;
            break;
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 1; i <= 4; i++) {
                int h = hexval(s[i]);
                if (h < 0)
                    goto bad;
                cp = cp * 16 + (unsigned)h;
            }
            if (cp == 0)
                goto bad; /* keys never hold NUL; refuse rather than truncate */
            s += 4;
            o += put_utf8(o, cp);
            break;
        }
        default:
            goto bad;
        }
    }
    *o = '\0';
    p->s = s + 1;
    *out = buf;
    return true;
bad:
    free(buf);
    return false;
}

static bool parse_number(struct jp *p, struct cu_json *v)
{
    const char *s = p->s, *start = s;

    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    v->type = CU_JNUM;
    v->str = strndup(start, (size_t)(s - start));
    p->s = s;
    return v->str != NULL;
}

static bool push_item(struct cu_json *v, size_t *cap)
{
    if (v->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct cu_json *items = realloc(v->items, nc * sizeof(*items));
        if (!items)
            return false;
        v->items = items;
        if (v->type == CU_JOBJ) {
            char **keys = realloc(v->keys, nc * sizeof(*keys));
            if (!keys)
                return false;
            v->keys = keys;
        }
        *cap = nc;
    }
    memset(&v->items[v->n], 0, sizeof(v->items[0]));
    if (v->type == CU_JOBJ)
        v->keys[v->n] = NULL;
    v->n++;
    return true;
}

static bool parse_container(struct jp *p, struct cu_json *v, char close)
{
    size_t cap = 0;

    v->type = close == '}' ? CU_JOBJ : CU_JARR;
    if (++p->depth > 64)
        return false;
    p->s++;
    skip_ws(p);
    if (*p->s == close) {
        p->s++;
        p->depth--;
        return true;
    }
    for (;;) {
        if (!push_item(v, &cap))
            return false;
        skip_ws(p);
        if (v->type == CU_JOBJ) {
            if (!parse_string(p, &v->keys[v->n - 1]))
                return false;
            skip_ws(p);
            if (*p->s++ != ':')
                return false;
            skip_ws(p);
        }
        if (!parse_value(p, &v->items[v->n - 1]))
            return false;
        skip_ws(p);
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s != close)
            return false;
        p->s++;
        p->depth--;
        return true;
    }
}

static bool parse_value(struct jp *p, struct cu_json *v)
{
    skip_ws(p);
    switch (*p->s) {
    case '{':
        return parse_container(p, v, '}');
    case '[':
        return parse_container(p, v, ']');
    case '"':
        v->type = CU_JSTR;
        return parse_string(p, &v->str);
    case 't':
        if (strncmp(p->s, "true", 4))
            return false;
        p->s += 4;
        v->type = CU_JBOOL;
        v->b = true;
        return true;
    case 'f':
        if (strncmp(p->s, "false", 5))
            return false;
        p->s += 5;
        v->type = CU_JBOOL;
        return true;
    case 'n':
        if (strncmp(p->s, "null", 4))
            return false;
        p->s += 4;
        v->type = CU_JNULL;
        return true;
    default:
        return parse_number(p, v);
    }
}

static void json_destroy(struct cu_json *v)
{
    for (size_t i = 0; i < v->n; i++) {
        json_destroy(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

struct cu_json *cu_json_parse(const char *text)
{
    struct jp p = {.s = text};
    struct cu_json *v = calloc(1, sizeof(*v));

    if (!v || !text)
        goto bad;
    if (!parse_value(&p, v))
        goto bad;
    skip_ws(&p);
    if (*p.s != '\0')
        goto bad;
    return v;
bad:
    if (v) {
        json_destroy(v);
        free(v);
    }
    return NULL;
}

void cu_json_free(struct cu_json *v)
{
    if (!v)
        return;
    json_destroy(v);
    free(v);
}

const struct cu_json *cu_json_get(const struct cu_json *v, const char *key)
{
    if (!v || v->type != CU_JOBJ)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (v->keys[i] && !strcmp(v->keys[i], key))
            return &v->items[i];
    return NULL;
}

bool cu_json_str(const struct cu_json *obj, const char *key, const char **out)
{
    const struct cu_json *m = cu_json_get(obj, key);
    if (!m || m->type != CU_JSTR)
        return false;
    *out = m->str;
    return true;
}

bool cu_json_u64(const struct cu_json *obj, const char *key, uint64_t *out)
{
    const struct cu_json *m = cu_json_get(obj, key);
    char *end = NULL;
    if (!m || m->type != CU_JNUM || m->str[0] == '-')
        return false;
    errno = 0;
    *out = strtoull(m->str, &end, 10);
    return errno == 0 && *end == '\0';
}

bool cu_json_i64(const struct cu_json *obj, const char *key, int64_t *out)
{
    const struct cu_json *m = cu_json_get(obj, key);
    char *end = NULL;
    if (!m || m->type != CU_JNUM)
        return false;
    errno = 0;
    *out = strtoll(m->str, &end, 10);
    return errno == 0 && *end == '\0';
}
