# A client's log level and callback are per client (no process-wide state); library default warn.
mc_add_test(test_client_log SOURCES test_client_log.c test_client_util.c
            LIBS mc_client_static Threads::Threads LABELS tsan TIMEOUT 60)
add_dependencies(test_client_log mooncake_master)
# A client with disk_path keeps its client id in disk_path (client_id.h).
mc_add_test(test_client_id SOURCES test_client_id.c test_client_util.c
            LIBS mc_client_static Threads::Threads TIMEOUT 60)
add_dependencies(test_client_id mooncake_master)
