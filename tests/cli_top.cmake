# mooncake_cli top in a real terminal (tmux). Without tmux the test fails and says so.
add_test(NAME test_cli_top COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_top.sh
         ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(test_cli_top PROPERTIES TIMEOUT 90)
