/* cuda_ops.c — the CUDA backend's op table, built from cuda_ops.def (one row per op:
 * status, launcher, supports predicate, workspace function), and the queries answered
 * from it: supports, workspace (with or without a cuDNN handle) and each op's status.
 * backend_cuda.c dispatches through ot_cuda_op_row_of; nothing else in the module
 * switches on the op to dispatch. Needs no GPU: the predicates read dtypes, shapes and
 * attributes only. */
#include <stddef.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/kernel_common.h"
#include "kernels/linear_ce_geometry.h"
#include "kernels/xfmr_geometry.h"

/* ---- supports predicates ---------------------------------------------------------- */

static ot_dtype in0(const ot_node *node, const ot_tensor *in) {
    return node->n_inputs > 0 ? in[0].dtype : OT_UNDEFINED;
}
static ot_dtype out0(const ot_node *node, const ot_tensor *out) {
    return node->n_outputs > 0 ? out[0].dtype : OT_UNDEFINED;
}
static bool any_dtype(ot_dtype t) { return ot_dtype_size(t) != 0; }
static bool cast_dtype(ot_dtype t) {
    return t == OT_F32 || t == OT_F64 || t == OT_F16 || t == OT_BF16 || t == OT_I64 || t == OT_I32 || t == OT_I8 ||
           t == OT_U8 || t == OT_BOOL;
}
/* The integer dtypes of the CPU's wrapping arithmetic (cpu_elementwise.c). */
static bool int_arith(ot_dtype t) { return t == OT_I64 || t == OT_I32 || t == OT_I8 || t == OT_U8; }
static bool index_dtype(ot_dtype t) { return t == OT_I64 || t == OT_I32; }

#define SUPPORTS(name) static bool name(const ot_node *node, const ot_tensor *in, const ot_tensor *out)
/* compute kernels, forward and backward, are float32 */
SUPPORTS(sup_f32) { return in0(node, in) == OT_F32; }
/* issue 27: float32, or bfloat16 / float16 A and B into float32 or their dtype (cuda_blas.c) */
SUPPORTS(sup_gemm) { return node->n_inputs >= 2 && ot_cuda_gemm_dtypes(in0(node, in), in[1].dtype, out0(node, out)); }
/* issue 27: the bfloat16 / float16 kernels (cuda_elementwise.cu, cuda_pointwise_grad.cu,
 * cuda_reduce.cu) take every float tensor of the node in the one low dtype, so the
 * autocast pass (autodiff/autocast.c asks these predicates) keeps those values low on
 * CUDA; the norms' small tensors may also be float32 (a master weight read as it is,
 * BatchNorm's running statistics). Float32 nodes are asked what they always were. */
static bool low_dtype(ot_dtype t) { return t == OT_BF16 || t == OT_F16; }
/* X -> Y: Sqrt .. Gelu, Softmax / LogSoftmax, Dropout (its ratio keeps its dtype, the
 * mask is bool), DropoutGrad */
SUPPORTS(sup_fp_unary) {
    ot_dtype t0 = in0(node, in);
    return t0 == OT_F32 || (low_dtype(t0) && out0(node, out) == t0);
}
/* (dY, X or Y) -> dX: the activation gradients, SoftmaxGrad / LogSoftmaxGrad */
SUPPORTS(sup_fp_pair) {
    ot_dtype t0 = in0(node, in);
    return t0 == OT_F32 || (low_dtype(t0) && node->n_inputs >= 2 && in[1].dtype == t0 && out0(node, out) == t0);
}
/* the norms: X (and for a gradient dY, X) and Y / dX in the low dtype, every other
 * tensor present in it or float32 */
static bool norm_low(const ot_node *node, const ot_tensor *in, const ot_tensor *out, int n_data) {
    ot_dtype t = in0(node, in);
    if (!low_dtype(t) || out0(node, out) != t || node->n_inputs < n_data) return false;
    for (int k = 1; k < node->n_inputs; k++) {
        ot_dtype d = in[k].dtype;
        if (k < n_data ? d != t : d != t && d != OT_F32 && d != OT_UNDEFINED) return false;
    }
    for (int k = 1; k < node->n_outputs; k++)
        if (out[k].dtype != t && out[k].dtype != OT_F32 && out[k].dtype != OT_UNDEFINED) return false;
    return true;
}
SUPPORTS(sup_fp_norm) { return in0(node, in) == OT_F32 || norm_low(node, in, out, 1); }
SUPPORTS(sup_fp_norm_grad) { return in0(node, in) == OT_F32 || norm_low(node, in, out, 2); }
/* a low Sum: 1 to OT_CUDA_SUM_LOW_MAX inputs of the output's dtype and size */
SUPPORTS(sup_sum) {
    ot_dtype t0 = in0(node, in);
    if (t0 == OT_F32) return true;
    if (!low_dtype(t0) || out0(node, out) != t0 || node->n_inputs > OT_CUDA_SUM_LOW_MAX) return false;
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].dtype != t0 || ot_kernel_numel(&in[k]) != ot_kernel_numel(&out[0])) return false;
    return true;
}
SUPPORTS(sup_arith) {
    ot_dtype t0 = in0(node, in);
    if (low_dtype(t0)) return in[1].dtype == t0 && out0(node, out) == t0 && node->op != OT_OP_POW;
    return (t0 == OT_F32 || int_arith(t0)) && in[1].dtype == t0;
}
SUPPORTS(sup_pow) {
    ot_dtype t0 = in0(node, in), o0 = out0(node, out);
    return (t0 == OT_F32 || ((t0 == OT_I64 || t0 == OT_I32) && o0 == t0)) &&
           (in[1].dtype == OT_F32 || index_dtype(in[1].dtype));
}
SUPPORTS(sup_clip) {
    ot_dtype t0 = in0(node, in);
    return t0 == OT_F32 || ((int_arith(t0) || low_dtype(t0)) && out0(node, out) == t0);
}
SUPPORTS(sup_neg) {
    ot_dtype t0 = in0(node, in);
    return t0 == OT_F32 || t0 == OT_I64 || t0 == OT_I32;
}
/* Neg through the unary kernel: float32, the low dtypes, int64 and int32 */
SUPPORTS(sup_neg_fp) { return sup_neg(node, in, out) || (low_dtype(in0(node, in)) && out0(node, out) == in0(node, in)); }
SUPPORTS(sup_equal) {
    ot_dtype t0 = in0(node, in);
    return in[1].dtype == t0 &&
           (t0 == OT_F32 || t0 == OT_I64 || t0 == OT_I32 || t0 == OT_BOOL || t0 == OT_U8 || t0 == OT_I8);
}
SUPPORTS(sup_where) {
    return in0(node, in) == OT_BOOL && any_dtype(in[1].dtype) && in[2].dtype == in[1].dtype;
}
/* data movement: elements of up to 8 bytes */
SUPPORTS(sup_move) {
    ot_dtype t0 = in0(node, in);
    return any_dtype(t0) && ot_dtype_size(t0) <= 8;
}
SUPPORTS(sup_gather) { return any_dtype(in0(node, in)) && index_dtype(in[1].dtype); }
SUPPORTS(sup_cast) { return cast_dtype(in0(node, in)) && cast_dtype(out0(node, out)); }
SUPPORTS(sup_class_loss) { return in0(node, in) == OT_F32 && index_dtype(in[1].dtype); }
/* X, W (or dY and W / X) and Y of one dtype: float32, or bfloat16 / float16 (issue 27) */
SUPPORTS(sup_conv) {
    ot_dtype t0 = in0(node, in);
    return ot_cuda_conv_dtype(t0) && in[1].dtype == t0 && out0(node, out) == t0 &&
           ot_cuda_conv_supported(node, in, out);
}
SUPPORTS(sup_any_out) { return any_dtype(out0(node, out)); }
SUPPORTS(sup_ones) {
    ot_dtype o0 = out0(node, out);
    return o0 == OT_F32 || o0 == OT_F64;
}
SUPPORTS(sup_gather_grad) { return in0(node, in) == OT_F32 && index_dtype(in[1].dtype); }
/* (dY, logits or log-probabilities, labels) */
SUPPORTS(sup_class_loss_grad) { return in[1].dtype == OT_F32 && index_dtype(in[2].dtype); }
/* issue 13: comparisons (and Mod) of float32 / int64 / int32, logic on bool */
SUPPORTS(sup_compare) {
    ot_dtype t0 = in0(node, in);
    return (t0 == OT_F32 || index_dtype(t0)) && in[1].dtype == t0;
}
SUPPORTS(sup_logic) { return in0(node, in) == OT_BOOL && in[1].dtype == OT_BOOL; }
SUPPORTS(sup_not) { return in0(node, in) == OT_BOOL; }
/* ops batch 4 (issue 26): TopK's float32 X and integer K; OneHot's indices and values */
SUPPORTS(sup_top_k) { return in0(node, in) == OT_F32 && index_dtype(in[1].dtype); }
SUPPORTS(sup_one_hot) {
    ot_dtype it = in0(node, in), vt = out0(node, out);
    return (it == OT_I64 || it == OT_I32 || it == OT_F32) && cast_dtype(in[1].dtype) &&
           (vt == OT_F32 || vt == OT_I64 || vt == OT_I32) && in[2].dtype == vt;
}
/* recurrent ops (issue 26): RnnGrad's X is input 3 */
SUPPORTS(sup_rnn_grad) { return node->n_inputs > 3 && in[3].dtype == OT_F32; }
SUPPORTS(sup_f32_f64) { return in0(node, in) == OT_F32 || in0(node, in) == OT_F64; }
/* random sources (issue 13): the output's dtype decides, the input gives a shape only */
SUPPORTS(sup_f32_out) { return out0(node, out) == OT_F32; }
SUPPORTS(sup_minmax) {
    ot_dtype t0 = in0(node, in);
    return (t0 == OT_F32 || index_dtype(t0)) && out0(node, out) == t0;
}
/* layout and indexing (issue 13) */
SUPPORTS(sup_pad) {
    ot_dtype t0 = in0(node, in);
    return any_dtype(t0) && ot_dtype_size(t0) <= 8 && index_dtype(in[1].dtype);
}
SUPPORTS(sup_scatter) {
    ot_dtype t0 = in0(node, in);
    return any_dtype(t0) && ot_dtype_size(t0) <= 8 && index_dtype(in[1].dtype) && in[2].dtype == t0;
}
SUPPORTS(sup_cumsum) {
    ot_dtype t0 = in0(node, in);
    return (t0 == OT_F32 || t0 == OT_F64 || t0 == OT_I64 || t0 == OT_I32) && index_dtype(in[1].dtype);
}
/* ops batch 1 (issue 26): PRelu's X and slope float32 */
SUPPORTS(sup_prelu) { return in0(node, in) == OT_F32 && in[1].dtype == OT_F32; }
#undef SUPPORTS

/* ---- workspace functions (cx NULL: the host-side query, without cuDNN) ------------ */

static size_t ws_pointwise(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_cuda_pointwise_workspace(node, in, out);
}
static size_t ws_mod(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_cuda_mod_workspace(node, in, out);
}
static size_t ws_reduce(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_cuda_reduce_workspace(node, in, out);
}
/* ops batch 1 (issue 26) */
static size_t ws_reduce_grad(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_cuda_reduce_grad_workspace(node, in, out);
}
static size_t ws_linear_ce(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)cx, (void)out;
    return ot_linear_ce_workspace_bytes(node, in);
}
static size_t ws_rnn(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    (void)cx;
    return ot_cuda_rnn_workspace(node, in, out);
}
static size_t ws_conv(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    if (!cx) return 0;
    size_t b = 0;
    ot_error e;
    /* cuDNN's queries use the current device: the planner's thread may not be the one
     * that opened cuda:N */
    if (cudaSetDevice(cx->device) != cudaSuccess) return 0;
    /* a failure here resurfaces with its message when the node runs */
    if (ot_cuda_conv_workspace(cx, node, in, out, &b, &e) != OT_OK) return 0;
    return b;
}

/* ops3 (issue 26): the same sizes as the CPU kernels' (kernels/xfmr_geometry.c) */
static size_t ws_rms_grad(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_rms_grad_workspace(node, &in[1].shape, ot_kernel_numel(&in[2]));
}
static size_t ws_attention(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_attn_workspace(node, in, node->op == OT_OP_ATTENTION_GRAD);
}

/* ---- the table -------------------------------------------------------------------- */

static const ot_cuda_op_row CUDA_OPS[OT_OP_COUNT] = {
#define OT_CUDA_OP(op, status, run, supports, workspace) [OT_OP_##op] = {OT_CUDA_##status, run, supports, workspace},
#include "kernels/cuda/cuda_ops.def"
#undef OT_CUDA_OP
};

const ot_cuda_op_row *ot_cuda_op_row_of(ot_op op) {
    if (op <= OT_OP_UNKNOWN || op >= OT_OP_COUNT || CUDA_OPS[op].status == OT_CUDA_MISSING) return NULL;
    return &CUDA_OPS[op];
}

ot_cuda_op_kind ot_cuda_module_op_status(ot_op op) {
    const ot_cuda_op_row *row = ot_cuda_op_row_of(op);
    if (!row) return OT_CUDA_MISSING;
    /* what the row does, not what it claims: a launcher means a kernel */
    if (row->run) return OT_CUDA_KERNEL;
    return row->status == OT_CUDA_CPU_ONLY ? OT_CUDA_CPU_ONLY : OT_CUDA_MISSING;
}

ot_status ot_cuda_check_op_table(ot_error *err) {
    for (int op = OT_OP_UNKNOWN + 1; op < (int)OT_OP_COUNT; op++)
        if (ot_cuda_module_op_status((ot_op)op) != ot_cuda_op_status((ot_op)op))
            return ot_fail(err, OT_E_INTERNAL,
                           "cuda backend: the op table disagrees with kernels/cuda/cuda_ops.def for %s (rebuild)",
                           ot_op_name((ot_op)op));
    return OT_OK;
}

bool ot_cuda_supports_node(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    const ot_cuda_op_row *row = ot_cuda_op_row_of(node->op);
    return row && row->supports(node, in, out);
}

size_t ot_cuda_node_workspace(ot_cuda_ctx *cx, const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    const ot_cuda_op_row *row = ot_cuda_op_row_of(node->op);
    return row && row->workspace ? row->workspace(cx, node, in, out) : 0;
}

size_t ot_cuda_host_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    return ot_cuda_node_workspace(NULL, node, in, out);
}
