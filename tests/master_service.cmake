# The master's batch RPC adapters in-process (one generic adapter, service_batch.c): the batch
# bound, per-item answers, request-wide errors and their order against the client binding.
mc_add_test(test_master_service_batch SOURCES test_master_service_batch.c LIBS mc_master_core
            Threads::Threads TIMEOUT 60)
# The read path's hand-written wire code (service_encode.c, service_wire.c) against protobuf-c:
# the same reply bytes, the same verdict and fields for every request body, valid or mutated.
mc_add_test(test_master_service_encode SOURCES test_master_service_encode.c put_end_diff.c
            LIBS mc_master_core
            TIMEOUT 60)
