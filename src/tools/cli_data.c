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
 * get KEY [-o FILE]  asks the size (a lease-free query that is not an access), reads into a
 *                    buffer of that size with one Get (when the object was replaced by a
 *                    larger one in between, the Get says the new size and is retried), writes
 *                    it to FILE or stdout. A get is thereby one read for the master's access
 *                    counts, as an engine's Get is.
 * exist KEY          prints "true" (exit 0) or "false" (exit 1).
 * rm KEY [--force]   --force ignores a read lease.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    return rc ? mc_cli_fail("put", rc) : MC_CLI_EXIT_OK;
}

int mc_cli_get(const struct mc_cli_opts *o)
{
    const char *key = o->args[0];
    struct mc_client *c = NULL;
    void *buf = NULL;
    int64_t n = 0;
    FILE *f = NULL;
    int rc;

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

    f = o->output ? fopen(o->output, "wb") : stdout;
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

    rc = open_client(o, &c);
    if (!rc)
        rc = mc_remove(c, o->args[0], o->force);
    mc_client_close(c);
    return rc ? mc_cli_fail("rm", rc) : MC_CLI_EXIT_OK;
}
