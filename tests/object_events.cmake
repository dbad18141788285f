# Master core: the object events (src/master/object_events.h): the subscriber table per
# configuration, and what a recording subscriber sees from the real operations.
mc_add_test(test_object_events SOURCES test_object_events.c master_fixture.c
            LIBS mc_master_core TIMEOUT 60)
