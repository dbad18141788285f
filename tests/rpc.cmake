# RPC layer and wire contract (issue 3): frame codec, server/client, bad input.
mc_add_test(test_wire SOURCES test_wire.c TIMEOUT 30)
mc_add_test(test_rpc SOURCES test_rpc.c LABELS tsan TIMEOUT 60)
mc_add_test(test_rpc_badinput SOURCES test_rpc_badinput.c LABELS tsan TIMEOUT 60)
mc_add_test(test_rpc_leader SOURCES test_rpc_leader.c LABELS tsan TIMEOUT 60)
