# Who may connect (README "Security"): the shared-token handshake with real processes
# (test_security), protected mode in a network namespace of its own (test_protected_mode).
mc_add_test(test_security SOURCES test_security.c security_fixture.c cluster_util.c
            LIBS mc_client_static TIMEOUT 120)
add_dependencies(test_security mooncake_master mc_client_daemon mooncake_cli)
mc_add_test(test_protected_mode SOURCES test_protected_mode.c cluster_util.c
            LIBS mc_client_static TIMEOUT 120)
set_tests_properties(test_protected_mode PROPERTIES SKIP_RETURN_CODE 77)
add_dependencies(test_protected_mode mooncake_master mc_client_daemon mooncake_cli)
# The client side of the token handshake checks the server's proof (no processes needed).
mc_add_test(test_auth SOURCES test_auth.c LIBS Threads::Threads LABELS tsan TIMEOUT 60)
# Decoding is bounded by the body's size (README "Security"): allocations counted in-process.
# alloc_meter.c replaces malloc, which a sanitizer's own allocator does not allow: not in the
# ASan/TSan passes (the decoder's bad-input cases run there through the fuzz replays).
if(TARGET mc_client_static AND TARGET mc_master_core AND NOT MC_SANITIZE)
  mc_add_test(test_security_decode SOURCES test_security_decode.c alloc_meter.c
              master_service_fixture.c LIBS mc_client_static mc_master_core TIMEOUT 120)
endif()
# What one connection may cost the RPC server: output-buffer limits, stalled peers.
mc_add_test(test_security_conn SOURCES test_security_conn.c LIBS Threads::Threads TIMEOUT 120)
# The HTTP port: per-address limit, header timeout, admin routes, protected mode.
mc_add_test(test_security_http SOURCES test_security_http.c TIMEOUT 60)
# The token file: length, permissions, entropy warning, two tokens for rotation.
mc_add_test(test_security_token SOURCES test_security_token.c TIMEOUT 60)
# A client's id is tied to its credential: hijack refused (also in the window after a master
# crash), ids minted by RegisterClient, kept across master and client restarts (real processes).
mc_add_test(test_security_cred SOURCES test_security_cred.c security_fixture.c cluster_util.c
            LIBS mc_client_static TIMEOUT 180)
add_dependencies(test_security_cred mooncake_master mc_client_daemon)
# TLS on the RPC and peer ports (README "Security"): certificates made at test time with the
# openssl tool (77 without it), a TLS cluster, refusals, and an on-path relay that cannot inject.
mc_add_test(test_tls SOURCES test_tls.c cluster_util.c LIBS mc_client_static TIMEOUT 180)
set_tests_properties(test_tls PROPERTIES SKIP_RETURN_CODE 77)
add_dependencies(test_tls mooncake_master mc_client_daemon mooncake_cli)
