# The master half of the LOCAL_DISK tier (src/master/offload.c): holders, offload modes by flag,
# long-polls, version-checked completions and re-registration, cancellation and expiry.
mc_add_test(test_offload SOURCES test_offload.c offload_fixture.c LIBS mc_master_core Threads::Threads
            LABELS tsan TIMEOUT 60)
# The delete rule (DESIGN.md §7): a Remove answers after its disk holders' durable delete or
# their fence; fenced holders re-register nothing at or below the fence.
mc_add_test(test_delete_rule SOURCES test_delete_rule.c offload_fixture.c
            LIBS mc_master_core Threads::Threads LABELS tsan TIMEOUT 60)
# Upsert and RemoveByRegex under the delete rule (upsert.c, remove_regex.c).
mc_add_test(test_connector_delete_rule SOURCES test_connector_delete_rule.c LIBS mc_master_core
            TIMEOUT 60)
# What keeps the master's cost off the object count: the disk-only census, counters that count
# each re-registered copy once.
mc_add_test(test_master_scale SOURCES test_master_scale.c offload_fixture.c LIBS mc_master_core
            TIMEOUT 60)
