# Upstream compatibility of the daemons as processes (tests/compat, pytest): launch lines from
# upstream's and SGLang's docs, the master's HTTP admin API. Plain build only (like test_python).
if(MC_SANITIZE STREQUAL "" AND TARGET mooncake_master AND TARGET mc_client_daemon
   AND TARGET mooncake_cli)
  if(MC_PYTEST_PYTHON)
    add_test(NAME test_compat_launch
             COMMAND ${MC_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider
                     ${CMAKE_CURRENT_SOURCE_DIR}/compat/test_launch_flags.py)
    add_test(NAME test_compat_master_http
             COMMAND ${MC_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider
                     ${CMAKE_CURRENT_SOURCE_DIR}/compat/test_master_http.py)
    add_test(NAME test_compat_client_metrics
             COMMAND ${MC_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider
                     ${CMAKE_CURRENT_SOURCE_DIR}/compat/test_client_metrics.py)
    add_test(NAME test_compat_grafana_dashboard
             COMMAND ${MC_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider
                     ${CMAKE_CURRENT_SOURCE_DIR}/compat/test_grafana_dashboard.py)
    add_test(NAME test_compat_cli_errors
             COMMAND ${MC_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider
                     ${CMAKE_CURRENT_SOURCE_DIR}/compat/test_cli_errors.py)
    # the CI step of `pip install .`: a venv, an offline install, an import and a put/get
    # (skipped, 77, without Debian's python3-setuptools / python3-wheel or python3-venv)
    add_test(NAME test_compat_pip_install
             COMMAND sh -c "/usr/bin/python3 -c 'import setuptools, wheel, venv, ensurepip' \
                              2>/dev/null || exit 77; exec \"$0\" -m pytest -q \
                              -p no:cacheprovider \"$1\""
                     ${MC_PYTEST_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/compat/test_pip_install.py)
    set_tests_properties(test_compat_launch test_compat_master_http test_compat_client_metrics
      test_compat_grafana_dashboard test_compat_cli_errors test_compat_pip_install
      PROPERTIES TIMEOUT 120 ENVIRONMENT
      "MC_BIN_DIR=${CMAKE_BINARY_DIR}/bin;PYTHONPATH=${CMAKE_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
    set_tests_properties(test_compat_pip_install PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
endif()

# The master's paged key listing (/get_all_keys) on the master core, fake clock.
mc_add_test(test_admin_keys SOURCES test_admin_keys.c master_fixture.c
            LIBS mc_master_core TIMEOUT 60)
