/*
 * sse.h — a streaming Server-Sent Events parser for live reads (PROTOCOL
 * §5.8, extensions §9.5): lines as they arrive, "event:" and "data:"
 * fields (data lines joined by LF), an event dispatched at its empty line.
 * Memory is bounded: an event larger than max_event fails the parse.
 */
#ifndef RN_CLIENT_SSE_H
#define RN_CLIENT_SSE_H

#include "util/buf.h"

#include <stddef.h>

/* Receives one event: its type ("message" when none was named) and its
 * data. Returns 0 to go on, nonzero to stop. */
typedef int (*rnc_sse_event_fn)(void *arg, const char *type, const char *data, size_t len);

typedef struct {
    size_t max_event;
    rn_buf line;   /* the current line */
    rn_buf data;   /* the current event's data */
    char type[32]; /* the current event's type */
    int has_data;  /* a data field was seen */
    int after_cr;  /* the previous byte ended a line with CR */
    int failed;    /* an event passed max_event */
    rnc_sse_event_fn on_event;
    void *arg;
} rnc_sse;

void rnc_sse_init(rnc_sse *p, size_t max_event, rnc_sse_event_fn on_event, void *arg);
/* Feeds bytes; returns 0, or -1 when an event was too large or the
 * callback stopped (failed tells which). */
int rnc_sse_feed(rnc_sse *p, const char *d, size_t n);
/* Forgets a partial event (a new connection starts). */
void rnc_sse_reset(rnc_sse *p);
void rnc_sse_free(rnc_sse *p);

#endif
