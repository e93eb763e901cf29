/* einsum_geometry.h — Einsum and EinsumGrad for both backends (ops batch 4, issue 26):
 * the host builds a geometry from the node's equation (ir/einsum.h) and its operands'
 * shapes; the element function computes one output element, the same code on the CPU
 * (kernels/cpu/cpu_einsum.c) and the GPU (kernels/cuda/cuda_einsum.cu, host mode
 * included), so their bits agree.
 *
 * One description serves both ops: operands (each a list of labels with strides, 0
 * where the operand lacks the label or broadcasts it from a size-1 dim) multiplied
 * and summed into an output whose axes are labels. An output element fixes the labels
 * of its axes; an output axis repeated (EinsumGrad onto "ii") is 0 off the diagonal;
 * an output axis of size 1 whose label is larger (EinsumGrad onto a broadcast
 * ellipsis dim) leaves the label summed. Every other label is summed, in increasing
 * order, last label fastest, in double precision. */
#ifndef OT_KERNELS_EINSUM_GEOMETRY_H
#define OT_KERNELS_EINSUM_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OT_EIN_FN static inline __host__ __device__
#else
#define OT_EIN_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "ir.h"
#include "ir/einsum.h"

typedef struct ot_ein_geom {
    int n_ops;                /* operands multiplied */
    int input[OT_EIN_MAX_IN]; /* the node's input each operand is */
    int n_labels;
    int64_t size[OT_EIN_MAX_LABELS];
    int64_t stride[OT_EIN_MAX_IN][OT_EIN_MAX_LABELS]; /* in elements */
    int out_rank;
    int8_t out_label[OT_MAX_RANK];
    int64_t out_dim[OT_MAX_RANK];
    int64_t n_out;
} ot_ein_geom;

/* The geometry of an Einsum or EinsumGrad node from its params and its tensors'
 * shapes. OT_E_MODEL naming the node for a bad equation or index, OT_E_SHAPE for
 * operands whose dims disagree on a label or an output not shaped as they give. */
ot_status ot_ein_geometry(const ot_node *node, const ot_tensor *in, const ot_tensor *out, ot_ein_geom *g,
                          ot_error *err);

#ifdef __cplusplus
}
#endif

#ifdef __CUDA_ARCH__
#define OT_EIN_MUL(a, b) __dmul_rn(a, b)
#define OT_EIN_ADD(a, b) __dadd_rn(a, b)
#else
#define OT_EIN_MUL(a, b) ((a) * (b))
#define OT_EIN_ADD(a, b) ((a) + (b))
#endif

/* Operand k's element at off: float32, or float64 when f64 (ONNX's node tests). */
OT_EIN_FN double ot_ein_load(const void *const *x, bool f64, int k, int64_t off) {
    return f64 ? ((const double *)x[k])[off] : (double)((const float *)x[k])[off];
}

/* Output element o (row-major over out_dim) of the operands x[0 .. n_ops-1], all
 * float32 or (f64) all float64, summed in double. */
OT_EIN_FN double ot_ein_element(const ot_ein_geom *g, const void *const *x, bool f64, int64_t o) {
    int64_t val[OT_EIN_MAX_LABELS], off[OT_EIN_MAX_IN], cnt[OT_EIN_MAX_LABELS];
    int free_l[OT_EIN_MAX_LABELS], nf = 0;
    for (int l = 0; l < g->n_labels; l++)
        val[l] = -1;
    int64_t rem = o;
    for (int d = g->out_rank - 1; d >= 0; d--) {
        int64_t p = rem % g->out_dim[d];
        rem /= g->out_dim[d];
        int l = g->out_label[d];
        if (g->out_dim[d] != g->size[l]) continue; /* a broadcast dim: its label is summed */
        if (val[l] < 0)
            val[l] = p;
        else if (val[l] != p)
            return 0.0; /* off the diagonal of a repeated output label */
    }
    for (int k = 0; k < g->n_ops; k++)
        off[k] = 0;
    for (int l = 0; l < g->n_labels; l++) {
        if (val[l] < 0) {
            if (g->size[l] == 0) return 0.0;
            cnt[nf] = 0;
            free_l[nf++] = l;
            continue;
        }
        for (int k = 0; k < g->n_ops; k++)
            off[k] += val[l] * g->stride[k][l];
    }
    double acc = 0.0;
    for (;;) {
        double prod = ot_ein_load(x, f64, 0, off[0]);
        for (int k = 1; k < g->n_ops; k++)
            prod = OT_EIN_MUL(prod, ot_ein_load(x, f64, k, off[k]));
        acc = OT_EIN_ADD(acc, prod);
        int i = nf - 1;
        for (; i >= 0; i--) {
            int l = free_l[i];
            if (++cnt[i] < g->size[l]) {
                for (int k = 0; k < g->n_ops; k++)
                    off[k] += g->stride[k][l];
                break;
            }
            for (int k = 0; k < g->n_ops; k++)
                off[k] -= g->stride[k][l] * (g->size[l] - 1);
            cnt[i] = 0;
        }
        if (i < 0) break;
    }
    return acc;
}

#endif
