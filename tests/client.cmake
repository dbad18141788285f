# Client library (issue 8): peer server and transports (no master), the client against a real
# mooncake_master, and the install + pkg-config check with examples/hello.c.
mc_add_test(test_transport SOURCES test_transport.c LIBS mc_client_static Threads::Threads
            LABELS tsan TIMEOUT 60)
mc_add_test(test_client SOURCES test_client.c test_client_util.c cluster_util.c cluster_data.c
            LIBS mc_client_static Threads::Threads LABELS tsan TIMEOUT 180)
add_dependencies(test_client mooncake_master)
# The same-process Get's one-pass copy and check: a damaged stored byte, odd sizes, odd buffers.
mc_add_test(test_client_get_local SOURCES test_client_get_local.c test_client_util.c
            LIBS mc_client_static Threads::Threads TIMEOUT 60)
add_dependencies(test_client_get_local mooncake_master)
# The connector batch calls (client_batch.c, client_upsert.c) against a real master.
mc_add_test(test_client_batch SOURCES test_client_batch.c test_client_util.c
            LIBS mc_client_static Threads::Threads TIMEOUT 60)
add_dependencies(test_client_batch mooncake_master)
# The client-expiry case stops and continues a mooncake_client daemon process.
mc_add_test(test_client_epoch SOURCES test_client_epoch.c test_client_util.c cluster_util.c
            cluster_data.c
            LIBS mc_client_static Threads::Threads LABELS tsan TIMEOUT 60)
add_dependencies(test_client_epoch mooncake_master mc_client_daemon)
set(MC_HELLO_CFLAGS "")
if(MC_SANITIZE STREQUAL "address")
  set(MC_HELLO_CFLAGS "-fsanitize=address,undefined")
elseif(MC_SANITIZE STREQUAL "thread")
  set(MC_HELLO_CFLAGS "-fsanitize=thread")
endif()
mc_add_test(test_client_install SOURCES test_client_install.c test_client_util.c TIMEOUT 120)
set(MC_INSTALL_PYTHON python3)
if(MC_PYTEST_PYTHON)
  set(MC_INSTALL_PYTHON ${MC_PYTEST_PYTHON})
endif()
target_compile_definitions(test_client_install PRIVATE MC_HELLO_CC="${CMAKE_C_COMPILER}"
                           MC_HELLO_CFLAGS="${MC_HELLO_CFLAGS}" MC_PYTHON="${MC_INSTALL_PYTHON}")
# everything `cmake --install` copies must be built first
add_dependencies(test_client_install mc_client_shared mc_client_bundle mooncake_master)
add_dependencies(test_client_install mc_client_daemon mooncake_cli mooncake_bench mc_python)
# mooncake_client --disk_path: usage checks and the client id kept in the directory.
add_test(NAME test_client_disk_path COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/test_client_disk_path.sh
         ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(test_client_disk_path PROPERTIES TIMEOUT 30)
