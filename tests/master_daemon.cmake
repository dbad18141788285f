# mooncake_master as a process (issue 6): starts the daemon on free loopback ports, drives every
# RPC method, scrapes /metrics, sends bad bytes, checks flags and a clean SIGTERM exit.
if(EXISTS ${CMAKE_SOURCE_DIR}/src/master/main.c)
  mc_add_test(test_master_daemon SOURCES test_master_daemon.c LIBS Threads::Threads LABELS tsan
              TIMEOUT 90)
  add_dependencies(test_master_daemon mooncake_master)
endif()
