# Daemons under a low RLIMIT_NOFILE: a listener out of descriptors pauses (no accept spin, a
# rate-limited log line), keeps serving open connections and accepts again once fds free up.
mc_add_test(test_accept_limit SOURCES test_accept_limit.c cluster_util.c TIMEOUT 60)
add_dependencies(test_accept_limit mooncake_master mc_client_daemon)
