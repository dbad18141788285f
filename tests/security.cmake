# Who may connect (README "Security"): the shared-token handshake with real processes
# (test_security), protected mode in a network namespace of its own (test_protected_mode).
mc_add_test(test_security SOURCES test_security.c cluster_util.c LIBS mc_client_static
            TIMEOUT 120)
add_dependencies(test_security mooncake_master mc_client_daemon mooncake_cli)
mc_add_test(test_protected_mode SOURCES test_protected_mode.c cluster_util.c
            LIBS mc_client_static TIMEOUT 120)
set_tests_properties(test_protected_mode PROPERTIES SKIP_RETURN_CODE 77)
add_dependencies(test_protected_mode mooncake_master mc_client_daemon mooncake_cli)
# The client side of the token handshake checks the server's proof (no processes needed).
mc_add_test(test_auth SOURCES test_auth.c LIBS Threads::Threads LABELS tsan TIMEOUT 60)
