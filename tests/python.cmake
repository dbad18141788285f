# The Python binding (python/): pytest against a real mooncake_master and mooncake_client daemon.
# Runs in the plain build only: the sanitizer builds' library needs its runtime preloaded into
# the interpreter. The interpreter is MC_PYTEST_PYTHON (python/CMakeLists.txt: one that can
# import pytest); without one the test fails and says so, rather than skipping.
if(MC_SANITIZE STREQUAL "")
  if(MC_PYTEST_PYTHON)
    add_test(NAME test_python
             COMMAND ${MC_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider
                     --ignore-glob=*/test_connector_*.py ${CMAKE_SOURCE_DIR}/python/tests)
    # one test per engine connector replay (python/tests/test_connector_<engine>.py)
    foreach(engine vllm sglang lmcache)
      add_test(NAME test_python_connector_${engine}
               COMMAND ${MC_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider
                       ${CMAKE_SOURCE_DIR}/python/tests/test_connector_${engine}.py)
      set_tests_properties(test_python_connector_${engine} PROPERTIES TIMEOUT 120 ENVIRONMENT
        "MC_BIN_DIR=${CMAKE_BINARY_DIR}/bin;PYTHONPATH=${CMAKE_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1;MC_PYTHON_COMPAT=${CMAKE_BINARY_DIR}/python-compat")
    endforeach()
  else()
    add_test(NAME test_python COMMAND sh -c
             "echo 'no python3 with pytest: run scripts/install-deps.sh (python3-pytest)'; exit 1")
  endif()
  set_tests_properties(test_python PROPERTIES TIMEOUT 120 ENVIRONMENT
    "MC_BIN_DIR=${CMAKE_BINARY_DIR}/bin;PYTHONPATH=${CMAKE_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1;MC_PYTHON_COMPAT=${CMAKE_BINARY_DIR}/python-compat")
endif()
