/* cpu_lowp.h — private to kernels/cpu: running a float32 kernel on a node whose
 * float tensors are bfloat16 or float16 (cpu_lowp.c says how and why): the float32
 * copies and the kernel's own workspace come from the node's planned workspace. */
#ifndef OT_CPU_LOWP_H
#define OT_CPU_LOWP_H

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grad_kernels.h"

/* The most inputs a node run this way has. */
#define OT_CPU_LOWP_MAX_IN 8

typedef size_t (*ot_cpu_workspace_fn)(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

/* Whether any input or output 0 is bfloat16 or float16. */
bool ot_cpu_lowp_any(const ot_node *node, const ot_tensor *in, const ot_tensor *out);
/* n bfloat16 / float16 values (t) to float32 and back, rounding to nearest even
 * (kernels/half_float.h), over nt threads when n is large: the conversions of the low
 * paths and of Cast between float32 and the low dtypes. */
void ot_cpu_lowp_to_f32(ot_dtype t, const uint16_t *s, float *d, int64_t n, int nt);
void ot_cpu_lowp_from_f32(ot_dtype t, const float *s, uint16_t *d, int64_t n, int nt);
/* The same on the calling thread alone, with no OpenMP region: for short runs inside a
 * kernel's own parallel loop (BatchNorm's), where entering even a one-thread region per
 * run cost more than the conversion. */
void ot_cpu_lowp_to_f32_serial(ot_dtype t, const uint16_t *s, float *d, int64_t n);
void ot_cpu_lowp_from_f32_serial(ot_dtype t, const float *s, uint16_t *d, int64_t n);
/* bfloat16 to float32 the same way; quiet: a NaN comes out with its quiet bit set, as
 * the Cast kernel gives it (cpu_shape_ops.c). */
void ot_cpu_bf16_to_f32(const uint16_t *s, float *d, int64_t n, int nt, bool quiet);
/* float16 to float32 likewise (F16C: 16 lanes with AVX-512F, else 8 with AVX2). */
void ot_cpu_f16_to_f32(const uint16_t *s, float *d, int64_t n, int nt, bool quiet);
/* The float16 vector bodies by width, for the conversions above and their tests: the
 * widest this CPU has (16, 8, or 0: scalar only); the first elements of n converted
 * with `lanes` lanes (a multiple of it; 0 when this CPU lacks that width), the rest
 * left to the caller's scalar tail. */
int ot_cpu_f16_lanes(void);
int64_t ot_cpu_f16_to_f32_lanes(int lanes, const uint16_t *s, float *d, int64_t n, bool quiet);
int64_t ot_cpu_f32_to_f16_lanes(int lanes, const float *s, uint16_t *d, int64_t n);
/* The bfloat16 ones likewise (16 lanes with AVX-512F, 8 with AVX2; quiet as above). */
int ot_cpu_bf16_lanes(void);
int64_t ot_cpu_bf16_to_f32_lanes(int lanes, const uint16_t *s, float *d, int64_t n, bool quiet);
int64_t ot_cpu_f32_to_bf16_lanes(int lanes, const float *s, uint16_t *d, int64_t n);

/* Workspace bytes: the float32 copies of the low-precision inputs whose bit is set in
 * `reads` (bit k: input k; inputs the kernel reads for their shape only stay out) and
 * of a low-precision output 0, plus f32_workspace's bytes for the float32 view. */
size_t ot_cpu_lowp_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out, unsigned reads,
                             ot_cpu_workspace_fn f32_workspace);

/* Converts the read inputs, runs f32_kernel on the float32 view with the rest of the
 * workspace, rounds its output 0 to nearest even into out[0]. */
ot_status ot_cpu_lowp_run(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          unsigned reads, ot_cpu_kernel_fn f32_kernel, ot_error *err);

/* Conv, ConvGradInput, ConvGradWeight and ConvTranspose in float32 (their kernels
 * as they are) or with bfloat16 / float16 tensors (through the float32 kernels). */
ot_status ot_cpu_conv_any(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_conv_any_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

/* Dropout's and DropoutGrad's keep-and-scale (ot_cpu_dropout_select) on len elements
 * of dtype t (float32, bfloat16 or float16) at x into y of that dtype: float32 math on
 * the widened input, the result rounded to nearest even, so the bits are a Cast down of
 * the float32 kernel's; the mask (bytes 0 / 1) is the float32 kernel's. */
void ot_cpu_dropout_select_any(ot_dtype t, const float *u, float ratio, const void *x, float scale, void *y,
                               uint8_t *mask, int64_t len);

/* Element-wise ops with bfloat16 / float16 operands and output (float32 ones too),
 * float32 math: chunk by chunk through the float32 kernel when no operand broadcasts
 * (no workspace; the float32 kernel's bits on the rounded inputs, rounded), through
 * float32 copies in the workspace when one does. Float32 nodes run the float32
 * kernel as they are. Unary: Relu, Gelu, Tanh, ...; binary: Add, Sub, Mul, Div;
 * Clip (unary; its bounds read as they are, any float dtype); activation gradients: ReluGrad,
 * GeluGrad, ClipGrad, ... */
ot_status ot_cpu_unary_any(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_binary_any(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
ot_status ot_cpu_act_grad_any(const ot_node *, const ot_tensor *, ot_tensor *, const ot_kernel_ctx *, ot_error *);
size_t ot_cpu_elementwise_any_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out);

#endif
