/*
 * errors.c — status, code and fixed message of every refusal. See errors.h.
 * Messages, and the details that follow them, name only what the request
 * sent (a path it named, a header's name or value); never addresses or
 * internals of the store.
 */
#include "protocol/errors.h"
#include "util/text.h"

#include <string.h>

typedef struct {
    int status;
    const char *code;
    const char *message;
} error_row;

static const error_row TABLE[RN_E_COUNT] = {
    [RN_E_INVALID_REQUEST] = {400, "INVALID_REQUEST", "the request is malformed"},
    [RN_E_INVALID_HEADER_TTL] = {400, "INVALID_HEADER",
                                 "Stream-TTL must be a non-negative decimal integer"},
    [RN_E_INVALID_HEADER_EXPIRES] = {400, "INVALID_HEADER",
                                     "Stream-Expires-At must be an RFC 3339 timestamp"},
    [RN_E_INVALID_HEADER_TTL_AND_EXPIRES] = {400, "INVALID_HEADER",
                                             "Stream-TTL and Stream-Expires-At are exclusive"},
    [RN_E_INVALID_OFFSET] = {400, "INVALID_OFFSET",
                             "the offset is malformed or not a position of "
                             "this stream"},
    [RN_E_INVALID_INCARNATION] = {400, "INVALID_HEADER",
                                  "Stream-Incarnation must be one token this server issues"},
    [RN_E_INVALID_QUERY_CONSISTENCY] = {400, "INVALID_QUERY",
                                        "consistency must be local or leader, and leader reads "
                                        "cannot be live"},
    [RN_E_INVALID_BUCKET_ID] = {400, "INVALID_BUCKET_ID",
                                "a bucket id is 4 to 64 characters from a-z, 0-9, _ and -"},
    [RN_E_INVALID_STREAM_ID] = {400, "INVALID_STREAM_ID",
                                "a stream id is at most 122 bytes with its bucket, has no /, NUL "
                                "or .., is not \"streams\" and does not start with $"},
    [RN_E_INVALID_V1_NAME] = {400, "INVALID_STREAM_ID",
                              "a stream name is 1 to 1024 bytes of UTF-8 without NUL, in segments "
                              "separated by single slashes, none of them empty, . or .."},
    [RN_E_HEADER_REPEATED] = {400, "INVALID_HEADER", "a protocol header may be sent only once"},
    [RN_E_QUERY_REPEATED] = {400, "INVALID_QUERY", "a query parameter may be given only once"},
    [RN_E_INVALID_STREAM_SEQ] = {400, "INVALID_HEADER", "Stream-Seq must not be empty"},
    [RN_E_INVALID_CONTENT_TYPE] = {400, "INVALID_HEADER", "Content-Type must not be empty"},
    [RN_E_INVALID_FORK_SOURCE] = {400, "INVALID_HEADER",
                                  "Stream-Forked-From must name a stream by its path"},
    [RN_E_NOT_JSON_BOUNDARY] = {400, "NOT_JSON_BOUNDARY",
                                "the offset is not a committed position on a message boundary"},
    [RN_E_INVALID_RETENTION] = {400, "INVALID_RETENTION",
                                "retention may not pass the latest snapshot's offset"},
    [RN_E_INVALID_RESOURCE] = {400, "INVALID_RESOURCE",
                               "the incarnation token or offset in the path is malformed"},
    [RN_E_QUERY_NOT_ACCEPTED] = {400, "QUERY_NOT_ACCEPTED", "this resource takes no query"},
    [RN_E_INVALID_PARTS_COMMIT] = {400, "INVALID_PARTS_COMMIT",
                                   "Stream-Snapshot-Parts (1..4096), Stream-Snapshot-Digest (64 "
                                   "lowercase hex) and a body of exactly that many distinct part "
                                   "ids, each followed by LF, are required"},
    [RN_E_UNKNOWN_PART] = {400, "UNKNOWN_PART",
                           "a listed part is not staged for this stream incarnation"},
    [RN_E_SNAPSHOT_DIGEST_MISMATCH] = {400, "SNAPSHOT_DIGEST_MISMATCH",
                                       "the assembled snapshot's digest differs from "
                                       "Stream-Snapshot-Digest"},
    [RN_E_SNAPSHOT_TOO_LARGE] = {413, "SNAPSHOT_TOO_LARGE",
                                 "the assembled snapshot exceeds the limit"},
    [RN_E_STAGED_PARTS_LIMIT] = {429, "STAGED_PARTS_LIMIT",
                                 "the stream holds as many staged parts as it may"},
    [RN_E_PRODUCER_LIMIT] = {429, "PRODUCER_LIMIT",
                             "the stream holds as many producers as it may; retry after "
                             "Retry-After"},
    [RN_E_SUB_LIMIT] = {429, "SUBSCRIPTION_LIMIT",
                        "this server holds as many subscriptions as it may"},
    [RN_E_SUB_STREAMS_LIMIT] = {429, "SUBSCRIPTION_STREAMS_LIMIT",
                                "the subscriptions name as many explicit streams as they may"},
    [RN_E_NO_COLD_STORE] = {501, "NO_COLD_STORE", "this server has no cold store for parts"},
    [RN_E_SNAPSHOT_COMMIT_IN_PROGRESS] = {503, "SNAPSHOT_COMMIT_IN_PROGRESS",
                                          "a commit or discard of this stream runs; retry"},
    [RN_E_SNAPSHOT_COMMITS_BUSY] = {503, "SNAPSHOT_COMMITS_BUSY",
                                    "this node copies as many parts commits as it may at once; "
                                    "nothing was copied or published, retry after Retry-After"},
    [RN_E_INVALID_QUERY_LIVE] = {400, "INVALID_QUERY", "live must be long-poll or sse"},
    [RN_E_INVALID_QUERY_OFFSET_REQUIRED] = {400, "INVALID_QUERY", "live reads require an offset"},
    [RN_E_INVALID_PRODUCER] = {400, "INVALID_PRODUCER",
                               "Producer-Id, Producer-Epoch and Producer-Seq must be sent together "
                               "with a non-empty id and integers up to 2^53-1"},
    [RN_E_PRODUCER_EPOCH_SEQ] = {400, "INVALID_PRODUCER",
                                 "a new producer epoch must start at seq 0"},
    [RN_E_PRODUCER_ON_CREATE] = {400, "INVALID_PRODUCER",
                                 "a create takes no producer headers: create the stream, then "
                                 "claim an epoch"},
    [RN_E_INVALID_PRODUCER_DIGEST] = {400, "INVALID_PRODUCER",
                                      "Producer-Digest must be one value of 64 lowercase hex "
                                      "digits, on a write with the producer headers"},
    [RN_E_PRODUCER_DIGEST_MISMATCH] = {400, "PRODUCER_DIGEST_MISMATCH",
                                       "the body's BLAKE3-256 differs from Producer-Digest"},
    [RN_E_MISSING_CONTENT_TYPE] = {400, "MISSING_CONTENT_TYPE",
                                   "an append with a body needs a "
                                   "Content-Type"},
    [RN_E_EMPTY_APPEND] = {400, "EMPTY_APPEND",
                           "an append needs a body unless it closes the stream"},
    [RN_E_INVALID_JSON] = {400, "INVALID_REQUEST", "the body is not valid JSON text"},
    [RN_E_SUB_INVALID_ID] = {400, "INVALID_REQUEST",
                             "a subscription id is 1 to 200 characters from A-Z a-z 0-9 . _ ~ : -"},
    [RN_E_SUB_INVALID_JSON] = {400, "INVALID_REQUEST", "the body must be a JSON object"},
    [RN_E_SUB_INVALID_TYPE] = {400, "INVALID_REQUEST", "type must be \"webhook\" or \"pull-wake\""},
    [RN_E_SUB_INVALID_PATTERN] = {400, "INVALID_REQUEST",
                                  "pattern must be a non-empty stream path pattern"},
    [RN_E_SUB_INVALID_STREAMS] = {400, "INVALID_REQUEST",
                                  "streams must be a list of non-empty stream paths"},
    [RN_E_SUB_NO_TARGET] = {400, "INVALID_REQUEST",
                            "at least one of pattern or streams is required"},
    [RN_E_SUB_INVALID_WEBHOOK] = {400, "INVALID_REQUEST",
                                  "webhook subscriptions need webhook.url; pull-wake ones take no "
                                  "webhook"},
    [RN_E_SUB_INVALID_WAKE_STREAM] = {400, "INVALID_REQUEST",
                                      "pull-wake subscriptions need wake_stream; webhook ones take "
                                      "none"},
    [RN_E_SUB_WAKE_STREAM_MISSING] = {400, "INVALID_REQUEST",
                                      "wake_stream must name an existing stream"},
    [RN_E_SUB_INVALID_LEASE] = {400, "INVALID_REQUEST",
                                "lease_ttl_ms must be an integer from 1000 to 600000"},
    [RN_E_SUB_INVALID_DESCRIPTION] = {400, "INVALID_REQUEST", "description must be a string"},
    [RN_E_SUB_INVALID_WORKER] = {400, "INVALID_REQUEST",
                                 "worker must be a string of 1 to 256 characters"},
    [RN_E_SUB_INVALID_WAKE_BODY] = {400, "INVALID_REQUEST",
                                    "the body needs wake_id (string) and generation (integer); "
                                    "acks must be [{stream, offset}] and done a boolean"},
    [RN_E_SUB_WRONG_TYPE] = {400, "INVALID_REQUEST",
                             "this endpoint does not apply to the subscription's type"},
    [RN_E_WEBHOOK_URL_MALFORMED] = {400, "WEBHOOK_URL_REJECTED",
                                    "webhook.url must be an absolute http(s) URL without "
                                    "credentials"},
    [RN_E_WEBHOOK_URL_SCHEME] = {400, "WEBHOOK_URL_REJECTED", "webhook.url must use https"},
    [RN_E_WEBHOOK_URL_LOCAL] = {400, "WEBHOOK_URL_REJECTED",
                                "webhook.url must not target a private, link-local or other local "
                                "address"},
    [RN_E_WEBHOOK_URL_LOOPBACK] = {400, "WEBHOOK_URL_REJECTED",
                                   "loopback webhook URLs are limited to localhost and 127.0.0.x "
                                   "on a server started with --webhook-allow-loopback"},
    [RN_E_TOKEN_MISSING] = {401, "TOKEN_INVALID", "an Authorization: Bearer token is required"},
    [RN_E_TOKEN_INVALID] = {401, "TOKEN_INVALID", "the token is not valid for this subscription"},
    [RN_E_TOKEN_EXPIRED] = {401, "TOKEN_EXPIRED", "the token has expired"},
    [RN_E_JSON_EMPTY_ARRAY] = {400, "EMPTY_APPEND", "an empty JSON array appends nothing"},
    [RN_E_JSON_TOO_DEEP] = {400, "INVALID_REQUEST", "a JSON message nests deeper than 127 levels"},
    [RN_E_INVALID_FORK_OFFSET] = {400, "INVALID_OFFSET",
                                  "Stream-Fork-Offset is malformed, past the source tail or not a "
                                  "message boundary"},
    [RN_E_INVALID_SUB_OFFSET] = {400, "INVALID_HEADER",
                                 "Stream-Fork-Sub-Offset is malformed, needs Stream-Forked-From "
                                 "(and Stream-Fork-Offset when above 0), or passes the append at "
                                 "the fork offset"},
    [RN_E_FORK_TOO_DEEP] = {400, "INVALID_REQUEST", "the fork chain is too deep"},
    [RN_E_PRODUCER_EPOCH_STALE] = {403, "PRODUCER_EPOCH_STALE",
                                   "the producer epoch is older than the current one"},
    [RN_E_PRODUCER_EPOCH_CLOSED] = {403, "PRODUCER_EPOCH_CLOSED",
                                    "the producer epoch is closed; see Producer-Closed-Seq"},
    [RN_E_PRODUCER_KEY_CONFLICT] = {403, "PRODUCER_KEY_CONFLICT",
                                    "a write with another identity holds this producer key"},
    [RN_E_PRODUCER_EXPIRED] = {403, "PRODUCER_EXPIRED",
                               "the producer epoch may be one whose state the server discarded; "
                               "claim an epoch above Producer-Epoch"},
    [RN_E_STREAM_NOT_FOUND] = {404, "STREAM_NOT_FOUND", "the stream does not exist"},
    [RN_E_BUCKET_NOT_FOUND] = {404, "BUCKET_NOT_FOUND", "no stream exists in this bucket"},
    [RN_E_BUCKET_ERASED] = {404, "BUCKET_ERASED",
                            "the bucket was purged by its operator: no stream is read or created "
                            "in it again"},
    [RN_E_FORK_SOURCE_NOT_FOUND] = {404, "STREAM_NOT_FOUND", "the fork source does not exist"},
    [RN_E_NOT_FOUND] = {404, "NOT_FOUND", "no such route"},
    [RN_E_SUB_NOT_FOUND] = {404, "SUBSCRIPTION_NOT_FOUND", "the subscription does not exist"},
    [RN_E_METHOD_NOT_ALLOWED] = {405, "METHOD_NOT_ALLOWED", "the method is not allowed here"},
    [RN_E_LATEST_SNAPSHOT_PATH] = {405, "UNSUPPORTED",
                                   "the latest-snapshot path was removed: HEAD the stream for "
                                   "Stream-Snapshot-Offset, then read {stream}/snapshot/{offset}"},
    [RN_E_REQUEST_TIMEOUT] = {408, "BODY_TOO_SLOW",
                              "the request was not received within the server's request "
                              "timeout; nothing of it was applied"},
    [RN_E_STREAM_CLOSED] = {409, "STREAM_CLOSED", "the stream is closed"},
    [RN_E_FORK_SOURCE_GONE] = {409, "FORK_SOURCE_GONE",
                               "the fork source was deleted and only its forks keep it"},
    [RN_E_STREAM_GONE] = {410, "STREAM_GONE", "the stream was deleted"},
    [RN_E_OFFSET_RETAINED_AWAY] = {410, "STREAM_GONE",
                                   "the offset is below the stream's retained offset"},
    [RN_E_SNAPSHOT_BEYOND_TAIL] = {409, "SNAPSHOT_CONFLICT",
                                   "the snapshot offset is past the stream's tail"},
    [RN_E_SNAPSHOT_CONFLICT] = {409, "SNAPSHOT_CONFLICT", "another snapshot is the latest"},
    [RN_E_SNAPSHOT_NOT_FOUND] = {404, "SNAPSHOT_NOT_FOUND",
                                 "no snapshot at this offset is the stream's latest"},
    [RN_E_RANGE_NOT_SATISFIABLE] = {416, "RANGE_NOT_SATISFIABLE",
                                    "the range starts at or past the end of the snapshot"},
    [RN_E_INCARNATION_MISMATCH] = {412, "INCARNATION_MISMATCH",
                                   "Stream-Incarnation names another incarnation of the stream"},
    [RN_E_HISTORY_REWRITTEN] = {412, "INCARNATION_MISMATCH",
                                "the stream's history was rewritten during this live read: its "
                                "offsets may not hold under the current Stream-Incarnation"},
    [RN_E_OFFSET_OUT_OF_RANGE] = {416, "OFFSET_OUT_OF_RANGE",
                                  "the offset is past the stream's "
                                  "tail"},
    [RN_E_STREAM_SEQ_CONFLICT] = {409, "STREAM_SEQ_CONFLICT",
                                  "Stream-Seq must be greater than the last one"},
    [RN_E_CONTENT_TYPE_MISMATCH] = {409, "CONTENT_TYPE_MISMATCH",
                                    "the content type differs from the stream's"},
    [RN_E_FORK_CONTENT_TYPE_MISMATCH] = {409, "CONTENT_TYPE_MISMATCH",
                                         "the fork's content type differs from its source's"},
    [RN_E_STREAM_EXISTS_CONFLICT] = {409, "STREAM_ALREADY_EXISTS_CONFLICT",
                                     "the stream exists with another configuration"},
    [RN_E_PRODUCER_SEQ_CONFLICT] = {409, "PRODUCER_SEQ_CONFLICT",
                                    "the producer seq is not the next expected one"},
    [RN_E_SUB_EXISTS_CONFLICT] = {409, "SUBSCRIPTION_ALREADY_EXISTS",
                                  "the subscription exists with another configuration"},
    [RN_E_SUB_FENCED] = {409, "FENCED",
                         "the wake id or generation is not the subscription's current one: a "
                         "later wake replaced it"},
    [RN_E_SUB_ALREADY_CLAIMED] = {409, "ALREADY_CLAIMED",
                                  "another worker holds the subscription's lease"},
    [RN_E_SUB_NO_PENDING_WORK] = {409, "NO_PENDING_WORK", "the subscription has no pending work"},
    [RN_E_SUB_ACK_INVALID] = {409, "INVALID_OFFSET",
                              "an ack names an unlinked stream or an offset that is malformed, "
                              "behind the acked one, or past the tail"},
    [RN_E_REQUEST_TOO_LARGE] = {413, "REQUEST_TOO_LARGE", "the request body exceeds the limit"},
    [RN_E_WAL_DISK_PRESSURE] = {503, "WAL_DISK_PRESSURE",
                                "the server's disk is full; nothing was written"},
    [RN_E_OUTCOME_UNKNOWN] = {503, "OUTCOME_UNKNOWN",
                              "the write could not be made durable; retry it"},
    [RN_E_NO_LEADER] = {503, "NO_LEADER",
                        "no leader of the stream's group is known here; nothing was applied, "
                        "retry after Retry-After"},
    [RN_E_RAFT_BACKPRESSURE] = {503, "RAFT_UNCOMMITTED_BACKPRESSURE",
                                "too many writes of the stream's group await their commit; "
                                "nothing was applied, retry after Retry-After"},
    [RN_E_APPLY_STOPPED] = {503, "APPLY_STOPPED",
                            "this node stopped applying the stream's group (its disk is full); "
                            "nothing was applied, retry after Retry-After"},
    [RN_E_JSON_BOUNDARY_UNVERIFIED] = {503, "JSON_BOUNDARY_UNVERIFIED",
                                       "the offset could not be verified as a message boundary; "
                                       "nothing was applied, retry"},
    [RN_E_RECOVERING] = {503, "GROUP_RESTARTING",
                         "the server is recovering its store; nothing was applied, retry"},
    [RN_E_INTERNAL] = {500, "INTERNAL", "internal error"},
    [RN_E_STREAM_DATA_DAMAGED] = {500, "STREAM_DATA_DAMAGED",
                                  "the stream's bytes at this offset are damaged on this "
                                  "server's disk and it has no other copy; nothing was served"},
    [RN_E_STREAM_DATA_REPAIRING] = {503, "STREAM_DATA_REPAIRING",
                                    "the stream's bytes at this offset were damaged on this "
                                    "server's disk and are being fetched again from a peer; "
                                    "nothing was served, retry after Retry-After"},
    [RN_E_COLD_STORE_FAILED] = {502, "COLD_STORE_FAILED", "the cold store failed; retry"},
    [RN_E_COLD_BACKPRESSURE] = {503, "COLD_BACKPRESSURE",
                                "the cold store is slow or saturated; nothing was applied, retry "
                                "after Retry-After"},
    [RN_E_INGRESS_BODY_BYTES] = {503, "INGRESS_BODY_BYTES_LIMIT_REACHED",
                                 "too many request body bytes are in flight; nothing was applied, "
                                 "retry after Retry-After"},
    [RN_E_LIVE_READ_BACKPRESSURE] = {503, "LIVE_READ_BACKPRESSURE",
                                     "the server holds its maximum of live reads; retry after "
                                     "Retry-After"},
    [RN_E_STREAM_LIVE_READ_BACKPRESSURE] = {503, "LIVE_READ_BACKPRESSURE",
                                            "the stream holds its maximum of live reads; retry "
                                            "after Retry-After"},
    [RN_E_INVALID_BACKUP_NAME] = {400, "INVALID_BACKUP_NAME",
                                  "a backup's name is 1 to 64 characters of A-Z a-z 0-9 . _ - "
                                  "and does not start with ."},
    [RN_E_NO_BACKUP_TARGET] = {501, "NO_BACKUP_TARGET",
                               "this server has no backup destination (--backup-to)"},
    [RN_E_BACKUP_EXISTS] = {409, "BACKUP_EXISTS",
                            "a backup of this name exists at the destination; choose another name"},
    [RN_E_BACKUP_IN_PROGRESS] = {503, "BACKUP_IN_PROGRESS",
                                 "another backup is being taken; retry after Retry-After"},
    [RN_E_BACKUP_INTERRUPTED] = {503, "BACKUP_INTERRUPTED",
                                 "a stream was deleted, rewritten or had its retention advanced "
                                 "while the backup copied it, so the copy is not of one instant; "
                                 "the backup is not complete, retry"},
    [RN_E_BACKUP_STORE_FAILED] = {502, "BACKUP_STORE_FAILED",
                                  "the backup destination failed; the backup is not complete, "
                                  "retry"},
    [RN_E_ADMIN_TOKEN_MISSING] = {401, "INVALID_CREDENTIAL",
                                  "this operator route needs the node's admin token as "
                                  "Authorization: Bearer <token>"},
    [RN_E_ADMIN_TOKEN_WRONG] = {403, "FORBIDDEN", "the admin token is not this node's"},
    [RN_E_ADMIN_INVALID_CURSOR] = {400, "INVALID_QUERY",
                                   "cursor is not a cursor this server issued for this listing"},
    [RN_E_ADMIN_INVALID_LIMIT] = {400, "INVALID_QUERY",
                                  "limit is a canonical decimal from 1 to 1000"},
    [RN_E_ADMIN_INVALID_PREFIX] = {400, "INVALID_QUERY",
                                   "prefix is percent-encoded UTF-8 of at most 1024 bytes"},
    [RN_E_ADMIN_INVALID_BUCKET] = {400, "INVALID_BUCKET_ID",
                                   "a bucket is 1 to 256 bytes of UTF-8 without / or NUL, not "
                                   "starting with __"},
    [RN_E_ADMIN_UNREACHABLE] = {503, "NO_LEADER",
                                "the leaders of some groups could not be asked (see "
                                "unreachable_groups); what they hold is not in this answer, "
                                "retry after Retry-After"},
    [RN_E_PEER_UNAUTHENTICATED] = {401, "INVALID_CREDENTIAL",
                                   "this route answers only the nodes of the cluster, and the "
                                   "request carries no peer credential (a peer signature, or a "
                                   "node's client certificate)"},
    [RN_E_PEER_REFUSED] = {403, "FORBIDDEN", "the request's peer credential was refused"},
    [RN_E_PEER_LISTENER_ONLY] = {404, "NOT_FOUND",
                                 "peer and operator routes are served on the node's peer "
                                 "listener (--peer-listen) only"},
    [RN_E_PUBLIC_LISTENER_ONLY] = {404, "NOT_FOUND",
                                   "the peer listener (--peer-listen) serves peer and operator "
                                   "routes only; streams are served on the node's public "
                                   "listener"},
    [RN_E_NODE_CONFLICT] = {409, "NODE_CONFLICT",
                            "the node id is known with other addresses, or its addresses are "
                            "another node's; nothing changed"},
    [RN_E_NODE_REMOVED] = {409, "NODE_REMOVED",
                           "the node was removed from the cluster and its id cannot be used "
                           "again; nothing changed"},
    [RN_E_NODES_FULL] = {409, "CLUSTER_FULL",
                         "the cluster knows as many nodes as it can; nothing changed"},
    [RN_E_BACKUP_NOT_WHOLE] = {409, "BACKUP_NOT_WHOLE",
                               "this node does not hold a replica of every group; take the "
                               "backup on a node that does"},
    [RN_E_GW_INVALID_CREDENTIAL] = {401, "INVALID_CREDENTIAL",
                                    "a valid credential is required (Authorization: Bearer)"},
    [RN_E_GW_CREDENTIAL_EXPIRED] = {401, "CREDENTIAL_EXPIRED", "the credential has expired"},
    [RN_E_GW_PAYMENT_REQUIRED] = {402, "PAYMENT_REQUIRED",
                                  "the account must be paid for before it is served"},
    [RN_E_GW_FORBIDDEN] = {403, "FORBIDDEN", "the credential does not allow this request"},
    [RN_E_GW_ADMIN_REQUIRED] = {403, "FORBIDDEN", "operator routes need admin rights"},
    [RN_E_GW_ACCOUNT_REVOKED] = {403, "ACCOUNT_REVOKED", "the account is revoked"},
    [RN_E_GW_BODY_TOO_SLOW] = {408, "BODY_TOO_SLOW",
                               "the request body came too slowly; nothing of it was forwarded"},
    [RN_E_GW_REQUEST_TOO_LARGE] = {413, "REQUEST_TOO_LARGE",
                                   "the request body exceeds this credential's limit"},
    [RN_E_GW_RATE_LIMITED] = {429, "RATE_LIMITED", "too many requests; retry after Retry-After"},
    [RN_E_GW_BYTE_RATE_LIMITED] = {429, "RATE_LIMITED",
                                   "too many bytes in or out; retry after Retry-After"},
    [RN_E_GW_LIVE_READS_EXHAUSTED] = {429, "LIVE_READS_EXHAUSTED",
                                      "too many live reads at once for this account"},
    [RN_E_GW_UPLOADS_EXHAUSTED] = {429, "UPLOADS_EXHAUSTED",
                                   "too many uploads at once for this account"},
    [RN_E_GW_UPLOAD_BYTES_EXHAUSTED] = {429, "UPLOAD_BYTES_EXHAUSTED",
                                        "too many upload bytes at once for this account"},
    [RN_E_GW_UPSTREAM_FAILED] = {502, "UPSTREAM_FAILED",
                                 "the server's connection failed after the request was forwarded; "
                                 "the write may have applied"},
    [RN_E_GW_AUTHENTICATION_UNAVAILABLE] = {503, "AUTHENTICATION_UNAVAILABLE",
                                            "the credential's keys cannot be fetched now; "
                                            "nothing was forwarded, retry after Retry-After"},
    [RN_E_GW_AUTHORIZATION_UNAVAILABLE] = {503, "AUTHORIZATION_UNAVAILABLE",
                                           "the request cannot be authorized now; nothing was "
                                           "forwarded, retry after Retry-After"},
    [RN_E_GW_NO_UPSTREAM] = {503, "NO_UPSTREAM",
                             "no server is available; nothing was forwarded, retry after "
                             "Retry-After"},
    [RN_E_GW_UPSTREAM_UNREACHABLE] = {503, "UPSTREAM_UNREACHABLE",
                                      "no server could be reached; nothing was forwarded, retry "
                                      "after Retry-After"},
    [RN_E_GW_UPLOAD_BUDGET_EXHAUSTED] = {503, "UPLOAD_BUDGET_EXHAUSTED",
                                         "too many upload bytes are in flight; nothing was "
                                         "forwarded, retry after Retry-After"},
    [RN_E_GW_UPSTREAM_TIMEOUT] = {504, "UPSTREAM_TIMEOUT",
                                  "the server did not answer in time; the write may have applied"},
    [RN_E_GW_STALLED_AFTER_FORWARD] = {502, "UPSTREAM_FAILED",
                                       "the request body stalled after part of it was forwarded; "
                                       "the forwarded request was cut and applied nothing"},
};

int rn_error_status(rn_error e) {
    return TABLE[e].status;
}

const char *rn_error_code(rn_error e) {
    return TABLE[e].code;
}

const char *rn_error_message(rn_error e) {
    return TABLE[e].message;
}

/* Appends text to a JSON string: " and \ escaped, control bytes (and,
 * unless utf8, bytes past ASCII) percent-encoded, which keeps the string
 * valid and shows such a byte the way a URL would. */
static void append_json_text(rn_buf *out, const char *p, size_t n, int utf8) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)p[i];
        if (b < 0x20 || b == 0x7F || (b >= 0x80 && !utf8)) {
            char e[3] = {'%', hex[b >> 4], hex[b & 15]};
            rn_buf_append(out, e, 3);
            continue;
        }
        if (b == '"' || b == '\\')
            rn_buf_append_byte(out, '\\');
        rn_buf_append_byte(out, b);
    }
}

void rn_error_body(rn_error e, const char *detail, size_t detail_len, rn_buf *out) {
    rn_buf_appendf(out, "{\"error\":{\"code\":\"%s\",\"message\":\"", TABLE[e].code);
    append_json_text(out, TABLE[e].message, strlen(TABLE[e].message), 0);
    if (detail) {
        rn_buf_append_str(out, " (");
        append_json_text(out, detail, detail_len,
                         rn_utf8_valid((const uint8_t *)detail, detail_len));
        rn_buf_append_byte(out, ')');
    }
    rn_buf_append_str(out, "\"}}");
}
