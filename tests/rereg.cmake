# LOCAL_DISK re-registration (the higher version wins, a holder's complete listing is
# authoritative) and the back-off of offloads to a holder whose disk is full: the master core
# on a fake clock ...
mc_add_test(test_offload_rereg SOURCES test_offload_rereg.c offload_fixture.c
            LIBS mc_master_core Threads::Threads LABELS tsan TIMEOUT 60)
# ... and the real binaries: a holder restarted within its TTL after a record was lost on its
# disk, and two holders' versions of a key meeting after a master restart.
mc_add_test(test_rereg_cluster SOURCES test_rereg_cluster.c cluster_util.c cluster_data.c
            tier_query.c LIBS mc_client_static Threads::Threads TIMEOUT 180)
add_dependencies(test_rereg_cluster mooncake_master mc_client_daemon)
