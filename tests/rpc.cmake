# RPC layer and wire contract (issue 3): frame codec, server/client, bad input.
mc_add_test(test_wire SOURCES test_wire.c TIMEOUT 30)
