/*
 * coldclaim.h — the cold store's claim at start: before the server turns
 * ready it confirms that its S3 cold store is this deployment's and takes
 * its requests (tiers.h, rn_tiers_cold_claim), so that wrong credentials,
 * a wrong bucket or a prefix another deployment owns are found before
 * anything is written or removed there, not by the first write.
 */
#ifndef RN_OPS_COLDCLAIM_H
#define RN_OPS_COLDCLAIM_H

#include <stddef.h>
#include <uv.h>

#include "tiers/tiers.h"

typedef struct rn_cold_claim rn_cold_claim;

/* Starts claiming t's cold store: done(arg, 0) once the store confirmed
 * it (at once without a network cold store), or done(arg, -errno) when it
 * refused for good (-EEXIST: another deployment owns the prefix; -EPERM:
 * the store refuses the server's requests), with why the store gave in
 * rn_cold_claim_why. While the store cannot tell (unreachable, slow,
 * failing), it tries again with backoff (1 s doubling to 30 s), and
 * rn_cold_claim_why says why it waits. done runs once, never after stop. */
rn_cold_claim *rn_cold_claim_start(uv_loop_t *loop, rn_tiers *t,
                                   void (*done)(void *arg, int status), void *arg);
/* 1 while the claim is not confirmed, with the store's last failure (or
 * "not answered yet") in why; 0 once it is. NULL: 0. */
int rn_cold_claim_why(const rn_cold_claim *c, char *why, size_t cap);
/* Stops trying (before the tiers stop); frees c once its timer closed.
 * NULL is a no-op. */
void rn_cold_claim_stop(rn_cold_claim *c);

#endif
