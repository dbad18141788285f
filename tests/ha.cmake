# Master high availability on etcd: the gateway client (canned replies and a real etcd on
# loopback; skipped with 77 when etcd is not installed).
mc_add_test(test_etcd SOURCES test_etcd.c etcd_util.c cluster_util.c TIMEOUT 120)
set_tests_properties(test_etcd PROPERTIES SKIP_RETURN_CODE 77)
# The election and fencing rules of master/ha.c, in-process, against a real etcd.
mc_add_test(test_ha SOURCES test_ha.c etcd_util.c cluster_util.c LIBS mc_master_core TIMEOUT 120)
set_tests_properties(test_ha PROPERTIES SKIP_RETURN_CODE 77)
# The delete rule's fences in etcd: stored by the leader, loaded by the next one.
mc_add_test(test_ha_fence SOURCES test_ha_fence.c etcd_util.c cluster_util.c LIBS mc_master_core TIMEOUT 120)
set_tests_properties(test_ha_fence PROPERTIES SKIP_RETURN_CODE 77)
# Election, hand-over and fencing with real processes: etcd + two masters on loopback.
if(TARGET mooncake_master)
  mc_add_test(test_ha_master SOURCES test_ha_master.c etcd_util.c cluster_util.c TIMEOUT 180)
  set_tests_properties(test_ha_master PROPERTIES SKIP_RETURN_CODE 77)
  add_dependencies(test_ha_master mooncake_master)
endif()
# Clients follow the leader: a holder daemon and a library client named etcd://..., SIGKILL of
# the leader, LOCAL_DISK objects read back through the new one.
if(TARGET mooncake_master AND TARGET mc_client_daemon)
  mc_add_test(test_ha_clients SOURCES test_ha_clients.c ha_fixture.c etcd_util.c cluster_util.c
              cluster_data.c tier_query.c LIBS mc_client_static Threads::Threads TIMEOUT 180)
  set_tests_properties(test_ha_clients PROPERTIES SKIP_RETURN_CODE 77)
  add_dependencies(test_ha_clients mooncake_master mc_client_daemon mooncake_cli)
endif()
# mooncake_bench failover end to end on a small set (only where etcd is installed): the run
# completes and reports both cases with every object back.
find_program(MC_ETCD_BIN etcd)
if(TARGET mooncake_bench AND MC_ETCD_BIN)
  add_test(NAME test_bench_failover
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/expect_output.sh 0
                   "\"case\":\"all_back\",\"runs\":1,.*\"objects\":50," --
                   $<TARGET_FILE:mooncake_bench> failover --objects 50 --runs 1 --ttl 1)
  set_tests_properties(test_bench_failover PROPERTIES TIMEOUT 120)
endif()
# The leader partitioned from etcd in a network namespace (exits 77 where `ip netns` is refused).
if(TARGET mooncake_master)
  mc_add_test(test_ha_partition SOURCES test_ha_partition.c etcd_util.c cluster_util.c
              cluster_data.c tier_query.c LIBS mc_client_static Threads::Threads TIMEOUT 180)
  set_tests_properties(test_ha_partition PROPERTIES SKIP_RETURN_CODE 77)
  add_dependencies(test_ha_partition mooncake_master)
endif()
# A fence survives a fail-over: the holder's stale record of a removed key is refused by the new
# leader (real binaries; 77 without etcd).
if(TARGET mooncake_master AND TARGET mc_client_daemon)
  mc_add_test(test_ha_fence_cluster SOURCES test_ha_fence_cluster.c etcd_util.c cluster_util.c
              cluster_data.c tier_query.c LIBS mc_client_static Threads::Threads TIMEOUT 180)
  set_tests_properties(test_ha_fence_cluster PROPERTIES SKIP_RETURN_CODE 77)
  add_dependencies(test_ha_fence_cluster mooncake_master mc_client_daemon)
endif()
# DRAM objects survive a fail-over: a DRAM-only holder daemon re-registers its holder index with
# the new leader; every object reads back byte-equal, keys removed before the kill stay removed.
if(TARGET mooncake_master AND TARGET mc_client_daemon)
  mc_add_test(test_ha_dram SOURCES test_ha_dram.c ha_fixture.c etcd_util.c cluster_util.c
              cluster_data.c LIBS mc_client_static Threads::Threads TIMEOUT 180)
  set_tests_properties(test_ha_dram PROPERTIES SKIP_RETURN_CODE 77)
  add_dependencies(test_ha_dram mooncake_master mc_client_daemon)
endif()
