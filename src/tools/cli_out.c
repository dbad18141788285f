/*
 * cli_out.c - output helpers of mooncake_cli: error reporting, JSON strings, aligned tables.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/errors.h"
#include "tools/cli.h"

int mc_cli_fail(const char *what, int err)
{
    fprintf(stderr, "mooncake_cli: %s: %s\n", what, mc_strerror(err));
    return err == MC_ERR_OBJECT_NOT_FOUND ? MC_CLI_EXIT_NOT_FOUND : MC_CLI_EXIT_ERROR;
}

void mc_cli_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void mc_cli_table_init(struct mc_cli_table *t, int ncols)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
}

void mc_cli_table_row(struct mc_cli_table *t, ...)
{
    va_list ap;

    if (t->failed)
        return;
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **cells = realloc(t->cells, cap * (size_t)t->ncols * sizeof(*cells));
        if (!cells) {
            t->failed = true;
            return;
        }
        t->cells = cells;
        t->cap = cap;
    }
    va_start(ap, t);
    for (int i = 0; i < t->ncols; i++) {
        const char *s = va_arg(ap, const char *);
        char *c = strdup(s ? s : "");
        if (!c)
            t->failed = true;
        t->cells[t->nrows * (size_t)t->ncols + (size_t)i] = c;
    }
    va_end(ap);
    t->nrows++;
}

void mc_cli_table_print(const struct mc_cli_table *t, FILE *f)
{
    size_t *w = calloc((size_t)t->ncols, sizeof(*w));

    if (!w)
        return;
    for (size_t r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
            size_t n = s ? strlen(s) : 0;
            if (n > w[c])
                w[c] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
            if (c == t->ncols - 1)
                fprintf(f, "%s\n", s ? s : "");
            else
                fprintf(f, "%-*s  ", (int)w[c], s ? s : "");
        }
    }
    free(w);
}

void mc_cli_table_destroy(struct mc_cli_table *t)
{
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}
