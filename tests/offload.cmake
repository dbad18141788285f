# The master half of the LOCAL_DISK tier (src/master/offload.c): holders, offload modes by flag,
# long-polls, version-checked completions and re-registration, cancellation and expiry.
mc_add_test(test_offload SOURCES test_offload.c LIBS mc_master_core Threads::Threads LABELS tsan
            TIMEOUT 60)
