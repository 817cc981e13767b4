/*
 * parts.h — snapshot upload in parts (extensions.txt §2.2): staging parts,
 * discarding them, and committing a snapshot made of them; the parts are
 * kept by the tiers (tiers/tiers.h). `key` is the stream's engine key;
 * offsets are raw path segments.
 */
#ifndef RN_PARTS_H
#define RN_PARTS_H

#include "surface/streams.h"

/* POST {stream}/snapshot/{offset}/parts */
void rn_parts_stage(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                    const char *offset, size_t offset_len);
/* POST {stream}/snapshot/{offset}/parts before its body is read (the
 * transport's on_headers hook): answers 429 STAGED_PARTS_LIMIT when the
 * part, counted at its Content-Length (32 MiB without one), would pass a
 * bound; answers nothing otherwise, and every other refusal waits for the
 * body. */
void rn_parts_answer_early(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                           const char *offset, size_t offset_len);
/* DELETE {stream}/snapshot/parts */
void rn_parts_discard(rn_surface *sf, rn_request *req, const char *key, size_t key_len);
/* PUT {stream}/snapshot/{offset} with Stream-Snapshot-Parts */
void rn_parts_commit(rn_surface *sf, rn_request *req, const char *key, size_t key_len,
                     const char *offset, size_t offset_len);

#endif
