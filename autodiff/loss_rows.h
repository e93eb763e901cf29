/* loss_rows.h — cross-entropy over scores whose classes are the last axis ([B, T, V]
 * from a language model): see loss_rows.c. Used by the loss builder (loss.c). */
#ifndef OT_LOSS_ROWS_H
#define OT_LOSS_ROWS_H

#include <stdbool.h>

#include "ir/ir.h"

/* True when scores of shape s with the classes on axis k can be fed to
 * SoftmaxCrossEntropyLoss as [rows, C] rows instead of being transposed to
 * [B, C, T...]: the classes are the last axis, the rank is above 2, every dim is known. */
bool ot_loss_rows_fit(const ot_shape *s, int k);

/* Appends Reshape(scores -> [rows, C]) and Reshape(labels -> [rows]) (views: the
 * planner aliases them) and returns the two new values. -1 on out of memory. */
int ot_loss_rows_flatten(ot_graph *g, int scores, int labels, int *scores_rows, int *labels_rows);

#endif
