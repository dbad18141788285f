/*
 * parse.h - the one parser for size and duration values given by users (flags, CLI, configs).
 *
 * Sizes:     "4096", "256MB", "4GiB", "1.5G", "64k" — K/M/G/T with an optional B or iB suffix,
 *            all powers of 1024, case-insensitive; fractional values allowed with a unit.
 * Durations: "500ms", "10s", "5m", "1h", "250us", "1.5s"; a bare number uses the caller's
 *            default unit (e.g. upstream's --default_kv_lease_ttl=10000 is milliseconds).
 * Errors: -1 with a human-readable reason in err (if non-NULL) — empty input, junk after the
 * number, a negative value, an unknown unit, or overflow of uint64.
 */
#ifndef MC_COMMON_PARSE_H
#define MC_COMMON_PARSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int mc_parse_size(const char *s, uint64_t *out, char *err, size_t errlen);

enum mc_time_unit { MC_UNIT_NS, MC_UNIT_US, MC_UNIT_MS, MC_UNIT_S };
/* Result in nanoseconds. */
int mc_parse_duration_ns(const char *s, enum mc_time_unit bare_unit, uint64_t *out_ns, char *err,
                         size_t errlen);
int mc_parse_duration_ms(const char *s, enum mc_time_unit bare_unit, uint64_t *out_ms, char *err,
                         size_t errlen);

/* Formats bytes as "1.5 GiB" / "512 B" into buf; returns buf. */
char *mc_format_size(uint64_t bytes, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
