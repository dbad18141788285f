# Promotion on hit end to end (test_promotion_cluster.c): mooncake_master with offload and
# promotion on, a mooncake_client holder with --disk_path, mooncake_cli for stat and metrics.
if(TARGET mc_client_static AND TARGET mooncake_master AND TARGET mc_client_daemon
   AND TARGET mooncake_cli)
  mc_add_test(test_promotion_cluster SOURCES test_promotion_cluster.c cluster_util.c
              LIBS mc_client_static TIMEOUT 180)
  add_dependencies(test_promotion_cluster mooncake_master mc_client_daemon mooncake_cli)
endif()
