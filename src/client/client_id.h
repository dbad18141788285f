/*
 * client_id.h - the client id kept in disk_path, so a restarted client is the same client.
 *
 * A client with a LOCAL_DISK directory owns the records there; the master knows them by the
 * client id that registered them. The id therefore lives in DIR/client_id (32 hex digits and a
 * newline): the first open writes a fresh random id (temp file, fsync, rename, fsync of the
 * directory), every later open reads it back. A file that is there but unreadable or malformed
 * is an error, never silently replaced: a new id would orphan the directory's records.
 * With a token, an id without a credential is replaced by the one a master mints
 * (mc_client_id_adopt): only then can the client prove it after a master restart.
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

/* Replaces DIR/client_id with id (written as a new file is): a client that had no credential
 * for its old id takes the one a master minted. 0, INVALID_PARAMS or INTERNAL_ERROR (logged). */
int mc_client_id_store(const char *dir, struct mc_id id);

struct mc_master_conn;
struct mc_auth_cred;
/* With a token (holder set) and no credential held for *id (a new client, one without dir, or a
 * dir written before credentials): asks the master to mint an id and its credential
 * (RegisterClient, on mc before its ping thread starts) and takes them: *id, the holder and,
 * with dir, DIR/client_id and DIR/client_cred. Called before anything is mounted or registered
 * under an id. An older master (NOT_SUPPORTED) leaves *id as it is, with a warning. 0 or the
 * failing call's code (logged). */
int mc_client_id_adopt(struct mc_master_conn *mc, struct mc_auth_cred *holder, const char *dir,
                       struct mc_id *id);

#endif
