# The promotion admission gate (src/master/sketch.c, promotion.c's gates): the doorkeeper and
# sketch estimate distribution, one-shot disk reads at scale against a full DRAM, hot beats cold
# both ways.
mc_add_test(test_admission SOURCES test_admission.c LIBS mc_master_core TIMEOUT 120)
