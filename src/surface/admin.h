/*
 * admin.h — test hooks under /__runnel/test/, which exist only with
 * --test-hooks: POST test/rewrite/{key}?keep=<offset> rewrites a stream's
 * history (for tests only: operators rewrite histories by `runnel restore`
 * and --accept-loss, see ops/backup.h and engine/accept_loss.c); POST
 * test/fail-syncs?n=N makes the next N log syncs fail, and POST
 * test/fail?point=NAME&n=N[&errno=EIO|ENOSPC] the next N passes of a
 * failure point of util/fault.h (fault injection).
 */
#ifndef RN_ADMIN_H
#define RN_ADMIN_H

#include "surface/streams.h"

/* Handles a path under /__runnel/ (path starts after that prefix). */
void rn_admin_handle(rn_surface *sf, rn_request *req, int test_hooks, const char *path,
                     size_t path_len, const char *query, size_t query_len);

#endif
