/*
 * forward_writes.h — --forward-writes: a cluster node forwards a write for
 * a group another node leads to that leader through the gateway's
 * forwarder (gateway/forward.h), streaming the body, and relays the
 * answer; where the forwarder cannot, it answers as a server does: 503
 * NO_LEADER when nothing went (a connection not made, a redirect it could
 * not follow), 503 OUTCOME_UNKNOWN when some of the write went and no
 * answer came (ext §5.7, §11.1). A write it forwards carries
 * RN_NO_FORWARD_HEADER (util/routes.h), and a node never forwards a write
 * carrying it (it answers it 307 or 503, which the forwarding node follows
 * or relays), so two nodes that disagree on the leader cannot pass a write
 * around; routers that learn leaders from redirects send it too.
 */
#ifndef RN_OPS_FORWARD_WRITES_H
#define RN_OPS_FORWARD_WRITES_H

#include <uv.h>

#include "ops/config.h"
#include "protocol/routing.h"

typedef struct rn_write_forwarder rn_write_forwarder;

rn_write_forwarder *rn_write_forwarder_new(uv_loop_t *loop, const rn_config *cfg);
/* The cluster view's forward hook (routing.h); ctx is the forwarder. */
int rn_write_forwarder_take(void *ctx, rn_request *req, const rn_group_route *r);
/* Cancels what is in flight (shutdown); free after the loop closed its
 * handles. NULL: no-op. */
void rn_write_forwarder_stop(rn_write_forwarder *w);
void rn_write_forwarder_free(rn_write_forwarder *w);

#endif
