/*
 * cli_data.c - `put`, `get`, `exist`, `rm`: through a real libmooncake_client.
 *
 * The command opens a client that contributes no DRAM (segment_size 0), so it behaves exactly
 * like an engine's reader or writer: a put is placed by the master on some mounted segment and
 * written peer to peer, a get takes a read lease and counts as an access (it may trigger a
 * promotion), and the bytes never pass through the master. The client is closed before exit.
 *
 * put KEY [FILE|-]   reads the whole value (a file, or stdin for "-" or no FILE) into memory;
 *                    `put KEY --value STRING` stores STRING. A key that already exists keeps
 *                    its value (upstream semantics): the put warns on stderr and exits 0.
 * get KEY [-o FILE]  reads the value with one Get (mc_get_alloc: sized by the master's own
 *                    answer), writes it to FILE or stdout. A get is thereby one read for the
 *                    master's access counts, as an engine's Get is. A binary value (a NUL or a
 *                    control byte other than tab, CR, LF) is not written to a terminal unless
 *                    asked with `-o -` (it could garble the terminal); the command says how big
 *                    it is and how to save it instead.
 * exist KEY          prints "true" (exit 0) or "false" (exit 1).
 * rm KEY [--force]   --force ignores a read lease.
 * Errors say the limit or the remedy (cli_hint.c): a key over 4096 bytes, a value no segment can
 * hold, a key held by a reader (for how long, and --force).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "tools/cli.h"

#define CLI_MAX_VALUE (1ull << 40)

static int open_client(const struct mc_cli_opts *o, struct mc_client **out)
{
    struct mc_client_config cfg;

    mc_client_config_init(&cfg);
    cfg.master_address = o->master;
    cfg.segment_size = 0;
    cfg.log_level = (int)mc_log_get_level(); /* the client logs at --log_level */
    cfg.auth_token_file = o->auth_token_file;
    cfg.tls_cert_file = o->tls_cert_file;
    cfg.tls_key_file = o->tls_key_file;
    cfg.tls_ca_file = o->tls_ca_file;
    if (o->protocol)
        cfg.protocol = o->protocol;
    if (o->host)
        cfg.host = o->host;
    if (o->timeout_ms) {
        cfg.connect_timeout_ms = o->timeout_ms;
        cfg.rpc_timeout_ms = o->timeout_ms;
    }
    return mc_client_open(&cfg, out);
}

/* Reads all of f into a malloc'd buffer. */
static int read_all(FILE *f, void **out, size_t *out_len)
{
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);

    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    for (;;) {
        size_t n;
        if (len == cap) {
            char *nb;
            if (cap >= CLI_MAX_VALUE) {
                free(buf);
                return MC_ERR_BUFFER_OVERFLOW;
            }
            nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return MC_ERR_INTERNAL_ERROR;
            }
            buf = nb;
            cap *= 2;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                free(buf);
                return MC_ERR_FILE_READ_FAIL;
            }
            break;
        }
    }
    *out = buf;
    *out_len = len;
    return 0;
}

int mc_cli_put(const struct mc_cli_opts *o)
{
    const char *key = o->args[0];
    const char *path = o->nargs > 1 ? o->args[1] : "-";
    struct mc_replicate_config rc_put;
    struct mc_client *c = NULL;
    void *buf = NULL;
    size_t len = 0;
    FILE *f;
    int rc;

    rc = mc_cli_check_key("put", key);
    if (rc)
        return rc;
    if (o->value) {
        if (o->nargs > 1) {
            fputs("mooncake_cli: put: give --value or a FILE, not both\n", stderr);
            return MC_CLI_EXIT_USAGE;
        }
        len = strlen(o->value);
        buf = malloc(len ? len : 1);
        if (!buf)
            return mc_cli_fail("put", MC_ERR_INTERNAL_ERROR);
        memcpy(buf, o->value, len);
    } else {
        if (!strcmp(path, "-")) {
            f = stdin;
        } else {
            f = fopen(path, "rb");
            if (!f) {
                fprintf(stderr, "mooncake_cli: put: cannot open %s: %s\n", path, strerror(errno));
                return mc_cli_fail("put",
                                   errno == ENOENT ? MC_ERR_FILE_NOT_FOUND : MC_ERR_FILE_OPEN_FAIL);
            }
        }
        rc = read_all(f, &buf, &len);
        if (f != stdin)
            fclose(f);
        if (rc)
            return mc_cli_fail("put", rc);
    }
    /* A key that is already there keeps its value (upstream semantics); say so rather than
     * report a store that did not happen as if it had. */
    mc_replicate_config_init(&rc_put);
    rc_put.report_existing = true;
    rc = open_client(o, &c);
    if (!rc)
        rc = mc_put(c, key, buf, len, &rc_put);
    mc_client_close(c);
    free(buf);
    if (rc == MC_ERR_OBJECT_ALREADY_EXISTS) {
        fprintf(stderr,
                "mooncake_cli: put: warning: key '%s' already exists; its value was kept "
                "(`mooncake_cli rm` it first to replace it)\n",
                key);
        return MC_CLI_EXIT_OK;
    }
    return rc ? mc_cli_fail_put(o, len, rc) : MC_CLI_EXIT_OK;
}

/* Bytes that make a value unfit for a terminal: NUL and control bytes other than tab, LF, CR. */
static bool is_binary(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') || p[i] == 0x7f)
            return true;
    return false;
}

int mc_cli_get(const struct mc_cli_opts *o)
{
    const char *key = o->args[0];
    struct mc_client *c = NULL;
    void *buf = NULL;
    int64_t n = 0;
    FILE *f = NULL;
    int rc;

    rc = mc_cli_check_key("get", key);
    if (rc)
        return rc;
    /* one GetReplicaList: the one read (one access for eviction order and promotion), sized by
     * the master's own answer */
    rc = open_client(o, &c);
    if (!rc) {
        n = mc_get_alloc(c, key, 0, &buf);
        rc = n < 0 ? (int)n : 0;
    }
    mc_client_close(c);
    if (rc)
        goto out;

    bool to_stdout = !o->output || !strcmp(o->output, "-");
    if (!o->output && n > 0 && isatty(STDOUT_FILENO) && is_binary(buf, (size_t)n)) {
        fprintf(stderr,
                "mooncake_cli: get: '%s' is a binary value of %lld bytes; not writing it to the "
                "terminal: save it with -o FILE (or pipe it), or force it with -o -\n",
                key, (long long)n);
        mc_value_free(buf);
        return MC_CLI_EXIT_USAGE;
    }
    f = to_stdout ? stdout : fopen(o->output, "wb");
    if (!f) {
        fprintf(stderr, "mooncake_cli: get: cannot open %s: %s\n", o->output, strerror(errno));
        rc = MC_ERR_FILE_OPEN_FAIL;
        goto out;
    }
    if (n > 0 && fwrite(buf, 1, (size_t)n, f) != (size_t)n)
        rc = MC_ERR_FILE_WRITE_FAIL;
    if (f != stdout) {
        if (fclose(f) != 0)
            rc = MC_ERR_FILE_WRITE_FAIL;
    } else if (fflush(stdout) != 0) {
        rc = MC_ERR_FILE_WRITE_FAIL;
    }
out:
    mc_value_free(buf);
    return rc ? mc_cli_fail("get", rc) : MC_CLI_EXIT_OK;
}

int mc_cli_exist(const struct mc_cli_opts *o)
{
    struct mc_client *c = NULL;
    int rc;

    rc = mc_cli_check_key("exist", o->args[0]);
    if (rc)
        return rc;
    rc = open_client(o, &c);
    if (!rc)
        rc = mc_exist(c, o->args[0]);
    mc_client_close(c);
    if (rc == 1 || rc == 0 || rc == MC_ERR_OBJECT_NOT_FOUND) {
        puts(rc == 1 ? "true" : "false");
        fflush(stdout);
        return rc == 1 ? MC_CLI_EXIT_OK : MC_CLI_EXIT_NOT_FOUND;
    }
    return mc_cli_fail("exist", rc);
}

int mc_cli_rm(const struct mc_cli_opts *o)
{
    struct mc_client *c = NULL;
    int rc;

    rc = mc_cli_check_key("rm", o->args[0]);
    if (rc)
        return rc;
    rc = open_client(o, &c);
    if (!rc)
        rc = mc_remove(c, o->args[0], o->force);
    if (rc) /* with the client still open: the hint asks how long the lease lasts */
        rc = mc_cli_fail_rm(c, o->args[0], rc);
    mc_client_close(c);
    return rc;
}
