/*
 * node.h — what the files of runnel-consensus-node share: the process's
 * state, the JSON line printer, and the command entry points.
 */
#ifndef RN_TEST_NODE_H
#define RN_TEST_NODE_H

#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#include "consensus/consensus.h"
#include "toy_fsm.h"
#include "util/buf.h"

#define NODE_MAX_PEERS 16

typedef struct {
    consensus *c;
    toy_fsm toy;
    uv_pipe_t input;
    uv_signal_t sigterm;
    rn_buf line;
    bool stopping;
    consensus_peer peers[NODE_MAX_PEERS];
    unsigned n_peers;
} node_state;

extern node_state N;

/* Prints j as one line on stdout and releases it. */
void node_print(json_t *j);

/* Stops the node gracefully (idempotent); the process exits once done. */
void node_stop(void);

/* commands.c: runs one command line ("TAG VERB ARGS..."). */
void node_command(char *line);

/* bench.c: "bench" (proposals) and "readbench" (read barriers). */
void node_bench(json_t *tag, unsigned group, char **args, int n_args);
void node_readbench(json_t *tag, unsigned group, char **args, int n_args);
void node_bench_free(void);

#endif
