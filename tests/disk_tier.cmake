# The LOCAL_DISK tier end to end (test_disk_tier.c): mooncake_master with offload on, a
# mooncake_client holder with --disk_path, the in-test client reading through the holder.
mc_add_test(test_disk_tier SOURCES test_disk_tier.c cluster_util.c cluster_data.c LIBS mc_client_static
            TIMEOUT 180)
add_dependencies(test_disk_tier mooncake_master mc_client_daemon mooncake_cli)
# One bad copy of a key (test_disk_fallback.c): a MEMORY copy whose bytes fail the checksum is
# skipped for the LOCAL_DISK one, and a disk record that fails its check is dropped and
# reported, so the master stops listing it. In-test holder and reader, mooncake_master.
mc_add_test(test_disk_fallback SOURCES test_disk_fallback.c cluster_util.c cluster_data.c
            LIBS mc_client_static TIMEOUT 120)
add_dependencies(test_disk_fallback mooncake_master)
