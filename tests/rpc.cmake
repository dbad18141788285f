# RPC layer and wire contract (issue 3): frame codec, server/client, bad input.
mc_add_test(test_wire SOURCES test_wire.c TIMEOUT 30)
mc_add_test(test_rpc SOURCES test_rpc.c LABELS tsan TIMEOUT 60)
mc_add_test(test_rpc_badinput SOURCES test_rpc_badinput.c LABELS tsan TIMEOUT 60)
mc_add_test(test_rpc_leader SOURCES test_rpc_leader.c LABELS tsan TIMEOUT 60)
# Syscalls per call on both sides (the client's one send and one recv, the server's round of
# replies and its reads in one io_uring submission each), counted through the linker's --wrap;
# replies whole and in order on those paths.
mc_add_test(test_rpc_syscalls SOURCES test_rpc_syscalls.c LABELS tsan TIMEOUT 60)
target_link_options(test_rpc_syscalls PRIVATE -Wl,--wrap=recv -Wl,--wrap=poll -Wl,--wrap=sendmsg
                    -Wl,--wrap=io_uring_submit -Wl,--wrap=read)
# A call sent on a connection the server has just closed: sent again on a new connection when
# the server's socket never took its bytes, failed (never sent twice) when it may have read it.
mc_add_test(test_rpc_reconnect SOURCES test_rpc_reconnect.c LABELS tsan TIMEOUT 60)
