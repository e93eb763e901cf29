/* remat_check.h — for the tests of the remat searches (auto, optimal): the plan-only
 * session they search over, and the two planned peaks their budgets lie between. */
#ifndef OT_REMAT_CHECK_H
#define OT_REMAT_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "train/remat_session.h"

typedef struct rc_search {
    ot_remat_session *s;
    bool *keep;    /* a flag per value (+1), the searches' answer */
    int64_t plain; /* the planned peak with nothing recomputed */
    int64_t least; /* the least planned peak (ot_remat_least_memory) */
} rc_search;

/* Opens the model at path as these tests do (plan only, batch 8, cross-entropy over
 * the last axis, policy none, seed 7, 2 threads); fails the test on any error. Free
 * it with ot_remat_session_free. */
ot_remat_session *rc_session_open(const char *path);

/* rc_session_open, then measures both peaks with the planner; fails the test on any
 * error. */
void rc_search_open(rc_search *r, const char *path);
void rc_search_close(rc_search *r);

/* The recompute FLOPs of a rewritten graph: the analysis's FLOPs of every live clone's
 * original node (what a test's own measure charges a plan it judges); *n_clones, when
 * not NULL, the number of those clones. */
double rc_clone_flops(const ot_graph *g, const ot_remat_analysis *an, int *n_clones);

/* True, after printing that the test is skipped, when this build has no MIP solver
 * (CBC or GLPK): --remat optimal is then unavailable and a test of it has nothing to
 * check. */
bool rc_skip_without_mip(void);

/* A budget num/den of the way from --remat all's planned peak to none's, for the model
 * and options in plan_args: runs `BINARY plan PLAN_ARGS --remat all --json` (its output
 * in out_path) and reads both peaks; fails the test unless all's is below none's. */
long long rc_cli_budget(const char *out_path, const char *binary, const char *plan_args, int num, int den);

#endif
