/* train_check.h — the training loop's NaN/Inf check of a gradient without reading
 * it, where a proof from the inputs of the GEMM that wrote it holds, and the step's
 * gradient norm taken during the optimizer's update instead (train_check.c). Used by
 * train_loop.c only. */
#ifndef OT_TRAIN_CHECK_H
#define OT_TRAIN_CHECK_H

#include <stdbool.h>

#include "train/train_internal.h" /* ot_train_session's hot_* and opt_* fields */

/* After the hot sums are laid out (hot_has): which gradients a Gemm or MatMul of two
 * inputs writes (hot_gemm), each param's optimizer step (opt_at), the per-step sums
 * the optimizer kernels fill (opt_ss). */
ot_status ot_train_check_build(ot_train_session *s, ot_error *err);

/* Whether this run may prove gradients finite instead of summing them before the
 * update: the check is on and nothing needs the norm before the update (a training
 * step without clipping, accumulation or ranks); a norm wanted for the report alone
 * can wait for the update. */
bool ot_train_check_may_prove(const ot_train_session *s);

/* Right after gradient i's writer hot_gemm[i] ran: whether its inputs prove it
 * finite (see train_check.c for the bound). */
bool ot_train_check_proves(ot_train_session *s, int i);

/* At the boundary, every gradient checked, with ss[i] the sums taken before the
 * update (0 for those proved): when some gradient was proved this run, keeps ss for
 * the norm, asks the optimizer kernels for theirs and returns true (the norm is
 * pending); else false, and no kernel is asked. */
bool ot_train_check_defer_norm(ot_train_session *s, const double *ss);

/* After a run: the pending norm (s->last_norm), the sums added in param order as the
 * boundary adds them, each proved gradient's from its optimizer kernel or, where none
 * was taken, from a pass over it (the update does not write the gradient). */
void ot_train_check_finish(ot_train_session *s);

/* Whether an infinity in value v of g is intended (a mask's -Inf read only by a
 * Softmax, Where, a max or a comparison, possibly through views, Add/Sub or Cast):
 * then the NaN/Inf diagnosis looks for NaN only there. Call with depth 0. */
bool ot_train_inf_intended(const ot_graph *g, int v, int depth);

#endif
