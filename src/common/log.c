/* log.c - see log.h. */
#include "common/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_level = MC_LOG_INFO;
static _Atomic int g_fd = 2;
static _Thread_local const struct mc_logger *t_logger;

const struct mc_logger *mc_log_current(void)
{
    return t_logger;
}

const struct mc_logger *mc_log_set_current(const struct mc_logger *lg)
{
    const struct mc_logger *prev = t_logger;
    t_logger = lg;
    return prev;
}

int mc_log_would(enum mc_log_level level)
{
    const struct mc_logger *lg = t_logger;
    return level != MC_LOG_OFF && level >= (lg ? lg->level : mc_log_get_level());
}

void mc_log_set_level(enum mc_log_level level)
{
    atomic_store(&g_level, (int)level);
}

enum mc_log_level mc_log_get_level(void)
{
    return (enum mc_log_level)atomic_load_explicit(&g_level, memory_order_relaxed);
}

void mc_log_set_fd(int fd)
{
    atomic_store(&g_fd, fd);
}

int mc_log_level_parse(const char *s, enum mc_log_level *out)
{
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};
    if (!s)
        return -1;
    for (int i = 0; i < 5; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *out = (enum mc_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = MC_LOG_WARN;
        return 0;
    }
    return -1;
}

char *mc_log_quote(const char *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (!buf || len < 3) {
        if (buf && len)
            buf[0] = '\0';
        return buf;
    }
    buf[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char esc[5];
        size_t k = 0;
        if (*p == '"' || *p == '\\') {
            esc[k++] = '\\';
            esc[k++] = (char)*p;
        } else if (*p == '\n') {
            esc[k++] = '\\';
            esc[k++] = 'n';
        } else if (*p < 0x20 || *p == 0x7f) {
            esc[k++] = '\\';
            esc[k++] = 'x';
            esc[k++] = hex[*p >> 4];
            esc[k++] = hex[*p & 15];
        } else {
            esc[k++] = (char)*p;
        }
        if (n + k + 2 > len) /* room for the closing quote and NUL */
            break;
        memcpy(buf + n, esc, k);
        n += k;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

void mc_log_vwrite(enum mc_log_level level, const char *comp, const char *msg, const char *fmt,
                   va_list ap)
{
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};
    char buf[2048];
    struct timeval tv;
    struct tm tm;
    size_t n;
    int r;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    r = snprintf(buf, sizeof(buf),
                 "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s comp=%s msg=\"%s\"",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (long)(tv.tv_usec / 1000), names[level > MC_LOG_OFF ? MC_LOG_OFF : level],
                 comp ? comp : "-", msg ? msg : "");
    n = r < 0 ? 0 : ((size_t)r >= sizeof(buf) ? sizeof(buf) - 1 : (size_t)r);
    if (fmt && *fmt && n + 2 < sizeof(buf)) {
        buf[n++] = ' ';
        r = vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
        if (r > 0)
            n += ((size_t)r >= sizeof(buf) - n) ? sizeof(buf) - n - 1 : (size_t)r;
        else
            n--; /* the fields came out empty: no trailing space */
    }
    if (n >= sizeof(buf) - 1)
        n = sizeof(buf) - 2;
    const struct mc_logger *lg = t_logger;
    if (lg && lg->sink) {
        buf[n] = '\0';
        lg->sink(lg->arg, level, buf, n);
        return;
    }
    buf[n++] = '\n';
    ssize_t w = write(atomic_load(&g_fd), buf, n);
    (void)w;
}

void mc_log_write(enum mc_log_level level, const char *comp, const char *msg, const char *fmt, ...)
{
    va_list ap;
    if (!mc_log_would(level))
        return;
    va_start(ap, fmt);
    mc_log_vwrite(level, comp, msg, fmt, ap);
    va_end(ap);
}
