/*
 * client_id.h - the client id kept in disk_path, so a restarted client is the same client.
 *
 * A client with a LOCAL_DISK directory owns the records there; the master knows them by the
 * client id that registered them. The id therefore lives in DIR/client_id (32 hex digits and a
 * newline): the first open writes a fresh random id (temp file, fsync, rename, fsync of the
 * directory), every later open reads it back. A file that is there but unreadable or malformed
 * is an error, never silently replaced: a new id would orphan the directory's records.
 */
#ifndef MC_CLIENT_CLIENT_ID_H
#define MC_CLIENT_CLIENT_ID_H

#include <stdbool.h>

#include "common/id.h"

#define MC_CLIENT_ID_FILE "client_id"

/* Loads DIR/client_id, or creates DIR (one level) and the file with a fresh random id.
 * *created says which. Returns 0, MC_ERR_INVALID_PARAMS for a malformed file, or
 * MC_ERR_INTERNAL_ERROR for an I/O error (each logged with the path and the reason). */
int mc_client_id_load_or_create(const char *dir, struct mc_id *out, bool *created);

#endif
