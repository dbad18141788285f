# The child-process harness (src/tools/proc_harness.c) that the process tests and
# mooncake_bench start their children with: /bin/sh children only, so it runs in every build.
mc_add_test(test_proc_harness SOURCES test_proc_harness.c TIMEOUT 60)
