# The child-process harness (src/tools/proc_harness.c) that the process tests and
# mooncake_bench start their children with: /bin/sh children only, so it runs in every build.
mc_add_test(test_proc_harness SOURCES test_proc_harness.c TIMEOUT 60)
# The tests' and bench tools' HTTP client and Prometheus-text reader (src/tools/metrics_scrape.c)
# against the project's HTTP server and against silent and non-HTTP peers.
mc_add_test(test_metrics_scrape SOURCES test_metrics_scrape.c TIMEOUT 60)
# The shell drivers' side of the same contract (scripts/bench/lib.sh): READY parser, /metrics
# samples, daemon start / stop / cleanup, with /bin/sh stand-ins.
add_test(NAME test_bench_lib COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_lib.sh)
set_tests_properties(test_bench_lib PROPERTIES TIMEOUT 60)
