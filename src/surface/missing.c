/*
 * missing.c — which 404 (or 410) a stream the engine does not hold gets.
 * See missing.h.
 */
#include "surface/missing.h"

#include <assert.h>
#include <string.h>

rn_error rn_bucket_missing_error(rn_engine *e, const char *key, size_t len) {
    assert(e && key);
    if (rn_engine_path_erased(e, key, len, 0))
        return RN_E_BUCKET_ERASED;
    if (rn_engine_is_gone(e, key, len))
        return RN_E_STREAM_GONE;
    const char *slash = memchr(key, '/', len); /* key: bucket_id "/" stream_id */
    size_t bucket_len = slash ? (size_t)(slash - key) : 0;
    return rn_engine_namespace_exists(e, key, bucket_len) ? RN_E_STREAM_NOT_FOUND
                                                          : RN_E_BUCKET_NOT_FOUND;
}
