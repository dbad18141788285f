# Master core: object table, leases, pins, groups, clients (issue 5).
mc_add_test(test_master_objects SOURCES test_master_objects.c master_fixture.c
            LIBS mc_master_core TIMEOUT 60)
mc_add_test(test_master_clients SOURCES test_master_clients.c LIBS mc_master_core TIMEOUT 60)
mc_add_test(test_master_concurrency SOURCES test_master_concurrency.c LIBS mc_master_core
            Threads::Threads LABELS tsan TIMEOUT 120)
# Master core: Put versions, ownership after completion, versions across restarts, deferred free
# of force-removed objects, the reaper's idle tick.
mc_add_test(test_master_safety SOURCES test_master_safety.c master_fixture.c
            LIBS mc_master_core TIMEOUT 60)
# The master's RPC adapters in-process: what a large BatchGetReplicaList allocates (a counting
# allocator through the linker's --wrap).
mc_add_test(test_master_service_alloc SOURCES test_master_service_alloc.c
            master_service_fixture.c LIBS mc_master_core
            Threads::Threads TIMEOUT 60)
target_link_options(test_master_service_alloc PRIVATE -Wl,--wrap=malloc -Wl,--wrap=calloc
                    -Wl,--wrap=realloc -Wl,--wrap=read)
# Promotion on hit (src/master/promotion.c), one file per family of scenarios on the shared
# fixture (promotion_fixture.c): the trigger and its gates, the holder's side, cancellation,
# parked staged ranges, racing readers with threads, retry candidates and hot beats cold. All
# carry the TSan label (the fixture's master runs its own threads).
foreach(t trigger holder cancel parked race candidates)
  mc_add_test(test_promotion_${t} SOURCES test_promotion_${t}.c promotion_fixture.c
              LIBS mc_master_core Threads::Threads LABELS tsan TIMEOUT 60)
endforeach()
# RemoveByRegex (src/master/remove_regex.c): anchored POSIX patterns, the Remove rules per key.
mc_add_test(test_remove_regex SOURCES test_remove_regex.c master_fixture.c
            LIBS mc_master_core TIMEOUT 60)
# Upsert (src/master/upsert.c): reservations, the one-step swap, the old value's space vs readers.
mc_add_test(test_upsert SOURCES test_upsert.c master_fixture.c LIBS mc_master_core TIMEOUT 60)
# RemoveAll in bounded steps through a shard larger than one step.
mc_add_test(test_master_remove_all SOURCES test_master_remove_all.c master_fixture.c
            LIBS mc_master_core TIMEOUT 60)
# The object records' slab arenas in transparent huge pages, or not (--object_huge_pages).
mc_add_test(test_objslab_pages SOURCES test_objslab_pages.c LIBS mc_master_core TIMEOUT 60)
