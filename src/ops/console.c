/*
 * console.c — serves the web console's files from the binary. See
 * console.h.
 *
 * Every answer carries a Content-Security-Policy that lets the page load
 * its own scripts and styles and talk to its own origin only (no inline
 * script, no other origin, no framing), and Cache-Control: no-store: the
 * files are small, and a browser never runs an old script after an
 * upgrade.
 */
#include "ops/console.h"
#include "protocol/reply.h"

#include <string.h>

#define CSP                                                                                        \
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "           \
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "              \
    "frame-ancestors 'none'\r\n"

static const rn_console_asset *find(const char *name, size_t len) {
    for (size_t i = 0; i < rn_console_asset_count; i++)
        if (strlen(rn_console_assets[i].name) == len &&
            memcmp(rn_console_assets[i].name, name, len) == 0)
            return &rn_console_assets[i];
    return NULL;
}

void rn_console_handle(rn_request *req, const char *path, size_t path_len) {
    static const char prefix[] = "console";
    size_t pl = sizeof prefix - 1;
    if (req->method != RN_HTTP_GET && req->method != RN_HTTP_HEAD) {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "Allow: GET, HEAD, OPTIONS\r\n");
        rn_reply_error(req, RN_E_METHOD_NOT_ALLOWED, &extra);
        return;
    }
    const char *name = path + pl;
    size_t len = path_len - pl;
    if (len && name[0] == '/') {
        name++;
        len--;
    }
    const rn_console_asset *a = len ? find(name, len) : find("index.html", 10);
    if (!a) {
        rn_reply_error(req, RN_E_NOT_FOUND, NULL);
        return;
    }
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_buf_appendf(&h,
                   "Content-Type: %s\r\nCache-Control: no-store\r\n" CSP
                   "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n",
                   a->content_type);
    rn_buf_append(&body, a->data, a->len);
    rn_http_respond(req, 200, &h, &body);
}
