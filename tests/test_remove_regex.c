/*
 * test_remove_regex.c - RemoveByRegex in the master core (src/master/remove_regex.c), on a fake
 * clock: the pattern is a POSIX extended regex anchored to the whole key; every matching key is
 * removed by the Remove rules (a leased key stays unless forced, a Put in flight stays); bad
 * patterns are INVALID_PARAMS and remove nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/remove_regex.h"
#include "master_fixture.h"

static int setup(void **state)
{
    *state = mfx_new(3, 64 * MIB, 0);
    return *state ? 0 : -1;
}

static bool exists(struct fx *f, const char *k)
{
    struct mc_key_info ki;
    return mc_master_query_key(f->m, k, strlen(k), &ki) == MC_OK;
}

static int regex(struct fx *f, const char *p, bool force, uint64_t *n)
{
    return mc_master_remove_by_regex(f->m, p, strlen(p), force, n);
}

static const char *const KEYS[] = {"layer0/block1", "layer0/block2", "layer1/block1", "xlayer0/b",
                                   "block"};
#define NKEYS (sizeof(KEYS) / sizeof(KEYS[0]))

static void put_all(struct fx *f)
{
    for (size_t i = 0; i < NKEYS; i++)
        assert_int_equal(tm_put(f->m, f->a, KEYS[i], 4096), MC_OK);
}

/* The whole key must match: a prefix pattern needs ".*", and "layer0/.*" does not remove
 * "xlayer0/b" (an unanchored search would). */
static void test_anchored_match(void **state)
{
    struct fx *f = *state;
    put_all(f);
    uint64_t n = 99;
    assert_int_equal(regex(f, "layer0/", false, &n), MC_OK);
    assert_int_equal(n, 0);
    assert_int_equal(regex(f, "layer0/.*", false, &n), MC_OK);
    assert_int_equal(n, 2);
    assert_false(exists(f, "layer0/block1"));
    assert_false(exists(f, "layer0/block2"));
    assert_true(exists(f, "layer1/block1"));
    assert_true(exists(f, "xlayer0/b"));
    assert_true(exists(f, "block"));
    /* alternation stays inside the anchors: ^(block|nothing)$ */
    assert_int_equal(regex(f, "block|nothing", false, &n), MC_OK);
    assert_int_equal(n, 1);
    assert_false(exists(f, "block"));
    assert_true(exists(f, "layer1/block1"));
}

/* A key read just now (leased) is kept unless forced; a Put in flight is never removed. */
static void test_remove_rules(void **state)
{
    struct fx *f = *state;
    put_all(f);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "layer1/block1", 13, &g), MC_OK);
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(f->m, f->a, "layer1/pending", 14, 4096, NULL, &ps), MC_OK);
    uint64_t n = 0;
    assert_int_equal(regex(f, "layer1/.*", false, &n), MC_OK);
    assert_int_equal(n, 0);
    assert_true(exists(f, "layer1/block1"));
    assert_int_equal(regex(f, "layer1/.*", true, &n), MC_OK);
    assert_int_equal(n, 1); /* forced: the leased key goes, the Put in flight stays */
    assert_false(exists(f, "layer1/block1"));
    assert_true(exists(f, "layer1/pending"));
    /* once the lease ran out an unforced pattern removes too */
    assert_int_equal(mc_master_get_replica_list(f->m, "block", 5, &g), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 10001);
    assert_int_equal(regex(f, "bl.ck", false, &n), MC_OK);
    assert_int_equal(n, 1);
}

static void test_bad_patterns(void **state)
{
    struct fx *f = *state;
    put_all(f);
    uint64_t n = 7;
    assert_int_equal(regex(f, "layer0/(", false, &n), MC_ERR_INVALID_PARAMS);
    assert_int_equal(regex(f, "", false, &n), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_remove_by_regex(f->m, "a\0b", 3, false, &n), MC_ERR_INVALID_PARAMS);
    char *big = malloc(MC_REGEX_MAX_LEN + 2);
    memset(big, 'a', MC_REGEX_MAX_LEN + 1);
    big[MC_REGEX_MAX_LEN + 1] = '\0';
    assert_int_equal(regex(f, big, false, &n), MC_ERR_INVALID_PARAMS);
    free(big);
    assert_int_equal(n, 7); /* untouched on refusal */
    for (size_t i = 0; i < NKEYS; i++)
        assert_true(exists(f, KEYS[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_anchored_match, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_remove_rules, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_patterns, setup, mfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
