# The floors of the master core (docs/design.md "Floors of the master core"): no file of
# src/master includes a header of a floor above its own, and no member of the core library
# calls a function defined on a floor above its own (scripts/check_floors.py, nm).
if(MC_PYTHON3 AND TARGET mc_master_core)
  add_test(NAME test_floors
           COMMAND ${MC_PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/check_floors.py
                   --src ${CMAKE_SOURCE_DIR} --lib $<TARGET_FILE:mc_master_core>)
  set_tests_properties(test_floors PROPERTIES TIMEOUT 60)
endif()
