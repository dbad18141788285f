# Multi-process tests (issue 9): mooncake_master + mooncake_client daemons + mooncake_cli on
# loopback. Registered only once every program they start is part of the build.
mc_add_test(test_cluster SOURCES test_cluster.c cluster_util.c cluster_data.c LIBS mc_client_static
            TIMEOUT 180)
# The test execs these; make sure `ctest` after a partial build does not run stale ones.
add_dependencies(test_cluster mooncake_master mc_client_daemon mooncake_cli)
