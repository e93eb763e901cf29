/* conv_dnnl.h — private to kernels/cpu: convolutions run on oneDNN (libdnnl, the
 * library PyTorch's CPU convolutions use) where it beats our own kernels, in its own
 * blocked layouts with reorders from and to our NCHW tensors. cpu_conv.c and
 * grad_conv.c ask ot_dnnl_conv_run first and run their own kernel when it did not.
 * Which convolutions go to oneDNN, and why, is in conv_dnnl.c's header. Built only
 * with OT_HAVE_DNNL (CMake option OT_WITH_DNNL, Debian libdnnl-dev); without it
 * nothing goes to oneDNN and the inline versions below say so. */
#ifndef OT_CONV_DNNL_H
#define OT_CONV_DNNL_H

#include "kernels/cpu/conv_cols.h"

typedef enum ot_dnnl_dir {
    OT_DNNL_FWD,         /* Conv: a = X, b = W, out = Y (bias may be NULL) */
    OT_DNNL_BWD_DATA,    /* ConvGradInput: a = dY, b = W, out = dX */
    OT_DNNL_BWD_WEIGHTS, /* ConvGradWeight: a = dY, b = X, out = dW */
} ot_dnnl_dir;

/* The dtypes of a bfloat16 convolution's tensors in oneDNN's terms for the direction:
 * x, w, y are (X, W, Y) whatever the direction reads or writes (ConvGradInput writes
 * x, ConvGradWeight w); bias is OT_UNDEFINED without one. The two the direction reads
 * must be bfloat16, the one it writes and the bias bfloat16 or float32. */
typedef struct ot_dnnl_lowp_dtypes {
    ot_dtype x, w, y, bias;
} ot_dnnl_lowp_dtypes;

#ifdef OT_HAVE_DNNL
/* Workspace bytes the oneDNN path needs for this convolution (blocked copies of the
 * operands and oneDNN's scratchpad); 0 when the rule does not pick oneDNN. */
size_t ot_dnnl_conv_workspace(const ot_conv3 *p, ot_dnnl_dir dir);
/* Runs the convolution on oneDNN when the rule picks it for (p, ctx->n_threads) and
 * the workspace holds what it needs (*ran = true), else leaves out alone (*ran =
 * false). The primitives are kept in *ctx->node_state when there is a slot, else
 * built and dropped in this call. */
ot_status ot_dnnl_conv_run(const ot_node *node, const ot_conv3 *p, ot_dnnl_dir dir, const ot_kernel_ctx *ctx,
                           const float *a, const float *b, const float *bias, float *out, bool *ran, ot_error *err);
/* The bfloat16 path (conv_dnnl.c, "bfloat16"): whether oneDNN has a kernel other than
 * its reference loops for p in these dtypes on this CPU, and the workspace bytes it
 * needs (blocked copies and scratchpad, the larger of one thread and the core count). */
bool ot_dnnl_conv_lowp_workspace(const ot_conv3 *p, ot_dnnl_dir dir, const ot_dnnl_lowp_dtypes *d, size_t *bytes);
/* Runs it (*ran = true) on the same terms as ot_dnnl_conv_run; a, b, bias and out are
 * the direction's operands as for ot_dnnl_conv_run, in the dtypes of d. */
ot_status ot_dnnl_conv_lowp_run(const ot_node *node, const ot_conv3 *p, ot_dnnl_dir dir, const ot_kernel_ctx *ctx,
                                const ot_dnnl_lowp_dtypes *d, const void *a, const void *b, const void *bias,
                                void *out, bool *ran, ot_error *err);
/* Frees a state ot_dnnl_conv_run kept in a node slot (the CPU backend's free_node_state). */
void ot_dnnl_state_free(void *state);
#else
static inline size_t ot_dnnl_conv_workspace(const ot_conv3 *p, ot_dnnl_dir dir) {
    (void)p, (void)dir;
    return 0;
}
static inline ot_status ot_dnnl_conv_run(const ot_node *node, const ot_conv3 *p, ot_dnnl_dir dir,
                                         const ot_kernel_ctx *ctx, const float *a, const float *b,
                                         const float *bias, float *out, bool *ran, ot_error *err) {
    (void)node, (void)p, (void)dir, (void)ctx, (void)a, (void)b, (void)bias, (void)out, (void)err;
    *ran = false;
    return OT_OK;
}
static inline void ot_dnnl_state_free(void *state) { (void)state; }
static inline bool ot_dnnl_conv_lowp_workspace(const ot_conv3 *p, ot_dnnl_dir dir, const ot_dnnl_lowp_dtypes *d,
                                               size_t *bytes) {
    (void)p, (void)dir, (void)d;
    *bytes = 0;
    return false;
}
static inline ot_status ot_dnnl_conv_lowp_run(const ot_node *node, const ot_conv3 *p, ot_dnnl_dir dir,
                                              const ot_kernel_ctx *ctx, const ot_dnnl_lowp_dtypes *d, const void *a,
                                              const void *b, const void *bias, void *out, bool *ran, ot_error *err) {
    (void)node, (void)p, (void)dir, (void)ctx, (void)d, (void)a, (void)b, (void)bias, (void)out, (void)err;
    *ran = false;
    return OT_OK;
}
#endif

#endif
