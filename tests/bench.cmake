# Tests of mooncake_bench's own logic: the replay's reference caches, prefix rule, trace parser
# and block bytes (unit), and a short replay against a real master + daemon (process).
mc_add_test(test_bench_lru SOURCES test_bench_lru.c ${CMAKE_SOURCE_DIR}/src/tools/bench_lru.c
            ${CMAKE_SOURCE_DIR}/src/tools/bench_trace.c TIMEOUT 60)
if(TARGET mc_client_static AND TARGET mooncake_master AND TARGET mc_client_daemon
   AND TARGET mooncake_bench)
  mc_add_test(test_replay SOURCES test_replay.c cluster_util.c TIMEOUT 120)
  # The test execs these; make sure `ctest` after a partial build does not run stale ones.
  add_dependencies(test_replay mooncake_master mc_client_daemon mooncake_bench)
endif()
