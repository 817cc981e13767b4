/*
 * rights.h — what a tenant may do, and to what: rules that map a pattern
 * (a bucket, a bucket and stream-id prefix, a /v1/stream/ name prefix, or
 * everything) to rights (read, write, admin), the target a request names,
 * and the rights a rule set grants on it (the union of the matching
 * rules). docs/GATEWAY.md gives the patterns.
 */
#ifndef RN_GATEWAY_RIGHTS_H
#define RN_GATEWAY_RIGHTS_H

#include <stddef.h>

#include "transport/http.h"

enum { RN_RIGHT_READ = 1, RN_RIGHT_WRITE = 2, RN_RIGHT_ADMIN = 4 };

typedef struct {
    int all;     /* "*" */
    int v1;      /* "v1:prefix" */
    char *space; /* the bucket (NULL for "*" and "v1:") */
    size_t space_len;
    char *prefix; /* of the stream id or the v1 name ("" for a whole bucket or all of v1) */
    size_t prefix_len;
    unsigned rights;
} rn_rights_rule;

typedef struct {
    rn_rights_rule *rules;
    size_t n;
} rn_rights;

/* What a request is about (rn_target_of). */
typedef enum {
    RN_TARGET_OPEN,       /* /__runnel/livez and readyz: anyone */
    RN_TARGET_OPS,        /* every other /__runnel/ route: admin on "*" */
    RN_TARGET_SUBS,       /* /v1/stream/__ds/...: read and write on "v1:" */
    RN_TARGET_SUBS_TOKEN, /* POST /v1/stream/__ds/subscriptions/{id}/callback, ack or release:
                             their Authorization is the server's own token (PROTOCOL.md
                             §7), which the node checks: no tenant credential */
    RN_TARGET_V1,         /* /v1/stream/{name} */
    RN_TARGET_BUCKET,     /* /{bucket}[/{stream}[/...]] */
    RN_TARGET_NONE,       /* "/" or a path no route serves: no rights needed (the node answers) */
} rn_target_kind;

typedef struct {
    rn_target_kind kind;
    /* BUCKET: the bucket and the stream id (stream_len 0: the bucket
     * itself); V1: the decoded name in stream. Bucket and stream are as
     * the request sent them (percent-encoded), decoded into buf. */
    const char *bucket;
    size_t bucket_len;
    const char *stream;
    size_t stream_len;
    char buf[3072];
} rn_target;

/* Parses a rights spec "pattern:letters,pattern:letters" (letters from
 * "rwa"), as `runnel gateway key new --buckets` takes it, or one pattern
 * and its letters (rn_rights_add). Return 0, or -1 with why in err. */
int rn_rights_parse_spec(rn_rights *r, const char *spec, char *err, size_t cap);
int rn_rights_add(rn_rights *r, const char *pattern, const char *letters, char *err, size_t cap);
void rn_rights_free(rn_rights *r);

/* What the request's path is about (a path that does not decode, or that
 * no route serves, is RN_TARGET_NONE: the node refuses it, and hearing that
 * needs no rights). */
void rn_target_of(const rn_request *req, rn_target *t);

/* The rights the rules grant on t (RN_TARGET_BUCKET, V1 or SUBS). */
unsigned rn_rights_on(const rn_rights *r, const rn_target *t);
/* Whether the rules grant admin on "*" (the operator routes). */
int rn_rights_admin(const rn_rights *r);

#endif
