# Fault injection (docs/testing.md): connection drops at every step of Put and Get through
# the rpc client's test hook, against a real mooncake_master and mooncake_client daemon.
mc_add_test(test_faults SOURCES test_faults.c test_client_util.c cluster_util.c
            LIBS mc_client_static Threads::Threads TIMEOUT 120)
add_dependencies(test_faults mooncake_master mc_client_daemon)
# Processes killed under load: a daemon (kill -9) and the master (kill -9, restart on its port).
mc_add_test(test_faults_load SOURCES test_faults_load.c test_client_util.c cluster_util.c
            LIBS mc_client_static Threads::Threads TIMEOUT 120)
add_dependencies(test_faults_load mooncake_master mc_client_daemon)
# The client's master link: a failure reported after its connection was already replaced (a
# caller descheduled under load) does not cut the fresh connection.
mc_add_test(test_master_link_stale SOURCES test_master_link_stale.c test_client_util.c
            cluster_util.c LIBS mc_client_static Threads::Threads TIMEOUT 60)
add_dependencies(test_master_link_stale mooncake_master)
# Connection drops at every step of the LOCAL_DISK tier (offload, disk-only Get, promotion)
# with the holder's worker in the test's process, against a real mooncake_master.
mc_add_test(test_faults_tier SOURCES test_faults_tier.c test_client_util.c cluster_util.c
            cluster_data.c tier_query.c
            LIBS mc_client_static Threads::Threads TIMEOUT 600)
add_dependencies(test_faults_tier mooncake_master mc_client_daemon)
# Connection drops of the LOCAL_DISK tier's capacity-eviction report (small extents, a small
# disk) with the holder's tier in the test's process, against a real mooncake_master.
mc_add_test(test_faults_tier_evict SOURCES test_faults_tier_evict.c test_client_util.c
            cluster_util.c cluster_data.c tier_query.c LIBS mc_client_static Threads::Threads TIMEOUT 300)
add_dependencies(test_faults_tier_evict mooncake_master mc_client_daemon)
# Processes of the LOCAL_DISK tier killed while offloads run: the holder daemon (kill -9,
# restart on its --disk_path) and the master (kill -9, restart on its port).
mc_add_test(test_faults_tier_kill SOURCES test_faults_tier_kill.c cluster_util.c cluster_data.c
            tier_query.c
            LIBS mc_client_static Threads::Threads TIMEOUT 400)
add_dependencies(test_faults_tier_kill mooncake_master mc_client_daemon)
# The delete rule across a master crash: Removes acknowledged before a kill -9 of the master stay
# removed after its restart (the holder re-registers what it still has); re-Put keys read their
# new bytes.
mc_add_test(test_delete_rule_cluster SOURCES test_delete_rule_cluster.c cluster_util.c
            cluster_data.c tier_query.c
            LIBS mc_client_static Threads::Threads TIMEOUT 180)
add_dependencies(test_delete_rule_cluster mooncake_master mc_client_daemon)
