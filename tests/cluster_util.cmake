# The cluster fixture of cluster_util.c against stand-in daemon scripts (no real processes of
# the project): flags passed, READY addresses taken, wrong READY lines refused.
mc_add_test(test_cluster_util SOURCES test_cluster_util.c cluster_util.c TIMEOUT 60)
