# The load generator of scripts/soak.sh (docs/testing.md): Put/Get/Remove over a Zipf key
# set, every value self-verifying. Not a CTest test: the soak runs as its own CI pass.
add_executable(soak_load soak_load.c)
target_link_libraries(soak_load PRIVATE mc_client_static Threads::Threads m)
set_target_properties(soak_load PROPERTIES LINKER_LANGUAGE CXX)
