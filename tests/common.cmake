# Tests of src/common (foundation): flags shim, parsing, metrics, HTTP endpoint, fan-out, misc.
# mc_flags_demo is a tiny program test_flags drives with fork/exec (gflags aborts on duplicate
# flag names, so each scenario runs in its own process).
add_executable(mc_flags_demo ${CMAKE_CURRENT_SOURCE_DIR}/flags_demo_main.c)
target_link_libraries(mc_flags_demo PRIVATE mc_flags mc_common)
set_target_properties(mc_flags_demo PROPERTIES LINKER_LANGUAGE CXX)

foreach(t test_flags test_parse test_common_misc test_metrics test_http test_fanout)
  set(labels "")
  if(t STREQUAL "test_metrics" OR t STREQUAL "test_http" OR t STREQUAL "test_fanout")
    set(labels LABELS tsan)
  endif()
  mc_add_test(${t} SOURCES ${t}.c TIMEOUT 60 ${labels})
endforeach()
add_dependencies(test_flags mc_flags_demo)
