/* parse.c - see parse.h. */
#include "common/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Splits "  1.5 GiB " into a number and a unit; rejects signs, empties and junk. */
static int split_number(const char *s, double *num, const char **unit, int *is_integer,
                        unsigned long long *ival, char *err, size_t errlen)
{
    const char *p = s, *q;
    char *end;

    if (!s)
        return fail(err, errlen, "empty value");
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0')
        return fail(err, errlen, "empty value");
    if (*p == '-' || *p == '+')
        return fail(err, errlen, "'%s': sign not allowed", s);
    if (!isdigit((unsigned char)*p) && *p != '.')
        return fail(err, errlen, "'%s': expected a number", s);
    q = p;
    while (isdigit((unsigned char)*q))
        q++;
    *is_integer = (*q != '.' && *q != 'e' && *q != 'E');
    errno = 0;
    if (*is_integer) {
        *ival = strtoull(p, &end, 10);
        if (errno == ERANGE)
            return fail(err, errlen, "'%s': number too large", s);
        *num = (double)*ival;
    } else {
        *num = strtod(p, &end);
        if (errno == ERANGE || !isfinite(*num))
            return fail(err, errlen, "'%s': number out of range", s);
    }
    if (end == p)
        return fail(err, errlen, "'%s': expected a number", s);
    while (isspace((unsigned char)*end))
        end++;
    *unit = end;
    /* trailing spaces after the unit are tolerated, but nothing else */
    return 0;
}

static int unit_is(const char *unit, const char *name)
{
    size_t n = strlen(name);
    if (strncasecmp(unit, name, n) != 0)
        return 0;
    for (const char *p = unit + n; *p; p++)
        if (!isspace((unsigned char)*p))
            return 0;
    return 1;
}

int mc_parse_size(const char *s, uint64_t *out, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int shift;
    } units[] = {
        {"", 0},     {"b", 0},  {"k", 10},  {"kb", 10},  {"kib", 10}, {"m", 20},  {"mb", 20},
        {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40},   {"tb", 40}, {"tib", 40},
    };
    double num;
    const char *unit;
    int is_int;
    unsigned long long ival = 0;

    if (split_number(s, &num, &unit, &is_int, &ival, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (!unit_is(unit, units[i].name))
            continue;
        if (is_int) {
            if (units[i].shift && ival > (UINT64_MAX >> units[i].shift))
                return fail(err, errlen, "'%s': size too large", s);
            *out = (uint64_t)ival << units[i].shift;
            return 0;
        }
        double v = ldexp(num, units[i].shift);
        if (v >= 18446744073709551616.0)
            return fail(err, errlen, "'%s': size too large", s);
        if (units[i].shift == 0 && v != floor(v))
            return fail(err, errlen, "'%s': a byte count must be whole", s);
        *out = (uint64_t)v;
        return 0;
    }
    return fail(err, errlen, "'%s': unknown size unit '%s' (use B, K, M, G, T, optionally KiB/KB)",
                s, unit);
}

int mc_parse_duration_ns(const char *s, enum mc_time_unit bare_unit, uint64_t *out_ns, char *err,
                         size_t errlen)
{
    static const struct {
        const char *name;
        double ns;
    } units[] = {
        {"ns", 1.0}, {"us", 1e3},   {"ms", 1e6},   {"s", 1e9},     {"sec", 1e9},
        {"m", 60e9}, {"min", 60e9}, {"h", 3600e9}, {"d", 86400e9},
    };
    static const double bare[] = {1.0, 1e3, 1e6, 1e9};
    double num, mult = -1;
    const char *unit;
    int is_int;
    unsigned long long ival = 0;

    if ((unsigned)bare_unit > MC_UNIT_S)
        return fail(err, errlen, "bad default unit");
    if (split_number(s, &num, &unit, &is_int, &ival, err, errlen) < 0)
        return -1;
    if (unit_is(unit, ""))
        mult = bare[bare_unit];
    for (size_t i = 0; mult < 0 && i < sizeof(units) / sizeof(units[0]); i++)
        if (unit_is(unit, units[i].name))
            mult = units[i].ns;
    if (mult < 0)
        return fail(err, errlen, "'%s': unknown duration unit '%s' (use ns, us, ms, s, m, h, d)", s,
                    unit);
    if (is_int) {
        /* exact integer arithmetic (every multiplier is a whole number of nanoseconds) */
        unsigned __int128 x = (unsigned __int128)ival * (uint64_t)mult;
        if (x > UINT64_MAX)
            return fail(err, errlen, "'%s': duration too large", s);
        *out_ns = (uint64_t)x;
        return 0;
    }
    double v = num * mult + 0.5;
    if (!(v < 18446744073709551616.0))
        return fail(err, errlen, "'%s': duration too large", s);
    *out_ns = (uint64_t)v;
    return 0;
}

int mc_parse_duration_ms(const char *s, enum mc_time_unit bare_unit, uint64_t *out_ms, char *err,
                         size_t errlen)
{
    uint64_t ns;
    if (mc_parse_duration_ns(s, bare_unit, &ns, err, errlen) < 0)
        return -1;
    *out_ms = ns / 1000000ull;
    return 0;
}

char *mc_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && i < 5) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.1f %s", v, names[i]);
    return buf;
}
