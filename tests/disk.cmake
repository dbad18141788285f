# LOCAL_DISK store (src/client/disk_store.h). Labelled tsan: it has a multi-threaded case and
# the eviction-vs-reader case.
if(TARGET mc_client_static)
  mc_add_test(test_disk_store SOURCES test_disk_store.c LIBS mc_client_static Threads::Threads
              LABELS tsan TIMEOUT 120)
endif()
