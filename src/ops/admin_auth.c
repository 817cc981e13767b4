/*
 * admin_auth.c — the admin token of the operator routes. See admin_auth.h.
 */
#include "ops/admin_auth.h"

#include <assert.h>
#include <string.h>
#include <strings.h>

#include "protocol/reply.h"

int rn_admin_auth_load(rn_admin_auth *a, const char *path, char *err, size_t errcap) {
    assert(a != NULL && path != NULL);
    rn_secret_wipe(&a->token);
    if (!path[0])
        return 0;
    return rn_secret_load(path, "--admin-token-file", &a->token, err, errcap);
}

/* Whether req carries a credential that makes it an operator's: true, or
 * false and *missing (no usable credential) / !*missing (a wrong token). */
static bool check(const rn_admin_auth *a, const rn_request *req, bool *missing) {
    assert(req != NULL && missing != NULL);
    *missing = false;
    if (a == NULL || a->token.len == 0 || (req->route_flags & RN_REQUEST_ADMIN_GRANTED))
        return true;
    size_t count = 0;
    const rn_header *h = rn_request_header(req, "authorization", &count);
    static const char bearer[] = "Bearer ";
    size_t bl = sizeof bearer - 1;
    if (h == NULL || count != 1 || h->value_len <= bl || strncasecmp(h->value, bearer, bl) != 0) {
        *missing = true;
        return false;
    }
    return rn_secret_equals(&a->token, h->value + bl, h->value_len - bl);
}

bool rn_admin_authorize(const rn_admin_auth *a, rn_request *req) {
    bool missing;
    if (check(a, req, &missing))
        return true;
    if (missing) {
        rn_buf extra = {0};
        rn_buf_append_str(&extra, "WWW-Authenticate: Bearer realm=\"runnel-admin\"\r\n");
        rn_reply_error(req, RN_E_ADMIN_TOKEN_MISSING, &extra);
    } else {
        rn_reply_error(req, RN_E_ADMIN_TOKEN_WRONG, NULL);
    }
    return false;
}

void rn_admin_auth_clear(rn_admin_auth *a) {
    rn_secret_wipe(&a->token);
}
