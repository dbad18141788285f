# Tests of mooncake_bench's own logic: the replay's reference caches, prefix rule, trace parser
# and block bytes (unit), and a short replay against a real master + daemon (process).
mc_add_test(test_bench_lru SOURCES test_bench_lru.c ${CMAKE_SOURCE_DIR}/src/tools/bench_lru.c
            ${CMAKE_SOURCE_DIR}/src/tools/bench_trace.c TIMEOUT 60)
mc_add_test(test_replay SOURCES test_replay.c cluster_util.c TIMEOUT 120)
# The test execs these; make sure `ctest` after a partial build does not run stale ones.
add_dependencies(test_replay mooncake_master mc_client_daemon mooncake_bench)
# mooncake_bench disk end to end on a small data set: populate, then random reads from two
# reader threads (each read CRC-checked by the store; a failed read fails the run), the JSON line
# naming both readers; then the same records read by one reader.
# tests/expect_output.sh checks the exit status as well as the output (PASS_REGULAR_EXPRESSION
# alone would pass a run that crashed after printing its line)
set(MC_EXPECT sh ${CMAKE_CURRENT_SOURCE_DIR}/expect_output.sh)
add_test(NAME test_bench_disk_readers
         COMMAND ${MC_EXPECT} 0
                 "\"readers\":2,\"batch\":256,\"data_bytes\":8388608,\"reads\":128" --
                 $<TARGET_FILE:mooncake_bench> disk --data 8MiB --sizes 64KiB --runs 1 --qd 8
                 --readers 2)
set_tests_properties(test_bench_disk_readers PROPERTIES TIMEOUT 60)
# refused with its reason and exit status 2 (usage), before any store is made
add_test(NAME test_bench_disk_refuses_readers_beyond_qd
         COMMAND ${MC_EXPECT} 2 "--readers must not exceed --qd .*readers=4\\)" "usage: " --
                 $<TARGET_FILE:mooncake_bench> disk --data 8MiB --sizes 64KiB --qd 2
                 --readers 4)
set_tests_properties(test_bench_disk_refuses_readers_beyond_qd PROPERTIES TIMEOUT 30)
# --evict: each timed eviction moved half an extent of 1 MiB records (31 of 62 fit in 64 MiB)
add_test(NAME test_bench_disk_evict
         COMMAND ${MC_EXPECT} 0 "\"case\":\"evict_1MiB\",\"runs\":2,.*\"moved_records\":31,"
                 -- $<TARGET_FILE:mooncake_bench> disk --evict --sizes 1MiB --runs 2 --qd 8)
set_tests_properties(test_bench_disk_evict PROPERTIES TIMEOUT 120)
# The options table (bench_opts.c): --help lists each option with the default it starts with,
# and a value that is not a number is refused naming the option (atoi took it as 0).
add_test(NAME test_bench_opts_help
         COMMAND ${MC_EXPECT} 0 "^usage: mooncake_bench disk \\[options\\]"
                 "--qd N .*\\(default 32\\)$" "--sizes LIST .*\\(default 64KiB,1MiB\\)$"
                 "--evict  " -- $<TARGET_FILE:mooncake_bench> disk --help)
add_test(NAME test_bench_opts_bad_value
         COMMAND ${MC_EXPECT} 2 "bench promotion: --runs: not an integer: 'x'"
                 "^usage: mooncake_bench promotion" --
                 $<TARGET_FILE:mooncake_bench> promotion --runs x)
set_tests_properties(test_bench_opts_help test_bench_opts_bad_value PROPERTIES TIMEOUT 30)
# bench promotion's CPU case: with DRAM room made first (--cpu_room 1), the 8 keys of its half
# of the hot set are admitted by bare GetReplicaList calls and all promoted, and the line gives
# the CPU per promotion; --cpu_room takes 0 or 1 only.
add_test(NAME test_bench_promotion_cpu
         COMMAND ${MC_EXPECT} 0
                 "\"case\":\"cpu/remote/64KiB\",\"runs\":8,.*\"promoted\":8,\"cpu_us_per_promotion\":"
                 -- $<TARGET_FILE:mooncake_bench> promotion --sizes 64KiB --keys 16 --reader remote
                 --zipf_objects 0 --runs 1 --segment_size 8MiB --cpu_room 1)
add_test(NAME test_bench_promotion_cpu_room_value
         COMMAND ${MC_EXPECT} 2 "bench promotion: --cpu_room must be 0 or 1" --
                 $<TARGET_FILE:mooncake_bench> promotion --cpu_room 2)
set_tests_properties(test_bench_promotion_cpu test_bench_promotion_cpu_room_value
                     PROPERTIES TIMEOUT 120)
# the hand-written request bodies of `mooncake_bench master` against the generated packer (unit)
mc_add_test(test_bench_master_enc SOURCES test_bench_master_enc.c
            ${CMAKE_SOURCE_DIR}/src/tools/bench_master_enc.c TIMEOUT 60)
# mooncake_bench master against a real master: one reused segment across invocations, Gets of
# missing keys counted as misses, the open-loop probe's figures.
mc_add_test(test_bench_master SOURCES test_bench_master.c cluster_util.c TIMEOUT 120)
add_dependencies(test_bench_master mooncake_master mooncake_bench mooncake_cli)
# scripts/bench/scale.sh, every case at tiny sizes (test_scale_script.sh checks each case's JSON
# figures; the restart case where the Python binding is built): the script cannot rot.
add_test(NAME test_scale_script
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/test_scale_script.sh
                 $<TARGET_FILE_DIR:mooncake_master> ${CMAKE_SOURCE_DIR})
set_tests_properties(test_scale_script PROPERTIES TIMEOUT 450)
if(MC_SANITIZE)
  set_tests_properties(test_scale_script PROPERTIES ENVIRONMENT MC_SCALE_SANITIZED=1)
endif()
# scripts/bench/master_vs_upstream.sh, a very short smoke run against upstream's master and its
# master_bench (skipped, 77, where those binaries are absent): exit 0, one well-formed line per
# side and op, one table row per op.
add_test(NAME test_master_vs_upstream
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_master_vs_upstream.sh
                 $<TARGET_FILE_DIR:mooncake_master>)
set_tests_properties(test_master_vs_upstream PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
# scripts/bench/headline.sh on its cheapest row (bytes per object, 20,000 objects): the table's
# header and one row with a figure, the date, the commit and the command; exit 0 (its logs go
# to the build tree).
add_test(NAME test_headline_objects
         COMMAND ${MC_EXPECT} 0 "^\\| what \\| ratio \\| measured \\| command \\|$"
                 "^\\| master bytes per object .* \\| [0-9]+\\.[0-9] \\| [0-9]{4}-[0-9]{2}-[0-9]{2}, `[0-9a-f]+(\\+changes)?` \\| `.*mooncake_bench objects --objects 20000 --key-len 64` \\|$"
                 -- env HEADLINE_OBJECTS=20000
                 HEADLINE_LOG_DIR=${CMAKE_CURRENT_BINARY_DIR}/headline_logs bash ${CMAKE_SOURCE_DIR}/scripts/bench/headline.sh
                 --rows objects --bin-dir $<TARGET_FILE_DIR:mooncake_bench>)
set_tests_properties(test_headline_objects PROPERTIES TIMEOUT 300)
# mooncake_bench restart on 500 objects over 2 daemons, the master SIGKILLed and restarted twice:
# the JSON line parses, every object is back with its bytes (back == objects, wrong == 0).
add_test(NAME test_bench_restart COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_restart.sh
                                         $<TARGET_FILE:mooncake_bench>)
set_tests_properties(test_bench_restart PROPERTIES TIMEOUT 120)
# mooncake_bench transfer --working_set: the Get series reads 4 keys (16 MiB / 4 MiB) in rotation,
# every byte of the first read checked (a wrong byte fails the run), the case named /cold with
# its working set and a memcpy reference over the same bytes; a working set that would not fit
# half the segment is refused as usage.
add_test(NAME test_bench_transfer_cold
         COMMAND ${MC_EXPECT} 0
                 "\"case\":\"get/same/4MiB/cold\",.*\"ref\":[1-9].*\"working_set\":16777216}"
                 -- $<TARGET_FILE:mooncake_bench> transfer --mode same --sizes 4MiB --runs 8
                 --working_set 16MiB --segment_size 64MiB)
add_test(NAME test_bench_transfer_cold_refused
         COMMAND ${MC_EXPECT} 2 "--working_set must be at most half of --segment_size" --
                 $<TARGET_FILE:mooncake_bench> transfer --mode same --sizes 4MiB
                 --working_set 48MiB --segment_size 64MiB)
set_tests_properties(test_bench_transfer_cold test_bench_transfer_cold_refused
                     PROPERTIES TIMEOUT 120)
