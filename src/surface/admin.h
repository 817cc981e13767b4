/*
 * admin.h — operator routes under /__runnel/. Today: the test hook that
 * rewrites a stream's history (POST /__runnel/test/rewrite/{key}?keep=
 * <offset>), standing in for the operator actions (restore, accepted loss)
 * that will trigger rewrites later. It exists only with --test-hooks 1.
 */
#ifndef RN_ADMIN_H
#define RN_ADMIN_H

#include "surface/streams.h"

/* Handles a path under /__runnel/ (path starts after that prefix). */
void rn_admin_handle(rn_surface *sf, rn_request *req, int test_hooks, const char *path,
                     size_t path_len, const char *query, size_t query_len);

#endif
