/* lowp_model.h — models exported in float16 or bfloat16 train as they are (issue 27
 * part 2): the session's rewrite (float32 master weights read through Casts, float32
 * BatchNorm statistics, low outputs cast up for the loss, float32 data for bfloat16
 * inputs cast down, forward nodes without a low kernel legalized in float32), and the
 * rounding back to the model's dtype wherever weights leave the session. */
#ifndef OT_LOWP_MODEL_H
#define OT_LOWP_MODEL_H

#include "autodiff/autocast.h"
#include "train/data.h"

struct ot_train_session;

/* train/lowp_model.c: float16/bfloat16 models' params as float32 master weights read
 * through casts, low graph outputs cast up, float32 data for bfloat16 inputs cast
 * down; before autocast, the loss and the backward pass. */
ot_status ot_train_lowp_model(struct ot_train_session *s, const ot_dataset *data, ot_autocast_supports_fn supports,
                              void *ctx, ot_error *err);
/* float16 or bfloat16 when g's params or state are (a low model), else OT_F32. */
ot_dtype ot_lowp_model_dtype(const ot_graph *g);
/* eval's forward and loss nodes of a low model that the backend cannot run in its
 * dtype run in float32 with casts (the weights stay as they are); the count, -1 when
 * out of memory. */
int ot_lowp_legalize_infer(ot_graph *g, ot_autocast_supports_fn supports, void *ctx);
/* The model's dtype of value v when the session holds it as a float32 master, else OT_F32. */
ot_dtype ot_train_lowp_dtype(const struct ot_train_session *s, int v);
/* n float32 values rounded (nearest even) to float16 or bfloat16 bits at dst. */
void ot_lowp_narrow(ot_dtype to, const float *src, void *dst, size_t n);
/* The streamed save's read of a master weight, in the model's dtype. */
ot_status ot_train_lowp_read(struct ot_train_session *s, int v, uint64_t offset, void *dst, size_t n, ot_error *err);

#endif
