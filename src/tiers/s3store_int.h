/*
 * s3store_int.h — the S3 store's state and its calls with retries, shared
 * by s3store.c (calls, retries, put, open, list, sweep, remove, lifecycle),
 * s3concat.c (concat) and s3owner.c (the owner object). Private to
 * src/tiers/.
 */
#ifndef RN_TIERS_S3STORE_INT_H
#define RN_TIERS_S3STORE_INT_H

#include "tiers/s3store.h"
#include "util/list.h"
#include "util/log.h"
#include "util/metrics.h"

#define S3STORE_MIN_PART (5ull << 20) /* S3's least part but the last */
#define S3STORE_KEY_MAX 1100          /* a full key (prefix and key) with its NUL */

typedef struct s3store s3store;
typedef struct s3store_req s3store_req;

/* One S3 call of an operation, tried again while the answer says it may
 * succeed later. Operations embed it first. */
struct s3store_req {
    s3store *st;
    rn_s3_call *(*issue)(s3store_req *r); /* makes the call, answering to s3store_on_answer */
    void (*answered)(s3store_req *r, const rn_s3_result *res);
    rn_cold_op metric;
    uint32_t attempt;
    uint64_t started_us, due_ms; /* a try's start; when the next one is due */
    uint64_t deadline_ms;        /* when every try together must have ended */
    rn_s3_call *running;         /* the call made, or NULL while waiting to retry */
    rn_list_node link;           /* on s3store.reqs */
};

struct s3store {
    rn_store base;
    uv_loop_t *loop;
    rn_s3 *s3;
    char *prefix, *tmp_dir;
    uint64_t part_bytes;
    uint32_t attempts;
    int no_part_copy; /* the store answered 501 to UploadPartCopy */
    char *owner;      /* the deployment's cluster id; NULL: no owner object */
    int foreign;      /* a check found the prefix owned by another (or nobody) */
    rn_log_throttle owner_log;
    uv_timer_t clock; /* the next retry or bound due */
    rn_list reqs;     /* s3store_req.link: every operation in progress, running or
                         waiting to retry */
    char why[160];    /* the last failure, in the store's words (s3store_why) */
    int stopped;
};

/* The prefix and key as one, in out. */
void s3store_full_key(const s3store *st, const char *key, char out[S3STORE_KEY_MAX]);

/* The full keys of keys[0..n), each allocated; free with s3store_free_keys. */
char **s3store_full_keys(const s3store *st, const char *const *keys, size_t n);
void s3store_free_keys(char **keys, size_t n);

/* -errno of a failed answer (s3store.h), 0 for a success. */
int s3store_answer_errno(const rn_s3_result *res);

/* Starts a fresh call of r (its first try; r->st set): issue makes it,
 * with s3store_on_answer as the answer's callback and r as its argument;
 * answered hears the last try's answer (after r is off the store's list,
 * so it may call again). */
void s3store_call(s3store_req *r, rn_cold_op metric, rn_s3_call *(*issue)(s3store_req *),
                  void (*answered)(s3store_req *, const rn_s3_result *));

/* The client's callback of every call an issue function makes (arg: r). */
void s3store_on_answer(void *arg, const rn_s3_result *res);

/* Appends the part numbered *n + 1 (a copy of etag) to the upload's list
 * *parts of *n, for its CompleteMultipartUpload. */
void s3store_add_part(rn_s3_part **parts, uint32_t *n, const char *etag);

/* Aborts a multipart upload, best effort (not once the store stopped). */
void s3store_abort_upload(s3store *st, const char *key, const char *upload_id);

/* s3owner.c: the owner object (s3store.h). Calls then(arg, 0) when the
 * store has no owner or its owner object still names it, else then(arg,
 * -errno): -EPERM when it names another deployment or is gone (logged),
 * the store's -errno when it cannot be read. */
void s3owner_check(s3store *st, void (*then)(void *arg, int status), void *arg);
/* The store's claim (store.h). */
void s3owner_claim(rn_store *store, int fresh, rn_store_done_fn done, void *arg);

/* s3concat.c: the store's concat (store.h). */
void s3store_concat(rn_store *store, const char *key, const char *const *src, size_t n,
                    uint64_t max_bytes, rn_store_observe_fn observe, void *observe_arg,
                    rn_store_size_fn done, void *arg);

#endif
