# The LOCAL_DISK tier end to end (test_disk_tier.c): mooncake_master with offload on, a
# mooncake_client holder with --disk_path, the in-test client reading through the holder.
if(TARGET mc_client_static AND TARGET mooncake_master AND TARGET mc_client_daemon
   AND TARGET mooncake_cli)
  mc_add_test(test_disk_tier SOURCES test_disk_tier.c cluster_util.c cluster_data.c LIBS mc_client_static
              TIMEOUT 180)
  add_dependencies(test_disk_tier mooncake_master mc_client_daemon mooncake_cli)
endif()
