/*
 * errors.h - error codes of the Mooncake-compatible KV-cache store.
 *
 * The numeric values are upstream Mooncake Store's ErrorCode values, so operators can use the
 * upstream error table. Every public call returns 0 (MC_OK) or one of these negative codes.
 * mc_strerror() names each code ("OBJECT_NOT_FOUND"); mc_error_from_name() is its inverse.
 * Codes from -2000 on have no upstream counterpart: UNAUTHENTICATED (the peer requires the shared
 * auth token, or refused ours) and PROTECTED_MODE (a server without a token serves loopback
 * peers only), NOT_LEADER (this master is a standby of a high-availability cluster: ask it
 * GetLeader for the leader's address and epoch, or read the cluster's etcd), TLS_REQUIRED (the
 * server speaks TLS only: configure this side's TLS files).
 */
#ifndef MOONCAKE_ERRORS_H
#define MOONCAKE_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

#define MC_ERROR_LIST(X)                                                                           \
    X(MC_OK, 0, "OK")                                                                              \
    X(MC_ERR_INTERNAL_ERROR, -1, "INTERNAL_ERROR")                                                 \
    X(MC_ERR_BUFFER_OVERFLOW, -10, "BUFFER_OVERFLOW")                                              \
    X(MC_ERR_SHARD_INDEX_OUT_OF_RANGE, -100, "SHARD_INDEX_OUT_OF_RANGE")                           \
    X(MC_ERR_SEGMENT_NOT_FOUND, -101, "SEGMENT_NOT_FOUND")                                         \
    X(MC_ERR_SEGMENT_ALREADY_EXISTS, -102, "SEGMENT_ALREADY_EXISTS")                               \
    X(MC_ERR_CLIENT_NOT_FOUND, -103, "CLIENT_NOT_FOUND")                                           \
    X(MC_ERR_NO_AVAILABLE_HANDLE, -200, "NO_AVAILABLE_HANDLE")                                     \
    X(MC_ERR_INVALID_VERSION, -300, "INVALID_VERSION")                                             \
    X(MC_ERR_INVALID_KEY, -400, "INVALID_KEY")                                                     \
    X(MC_ERR_WRITE_FAIL, -500, "WRITE_FAIL")                                                       \
    X(MC_ERR_INVALID_PARAMS, -600, "INVALID_PARAMS")                                               \
    X(MC_ERR_ILLEGAL_CLIENT, -601, "ILLEGAL_CLIENT")                                               \
    X(MC_ERR_INVALID_WRITE, -700, "INVALID_WRITE")                                                 \
    X(MC_ERR_INVALID_READ, -701, "INVALID_READ")                                                   \
    X(MC_ERR_INVALID_REPLICA, -702, "INVALID_REPLICA")                                             \
    X(MC_ERR_REPLICA_IS_NOT_READY, -703, "REPLICA_IS_NOT_READY")                                   \
    X(MC_ERR_OBJECT_NOT_FOUND, -704, "OBJECT_NOT_FOUND")                                           \
    X(MC_ERR_OBJECT_ALREADY_EXISTS, -705, "OBJECT_ALREADY_EXISTS")                                 \
    X(MC_ERR_OBJECT_HAS_LEASE, -706, "OBJECT_HAS_LEASE")                                           \
    X(MC_ERR_LEASE_EXPIRED, -707, "LEASE_EXPIRED")                                                 \
    X(MC_ERR_OBJECT_HAS_REPLICATION_TASK, -708, "OBJECT_HAS_REPLICATION_TASK")                     \
    X(MC_ERR_OBJECT_NO_REPLICATION_TASK, -709, "OBJECT_NO_REPLICATION_TASK")                       \
    X(MC_ERR_REPLICA_NOT_FOUND, -710, "REPLICA_NOT_FOUND")                                         \
    X(MC_ERR_REPLICA_ALREADY_EXISTS, -711, "REPLICA_ALREADY_EXISTS")                               \
    X(MC_ERR_REPLICA_IS_GONE, -712, "REPLICA_IS_GONE")                                             \
    X(MC_ERR_REPLICA_NOT_IN_LOCAL_MEMORY, -713, "REPLICA_NOT_IN_LOCAL_MEMORY")                     \
    X(MC_ERR_OBJECT_REPLICA_BUSY, -714, "OBJECT_REPLICA_BUSY")                                     \
    X(MC_ERR_TRANSFER_FAIL, -800, "TRANSFER_FAIL")                                                 \
    X(MC_ERR_CHECKSUM_MISMATCH, -801, "CHECKSUM_MISMATCH")                                         \
    X(MC_ERR_RPC_FAIL, -900, "RPC_FAIL")                                                           \
    X(MC_ERR_RPC_TIMEOUT, -901, "RPC_TIMEOUT")                                                     \
    X(MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS, -1010, "UNAVAILABLE_IN_CURRENT_STATUS")                \
    X(MC_ERR_UNAVAILABLE_IN_CURRENT_MODE, -1011, "UNAVAILABLE_IN_CURRENT_MODE")                    \
    X(MC_ERR_NOT_SUPPORTED, -1012, "NOT_SUPPORTED")                                                \
    X(MC_ERR_FILE_NOT_FOUND, -1100, "FILE_NOT_FOUND")                                              \
    X(MC_ERR_FILE_OPEN_FAIL, -1101, "FILE_OPEN_FAIL")                                              \
    X(MC_ERR_FILE_READ_FAIL, -1102, "FILE_READ_FAIL")                                              \
    X(MC_ERR_FILE_WRITE_FAIL, -1103, "FILE_WRITE_FAIL")                                            \
    X(MC_ERR_FILE_INVALID_BUFFER, -1104, "FILE_INVALID_BUFFER")                                    \
    X(MC_ERR_FILE_LOCK_FAIL, -1105, "FILE_LOCK_FAIL")                                              \
    X(MC_ERR_FILE_INVALID_HANDLE, -1106, "FILE_INVALID_HANDLE")                                    \
    X(MC_ERR_UNABLE_OFFLOAD, -1300, "UNABLE_OFFLOAD")                                              \
    X(MC_ERR_UNABLE_OFFLOADING, -1301, "UNABLE_OFFLOADING")                                        \
    X(MC_ERR_TASK_NOT_FOUND, -1400, "TASK_NOT_FOUND")                                              \
    X(MC_ERR_TASK_PENDING_LIMIT_EXCEEDED, -1401, "TASK_PENDING_LIMIT_EXCEEDED")                    \
    X(MC_ERR_SERIALIZE_FAIL, -1501, "SERIALIZE_FAIL")                                              \
    X(MC_ERR_DESERIALIZE_FAIL, -1502, "DESERIALIZE_FAIL")                                          \
    X(MC_ERR_UNAUTHENTICATED, -2000, "UNAUTHENTICATED")                                            \
    X(MC_ERR_PROTECTED_MODE, -2001, "PROTECTED_MODE")                                              \
    X(MC_ERR_NOT_LEADER, -2002, "NOT_LEADER")                                                      \
    X(MC_ERR_TLS_REQUIRED, -2003, "TLS_REQUIRED")

enum mc_error {
#define MC_ERROR_ENUM_(sym, val, name) sym = (val),
    MC_ERROR_LIST(MC_ERROR_ENUM_)
#undef MC_ERROR_ENUM_
};

/* Name of an error code ("OBJECT_NOT_FOUND"); "UNKNOWN_ERROR" for a value not in the table. */
const char *mc_strerror(int code);

/* Inverse of mc_strerror: the code for a name, or 1 (not an error code) when unknown. */
int mc_error_from_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_ERRORS_H */
