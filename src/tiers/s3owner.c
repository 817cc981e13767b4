/*
 * s3owner.c — who owns an S3 store's prefix (s3store.h): the owner object,
 * OWNER_KEY under the prefix, holding the deployment's cluster id and a
 * newline. The claim at start reads it, and writes it when absent (then
 * reads it back: of two deployments that wrote at once, the one whose id
 * stayed wins, the other finds the winner's); every removal reads it
 * first (s3owner_check) and goes on only while it names this deployment.
 * A prefix found owned by another deployment, or whose owner object went
 * away, makes the store refuse every write and removal from then on.
 */
#include "tiers/s3store_int.h"
#include "util/buf.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OWNER_MAX 128 /* bytes of an owner object read: an id is at most 64 */

typedef struct {
    s3store_req r;
    char key[S3STORE_KEY_MAX];
    char prefix[S3STORE_KEY_MAX];
    uint8_t buf[OWNER_MAX];
    char content[72]; /* what a claim writes */
    int fresh, wrote;
    void (*then)(void *arg, int status); /* a check */
    rn_store_done_fn done;               /* a claim */
    void *arg;
} owner_op;

static owner_op *owner_op_new(s3store *st) {
    assert(st->owner);
    owner_op *o = rn_xcalloc(1, sizeof *o);
    o->r.st = st;
    s3store_full_key(st, RN_S3STORE_OWNER_KEY, o->key);
    snprintf(o->prefix, sizeof o->prefix, "%s", st->prefix);
    snprintf(o->content, sizeof o->content, "%s\n", st->owner);
    return o;
}

static rn_s3_call *issue_read(s3store_req *r) {
    owner_op *o = (owner_op *)r;
    return rn_s3_get(r->st->s3, o->key, 0, OWNER_MAX, rn_s3_into(o->buf), s3store_on_answer, r);
}

static rn_s3_call *issue_write(s3store_req *r) {
    owner_op *o = (owner_op *)r;
    return rn_s3_put(r->st->s3, o->key, rn_s3_mem(o->content, strlen(o->content)),
                     s3store_on_answer, r);
}

static rn_s3_call *issue_list_one(s3store_req *r) {
    owner_op *o = (owner_op *)r;
    return rn_s3_list(r->st->s3, o->prefix, NULL, 1, s3store_on_answer, r);
}

/* The id an owner object of len bytes names into out ("" when it is not
 * an owner object). Returns -EAGAIN, out "", for bytes that do not end
 * with the newline every owner object ends with: an object read while
 * another node of the deployment writes it (S3 never shows that, a store
 * that writes objects in place, such as s3rver, may), which a later read
 * tells apart. */
static int owner_named(const uint8_t *buf, uint64_t len, char out[65]) {
    size_t n = len < OWNER_MAX ? (size_t)len : OWNER_MAX;
    out[0] = '\0';
    if (n == 0 || buf[n - 1] != '\n')
        return -EAGAIN;
    n--;
    if (n == 0 || n > 64 || memchr(buf, '\n', n) || memchr(buf, '\0', n))
        n = 0;
    memcpy(out, buf, n);
    out[n] = '\0';
    return 0;
}

/* The store is not (or no longer) this deployment's: why it says so
 * (logged with `log`), and from now on it writes and removes nothing. */
static void found_foreign(s3store *st, const char *other, int log) {
    st->foreign = 1;
    if (*other)
        snprintf(st->why, sizeof st->why, "the prefix belongs to deployment %.64s", other);
    else
        snprintf(st->why, sizeof st->why, "the prefix's owner object is gone");
    if (log)
        rn_log_throttled(
            &st->owner_log, 60000, RN_LOG_ERROR, "cold_store_owner",
            "the S3 prefix \"%s\" is not this deployment's (cluster id %s): %s; nothing "
            "is written or removed there until a restart claims it again",
            st->prefix, st->owner, st->why);
}

/* ---- the check before a removal ---- */

static void checked(s3store_req *r, const rn_s3_result *res) {
    owner_op *o = (owner_op *)r;
    char other[65] = "";
    int status = s3store_answer_errno(res);
    if (status == 0)
        status = owner_named(o->buf, res->length, other);
    if ((status == 0 && strcmp(other, r->st->owner) != 0) || status == -ENOENT) {
        found_foreign(r->st, other, 1);
        status = -EPERM;
    }
    o->then(o->arg, status);
    free(o);
}

void s3owner_check(s3store *st, void (*then)(void *arg, int status), void *arg) {
    if (!st->owner) {
        then(arg, 0);
        return;
    }
    if (st->foreign) {
        then(arg, -EPERM);
        return;
    }
    owner_op *o = owner_op_new(st);
    o->then = then;
    o->arg = arg;
    s3store_call(&o->r, RN_COLD_GET, issue_read, checked);
}

/* ---- the claim at start ---- */

static void claim_finish(owner_op *o, int status) {
    o->done(o->arg, status);
    free(o);
}

static void claim_read(s3store_req *r, const rn_s3_result *res);

static void claim_written(s3store_req *r, const rn_s3_result *res) {
    owner_op *o = (owner_op *)r;
    int status = s3store_answer_errno(res);
    if (status < 0) {
        claim_finish(o, status);
        return;
    }
    o->wrote = 1; /* read it back: another deployment may have written too */
    s3store_call(r, RN_COLD_GET, issue_read, claim_read);
}

static void claim_listed(s3store_req *r, const rn_s3_result *res) {
    owner_op *o = (owner_op *)r;
    int status = s3store_answer_errno(res);
    if (status < 0) {
        claim_finish(o, status);
        return;
    }
    if (res->nentries) {
        snprintf(r->st->why, sizeof r->st->why,
                 "the prefix holds objects but no owner object: another deployment's");
        claim_finish(o, -EEXIST);
        return;
    }
    s3store_call(r, RN_COLD_PUT, issue_write, claim_written);
}

static void claim_read(s3store_req *r, const rn_s3_result *res) {
    owner_op *o = (owner_op *)r;
    s3store *st = r->st;
    int status = s3store_answer_errno(res);
    if (status == -ENOENT && !o->wrote) {
        if (o->fresh)
            s3store_call(r, RN_COLD_LIST, issue_list_one, claim_listed);
        else
            s3store_call(r, RN_COLD_PUT, issue_write, claim_written);
        return;
    }
    if (status < 0) {
        claim_finish(o, status == -ENOENT ? -EIO : status);
        return;
    }
    char other[65];
    if (owner_named(o->buf, res->length, other) < 0) {
        claim_finish(o, -EAGAIN); /* the claim asks again */
        return;
    }
    if (strcmp(other, st->owner) != 0) {
        found_foreign(st, other, 0); /* the caller says so */
        claim_finish(o, -EEXIST);
        return;
    }
    st->foreign = 0;
    claim_finish(o, 0);
}

void s3owner_claim(rn_store *store, int fresh, rn_store_done_fn done, void *arg) {
    s3store *st = (s3store *)store;
    owner_op *o = owner_op_new(st);
    o->fresh = fresh;
    o->done = done;
    o->arg = arg;
    s3store_call(&o->r, RN_COLD_GET, issue_read, claim_read);
}
