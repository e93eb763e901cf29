/* step_results.h — one step's results in a fixed order, for `onnxtrain verify` (one
 * step with and without remat, compared bitwise) and the model-level remat tests:
 * the loss, every param gradient (autodiff order), every state update (BatchNorm
 * running statistics), with the step's time and planned and measured peaks. */
#ifndef OT_STEP_RESULTS_H
#define OT_STEP_RESULTS_H

#include "autodiff/autodiff.h"
#include "exec/executor.h"

typedef struct ot_step_results {
    int n;
    char **names;        /* "loss", "grad:<param>", "state:<value>" */
    ot_tensor **tensors;
    double loss;
    double seconds;      /* wall time of the executor run */
    size_t planned_peak, measured_peak;
} ot_step_results;

/* Copies the results of the run ex has just done out of its arena (r->seconds is
 * left to the caller). g is ex's graph, ad its backward pass, loss_value its loss. */
ot_status ot_step_results_collect(ot_executor *ex, const ot_graph *g, const ot_autodiff_result *ad, int loss_value,
                                  ot_step_results *r, ot_error *err);
void ot_step_results_free(ot_step_results *r);

/* How two results compare: *equal when dtype, size and every byte agree (bitwise:
 * -0 and +0 differ, a NaN equals the same NaN). Returns 0 when equal, else max |a - b|
 * over float32/float64 elements, NaN when dtypes or sizes differ, an element is NaN on
 * one side only, or the dtype is not a float. */
double ot_tensor_bitwise_diff(const ot_tensor *a, const ot_tensor *b, bool *equal);

#endif
