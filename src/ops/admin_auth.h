/*
 * admin_auth.h — who may call the operator routes under /__runnel/
 * (backups, membership changes, test hooks, and metrics with
 * --metrics-need-token): a request carrying the node's admin token
 * (--admin-token-file) as `Authorization: Bearer <token>`, compared in
 * constant time, or one an embedded gate marked RN_REQUEST_ADMIN_GRANTED.
 * Without a token file every request may (a bare node as before).
 *
 * Refusals are §11 bodies: no credential (no Authorization, or not a
 * Bearer one) 401 INVALID_CREDENTIAL with WWW-Authenticate; a wrong token
 * 403 FORBIDDEN. The token is never logged.
 */
#ifndef RN_OPS_ADMIN_AUTH_H
#define RN_OPS_ADMIN_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "transport/http.h"
#include "util/secret.h"

typedef struct {
    rn_secret token; /* len 0: no token configured */
} rn_admin_auth;

/* Reads the token file (path; "" for none). Returns 0, or -1 with err set. */
int rn_admin_auth_load(rn_admin_auth *a, const char *path, char *err, size_t errcap);

/* Whether req may call an operator route: true (the token matches, the
 * request was granted by a gate, or a has no token: a NULL a is a node
 * without one), or false after answering the refusal. */
bool rn_admin_authorize(const rn_admin_auth *a, rn_request *req);

/* Wipes the token (at stop). */
void rn_admin_auth_clear(rn_admin_auth *a);

#endif
