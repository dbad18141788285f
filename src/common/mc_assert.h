/* mc_assert.h: invariant checks.
 *
 * MC_ASSERT(cond) states an invariant of the code (a lock that must be held,
 * a state an object must be in). It is compiled into test and Debug builds
 * (MC_CHECKS, set by CMake when MC_TEST_HOOKS is on or the build type is
 * Debug) and costs nothing in release builds, where the condition is not
 * evaluated. A failed check prints the condition, the function and the line,
 * then aborts: an invariant that does not hold is a bug, never an input error.
 * Bad input is answered with an error code, not with MC_ASSERT. */
#ifndef MC_ASSERT_H
#define MC_ASSERT_H

#ifdef MC_CHECKS
#include <stdio.h>
#include <stdlib.h>

#define MC_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s: invariant failed: %s\n", __FILE__, __LINE__, __func__,     \
                    #cond);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#else
#define MC_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif /* MC_ASSERT_H */
