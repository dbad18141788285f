/*
 * remove_regex.h - RemoveByRegex: removes every key the pattern matches (remove_regex.c).
 *
 * The pattern is a POSIX extended regular expression (regcomp(3), REG_EXTENDED | REG_NOSUB)
 * matched against the whole key: it is anchored as ^(pattern)$, so "layer0/.*" removes the
 * keys that start with "layer0/" and "block" removes the key "block" only. Each matching key is
 * removed by the Remove rules (a key under a read lease is kept unless force; its LOCAL_DISK
 * copies go under the delete rule, DESIGN §7).
 */
#ifndef MC_MASTER_REMOVE_REGEX_H
#define MC_MASTER_REMOVE_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

/* Longest pattern accepted (bytes); a longer one, one with a NUL byte or one regcomp refuses
 * is INVALID_PARAMS. */
#define MC_REGEX_MAX_LEN 4096

/* Removes the matching keys; *removed gets how many. Like mc_master_remove_all_wait: returns
 * MC_MASTER_PENDING when their holders' acknowledgements are awaited (done(arg, rc) is called
 * then), else the status now (done is not called). */
int mc_master_remove_by_regex_wait(struct mc_master *m, const char *pattern, size_t len, bool force,
                                   uint64_t *removed, mc_master_done_fn done, void *arg);
/* Without waiting for the holders (the deletes are still queued). */
int mc_master_remove_by_regex(struct mc_master *m, const char *pattern, size_t len, bool force,
                              uint64_t *removed);

#endif
