# mooncake_master as a process: starts the daemon on free loopback ports, drives every RPC
# family, scrapes /metrics, sends bad bytes, checks flags and a clean SIGTERM exit. One file per
# family on the shared fixture (master_daemon_fixture.c).
foreach(t session objects http promotion input flags offload)
  mc_add_test(test_master_daemon_${t} SOURCES test_master_daemon_${t}.c master_daemon_fixture.c
              LIBS Threads::Threads LABELS tsan TIMEOUT 90)
  add_dependencies(test_master_daemon_${t} mooncake_master)
endforeach()
