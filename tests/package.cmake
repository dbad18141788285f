# Packaging (packaging/): the Debian package built by cpack, unpacked with dpkg -x and run.
# Plain builds only (a sanitizer build's binaries need its runtime, not a package's business).
if(MC_SANITIZE STREQUAL "")
  find_program(MC_DPKG_DEB dpkg-deb)
  if(MC_DPKG_DEB)
    set(MC_DEB_PYTHON python3)
    if(MC_PYTEST_PYTHON)
      set(MC_DEB_PYTHON ${MC_PYTEST_PYTHON})
    endif()
    add_test(NAME test_package_deb
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_package_deb.sh ${CMAKE_BINARY_DIR}
                     ${MC_DEB_PYTHON})
    set_tests_properties(test_package_deb PROPERTIES TIMEOUT 120)
    add_test(NAME test_package_deb_scripts
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/test_package_deb_scripts.sh ${CMAKE_BINARY_DIR})
    set_tests_properties(test_package_deb_scripts PROPERTIES TIMEOUT 120)
  endif()
endif()
