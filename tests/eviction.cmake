# Eviction: BatchEvict and the eviction tick (issue 7).
mc_add_test(test_eviction SOURCES test_eviction.c eviction_sides.c LIBS mc_master_core
            TIMEOUT 120)
mc_add_test(test_eviction_concurrency SOURCES test_eviction_concurrency.c LIBS mc_master_core
            Threads::Threads LABELS tsan TIMEOUT 300)
# A large target evicted in slices, oldest first.
mc_add_test(test_eviction_slices SOURCES test_eviction_slices.c master_fixture.c
            LIBS mc_master_core TIMEOUT 60)
# The sampled census picks the census's victims (same operations on two masters).
mc_add_test(test_eviction_sample SOURCES test_eviction_sample.c eviction_sides.c LIBS mc_master_core
            Threads::Threads LABELS tsan TIMEOUT 120)
# One-by-one unlinks with the keys' hashes computed once, a stale hint for the last object.
mc_add_test(test_eviction_unlink SOURCES test_eviction_unlink.c LIBS mc_master_core TIMEOUT 60)
# A large target evicted by cut takes the victims of the path that materializes every candidate.
mc_add_test(test_eviction_cut SOURCES test_eviction_cut.c eviction_sides.c LIBS mc_master_core
            Threads::Threads LABELS tsan TIMEOUT 120)
