/* kernel_common.h — the backend-neutral helpers that both backends' host code uses:
 * element counts, axis normalisation, the multidirectional broadcasting iterator
 * (the CPU kernels loop over it; the CUDA launchers copy it into a device
 * descriptor), dtype loads and float16 / bfloat16 conversion. Plain C; the CUDA
 * module includes it inside extern "C". CPU-only helpers stay in
 * kernels/cpu/cpu_common.h. */
#ifndef OT_KERNEL_COMMON_H
#define OT_KERNEL_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "ir.h"

/* Element count of a kernel argument (its shape is always static). The one numel of
 * the kernels: inline so hot launch paths of either backend pay no call. */
static inline int64_t ot_kernel_numel(const ot_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->shape.rank; i++) n *= t->shape.dim[i];
    return n;
}

/* Normalises a possibly negative axis against rank; -1 when out of range. */
int ot_kernel_axis(int64_t axis, int rank);

/* ---- broadcasting ----------------------------------------------------------- */

#define OT_BCAST_MAX_IN 3

/* An output shape and, per input, element strides (0 along broadcast dims), with
 * adjacent dims merged where every input is contiguous across them so the inner
 * loop is as long as possible. Iterate rows (all dims but the last) and inner. */
typedef struct ot_bcast {
    int rank; /* >= 1 after init */
    int n_in;
    int64_t dim[OT_MAX_RANK];
    int64_t stride[OT_BCAST_MAX_IN][OT_MAX_RANK];
    int64_t rows, inner;
} ot_bcast;

/* False when some input does not broadcast to `out` (ONNX multidirectional rules,
 * aligned on the right). */
bool ot_bcast_init(ot_bcast *b, const ot_shape *out, const ot_shape *const *ins, int n_in);
/* Element offsets of each input at the start of row `row`. */
void ot_bcast_row(const ot_bcast *b, int64_t row, int64_t *off);
/* ot_bcast_init over a node's first n_in inputs, for both backends' launchers:
 * OT_E_SHAPE naming the node when they do not broadcast to `out`. */
ot_status ot_kernel_bcast(const ot_node *node, const ot_tensor *in, int n_in, const ot_tensor *out, ot_bcast *b,
                          ot_error *err);

/* ---- elementwise launch checks ---------------------------------------------- */

/* A backend's "unsupported dtype" error (ot_cpu_bad_dtype, ot_cuda_bad_dtype), so
 * the shared checks below word it as the backend that runs. */
typedef ot_status (*ot_kernel_bad_dtype_fn)(const ot_node *node, const char *what, ot_dtype t, ot_error *err);

/* X -> Y of one element count: OT_E_SHAPE naming the node and both counts otherwise. */
ot_status ot_kernel_same_numel(const ot_node *node, const ot_tensor *x, const ot_tensor *y, ot_error *err);

/* The checks of an elementwise gradient (dY, X) -> dX, shared by both backends:
 * dY and X float32 (else `bad`), all three of one element count (*n), and the
 * node's typed params in *pp (scratch holds them when the node has none cached). */
ot_status ot_kernel_grad_dy_x(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                              ot_kernel_bad_dtype_fn bad, int64_t *n, ot_op_params *scratch,
                              const ot_op_params **pp, ot_error *err);

/* The checks of MaxGrad / MinGrad (dY, Y, X_0 .. X_n-1) -> dX_k, shared by both
 * backends: 1 to OT_MINMAX_GRAD_MAX_IN forward inputs (*nx), every input float32 (else `bad`), dY, Y
 * and dX of one element count (*n), and the node's index k of one of them (*k). */
ot_status ot_kernel_minmax_grad_check(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                                      ot_kernel_bad_dtype_fn bad, int *nx, int *k, int64_t *n, ot_error *err);

/* ---- Slice ------------------------------------------------------------------ */


/* ---- Concat and Split -------------------------------------------------------- */

/* Concat's or Split's axis against s (Concat's output, Split's input) of element size
 * es, with the node's layout params in *lp (scratch holds them when the node has none
 * cached): OT_E_SHAPE naming the node when the axis is out of range or es is 0. */
ot_status ot_kernel_concat_axis(const ot_node *node, const ot_shape *s, size_t es, ot_op_params *scratch,
                                const ot_layout_params **lp, int *axis, ot_error *err);

/* Split's length of output k along axis, of size dim in the input: the "split"
 * attribute when it has an entry per output, else output k's own shape (shape
 * inference read "split" or the num_outputs), else (an absent output) an equal share. */
int64_t ot_kernel_split_len(const ot_node *node, const ot_layout_params *lp, const ot_tensor *out, int k, int axis,
                            int64_t dim);

/* ---- dtypes ----------------------------------------------------------------- */

float ot_f16_to_f32(uint16_t h);
uint16_t ot_f32_to_f16(float f);
float ot_bf16_to_f32(uint16_t h);
uint16_t ot_f32_to_bf16(float f);
/* Reads element i of an integer tensor (int64/int32/int8/uint8/bool) as int64. */
bool ot_kernel_load_int(ot_dtype t, const void *p, int64_t i, int64_t *v);
/* Reads element i of a numeric tensor as double. */
bool ot_kernel_load_double(ot_dtype t, const void *p, int64_t i, double *v);
/* int64, int32, int8, uint8 or bool. */
bool ot_kernel_is_int_dtype(ot_dtype t);


/* Transpose's permutation for input shape x and output shape y, from the node's typed
 * params (absent perm: the reversed axes), checked once for both backends: a perm of
 * the input's rank, each axis once, and y the permuted x. OT_E_SHAPE naming the node. */
ot_status ot_transpose_perm(const ot_node *node, const ot_shape *x, const ot_shape *y, int *perm, ot_error *err);

/* RandomUniform(Like)'s bounds from the node's typed params, checked once for both
 * backends: OT_E_MODEL naming the node when low is above high (or either is NaN). */
ot_status ot_random_uniform_bounds(const ot_node *node, float *low, float *high, ot_error *err);

/* PReluGrad's checks for both backends: dY, X and slope float32 (else `bad`), the
 * index param 0 (dX) or 1 (the slope's share) in *which (else OT_E_MODEL naming the
 * node), and the three inputs broadcast to the output in *b. */
ot_status ot_prelu_grad_setup(const ot_node *node, const ot_tensor *in, const ot_tensor *out,
                              ot_kernel_bad_dtype_fn bad, int *which, ot_bcast *b, ot_error *err);

#endif
