# Promotion on hit end to end (test_promotion_cluster.c): mooncake_master with offload and
# promotion on, a mooncake_client holder with --disk_path, mooncake_cli for stat and metrics.
mc_add_test(test_promotion_cluster SOURCES test_promotion_cluster.c cluster_util.c cluster_data.c
            LIBS mc_client_static TIMEOUT 180)
add_dependencies(test_promotion_cluster mooncake_master mc_client_daemon mooncake_cli)
# The two disk-cluster tests (this one and test_disk_tier) each write 100-200 MiB with O_DIRECT
# and restart daemons within a short client TTL: never run them at the same time (ctest -j).
if(TEST test_promotion_cluster)
  set_tests_properties(test_promotion_cluster PROPERTIES RESOURCE_LOCK mc_disk_cluster)
endif()
if(TEST test_disk_tier)
  set_tests_properties(test_disk_tier PROPERTIES RESOURCE_LOCK mc_disk_cluster)
endif()
# A promotion's staged range under faults and a holder restarted within its TTL
# (test_staged_space.c): real master and holder daemons, the stall hook of test builds.
if(MC_TEST_HOOKS)
  mc_add_test(test_staged_space SOURCES test_staged_space.c cluster_util.c cluster_data.c
              LIBS mc_client_static TIMEOUT 240)
  add_dependencies(test_staged_space mooncake_master mc_client_daemon mooncake_cli)
  set_tests_properties(test_staged_space PROPERTIES RESOURCE_LOCK mc_disk_cluster)
endif()
