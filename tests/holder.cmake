# The DRAM holder index (src/client/holder_index.h): epochs, overlap drops against a model, the
# memory one entry costs (alloc_meter.c replaces malloc: not in the sanitizer passes).
if(TARGET mc_client_static AND NOT MC_SANITIZE)
  mc_add_test(test_holder_index SOURCES test_holder_index.c alloc_meter.c LIBS mc_client_static
              TIMEOUT 60)
endif()
# The stream against a real master: the index lists what the segment holds (content checked),
# Removes drop entries, --holder_stream=false streams nothing; a key removed while its holder
# daemon is SIGSTOPped (fenced) stays removed after a master SIGKILL.
mc_add_test(test_holder_stream SOURCES test_holder_stream.c test_client_util.c cluster_util.c
            cluster_data.c
            LIBS mc_client_static Threads::Threads TIMEOUT 120)
add_dependencies(test_holder_stream mooncake_master mc_client_daemon)
# The master's side on the core (injected clock): the backlog fence, re-registration's rules.
mc_add_test(test_holder_rereg SOURCES test_holder_rereg.c LIBS mc_master_core TIMEOUT 60)
