# The holders' task mailboxes (src/master/mailbox.c): push/pull, long-poll parking against a
# fake clock, queue limit, cancel by key, expiry, holder close; a threaded case for TSan.
mc_add_test(test_mailbox SOURCES test_mailbox.c LIBS mc_master_core Threads::Threads
            LABELS tsan TIMEOUT 60)
