/*
 * lock_order.h - the master core's lock order: the checker and the levels live in
 * common/lock_order.h (shared with the client); the master's files include this name.
 */
#ifndef MC_MASTER_LOCK_ORDER_H
#define MC_MASTER_LOCK_ORDER_H

#include "common/lock_order.h"

#endif
