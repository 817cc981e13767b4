/*
 * sse.c — SSE responses that follow a stream (PROTOCOL §5.8): their
 * head, the pump
 * that sends every event available from a reader's offset, the event
 * framing (data events in the reader's encoding, control events, error
 * events), the per-wake event shared by the readers at one position
 * (rn_sse_shared, live_int.h), and the pause of a reader whose socket
 * holds more than sse_queue_bytes unsent until the transport reports it
 * drained. See live.h.
 */
#include "live/live_int.h"
#include "util/json_text.h"
#include "util/metrics.h"
#include "util/text.h"

#include <assert.h>
#include <errno.h>

/* Appends one data event of n > 0 stream bytes d: a JSON array, base64, or
 * text with one data: line per line of the payload. */
static void data_event(rn_buf *out, rn_sse_encoding enc, const uint8_t *d, size_t n) {
    rn_buf_append_str(out, "event: data\n");
    if (enc == RN_SSE_JSON_ARRAY) {
        rn_buf_append_str(out, "data:");
        rn_json_append_array(out, d, n);
        rn_buf_append_str(out, "\n\n");
        return;
    }
    if (enc == RN_SSE_BASE64) {
        rn_buf_append_str(out, "data:");
        rn_base64_append(out, d, n);
        rn_buf_append_str(out, "\n\n");
        return;
    }
    /* Text: one data: line per line of the payload, split at CR, LF and
     * CRLF so that no payload byte can end the event early. */
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < n && d[j] != '\n' && d[j] != '\r')
            j++;
        rn_buf_append_str(out, j > i && d[i] == ' ' ? "data: " : "data:");
        rn_buf_append(out, d + i, j - i);
        rn_buf_append_byte(out, '\n');
        if (j >= n)
            break;
        i = j + ((d[j] == '\r' && j + 1 < n && d[j + 1] == '\n') ? 2 : 1);
    }
    rn_buf_append_byte(out, '\n');
}

/* Appends the control event for r's position; `cursor` is sent unless the
 * event reports the closure. */
static void control_event(rn_buf *out, const rn_live_reader *r, const rn_stream *s, int at_tail,
                          uint64_t cursor) {
    rn_buf_append_str(out, "event: control\ndata:{\"streamNextOffset\":\"");
    r->ops->append_offset(out, r->offset);
    rn_buf_append_str(out, "\"");
    if (at_tail && s->closed) {
        rn_buf_append_str(out, ",\"streamClosed\":true,\"upToDate\":true}\n\n");
        return;
    }
    rn_buf_appendf(out, ",\"streamCursor\":\"%llu\"", (unsigned long long)cursor);
    if (at_tail)
        rn_buf_append_str(out, ",\"upToDate\":true");
    rn_buf_append_str(out, "}\n\n");
}

/* Ends r's response after what was sent (its end, the closure or its
 * time), or with an error event first. */
void rn_live_sse_end(rn_live_reader *r, rn_live_end why) {
    assert(why != RN_LIVE_DATA);
    if (why == RN_LIVE_REWRITTEN || why == RN_LIVE_REMOVED || why == RN_LIVE_FAILED ||
        why == RN_LIVE_COLD || why == RN_LIVE_DAMAGED) {
        rn_buf ev = {0};
        rn_buf_append_str(&ev, "event: error\ndata:");
        size_t head = ev.len;
        r->ops->sse_error(r, why, &ev);
        if (ev.len > head) {
            rn_buf_append_str(&ev, "\n\n");
            rn_http_stream_write(r->req, &ev);
        }
        rn_buf_free(&ev);
    }
    if (why == RN_LIVE_EXPIRED) { /* after a whole event: the client resumes with a new one */
        rn_buf ev = {0};
        rn_buf_append_str(&ev, "event: credential-expired\ndata:");
        size_t head = ev.len;
        r->ops->sse_error(r, why, &ev);
        if (ev.len == head)
            rn_buf_append_str(&ev, "{}");
        rn_buf_append_str(&ev, "\n\n");
        rn_http_stream_write(r->req, &ev);
    }
    rn_http_stream_end(r->req);
    rn_live_finish(r);
}

/* Makes the shared event hold the data event at r->offset (reading and
 * encoding it unless it already does). Returns the stream bytes it covers
 * (<= 0 on a read failure). */
static long next_event(rn_live_reader *r, rn_stream *s) {
    rn_sse_shared *sh = &r->live->shared;
    if (sh->event.len && sh->stream_id == s->id && sh->incarnation == s->incarnation &&
        sh->offset == r->offset && sh->tail == s->tail && sh->max_bytes == r->max_bytes &&
        sh->encoding == r->encoding)
        return sh->got;
    rn_buf data = {0};
    long got = rn_engine_read(r->live->engine, s, r->offset, r->max_bytes,
                              r->encoding == RN_SSE_JSON_ARRAY, &data);
    if (got <= 0) {
        rn_buf_free(&data);
        return got;
    }
    sh->event.len = 0;
    data_event(&sh->event, r->encoding, data.data, data.len);
    rn_buf_free(&data);
    if (sh->chunk)
        rn_http_chunk_release(sh->chunk);
    sh->chunk = NULL;
    sh->stream_id = s->id;
    sh->incarnation = s->incarnation;
    sh->offset = r->offset;
    sh->tail = s->tail;
    sh->max_bytes = r->max_bytes;
    sh->encoding = r->encoding;
    sh->got = got;
    return got;
}

/* Sends the shared data event and then r's control event (r->offset
 * already past the data, in cursor interval `interval`): the shared chunk
 * when r's cursor is the interval, else a chunk of its own. Returns bytes
 * still queued on the socket. */
static size_t send_event(rn_live_reader *r, const rn_stream *s, int at_tail, uint64_t interval) {
    rn_sse_shared *sh = &r->live->shared;
    uint64_t cursor = at_tail && s->closed ? interval : rn_cursor_after(&r->cursor, interval);
    int shared = cursor == interval;
    if (shared && sh->chunk && sh->chunk_cursor == interval && sh->chunk_closed == s->closed)
        return rn_http_stream_write_chunk(r->req, sh->chunk);
    rn_buf ev = {0};
    rn_buf_append(&ev, sh->event.data, sh->event.len);
    control_event(&ev, r, s, at_tail, cursor);
    if (!shared)
        return rn_http_stream_write(r->req, &ev);
    if (sh->chunk)
        rn_http_chunk_release(sh->chunk);
    sh->chunk = rn_http_chunk_new(ev.data, ev.len);
    sh->chunk_cursor = interval;
    sh->chunk_closed = s->closed;
    rn_buf_free(&ev);
    return rn_http_stream_write_chunk(r->req, sh->chunk);
}

static void pump(rn_live_reader *r, rn_stream *s, int force_control);

/* The end of r's wait for cold history: it goes on from where it paused,
 * or ends with an error event when the fetch failed; a reader that ended
 * meanwhile is only released (when its timer closed already). */
static void cold_fetched(void *arg, int status) {
    rn_live_reader *r = arg;
    r->cold_wait = 0;
    if (r->release_due) {
        r->ops->release(r);
        return;
    }
    if (r->ended)
        return; /* its timer's close releases it */
    if (status < 0) {
        rn_live_sse_end(r, RN_LIVE_COLD);
        return;
    }
    r->paused = 0;
    pump(r, r->stream, 0);
}

/* Sends every event available from r->offset; ends the response on
 * closure. `force_control` sends a control even without new data (the
 * first one of a response). A chunk of history in the cold store that the
 * read cache lacks pauses it until the chunk is fetched. */
static void pump(rn_live_reader *r, rn_stream *s, int force_control) {
    for (;;) {
        if (r->offset >= s->tail) {
            if (force_control || s->closed) {
                rn_buf ev = {0};
                control_event(&ev, r, s, 1, rn_cursor_next(&r->cursor));
                rn_http_stream_write(r->req, &ev);
            }
            if (s->closed)
                rn_live_sse_end(r, RN_LIVE_TIMEOUT);
            return;
        }
        long got = next_event(r, s);
        if (got == -ENODATA) { /* history in the cold store that the read cache lacks */
            r->paused = 1;
            r->cold_wait = 1;
            rn_engine_cold_fetch(r->live->engine, cold_fetched, r);
            return;
        }
        if (got <= 0) {
            rn_live_sse_end(r, got == -EUCLEAN ? RN_LIVE_DAMAGED : RN_LIVE_FAILED);
            return;
        }
        rn_metric.sse_events++;
        rn_metric.sse_bytes += (uint64_t)got;
        r->offset += (uint64_t)got;
        int at_tail = r->offset == s->tail;
        force_control = 0;
        size_t queued = send_event(r, s, at_tail, rn_cursor_interval());
        if (at_tail && s->closed) {
            rn_live_sse_end(r, RN_LIVE_TIMEOUT);
            return;
        }
        if (queued > r->live->cfg.sse_queue_bytes) {
            r->paused = 1;
            return;
        }
    }
}

static void on_drain(rn_request *req) {
    rn_live_reader *r = req->handler_data;
    if (!r->paused || r->cold_wait || r->ended)
        return;
    r->paused = 0;
    assert(r->stream); /* registered until it ends */
    pump(r, r->stream, 0);
}

void rn_live_sse(rn_live *live, rn_live_reader *r, rn_stream *s, rn_buf *head) {
    assert(r->offset <= s->tail);
    rn_buf_append_str(head, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n");
    if (r->encoding == RN_SSE_BASE64)
        rn_buf_append_str(head, "Stream-SSE-Data-Encoding: base64\r\n");
    rn_http_stream_start(r->req, 200, head);
    r->sse = 1;
    rn_live_register(live, r, s, live->cfg.sse_max_duration_ms);
    r->req->on_drain = on_drain;
    pump(r, s, 1);
}

void rn_live_sse_changed(rn_live_reader *r, rn_stream *s) {
    if (!r->paused)
        pump(r, s, 0);
}

void rn_live_sse_free_shared(rn_live *live) {
    rn_buf_free(&live->shared.event);
    if (live->shared.chunk)
        rn_http_chunk_release(live->shared.chunk);
    live->shared.chunk = NULL;
}
