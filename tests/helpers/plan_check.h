/* plan_check.h — for the planner tests: tiny graph builders and the exhaustive
 * invariant check of a plan. pc_check_plan asserts that no two blocks live at the
 * same step overlap (unless one took the other over in place), that every view
 * (alias) lies inside its base's memory and lifetime and takes no block, that the
 * timeline is the live blocks' bytes, and that the peak equals the highest end
 * offset of any block. O(blocks^2): fine up to ~10k blocks. */
#ifndef OT_PLAN_CHECK_H
#define OT_PLAN_CHECK_H

#include "ir.h"
#include "exec/backend.h"
#include "plan/planner.h"

/* A 1-D float32 value of n elements; params, constants and state get zero data. */
int pc_f32(ot_graph *g, const char *name, int64_t n, ot_value_kind kind);
/* One-input and two-input nodes with one output (assert on failure). */
int pc_node1(ot_graph *g, ot_op op, const char *name, int in, int out, ot_phase ph);
int pc_node2(ot_graph *g, ot_op op, const char *name, int a, int b, int out, ot_phase ph);
void pc_mark_output(ot_graph *g, int v);
void pc_mark_input(ot_graph *g, int v);

/* The stem the schedule and gradient-slot tests share, built in this id order:
 * input x and param w of n floats, f0: a = x*w (forward), loss: l = -a (a graph
 * output), b0: d0 = OnesLike(l) (the backward seed). Values made after it get the
 * next ids, nodes the next node ids (f0, loss, b0 are nodes 0..2). */
typedef struct {
    int x, w, a, l, d0;
} pc_stem;
pc_stem pc_weight_stem(ot_graph *g, int64_t n);

void pc_check_plan(const ot_graph *g, const ot_plan *p);
/* Schedules and plans g (be: workspace sizes, may be NULL) and checks the plan. */
ot_plan *pc_plan_of(const ot_graph *g, ot_backend *be, bool no_inplace);

#endif
