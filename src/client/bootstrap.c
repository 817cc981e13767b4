/*
 * bootstrap.c — GET {stream}/bootstrap (extensions §3): the answer's
 * multipart/mixed body goes through the streaming parser (multipart.c) to
 * the caller's part callbacks.
 */
#include "client/internal.h"
#include "client/multipart.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const runnel_bootstrap_handler *h;
    runnel_answer *ans;
    rnc_multipart *mp; /* set up at the first body byte, from the Content-Type */
    int bad;           /* the body is not the multipart the answer announced */
} bootstrap_sink;

static int on_body(void *arg, const void *data, size_t len) {
    bootstrap_sink *s = arg;
    if (!s->mp) {
        s->mp = malloc(sizeof *s->mp);
        if (!s->mp)
            abort();
        if (rnc_multipart_init(s->mp, s->ans->content_type, s->h)) {
            s->bad = 1;
            return 1;
        }
    }
    if (rnc_multipart_feed(s->mp, data, len)) {
        s->bad = !s->mp->stopped;
        return 1;
    }
    return 0;
}

runnel_result runnel_bootstrap(runnel_client *c, const char *stream, const char *incarnation,
                               const runnel_bootstrap_handler *h, runnel_answer *ans) {
    rnc_request req = {0};
    if (rnc_request_init(&req, c, "GET", stream, "/bootstrap"))
        return rnc_usage(ans, "the URL is too long");
    rnc_header(&req.headers, "Stream-Incarnation", incarnation);
    bootstrap_sink s = {.h = h, .ans = ans};
    req.sink = on_body;
    req.sink_arg = &s;
    runnel_result r = rnc_perform(c, &req, ans);
    rnc_request_free(&req);
    if (r == RUNNEL_OK && ans->status == 200) {
        if (!s.mp || rnc_multipart_finish(s.mp))
            s.bad = 1; /* no body, or cut before the closing delimiter */
    }
    if (r == RUNNEL_E_STOPPED && s.bad)
        r = RUNNEL_E_PROTOCOL;
    else if (r == RUNNEL_OK && s.bad)
        r = RUNNEL_E_PROTOCOL;
    free(s.mp);
    return rnc_read_result(r, ans);
}
