/*
 * console.h — the web console at /__runnel/console: its files (web/),
 * compiled into the binary by a build step (cmake/embed_web.cmake writes
 * console_assets.c), served as they are. The page holds no credential: it
 * asks for the admin credential and sends it to the operator routes
 * itself (docs/ADMIN.md "The console"), so serving it needs none.
 */
#ifndef RN_OPS_CONSOLE_H
#define RN_OPS_CONSOLE_H

#include <stddef.h>

#include "transport/http.h"

typedef struct {
    const char *name;         /* its path under /__runnel/console/ */
    const char *content_type; /* from its extension */
    const unsigned char *data;
    size_t len;
} rn_console_asset;

extern const rn_console_asset rn_console_assets[];
extern const size_t rn_console_asset_count;

/* Answers a GET or HEAD of path ("console" or "console/<file>", after
 * /__runnel/): the page for "console" and "console/", a file by its name,
 * 404 NOT_FOUND for any other name, 405 for another method. */
void rn_console_handle(rn_request *req, const char *path, size_t path_len);

#endif
