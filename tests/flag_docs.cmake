# docs/flags/*.md must say what the built daemons' --helpxml says (docs/CMakeLists.txt).
if(MC_PYTHON3)
  foreach(t mooncake_master mc_client_daemon)
    get_target_property(out ${t} OUTPUT_NAME)
    if(NOT out)
      set(out ${t})
    endif()
    add_test(NAME test_flag_docs_${out}
             COMMAND ${MC_PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/gen_flag_docs.py --check
                     $<TARGET_FILE:${t}> ${CMAKE_SOURCE_DIR}/docs/flags/${out}.md)
    set_tests_properties(test_flag_docs_${out} PROPERTIES TIMEOUT 30)
  endforeach()
endif()
