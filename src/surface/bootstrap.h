/*
 * bootstrap.h — one-request initialization (extensions.txt §3) and the
 * immutable chunk resource (§4.1–4.3). `key` is the stream's engine key;
 * tokens and offsets are raw (percent-encoded) path segments.
 */
#ifndef RN_BOOTSTRAP_H
#define RN_BOOTSTRAP_H

#include "surface/streams.h"

/* GET {stream}/bootstrap; a query component is refused (it takes none). */
void rn_bootstrap(rn_surface *sf, rn_request *req, const char *key, size_t key_len, int has_query);
/* GET|HEAD {stream}/incarnation/{token}/chunk/{offset}. */
void rn_chunk_read(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                   const char *token, size_t token_len, const char *offset, size_t offset_len);

#endif
