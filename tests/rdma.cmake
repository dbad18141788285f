# RDMA transport (RDMA builds only): the pure parts and the state logic through the loopback test
# provider (rdma_fake.c), with no device needed. scripts/rdma_selftest.sh is the hardware check.
if(MC_WITH_RDMA AND TARGET mc_client_static)
  mc_add_test(test_rdma SOURCES test_rdma.c rdma_fake.c LIBS mc_client_static Threads::Threads
              TIMEOUT 60)
endif()
