/*
 * test_parse.c - the size and duration parser (common/parse.h): good values, every unit, the
 * boundaries of uint64, and bad input with a reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/parse.h"

static uint64_t size_ok(const char *s)
{
    char err[128] = "";
    uint64_t v = 0xdeadbeef;
    if (mc_parse_size(s, &v, err, sizeof(err)) != 0)
        fail_msg("'%s' rejected: %s", s, err);
    return v;
}

static void size_bad(const char *s, const char *reason)
{
    char err[160] = "";
    uint64_t v = 12345;
    if (mc_parse_size(s, &v, err, sizeof(err)) != -1)
        fail_msg("'%s' accepted as %llu", s ? s : "(null)", (unsigned long long)v);
    assert_int_equal(v, 12345); /* untouched */
    if (!strstr(err, reason))
        fail_msg("'%s': reason '%s' lacks '%s'", s ? s : "(null)", err, reason);
}

static void test_sizes_good(void **state)
{
    (void)state;
    assert_int_equal(size_ok("0"), 0);
    assert_int_equal(size_ok("4096"), 4096);
    assert_int_equal(size_ok("7B"), 7);
    assert_int_equal(size_ok("64k"), 64ull << 10);
    assert_int_equal(size_ok("64K"), 64ull << 10);
    assert_int_equal(size_ok("64KB"), 64ull << 10);
    assert_int_equal(size_ok("64KiB"), 64ull << 10);
    assert_int_equal(size_ok("256MB"), 256ull << 20);
    assert_int_equal(size_ok("256mib"), 256ull << 20);
    assert_int_equal(size_ok("4GiB"), 4ull << 30);
    assert_int_equal(size_ok("1.5G"), 3ull << 29);
    assert_int_equal(size_ok("2T"), 2ull << 40);
    assert_int_equal(size_ok(" 8 MB "), 8ull << 20);
    assert_int_equal(size_ok("0.5K"), 512);
    assert_int_equal(size_ok("1e3"), 1000);
    assert_int_equal(size_ok("18446744073709551615"), UINT64_MAX);
    assert_int_equal(size_ok("16777215T"), 16777215ull << 40);
}

static void test_sizes_bad(void **state)
{
    (void)state;
    size_bad(NULL, "empty");
    size_bad("", "empty");
    size_bad("   ", "empty");
    size_bad("-1", "sign");
    size_bad("+5M", "sign");
    size_bad("abc", "expected a number");
    size_bad("4X", "unknown size unit");
    size_bad("4 GiB extra", "unknown size unit");
    size_bad("1.5", "whole");
    size_bad("18446744073709551616", "too large");
    size_bad("16777216T", "too large");
    size_bad("1e30G", "too large");
    size_bad("1e400", "out of range");
    size_bad("0x10", "unknown size unit");
    size_bad("inf", "expected a number");
}

static uint64_t dur_ns(const char *s, enum mc_time_unit bare)
{
    char err[128] = "";
    uint64_t v = 0;
    if (mc_parse_duration_ns(s, bare, &v, err, sizeof(err)) != 0)
        fail_msg("'%s' rejected: %s", s, err);
    return v;
}

static void dur_bad(const char *s, const char *reason)
{
    char err[160] = "";
    uint64_t v = 777;
    if (mc_parse_duration_ns(s, MC_UNIT_MS, &v, err, sizeof(err)) != -1)
        fail_msg("'%s' accepted as %llu ns", s ? s : "(null)", (unsigned long long)v);
    assert_int_equal(v, 777);
    if (!strstr(err, reason))
        fail_msg("'%s': reason '%s' lacks '%s'", s ? s : "(null)", err, reason);
}

static void test_durations_good(void **state)
{
    uint64_t ms = 0;
    (void)state;
    assert_int_equal(dur_ns("5ns", MC_UNIT_S), 5);
    assert_int_equal(dur_ns("250us", MC_UNIT_S), 250000);
    assert_int_equal(dur_ns("500ms", MC_UNIT_S), 500000000ull);
    assert_int_equal(dur_ns("10s", MC_UNIT_MS), 10000000000ull);
    assert_int_equal(dur_ns("10sec", MC_UNIT_MS), 10000000000ull);
    assert_int_equal(dur_ns("5m", MC_UNIT_MS), 300000000000ull);
    assert_int_equal(dur_ns("5min", MC_UNIT_MS), 300000000000ull);
    assert_int_equal(dur_ns("1h", MC_UNIT_MS), 3600000000000ull);
    assert_int_equal(dur_ns("2d", MC_UNIT_MS), 172800000000000ull);
    assert_int_equal(dur_ns("1.5s", MC_UNIT_MS), 1500000000ull);
    assert_int_equal(dur_ns("0.25ms", MC_UNIT_MS), 250000ull);
    /* a bare number takes the caller's unit */
    assert_int_equal(dur_ns("10000", MC_UNIT_MS), 10000000000ull);
    assert_int_equal(dur_ns("10", MC_UNIT_S), 10000000000ull);
    assert_int_equal(dur_ns("7", MC_UNIT_NS), 7);
    assert_int_equal(dur_ns("7", MC_UNIT_US), 7000);
    /* exact at the top of the range (integers never go through a double) */
    assert_int_equal(dur_ns("18446744073709551615ns", MC_UNIT_MS), UINT64_MAX);
    assert_int_equal(dur_ns("1e19ns", MC_UNIT_MS), 10000000000000000000ull);
    assert_int_equal(mc_parse_duration_ms("1h", MC_UNIT_MS, &ms, NULL, 0), 0);
    assert_int_equal(ms, 3600000);
    assert_int_equal(mc_parse_duration_ms("1500us", MC_UNIT_MS, &ms, NULL, 0), 0);
    assert_int_equal(ms, 1);
}

static void test_durations_bad(void **state)
{
    uint64_t v;
    (void)state;
    dur_bad(NULL, "empty");
    dur_bad("", "empty");
    dur_bad("-5s", "sign");
    dur_bad("s", "expected a number");
    dur_bad("10parsecs", "unknown duration unit");
    dur_bad("10 s s", "unknown duration unit");
    dur_bad("18446744073709551616ns", "too large");
    dur_bad("18446744073709551615s", "too large");
    dur_bad("1e19s", "too large");
    dur_bad("2e19ns", "too large");
    dur_bad("1e400s", "out of range");
    /* a NULL error buffer is fine */
    assert_int_equal(mc_parse_duration_ns("x", MC_UNIT_MS, &v, NULL, 0), -1);
    /* a bad unit enum is refused, not read out of bounds */
    assert_int_equal(mc_parse_duration_ns("5", (enum mc_time_unit)42, &v, NULL, 0), -1);
}

static void test_format_size(void **state)
{
    char buf[32];
    (void)state;
    assert_string_equal(mc_format_size(512, buf, sizeof(buf)), "512 B");
    assert_string_equal(mc_format_size(1536, buf, sizeof(buf)), "1.5 KiB");
    assert_string_equal(mc_format_size(4ull << 30, buf, sizeof(buf)), "4.0 GiB");
    assert_string_equal(mc_format_size(3ull << 40, buf, sizeof(buf)), "3.0 TiB");
    /* round trip through the parser */
    uint64_t v;
    assert_int_equal(mc_parse_size(mc_format_size(256ull << 20, buf, sizeof(buf)), &v, NULL, 0), 0);
    assert_int_equal(v, 256ull << 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_good),     cmocka_unit_test(test_sizes_bad),
        cmocka_unit_test(test_durations_good), cmocka_unit_test(test_durations_bad),
        cmocka_unit_test(test_format_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
