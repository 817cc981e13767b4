/*
 * fences.h — the state machine's side of a bucket purge, shared by apply.c
 * and fences.c (private to the state machine): applying a FENCE, a PURGE,
 * and the refusal of a create its namespace's fence covers. See state.h
 * (rn_fence) for the table and engine/purge.c for who logs the commands.
 */
#ifndef RN_ENGINE_FENCES_H
#define RN_ENGINE_FENCES_H

#include "engine/state.h"

/* A FENCE command: records (or widens) the namespace's fence. */
void rn_fences_apply_fence(rn_state *st, const rn_cmd *c);

/* Where the source chain of x reaches s in this group: the lowest fork
 * offset along it up to the link whose source is s (x's bytes below it
 * are read through s), or UINT64_MAX when the chain does not reach s. */
uint64_t rn_fences_reach(const rn_stream *x, const rn_stream *s);

/* True when s's namespace is fenced for s's group. */
int rn_fences_covers(const rn_state *st, const rn_stream *s);

/* A PURGE of stream s: when its namespace's fence covers it, forks of it
 * (elsewhere: a fork in the fenced namespace goes by its own PURGE) lose
 * the bytes they read through it, then s is destroyed with its files,
 * snapshot body and history objects (fx). A stream the fence does not
 * cover is left alone (such a PURGE is never logged), and so is one that
 * forks in other groups still pin: they are cut, and unpinned, first. */
void rn_fences_apply_purge(rn_state *st, rn_stream *s, const rn_effects *fx);

/* A CUT of fork x (c->source_id its apart source, c->offset where that
 * source's bytes stop being readable, or RN_CUT_SOURCE): when x still
 * reads that source, x and its forks of this group lose the bytes below
 * where their chains reach the cut (their retained offsets rise there, a
 * snapshot below goes, a kept copy of them is given back); with
 * RN_CUT_SOURCE x forgets its source. Else nothing changes (a repeat). */
void rn_fences_apply_cut(rn_state *st, rn_stream *x, const rn_cmd *c, const rn_effects *fx);

/* Whether a CREATE must be refused at apply: its path's namespace is
 * fenced for the group of its id. Then out->erased is set and nothing is
 * created; the pending stream the pipeline made for it, when there is one
 * (the proposer's), is left to the pipeline, which destroys it once it
 * released the stream's files (pipeline.c command_done). Returns 1 when
 * refused. */
int rn_fences_refuse_create(const rn_state *st, const rn_cmd *c, rn_applied *out);

#endif
