/* fold_linear.h — folds the weight Transpose of nn.Linear as PyTorch exports it
 * (MatMul(X, Transpose(W))) into a Gemm with transB on the training graph: see
 * fold_linear.c. Called by the session builder (train/session.c) after autodiff. */
#ifndef OT_FOLD_LINEAR_H
#define OT_FOLD_LINEAR_H

#include "ir/ir.h"

/* Rewrites every MatMul(X [..., K], T = Transpose(W [N, K])) whose T feeds only such
 * MatMuls, X's dims all known: Gemm(X as [rows, K], W, transB = 1), reshaped back to
 * [..., N], and removes the Transpose. Returns the number of Transposes removed, or -1
 * when out of memory (the graph is then unusable). */
int ot_fold_linear_transposes(ot_graph *g);

#endif
