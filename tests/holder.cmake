# The DRAM holder index (src/client/holder_index.h): epochs, overlap drops against a model, the
# memory one entry costs (alloc_meter.c replaces malloc: not in the sanitizer passes).
if(TARGET mc_client_static AND NOT MC_SANITIZE)
  mc_add_test(test_holder_index SOURCES test_holder_index.c alloc_meter.c LIBS mc_client_static
              TIMEOUT 60)
endif()
