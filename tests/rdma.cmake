# RDMA transport (RDMA builds only): the pure parts and the state logic through the loopback test
# provider (rdma_fake.c), with no device needed. scripts/rdma_selftest.sh is the hardware check.
if(MC_WITH_RDMA)
  mc_add_test(test_rdma SOURCES test_rdma.c rdma_fake.c LIBS mc_client_static Threads::Threads
              LABELS tsan TIMEOUT 60)
endif()
# What a real NIC refuses, modelled by the test provider, and the transport's answers (no device:
# a pass here is not a hardware pass).
if(MC_WITH_RDMA AND TARGET mc_client_static)
  mc_add_test(test_rdma_hw SOURCES test_rdma_hw.c rdma_fake.c LIBS mc_client_static
              Threads::Threads LABELS tsan TIMEOUT 60)
endif()
# The client library with protocol rdma over the test provider (mc_client_test_set_rdma_ops):
# descriptors with rkeys, Put/Get by one-sided verbs, TCP readers of the same bytes, teardown.
if(MC_WITH_RDMA)
  mc_add_test(test_rdma_client SOURCES test_rdma_client.c rdma_fake.c test_client_util.c
              LIBS mc_client_static Threads::Threads LABELS tsan TIMEOUT 60)
  add_dependencies(test_rdma_client mooncake_master)
  set_tests_properties(test_rdma_client PROPERTIES SKIP_RETURN_CODE 77)
  if(TARGET mooncake_cli)
    add_dependencies(test_rdma_client mooncake_cli)
  endif()
endif()
# protocol rdma without a device: library error and daemon exit status/message (skipped on a host
# that has a device).
mc_add_test(test_rdma_start SOURCES test_rdma_start.c LIBS mc_client_static Threads::Threads
            TIMEOUT 60)
add_dependencies(test_rdma_start mc_client_daemon)
add_dependencies(test_rdma_start mooncake_cli mooncake_bench)
