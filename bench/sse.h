/*
 * sse.h — incremental parser for a Server-Sent Events body.
 *
 * Fed the body in arbitrary pieces, it reassembles lines (LF-terminated, a
 * CR before the LF is dropped) and hands every `data:` line of an
 * `event: data` event to a callback, without the field name and the one
 * optional space after the colon. Events of other types (control) are only
 * counted. Lines are buffered per parser, so one parser per subscriber.
 */
#ifndef BN_SSE_H
#define BN_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef void (*bn_sse_data_fn)(void *arg, const char *line, size_t n);

typedef struct {
    rn_buf line;
    int in_data; /* the current event's type is "data" */
    int is_control;
    bn_sse_data_fn on_data;
    void *arg;
    uint64_t data_events;
    uint64_t control_events;
} bn_sse;

void bn_sse_init(bn_sse *s, bn_sse_data_fn on_data, void *arg);
void bn_sse_feed(bn_sse *s, const char *at, size_t n);
void bn_sse_free(bn_sse *s);

#endif
