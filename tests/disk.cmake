# LOCAL_DISK store (src/client/disk_store.h). Labelled tsan: it has a multi-threaded case and
# the eviction-vs-reader case.
mc_add_test(test_disk_store SOURCES test_disk_store.c LIBS mc_client_static Threads::Threads
            LABELS tsan TIMEOUT 120)
# Second chance at eviction: read records moved, bounded, crash image between move and delete.
mc_add_test(test_disk_reinsert SOURCES test_disk_reinsert.c LIBS mc_client_static
            Threads::Threads TIMEOUT 60)
# Persistent write faults, a real full filesystem (loop-mounted ext4; skipped unless root),
# io_uring short / EAGAIN / submit errors.
mc_add_test(test_disk_faults SOURCES test_disk_faults.c LIBS mc_client_static Threads::Threads
            TIMEOUT 120)
# The 512-byte record layout (format 3): size on disk per value, every key/value length across
# a restart, a bad header, a format-2 store read and evicted from, a newer format refused.
# Exits 77 where the filesystem refuses 512-byte O_DIRECT I/O.
mc_add_test(test_disk_format SOURCES test_disk_format.c LIBS mc_client_static Threads::Threads
            TIMEOUT 120)
set_tests_properties(test_disk_format PROPERTIES SKIP_RETURN_CODE 77)
# Restart semantics: record images inside values, the older format, removals vs eviction
# order, a SIGKILLed writer.
mc_add_test(test_disk_recovery SOURCES test_disk_recovery.c LIBS mc_client_static
            Threads::Threads TIMEOUT 120)
# LOCAL_DISK reads through the holder (disk_tier.c + transport_tcp_disk.c), no master needed.
mc_add_test(test_disk_read SOURCES test_disk_read.c LIBS mc_client_static Threads::Threads
            TIMEOUT 60)
# The store's read into a consumer (a promotion's staged replica): bytes, CRC check, refusal.
mc_add_test(test_promotion_sink SOURCES test_promotion_sink.c LIBS mc_client_static
            Threads::Threads TIMEOUT 60)
# What the write path reuses: the ring's kept window buffer, evicted extent files as spares
# (steady state, a killed writer over a reused file, no_recycle).
mc_add_test(test_disk_reuse SOURCES test_disk_reuse.c LIBS mc_client_static Threads::Threads
            TIMEOUT 60)
# A really full filesystem (a loop-mounted 64 MiB ext4 image under a 256 MiB store): ENOSPC
# evicts and appends resume; removing every key gives the space back. Exits 77 (skipped) where
# this machine cannot loop-mount (not root, no mkfs.ext4, no loop devices).
mc_add_test(test_disk_full SOURCES test_disk_full.c LIBS mc_client_static Threads::Threads
            TIMEOUT 120)
set_tests_properties(test_disk_full PROPERTIES SKIP_RETURN_CODE 77)
# The default extent size follows the capacity (16 extents a tier): a tier keeps what was
# appended in the last 3/4 of its capacity.
mc_add_test(test_disk_extent_size SOURCES test_disk_extent_size.c LIBS mc_client_static
            Threads::Threads TIMEOUT 60)
# Large appends in 512-byte units padded to 4 KiB with dead fillers, writes cut at aligned
# offsets: sizes, a failed straddling write, a bad CRC written dead, a torn record after a
# filler; every case across a restart. Exits 77 where 512-byte O_DIRECT I/O is refused.
mc_add_test(test_disk_align SOURCES test_disk_align.c LIBS mc_client_static Threads::Threads
            TIMEOUT 60)
set_tests_properties(test_disk_align PROPERTIES SKIP_RETURN_CODE 77)
