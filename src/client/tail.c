/*
 * tail.c — runnel_tail: a live read by SSE or long-poll that goes on from the
 * last offset it delivered. Data reaches the caller only with the offset
 * after it (an SSE data event waits for its control event; a long-poll
 * body is delivered whole), so a connection cut mid-answer never delivers
 * a byte twice. The incarnation the caller's offsets belong to is sent as
 * a precondition on every request (after it is learned from the first
 * answer); a 412, an SSE error event or an answer naming another token
 * stops the tail and tells the caller — offsets of one incarnation mean
 * nothing in another. A 410 for an offset the stream retained away (the
 * stream still answers HEAD) stops it with RUNNEL_TAIL_RETAINED, so that the
 * caller can bootstrap (extensions §3), not as a deleted stream. Memory: one
 * event or answer of at most max_event_bytes.
 */
#include "client/internal.h"
#include "client/sse.h"
#include "util/text.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct {
    runnel_client *c;
    const char *stream;
    const runnel_tail_options *o;
    size_t max_event;
    char offset[RUNNEL_VALUE_MAX];
    char cursor[RUNNEL_VALUE_MAX];
    char incarnation[32];
    runnel_answer *ans;
    rnc_sse sse;
    rn_buf pending; /* SSE: a data event waiting for its control event;
                       long-poll: the answer's body */
    int has_pending;
    int closed;    /* the end of the stream was reached */
    int stop_ok;   /* stopped because not following and up to date */
    int stop_user; /* a callback stopped */
    int too_large; /* an answer passed max_event */
    int sse_error; /* an SSE error event: its code is in error_code */
    char error_code[64];
    char new_incarnation[32];
} tail_state;

static int event(tail_state *t, runnel_tail_event ev, const runnel_answer *a) {
    if (t->o->on_event && t->o->on_event(t->o->arg, ev, t->offset, a)) {
        t->stop_user = 1;
        return 1;
    }
    return 0;
}

static int deliver(tail_state *t, const char *data, size_t len, const char *next) {
    if (len && t->o->on_data && t->o->on_data(t->o->arg, data, len, next)) {
        t->stop_user = 1;
        return 1;
    }
    return 0;
}

/* A control event: the data before it holds up to streamNextOffset. */
static int on_control(tail_state *t, const char *data, size_t len) {
    json_t *root = json_loadb(data, len, 0, NULL);
    json_t *next = root ? json_object_get(root, "streamNextOffset") : NULL;
    if (!json_is_string(next) || json_string_length(next) >= sizeof t->offset) {
        json_decref(root);
        return 1; /* a control event without its offset: the answer is broken */
    }
    char off[RUNNEL_VALUE_MAX];
    rnc_fmt(off, sizeof off, "%s", json_string_value(next));
    json_t *cur = json_object_get(root, "streamCursor");
    if (json_is_string(cur) && json_string_length(cur) < sizeof t->cursor)
        rnc_fmt(t->cursor, sizeof t->cursor, "%s", json_string_value(cur));
    int up = json_is_true(json_object_get(root, "upToDate"));
    int closed = json_is_true(json_object_get(root, "streamClosed"));
    json_decref(root);
    int stop = t->has_pending && deliver(t, (const char *)t->pending.data, t->pending.len, off);
    t->pending.len = 0;
    t->has_pending = 0;
    memcpy(t->offset, off, sizeof off);
    if (stop)
        return 1;
    if (closed) {
        t->closed = 1;
        return event(t, RUNNEL_TAIL_CLOSED, t->ans) || 1; /* the server ends the answer */
    }
    if (up) {
        if (event(t, RUNNEL_TAIL_UP_TO_DATE, t->ans))
            return 1;
        if (!t->o->follow) {
            t->stop_ok = 1;
            return 1;
        }
    }
    return 0;
}

static int on_sse_event(void *arg, const char *type, const char *data, size_t len) {
    tail_state *t = arg;
    if (strcmp(type, "data") == 0) {
        rn_buf_append(&t->pending, data, len);
        t->has_pending = 1;
        if (t->ans->sse_base64) {
            long n =
                rn_base64_decode((const char *)t->pending.data, t->pending.len, t->pending.data);
            if (n < 0)
                return 1;
            t->pending.len = (size_t)n;
        }
        return 0;
    }
    if (strcmp(type, "control") == 0)
        return on_control(t, data, len);
    if (strcmp(type, "error") == 0) {
        runnel_answer a = *t->ans; /* the error body of the event, read like an answer's */
        rnc_answer_error_body(&a, data, len);
        rnc_fmt(t->error_code, sizeof t->error_code, "%s", a.error_code);
        t->sse_error = 1;
        return 1;
    }
    return 0;
}

static int sse_sink(void *arg, const void *data, size_t len) {
    tail_state *t = arg;
    if (!rnc_sse_feed(&t->sse, data, len))
        return 0;
    if (t->sse.failed)
        t->too_large = 1;
    return 1;
}

static int poll_sink(void *arg, const void *data, size_t len) {
    tail_state *t = arg;
    if (t->pending.len + len > t->max_event) {
        t->too_large = 1;
        return 1;
    }
    rn_buf_append(&t->pending, data, len);
    return 0;
}

/* One live request. Returns rnc_perform's result. */
static runnel_result one_request(tail_state *t) {
    int sse = t->o->mode == RUNNEL_TAIL_SSE;
    rnc_request req = {0};
    if (rnc_request_init(&req, t->c, "GET", t->stream, NULL) ||
        rnc_read_query(req.url, t->offset, 0, NULL, sse ? "sse" : "long-poll",
                       sse ? NULL : t->cursor, sse ? 0 : t->o->timeout_ms)) {
        rnc_request_free(&req);
        return RUNNEL_E_USAGE;
    }
    if (t->incarnation[0])
        rnc_header(&req.headers, "Stream-Incarnation", t->incarnation);
    req.live = 1;
    req.sink = sse ? sse_sink : poll_sink;
    req.sink_arg = t;
    t->pending.len = 0;
    t->has_pending = 0;
    rnc_sse_reset(&t->sse);
    t->too_large = t->sse_error = 0;
    runnel_result r = rnc_perform(t->c, &req, t->ans);
    rnc_request_free(&req);
    return r;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* After an answer: learns or checks the incarnation. Returns 1 when the
 * answer names another one than the tail holds. */
static int other_incarnation(tail_state *t) {
    const char *got = t->ans->incarnation;
    if (!got[0])
        return 0;
    if (!t->incarnation[0]) {
        rnc_fmt(t->incarnation, sizeof t->incarnation, "%s", got);
        return 0;
    }
    return strcmp(got, t->incarnation) != 0;
}

/* The long-poll answer's data and position. Returns 1 to stop. */
static int after_poll(tail_state *t) {
    runnel_answer *a = t->ans;
    if (!a->next_offset[0])
        return -1;
    if (a->status == 200 &&
        deliver(t, (const char *)t->pending.data, t->pending.len, a->next_offset))
        return 1;
    rnc_fmt(t->offset, sizeof t->offset, "%s", a->next_offset);
    if (a->cursor[0])
        rnc_fmt(t->cursor, sizeof t->cursor, "%s", a->cursor);
    if (a->closed && (a->up_to_date || a->status == 204)) {
        t->closed = 1;
        event(t, RUNNEL_TAIL_CLOSED, a);
        return 1;
    }
    if (a->up_to_date || a->status == 204) {
        if (event(t, RUNNEL_TAIL_UP_TO_DATE, a))
            return 1;
        if (!t->o->follow) {
            t->stop_ok = 1;
            return 1;
        }
    }
    return 0;
}

/* After a 410: whether the stream still exists as the incarnation the tail
 * holds (HEAD answers 200), so that the 410 says the offset was retained
 * away, not that the stream was deleted. Copies the stream's retained
 * offset into ans. */
static int retained_away(tail_state *t, runnel_answer *ans) {
    runnel_answer h;
    if (runnel_head(t->c, t->stream, t->incarnation[0] ? t->incarnation : NULL, &h) != RUNNEL_OK ||
        h.status != 200)
        return 0;
    rnc_fmt(ans->retained_offset, sizeof ans->retained_offset, "%s", h.retained_offset);
    return 1;
}

runnel_result runnel_tail(runnel_client *c, const char *stream, const runnel_tail_options *o,
                          char *last_offset, runnel_answer *ans) {
    tail_state t = {.c = c, .stream = stream, .o = o, .ans = ans};
    t.max_event = o->max_event_bytes ? o->max_event_bytes : 16u << 20;
    rnc_fmt(t.offset, sizeof t.offset, "%s", o->offset ? o->offset : "-1");
    if (o->incarnation)
        rnc_fmt(t.incarnation, sizeof t.incarnation, "%s", o->incarnation);
    rnc_sse_init(&t.sse, t.max_event, on_sse_event, &t);
    long patience = o->reconnect_for_ms ? o->reconnect_for_ms : 60000;
    int64_t last_answer = rnc_now_ms();
    int failures = 0;
    runnel_result result;
    for (;;) {
        runnel_result r = one_request(&t);
        if (r == RUNNEL_E_USAGE) {
            result = r;
            break;
        }
        if (t.stop_user) {
            result = RUNNEL_E_STOPPED;
            break;
        }
        if (t.closed || t.stop_ok) {
            result = RUNNEL_OK;
            break;
        }
        if (r == RUNNEL_E_TRANSPORT || (r == RUNNEL_E_STOPPED && !t.too_large && !t.sse_error &&
                                        ans->status == 200 && o->mode == RUNNEL_TAIL_SSE)) {
            /* no answer, or an SSE answer cut or broken: reconnect from the
             * last offset delivered */
            if (patience >= 0 && rnc_now_ms() - last_answer > patience) {
                result = RUNNEL_E_TRANSPORT;
                break;
            }
            if (event(&t, RUNNEL_TAIL_RECONNECTING, ans)) {
                result = RUNNEL_E_STOPPED;
                break;
            }
            pause_ms(failures < 5 ? 100L << failures : 2000);
            failures++;
            continue;
        }
        if (t.too_large) {
            rnc_fmt(ans->transport_message, sizeof ans->transport_message,
                    "an answer or event was larger than max_event_bytes");
            result = RUNNEL_E_PROTOCOL;
            break;
        }
        last_answer = rnc_now_ms();
        failures = 0;
        if (t.sse_error || ans->status == 412 || other_incarnation(&t)) {
            if (t.sse_error && strcmp(t.error_code, "INCARNATION_MISMATCH") != 0 &&
                strcmp(t.error_code, "STREAM_NOT_FOUND") != 0 &&
                strcmp(t.error_code, "STREAM_GONE") != 0) {
                pause_ms(200); /* an error event of another kind: reconnect */
                continue;
            }
            int gone = t.sse_error && strcmp(t.error_code, "INCARNATION_MISMATCH") != 0;
            if (t.sse_error) { /* the event names no token; the answer's is the old one */
                rnc_fmt(ans->error_code, sizeof ans->error_code, "%s", t.error_code);
                ans->incarnation[0] = 0;
            }
            event(&t, gone ? RUNNEL_TAIL_GONE : RUNNEL_TAIL_INCARNATION, ans);
            result = gone ? RUNNEL_E_STATUS : RUNNEL_E_INCARNATION;
            break;
        }
        if (ans->status == 410 && retained_away(&t, ans)) {
            event(&t, RUNNEL_TAIL_RETAINED, ans);
            result = RUNNEL_E_STATUS;
            break;
        }
        if (ans->status == 404 ||
            (ans->status == 410 && strcmp(ans->error_code, "STREAM_GONE") == 0)) {
            event(&t, RUNNEL_TAIL_GONE, ans);
            result = RUNNEL_E_STATUS;
            break;
        }
        if ((ans->status == 503 || ans->status == 429) && ans->retry_after_s >= 0) {
            if (patience >= 0 && rnc_now_ms() - last_answer > patience) {
                result = RUNNEL_E_STATUS;
                break;
            }
            pause_ms(ans->retry_after_s > 5 ? 5000 : ans->retry_after_s * 1000 + 100);
            continue;
        }
        if (o->mode == RUNNEL_TAIL_SSE && ans->status == 200)
            continue; /* the server ended the answer (its duration bound): go on */
        if (o->mode == RUNNEL_TAIL_LONG_POLL && (ans->status == 200 || ans->status == 204)) {
            int stop = after_poll(&t);
            if (stop < 0) {
                result = RUNNEL_E_PROTOCOL;
                break;
            }
            if (stop) {
                result = t.stop_user ? RUNNEL_E_STOPPED : RUNNEL_OK;
                break;
            }
            continue;
        }
        result = RUNNEL_E_STATUS;
        break;
    }
    if (last_offset)
        rnc_fmt(last_offset, RUNNEL_VALUE_MAX, "%s", t.offset);
    rnc_sse_free(&t.sse);
    rn_buf_free(&t.pending);
    return result;
}
