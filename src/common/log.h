/*
 * log.h - leveled, one-line, key=value structured logging to stderr.
 *
 * A line looks like:
 *   ts=2026-11-29T18:50:01.123Z level=warn comp=rpc msg="frame too large" conn=7 len=99999999
 * The caller writes the fields after msg as a printf format ("conn=%d len=%u"); values that may
 * contain spaces should be quoted by the caller (mc_log_quote helps). The level threshold and the
 * output stream are process-wide settings made by executables (never by libraries); the default
 * is INFO on stderr. Thread-safe: each line is formatted into a buffer and written with one
 * write(2).
 *
 * Loggers. A library object that logs on its own terms (an mc_client: its level and callback
 * come from its config) owns a struct mc_logger, and the code working for it logs through it
 * without passing it around: a thread's *current logger* (thread-local, NULL = the process
 * default above) is set by each public entry point for the length of the call (mc_log_scope)
 * and by each thread the object starts (the thread takes the logger its creator had, see
 * mc_log_current). Nothing process-wide changes, so two clients in one process keep their own
 * levels and sinks.
 */
#ifndef MC_COMMON_LOG_H
#define MC_COMMON_LOG_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mc_log_level {
    MC_LOG_DEBUG = 0,
    MC_LOG_INFO = 1,
    MC_LOG_WARN = 2,
    MC_LOG_ERROR = 3,
    MC_LOG_OFF = 4,
};

/* A logger: lines below `level` are dropped; the others go to sink (NULL: the process's log
 * fd). sink gets the whole line without its newline, NUL-terminated, on the logging thread. */
struct mc_logger {
    enum mc_log_level level;
    void (*sink)(void *arg, enum mc_log_level level, const char *line, size_t len);
    void *arg;
};

/* The calling thread's current logger (NULL: the process default). */
const struct mc_logger *mc_log_current(void);
/* Makes lg the calling thread's current logger; returns the previous one, for restoring. */
const struct mc_logger *mc_log_set_current(const struct mc_logger *lg);
static inline void mc_log_scope_end_(const struct mc_logger **prev)
{
    mc_log_set_current(*prev);
}
/* Logs through lg (when not NULL) until the enclosing block ends. */
#define mc_log_scope(lg)                                                                           \
    const struct mc_logger *mc_log_prev_ __attribute__((cleanup(mc_log_scope_end_), unused)) =     \
        mc_log_set_current((lg) ? (lg) : mc_log_current())

/* Whether a line at level would be written by the calling thread's current logger. */
int mc_log_would(enum mc_log_level level);

void mc_log_set_level(enum mc_log_level level);
enum mc_log_level mc_log_get_level(void);
/* Parse "debug|info|warn|error|off" (case-insensitive). Returns 0, or -1 when unknown. */
int mc_log_level_parse(const char *s, enum mc_log_level *out);
/* Where lines go: a file descriptor (default 2). */
void mc_log_set_fd(int fd);

/* Writes s into buf as a quoted field value: "..." with '"', '\\' and control characters
 * escaped, truncated (still closed) to fit len bytes. Returns buf. mc_info("disk", "open failed",
 * "path=%s", mc_log_quote(path, q, sizeof(q))). */
char *mc_log_quote(const char *s, char *buf, size_t len);
/* A buffer size for quoting names and endpoints (longer values are truncated, still closed). */
#define MC_LOG_QUOTE_MAX 512

void mc_log_write(enum mc_log_level level, const char *comp, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void mc_log_vwrite(enum mc_log_level level, const char *comp, const char *msg, const char *fmt,
                   va_list ap) __attribute__((format(printf, 4, 0)));

#define mc_log_enabled(level) mc_log_would(level)
/* mc_log(MC_LOG_WARN, "rpc", "frame too large", "conn=%d len=%u", fd, len) */
#define mc_log(level, comp, msg, ...)                                                              \
    do {                                                                                           \
        if (mc_log_enabled(level))                                                                 \
            mc_log_write((level), (comp), (msg), __VA_ARGS__);                                     \
    } while (0)
#define mc_debug(comp, msg, ...) mc_log(MC_LOG_DEBUG, comp, msg, __VA_ARGS__)
#define mc_info(comp, msg, ...) mc_log(MC_LOG_INFO, comp, msg, __VA_ARGS__)
#define mc_warn(comp, msg, ...) mc_log(MC_LOG_WARN, comp, msg, __VA_ARGS__)
#define mc_error(comp, msg, ...) mc_log(MC_LOG_ERROR, comp, msg, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
