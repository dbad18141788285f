/*
 * test_skip.h - the skip convention of the cmocka tests. cmocka's skip() marks a test skipped
 * but the binary still exits 0, and CTest shows "Passed" for a test that did not run. A test
 * that cannot run here (no device, no privilege, a sanitizer that forbids what it does) calls
 * MC_SKIP("why", ...) instead: the reason is printed, the test is skipped, and MC_RUN_TESTS
 * (cmocka_run_group_tests) makes the binary exit 77 when something was skipped and nothing
 * failed. Every test is registered with SKIP_RETURN_CODE 77 (tests/CMakeLists.txt), so CTest
 * reports it as skipped, and scripts/test.sh prints the skipped tests by name.
 *
 * Include after <cmocka.h>. One counter per translation unit: call MC_SKIP from the file that
 * holds main().
 */
#ifndef MC_TESTS_TEST_SKIP_H
#define MC_TESTS_TEST_SKIP_H

#define MC_SKIP_EXIT 77 /* CTest's SKIP_RETURN_CODE of every test */

static int mc_test_skipped;

#define MC_SKIP(...)                                                                               \
    do {                                                                                           \
        mc_test_skipped++;                                                                         \
        print_message("SKIPPED: " __VA_ARGS__);                                                    \
        print_message("\n");                                                                       \
        skip();                                                                                    \
    } while (0)

/* cmocka_run_group_tests, then 77 when a test was skipped and none failed. */
#define MC_RUN_TESTS(tests, setup, teardown)                                                       \
    mc_skip_status(cmocka_run_group_tests(tests, setup, teardown))

static inline int mc_skip_status(int failed)
{
    return failed ? failed : mc_test_skipped ? MC_SKIP_EXIT : 0;
}

#endif
