/* views.h — which nodes are views the planner may alias: ops whose output is one
 * contiguous run of their first input's bytes (Flatten, Reshape, Squeeze, Unsqueeze,
 * Identity: the whole input; Slice: when its constant starts/ends/axes/steps select
 * one contiguous run), and where that run starts. Pure geometry over static shapes
 * and constant inputs; the planner (planner.c) decides whether aliasing is safe. */
#ifndef OT_PLAN_VIEWS_H
#define OT_PLAN_VIEWS_H

#include <stdbool.h>
#include <stddef.h>

#include "ir.h"

/* True when node nd may be a view at all: an OT_T_VIEW op or a Slice, with a first
 * input and a first output. Cheap; no shapes read. */
bool ot_plan_view_candidate(const ot_node *nd);

/* True when nd's output 0 is exactly the bytes [*offset, *offset + its size) of its
 * input 0 in the same dtype: a view op of equal size (offset 0), or a Slice whose
 * steps are 1 (on every axis it takes more than one index from), whose starts, ends,
 * axes and steps are constants, and whose result is one contiguous run: every axis
 * after the sliced one taken whole, every axis before it reduced to one index.
 * False for anything else (a strided or reversed slice, non-constant bounds, empty
 * results, shapes that disagree). */
bool ot_plan_view_offset(const ot_graph *g, const ot_node *nd, size_t *offset);

#endif
