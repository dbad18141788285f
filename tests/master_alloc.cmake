# Master: offset allocator and segment table (issue 4).
mc_add_test(test_offset_alloc SOURCES test_offset_alloc.c LIBS mc_master_core TIMEOUT 60)
mc_add_test(test_segments SOURCES test_segments.c LIBS mc_master_core Threads::Threads
            LABELS tsan TIMEOUT 60)
