/* train_synthetic.h — seeded random data shaped like a training session's inputs, for
 * what can be done without data: the bare form's verify (`onnxtrain MODEL.onnx`), and
 * later `train --synthetic` for benchmarks.
 *
 * One array per model input and one for the loss's labels (OT_DATA_LABELS), each
 * [n_samples, the bound per-sample dims], from the session's bound graph:
 *   float inputs and mse targets   N(0, 1)
 *   integer inputs                 uniform in [0, R): R is the row count of the table a
 *                                  Gather reads with them (an embedding), or the
 *                                  class count of a SoftmaxCrossEntropyLoss /
 *                                  NegativeLogLikelihoodLoss they are the target of,
 *                                  looked for through Cast, Reshape, Flatten, Squeeze,
 *                                  Unsqueeze and Identity (the smallest when several);
 *                                  else [0, 2) (masks, token types)
 *   bool inputs                    0 or 1
 *   cross-entropy labels           uniform in [0, classes)
 * Each array's `path` (what data messages name) says that it is synthetic and where
 * its range came from. Draws are Philox4x32-10 (exec/rng.h) keyed by the seed, with the
 * array's position as the step and a node id no graph has, so the same seed gives the
 * same data on every machine. */
#ifndef OT_TRAIN_SYNTHETIC_H
#define OT_TRAIN_SYNTHETIC_H

#include "train/train.h"

/* Fills out (empty) with n_samples (>= 1) samples of every input of s and, unless the
 * loss is `output`, its labels. s may be plan-only and built without data. Fails with
 * OT_E_UNSUPPORTED naming an input whose dtype has no synthetic form (float16,
 * bfloat16, string). */
ot_status ot_train_synthetic_data(ot_train_session *s, uint64_t seed, int64_t n_samples, ot_dataset *out,
                                  ot_error *err);

#endif
