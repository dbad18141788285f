/*
 * test_common_misc.c - the small pieces of src/common: CRC32C (published vectors, hardware vs
 * portable), xxh3 hashing, error-code names, 128-bit ids, the fake clock and logging.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/hash.h"
#include "common/id.h"
#include "common/log.h"
#include "common/net.h"
#include "mooncake/errors.h"

/* ---- CRC32C ---------------------------------------------------------------------------------- */

static void test_crc32c_vectors(void **state)
{
    uint8_t buf[48];
    (void)state;

    /* RFC 3720 (iSCSI) appendix B.4 and the common check value */
    assert_int_equal(mc_crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(mc_crc32c_extend_sw(0, "123456789", 9), 0xE3069283u);
    memset(buf, 0, 32);
    assert_int_equal(mc_crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    assert_int_equal(mc_crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(mc_crc32c(buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    assert_int_equal(mc_crc32c(buf, 32), 0x113FDB5Cu);
    /* the iSCSI SCSI Read (10) command PDU from RFC 3720 B.4 */
    static const uint8_t pdu[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    assert_int_equal(mc_crc32c(pdu, sizeof(pdu)), 0xD9963A56u);
    assert_int_equal(mc_crc32c_extend_sw(0, pdu, sizeof(pdu)), 0xD9963A56u);
    assert_int_equal(mc_crc32c("", 0), 0);
}

static void test_crc32c_hw_equals_sw(void **state)
{
    uint8_t *buf = malloc(4096 + 16);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    (void)state;
    assert_non_null(buf);
    for (size_t i = 0; i < 4096 + 16; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    /* every length up to 64 and assorted larger ones, at unaligned offsets */
    for (size_t len = 0; len < 4096; len = len < 64 ? len + 1 : len * 3 + 7) {
        for (size_t off = 0; off < 8; off += 3) {
            uint32_t a = mc_crc32c(buf + off, len);
            uint32_t b = mc_crc32c_extend_sw(0, buf + off, len);
            if (a != b)
                fail_msg("len %zu off %zu: dispatch %08x sw %08x", len, off, a, b);
        }
    }
    /* extend(crc(a), b) == crc(a || b) for both paths */
    for (size_t cut = 0; cut <= 100; cut += 7) {
        uint32_t whole = mc_crc32c(buf, 100);
        assert_int_equal(mc_crc32c_extend(mc_crc32c(buf, cut), buf + cut, 100 - cut), whole);
        assert_int_equal(
            mc_crc32c_extend_sw(mc_crc32c_extend_sw(0, buf, cut), buf + cut, 100 - cut), whole);
    }
    /* a flipped bit changes the CRC */
    uint32_t before = mc_crc32c(buf, 1000);
    buf[500] ^= 0x10;
    assert_int_not_equal(mc_crc32c(buf, 1000), before);
    free(buf);
}

/* Long lengths (multiples of 24 KiB and around them), unaligned, with
 * a running CRC carried in, against the table implementation: paths that only long buffers
 * take (wide folding) show up here and nowhere in the short lengths above. */
static void test_crc32c_long_buffers(void **state)
{
    const size_t max = 5 * 24576 + 4096;
    uint8_t *buf = malloc(max + 16);
    uint64_t x = 0x243f6a8885a308d3ull;
    (void)state;
    assert_non_null(buf);
    for (size_t i = 0; i < max + 16; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    static const size_t lens[] = {
        24575,     24576,           24577, 24576 + 8, 2 * 24576 - 1, 2 * 24576, 3 * 24576 + 4095,
        5 * 24576, 5 * 24576 + 4096};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        for (size_t off = 0; off < 16; off += 5) {
            uint32_t a = mc_crc32c(buf + off, lens[i]);
            uint32_t b = mc_crc32c_extend_sw(0, buf + off, lens[i]);
            if (a != b)
                fail_msg("len %zu off %zu: dispatch %08x sw %08x", lens[i], off, a, b);
            uint32_t seed = 0xdeadbeefu ^ (uint32_t)i;
            assert_int_equal(mc_crc32c_extend(seed, buf + off, lens[i]),
                             mc_crc32c_extend_sw(seed, buf + off, lens[i]));
        }
    }
    free(buf);
}

typedef uint32_t (*copy_crc_fn)(uint32_t crc, void *dst, const void *src, size_t len);

/* fn moves the same bytes as memcpy and gives the same CRC as a separate pass (the table
 * implementation), for every length 0..4096 at odd source and destination alignments, with a
 * running CRC carried in, and across 32 KiB chunks and 256-byte fold blocks. Bytes around the
 * destination stay. */
static void check_copy_crc(copy_crc_fn fn, const char *name)
{
    const size_t max = 3 * 32768 + 4096;
    uint8_t *src = malloc(max + 16), *got = malloc(max + 32), *want = malloc(max + 32);
    uint64_t x = 0x452821e638d01377ull;
    assert_non_null(src);
    assert_non_null(got);
    assert_non_null(want);
    for (size_t i = 0; i < max + 16; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        src[i] = (uint8_t)x;
    }
    static const size_t offs[][2] = {{0, 0}, {1, 3}, {3, 1}, {7, 5}, {5, 0}};
    for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++) {
        size_t so = offs[o][0], d = offs[o][1] + 8;
        for (size_t len = 0; len <= 4096; len++) {
            memset(got, 0xa5, len + d + 8);
            memset(want, 0xa5, len + d + 8);
            uint32_t seed = (uint32_t)(len * 2654435761u);
            uint32_t c = fn(seed, got + d, src + so, len);
            memcpy(want + d, src + so, len);
            uint32_t w = mc_crc32c_extend_sw(seed, want + d, len);
            if (c != w || memcmp(got, want, len + d + 8) != 0)
                fail_msg("%s: len %zu src+%zu dst+%zu: crc %08x want %08x, bytes %s", name, len, so,
                         d, c, w, memcmp(got, want, len + d + 8) ? "differ" : "same");
        }
    }
    static const size_t lens[] = {32767, 32768, 32769, 2 * 32768 + 1, 3 * 32768 + 4095};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint32_t c = fn(0xdeadbeef, got + 3, src + 1, lens[i]);
        assert_int_equal(c, mc_crc32c_extend_sw(0xdeadbeef, src + 1, lens[i]));
        assert_memory_equal(got + 3, src + 1, lens[i]);
    }
    free(src);
    free(got);
    free(want);
}

/* The copy fused with the CRC (the fold where the CPU has VPCLMULQDQ) and the chunked copy. */
static void test_crc32c_copy_equals_copy_then_crc(void **state)
{
    (void)state;
    print_message("mc_crc32c_copy: %s\n", mc_crc32c_copy_folds() ? "fold" : "chunked");
    check_copy_crc(mc_crc32c_copy, "mc_crc32c_copy");
    check_copy_crc(mc_crc32c_copy_chunked, "mc_crc32c_copy_chunked");
}

/* ---- hashing --------------------------------------------------------------------------------- */

static void test_hash(void **state)
{
    (void)state;
    /* XXH3-64 of the empty input, seed 0 (xxHash's published sanity value) */
    assert_true(mc_hash_key("", 0) == 0x2D06800538D394C2ull);
    assert_true(mc_hash_seeded("", 0, 0) == 0x2D06800538D394C2ull);
    /* stable: same input, same output; seed 0 is the shard hash */
    assert_true(mc_hash_key("mooncake", 8) == mc_hash_key("mooncake", 8));
    assert_true(mc_hash_seeded("mooncake", 8, 0) == mc_hash_key("mooncake", 8));
    /* seeds give different functions */
    uint64_t h1 = mc_hash_seeded("mooncake", 8, 1), h2 = mc_hash_seeded("mooncake", 8, 2);
    assert_true(h1 != h2);
    assert_true(h1 != mc_hash_key("mooncake", 8));
    /* keys differing in one byte land in different places; shards spread */
    int buckets[16] = {0};
    for (int i = 0; i < 16000; i++) {
        char k[32];
        int n = snprintf(k, sizeof(k), "key-%d", i);
        buckets[mc_hash_key(k, (size_t)n) & 15]++;
    }
    for (int b = 0; b < 16; b++)
        assert_in_range(buckets[b], 800, 1200);
}

/* ---- error codes ----------------------------------------------------------------------------- */

static void test_error_names(void **state)
{
    (void)state;
    assert_string_equal(mc_strerror(MC_OK), "OK");
    assert_string_equal(mc_strerror(-704), "OBJECT_NOT_FOUND");
    assert_int_equal(MC_ERR_OBJECT_NOT_FOUND, -704);
    assert_int_equal(MC_ERR_INVALID_PARAMS, -600);
    assert_int_equal(MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS, -1010);
    assert_string_equal(mc_strerror(-12345), "UNKNOWN_ERROR");
    assert_string_equal(mc_strerror(7), "UNKNOWN_ERROR");
    assert_int_equal(mc_error_from_name("NO_SUCH_NAME"), 1);
    assert_int_equal(mc_error_from_name(NULL), 1);
    /* every code round-trips through its name, and names are unique */
#define X_(sym, val, name)                                                                         \
    assert_string_equal(mc_strerror(val), name);                                                   \
    assert_int_equal(mc_error_from_name(name), val);
    MC_ERROR_LIST(X_)
#undef X_
}

/* ---- ids ------------------------------------------------------------------------------------- */

static void test_ids(void **state)
{
    char buf[MC_ID_STRLEN];
    struct mc_id id = {0x0123456789abcdefull, 0xfedcba9876543210ull}, back;
    (void)state;

    assert_string_equal(mc_id_format(id, buf), "0123456789abcdeffedcba9876543210");
    assert_int_equal(mc_id_parse(buf, &back), 0);
    assert_true(mc_id_eq(id, back));
    assert_int_equal(mc_id_parse("0123456789ABCDEFFEDCBA9876543210", &back), 0);
    assert_true(mc_id_eq(id, back));

    back.hi = back.lo = 42;
    assert_int_equal(mc_id_parse("0123", &back), -1);
    assert_int_equal(mc_id_parse("0123456789abcdeffedcba98765432100", &back), -1);
    assert_int_equal(mc_id_parse("0123456789abcdeffedcba987654321g", &back), -1);
    assert_int_equal(mc_id_parse("", &back), -1);
    assert_int_equal(mc_id_parse(NULL, &back), -1);
    assert_true(back.hi == 42 && back.lo == 42); /* untouched on failure */

    struct mc_id a = mc_id_random(), b = mc_id_random();
    assert_false(mc_id_is_zero(a));
    assert_false(mc_id_eq(a, b));
    assert_int_equal(mc_id_parse(mc_id_format(a, buf), &back), 0);
    assert_true(mc_id_eq(a, back));
    assert_int_equal(strlen(buf), 32);
}

/* ---- clock ----------------------------------------------------------------------------------- */

static void test_fake_clock(void **state)
{
    struct mc_fake_clock fc;
    const struct mc_clock *clk = &fc.clock;
    (void)state;

    mc_fake_clock_init(&fc, 5000000);
    assert_int_equal(mc_clock_now_ns(clk), 5000000);
    assert_int_equal(mc_clock_now_ms(clk), 5);
    assert_int_equal(mc_clock_now_ms(clk), 5); /* does not move by itself */
    mc_fake_clock_advance_ms(&fc, 10000);
    assert_int_equal(mc_clock_now_ms(clk), 10005);
    mc_fake_clock_set_ns(&fc, 42);
    assert_int_equal(mc_clock_now_ns(clk), 42);

    const struct mc_clock *sys = mc_clock_system();
    uint64_t t1 = mc_clock_now_ns(sys), t2 = mc_clock_now_ns(sys);
    assert_true(t1 > 0 && t2 >= t1);
    assert_true(mc_now_ms() >= t1 / 1000000);
}

/* ---- log ------------------------------------------------------------------------------------- */

static void test_log_level_parse(void **state)
{
    enum mc_log_level l = MC_LOG_OFF;
    (void)state;
    assert_int_equal(mc_log_level_parse("debug", &l), 0);
    assert_int_equal(l, MC_LOG_DEBUG);
    assert_int_equal(mc_log_level_parse("INFO", &l), 0);
    assert_int_equal(l, MC_LOG_INFO);
    assert_int_equal(mc_log_level_parse("Warn", &l), 0);
    assert_int_equal(l, MC_LOG_WARN);
    assert_int_equal(mc_log_level_parse("warning", &l), 0);
    assert_int_equal(l, MC_LOG_WARN);
    assert_int_equal(mc_log_level_parse("error", &l), 0);
    assert_int_equal(l, MC_LOG_ERROR);
    assert_int_equal(mc_log_level_parse("off", &l), 0);
    assert_int_equal(l, MC_LOG_OFF);
    assert_int_equal(mc_log_level_parse("loud", &l), -1);
    assert_int_equal(mc_log_level_parse("", &l), -1);
    assert_int_equal(mc_log_level_parse(NULL, &l), -1);
    assert_int_equal(l, MC_LOG_OFF);
}

static void test_log_lines(void **state)
{
    char path[] = "/tmp/mc_test_log.XXXXXX", q[64], buf[4096] = "";
    int fd = mkstemp(path);
    (void)state;
    assert_true(fd >= 0);
    mc_log_set_fd(fd);
    mc_log_set_level(MC_LOG_WARN);
    mc_info("test", "hidden", "n=%d", 1);
    mc_warn("test", "shown", "n=%d who=%s", 2, mc_log_quote("a \"b\"\n", q, sizeof(q)));
    mc_error("test", "no fields", "%s", "");
    mc_log_set_level(MC_LOG_OFF);
    mc_error("test", "off", "n=%d", 3);
    mc_log_set_level(MC_LOG_INFO);
    mc_log_set_fd(2);

    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    assert_null(strstr(buf, "hidden"));
    assert_null(strstr(buf, "msg=\"off\""));
    const char *l1 = strstr(buf, "level=warn comp=test msg=\"shown\" n=2 who=\"a \\\"b\\\"\\n\"\n");
    if (!l1)
        fail_msg("unexpected log output:\n%s", buf);
    assert_true(strncmp(buf, "ts=", 3) == 0);
    assert_non_null(strstr(buf, "level=error comp=test msg=\"no fields\"\n"));
    /* one line per event */
    int lines = 0;
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 2);
}

static void test_log_quote_truncates(void **state)
{
    char small[8];
    (void)state;
    assert_string_equal(mc_log_quote("abcdefghij", small, sizeof(small)), "\"abcde\"");
    assert_string_equal(mc_log_quote("ab\"cd", small, sizeof(small)), "\"ab\\\"c\"");
    assert_string_equal(mc_log_quote(NULL, small, sizeof(small)), "\"\"");
    assert_string_equal(mc_log_quote("\x01", small, sizeof(small)), "\"\\x01\"");
    /* a very long line is cut, still ends with a newline */
    char path[] = "/tmp/mc_test_log.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char *big = malloc(10000);
    assert_non_null(big);
    memset(big, 'x', 9999);
    big[9999] = '\0';
    mc_log_set_fd(fd);
    mc_warn("test", "big", "v=%s", big);
    mc_log_set_fd(2);
    char rd[8192];
    ssize_t n = pread(fd, rd, sizeof(rd), 0);
    close(fd);
    unlink(path);
    free(big);
    assert_true(n > 100 && n < 4096);
    assert_int_equal(rd[n - 1], '\n');
}

/* What mooncake_client calls loopback when it warns about --host (no DNS lookups). */
static void test_host_is_loopback(void **state)
{
    (void)state;
    static const char *const yes[] = {"127.0.0.1", "127.1.2.3", "localhost",
                                      "LocalHost", "::1",       "[::1]"};
    static const char *const no[] = {"10.0.0.1", "0.0.0.0", "128.0.0.1",         "node7",  "::2",
                                     "[::1",     "",        "localhost.example", "fe80::1"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_true(mc_net_host_is_loopback(yes[i]));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(mc_net_host_is_loopback(no[i]));
    assert_false(mc_net_host_is_loopback(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_crc32c_hw_equals_sw),
        cmocka_unit_test(test_crc32c_long_buffers),
        cmocka_unit_test(test_crc32c_copy_equals_copy_then_crc),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_host_is_loopback),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_fake_clock),
        cmocka_unit_test(test_log_level_parse),
        cmocka_unit_test(test_log_lines),
        cmocka_unit_test(test_log_quote_truncates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
