/* cpu_lowp.c — bfloat16 / float16 through a float32 kernel (issue 27): the inputs
 * the kernel reads are converted to float32 in the node's planned workspace, the
 * float32 kernel runs on those copies (with the rest of the workspace as its own),
 * and its float32 output is rounded to nearest even into the node's output. The
 * convolutions use it (Conv, ConvGradInput, ConvGradWeight, ConvTranspose), and the
 * element-wise ops where an operand broadcasts (the others go chunk by chunk, below):
 * float32 sums as in every low-precision kernel, the float32 kernel's own bits on
 * the rounded inputs, and the cost of the two conversions, which are memory-bound
 * O(N C H W) against the convolution's O(N C H W K C'). A native bfloat16 oneDNN
 * convolution would save them and the float32 copies; bench/results_lowp.md measures
 * what this path costs. */
#include "kernels/cpu/cpu_lowp.h"

#include <immintrin.h>

#include "kernels/half_float.h"

#define LOWP_ALIGN 64

static bool is_lowp(ot_dtype t) { return t == OT_BF16 || t == OT_F16; }
static size_t align_up(size_t n) { return (n + LOWP_ALIGN - 1) / LOWP_ALIGN * LOWP_ALIGN; }

bool ot_cpu_lowp_any(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    for (int k = 0; k < node->n_inputs; k++)
        if (is_lowp(in[k].dtype)) return true;
    return node->n_outputs > 0 && is_lowp(out[0].dtype);
}

/* The float32 view of the node's tensors: every low-precision dtype made float32
 * (data pointers left as they are: run() points the read ones at their copies). */
static void f32_view(const ot_node *node, const ot_tensor *in, const ot_tensor *out, ot_tensor *in2, ot_tensor *out2) {
    for (int k = 0; k < node->n_inputs; k++) {
        in2[k] = in[k];
        if (is_lowp(in[k].dtype)) {
            in2[k].dtype = OT_F32;
            in2[k].nbytes = (size_t)ot_kernel_numel(&in[k]) * sizeof(float);
        }
    }
    out2[0] = out[0];
    if (is_lowp(out[0].dtype)) {
        out2[0].dtype = OT_F32;
        out2[0].nbytes = (size_t)ot_kernel_numel(&out[0]) * sizeof(float);
    }
}

/* Bytes of the copies: each low-precision input in `reads`, then a low-precision
 * output (from dtypes and shapes only: workspace queries see no data). */
static size_t copies_bytes(const ot_node *node, const ot_tensor *in, const ot_tensor *out, unsigned reads) {
    size_t n = 0;
    for (int k = 0; k < node->n_inputs && k < 16; k++)
        if ((reads >> k & 1u) && is_lowp(in[k].dtype)) n += align_up((size_t)ot_kernel_numel(&in[k]) * sizeof(float));
    if (is_lowp(out[0].dtype)) n += align_up((size_t)ot_kernel_numel(&out[0]) * sizeof(float));
    return n;
}

size_t ot_cpu_lowp_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out, unsigned reads,
                             ot_cpu_workspace_fn f32_workspace) {
    if (node->n_inputs > OT_CPU_LOWP_MAX_IN || node->n_outputs < 1) return 0;
    ot_tensor in2[OT_CPU_LOWP_MAX_IN], out2[1];
    f32_view(node, in, out, in2, out2);
    size_t inner = f32_workspace ? f32_workspace(node, in2, out2) : 0;
    return copies_bytes(node, in, out, reads) + inner;
}

/* ---- bfloat16 <-> float32, 16 at a time ----------------------------------------------- */

/* The conversions of half_float.h on 16 lanes of AVX-512F, the same integer operations
 * per lane (a widening shift one way; the nearest-even add, the shift and the quiet-NaN
 * case the other), so every bit is the scalar loop's. Not vcvtneps2bf16 of AVX512-BF16:
 * it flushes subnormal inputs to zero, which the scalar rule (and the CUDA Cast) keeps.
 * They are memory-bound; the scalar loop with its NaN branch is not, and ran at about
 * a tenth of the memory's speed (GPT-2's [50257, 768] embedding: 0.3 s per cast). */
__attribute__((target("avx512f"))) static int64_t bf16_to_f32_avx512(const uint16_t *s, float *d, int64_t n,
                                                                     bool quiet) {
    const __m512i qbit = _mm512_set1_epi32(0x00400000), abs = _mm512_set1_epi32(0x7fffffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i))), 16);
        if (quiet) { /* a NaN comes out with its quiet bit set (the Cast's rule) */
            __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs), inf);
            x = _mm512_mask_or_epi32(x, nan, x, qbit);
        }
        _mm512_storeu_si512((void *)(d + i), x);
    }
    return i;
}

__attribute__((target("avx512f"))) static int64_t f32_to_bf16_avx512(const float *s, uint16_t *d, int64_t n) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), q = _mm512_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_loadu_si512((const void *)(s + i));
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs), inf);
        __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, half), odd), 16);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), q);
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(r));
    }
    return i;
}

static bool have_avx512(void) { return __builtin_cpu_supports("avx512f"); }

/* One thread's share: the vector body, the scalar tail. */
static void bf16_to_f32_part(const uint16_t *s, float *d, int64_t n, bool quiet, bool vec) {
    int64_t i = vec ? bf16_to_f32_avx512(s, d, n, quiet) : 0;
    for (; i < n; i++) {
        float f = ot_hf_bf16_to_f32(s[i]);
        d[i] = quiet && f != f ? ot_hf_from_bits(ot_hf_bits(f) | 0x00400000u) : f;
    }
}

static void f32_to_bf16_part(const float *s, uint16_t *d, int64_t n, bool vec) {
    int64_t i = vec ? f32_to_bf16_avx512(s, d, n) : 0;
    for (; i < n; i++) d[i] = ot_hf_f32_to_bf16(s[i]);
}

/* Blocks of this many elements per thread task: a multiple of 16, so the split does
 * not change which elements take the vector path (it could not change bits anyway:
 * each element's conversion is exact integer arithmetic). */
#define CONV_BLOCK 16384

void ot_cpu_bf16_to_f32(const uint16_t *s, float *d, int64_t n, int nt, bool quiet) {
    bool vec = have_avx512(), par = n >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
    int64_t blocks = (n + CONV_BLOCK - 1) / CONV_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t o = b * CONV_BLOCK, len = n - o < CONV_BLOCK ? n - o : CONV_BLOCK;
        bf16_to_f32_part(s + o, d + o, len, quiet, vec);
    }
}

static void f32_to_bf16(const float *s, uint16_t *d, int64_t n, int nt) {
    bool vec = have_avx512(), par = n >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
    int64_t blocks = (n + CONV_BLOCK - 1) / CONV_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t o = b * CONV_BLOCK, len = n - o < CONV_BLOCK ? n - o : CONV_BLOCK;
        f32_to_bf16_part(s + o, d + o, len, vec);
    }
}

void ot_cpu_lowp_to_f32(ot_dtype t, const uint16_t *s, float *d, int64_t n, int nt) {
    if (t == OT_BF16) {
        ot_cpu_bf16_to_f32(s, d, n, nt, false);
        return;
    }
    bool par = n >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t i = 0; i < n; i++) d[i] = ot_hf_f16_to_f32(s[i]);
}

void ot_cpu_lowp_from_f32(ot_dtype t, const float *s, uint16_t *d, int64_t n, int nt) {
    if (t == OT_BF16) {
        f32_to_bf16(s, d, n, nt);
        return;
    }
    bool par = n >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t i = 0; i < n; i++) d[i] = ot_hf_f32_to_f16(s[i]);
}

void ot_cpu_lowp_to_f32_serial(ot_dtype t, const uint16_t *s, float *d, int64_t n) {
    if (t == OT_BF16) {
        bf16_to_f32_part(s, d, n, false, have_avx512());
        return;
    }
    for (int64_t i = 0; i < n; i++) d[i] = ot_hf_f16_to_f32(s[i]);
}

void ot_cpu_lowp_from_f32_serial(ot_dtype t, const float *s, uint16_t *d, int64_t n) {
    if (t == OT_BF16) {
        f32_to_bf16_part(s, d, n, have_avx512());
        return;
    }
    for (int64_t i = 0; i < n; i++) d[i] = ot_hf_f32_to_f16(s[i]);
}

ot_status ot_cpu_lowp_run(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          unsigned reads, ot_cpu_kernel_fn f32_kernel, ot_error *err) {
    if (node->n_inputs > OT_CPU_LOWP_MAX_IN || node->n_outputs != 1)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): no low-precision path for %d inputs / %d outputs",
                       node->name, node->op_type, node->n_inputs, node->n_outputs);
    ot_tensor in2[OT_CPU_LOWP_MAX_IN], out2[1];
    f32_view(node, in, out, in2, out2);
    size_t copies = copies_bytes(node, in, out, reads);
    if (copies > 0 && (!ctx->workspace || ctx->workspace_bytes < copies))
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): its float32 copies need %zu bytes of workspace, given %zu",
                       node->name, node->op_type, copies, ctx->workspace ? ctx->workspace_bytes : (size_t)0);
    int nt = ot_cpu_threads(ctx);
    char *p = ctx->workspace;
    for (int k = 0; k < node->n_inputs && k < 16; k++)
        if ((reads >> k & 1u) && in[k].data && is_lowp(in[k].dtype)) {
            ot_cpu_lowp_to_f32(in[k].dtype, in[k].data, (float *)p, ot_kernel_numel(&in[k]), nt);
            in2[k].data = p;
            p += align_up(in2[k].nbytes);
        }
    if (is_lowp(out[0].dtype)) {
        out2[0].data = p;
        p += align_up(out2[0].nbytes);
    }
    ot_kernel_ctx inner = *ctx;
    inner.workspace = copies < ctx->workspace_bytes ? p : NULL;
    inner.workspace_bytes = ctx->workspace_bytes - copies;
    ot_status st = f32_kernel(node, in2, out2, &inner, err);
    if (st == OT_OK && is_lowp(out[0].dtype) && out[0].data)
        ot_cpu_lowp_from_f32(out[0].dtype, out2[0].data, out[0].data, ot_kernel_numel(&out[0]), nt);
    return st;
}

/* ---- the convolutions ----------------------------------------------------------------- */

typedef struct conv_row {
    ot_cpu_kernel_fn run;
    ot_cpu_workspace_fn workspace;
    unsigned reads; /* ConvGradInput's X and ConvGradWeight's W give a shape only */
} conv_row;

static conv_row conv_row_of(ot_op op) {
    switch (op) {
    case OT_OP_CONV: return (conv_row){ot_cpu_conv, ot_cpu_conv_workspace, 0x7u};
    case OT_OP_CONV_GRAD_INPUT: return (conv_row){ot_cpu_conv_grad_input, ot_cpu_conv_grad_workspace, 0x3u};
    case OT_OP_CONV_GRAD_WEIGHT: return (conv_row){ot_cpu_conv_grad_weight, ot_cpu_conv_grad_workspace, 0x3u};
    default: return (conv_row){ot_cpu_conv_transpose, ot_cpu_conv_grad_workspace, 0x7u};
    }
}

ot_status ot_cpu_conv_any(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    conv_row r = conv_row_of(node->op);
    if (!ot_cpu_lowp_any(node, in, out)) return r.run(node, in, out, ctx, err);
    return ot_cpu_lowp_run(node, in, out, ctx, r.reads, r.run, err);
}

size_t ot_cpu_conv_any_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    conv_row r = conv_row_of(node->op);
    if (!ot_cpu_lowp_any(node, in, out)) return r.workspace(node, in, out);
    return ot_cpu_lowp_workspace(node, in, out, r.reads, r.workspace);
}

/* ---- element-wise ops ------------------------------------------------------------------ */

/* Elements per chunk: a multiple of every vector width of the float32 kernels, so each
 * element takes the same (vector or scalar tail) path as in one call over the whole
 * tensor; 16 KiB of float32 per operand, on the stack of the thread that runs it. */
#define LOWP_CHUNK 4096
#define LOWP_CHUNK_IN 3

static bool same_count(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    int64_t n = ot_kernel_numel(&out[0]);
    for (int k = 0; k < node->n_inputs; k++)
        if (!in[k].data || ot_kernel_numel(&in[k]) != n) return false;
    return node->n_inputs <= LOWP_CHUNK_IN && node->n_outputs == 1;
}

/* Chunk c of n elements through f32: low-precision operands converted on the stack,
 * float32 ones read in place, a low-precision output rounded back. */
static ot_status run_chunk(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *one,
                           ot_cpu_kernel_fn f32, int64_t c, int64_t n, ot_error *err) {
    float buf[LOWP_CHUNK_IN][LOWP_CHUNK], ybuf[LOWP_CHUNK];
    int64_t off = c * LOWP_CHUNK, len = n - off < LOWP_CHUNK ? n - off : LOWP_CHUNK;
    ot_tensor ci[LOWP_CHUNK_IN], co[1];
    for (int k = 0; k < node->n_inputs; k++) {
        ci[k] = in[k];
        ci[k].dtype = OT_F32;
        ci[k].shape = ot_shape_make(1, &len);
        ci[k].nbytes = (size_t)len * sizeof(float);
        if (is_lowp(in[k].dtype)) {
            ot_cpu_lowp_to_f32(in[k].dtype, (const uint16_t *)in[k].data + off, buf[k], len, 1);
            ci[k].data = buf[k];
        } else {
            ci[k].data = (float *)in[k].data + off;
        }
    }
    co[0] = out[0];
    co[0].dtype = OT_F32;
    co[0].shape = ot_shape_make(1, &len);
    co[0].nbytes = (size_t)len * sizeof(float);
    co[0].data = is_lowp(out[0].dtype) ? ybuf : (float *)out[0].data + off;
    ot_status st = f32(node, ci, co, one, err);
    if (st == OT_OK && is_lowp(out[0].dtype)) ot_cpu_lowp_from_f32(out[0].dtype, ybuf, (uint16_t *)out[0].data + off, len, 1);
    return st;
}

/* Element-wise through f32: chunk by chunk when every operand has the output's count
 * (no workspace; chunks spread over the threads, each on one: the same bits on any
 * thread count), else on whole float32 copies in the workspace (broadcasting). */
static ot_status elementwise_any(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                 ot_cpu_kernel_fn f32, ot_error *err) {
    if (!ot_cpu_lowp_any(node, in, out)) return f32(node, in, out, ctx, err);
    if (!same_count(node, in, out)) return ot_cpu_lowp_run(node, in, out, ctx, 0x7u, f32, err);
    for (int k = 0; k < node->n_inputs; k++)
        if (in[k].dtype != OT_F32 && !is_lowp(in[k].dtype)) return ot_cpu_bad_dtype(node, "an input", in[k].dtype, err);
    if (out[0].dtype != OT_F32 && !is_lowp(out[0].dtype)) return ot_cpu_bad_dtype(node, "output", out[0].dtype, err);
    int64_t n = ot_kernel_numel(&out[0]);
    if (n == 0) return OT_OK;
    ot_kernel_ctx one = *ctx;
    one.n_threads = 1;
    one.workspace = NULL;
    one.workspace_bytes = 0;
    /* the first chunk alone: any error (a shape, a dtype) is every chunk's */
    ot_status st = run_chunk(node, in, out, &one, f32, 0, n, err);
    if (st) return st;
    int64_t chunks = (n + LOWP_CHUNK - 1) / LOWP_CHUNK;
    int nt = ot_cpu_threads(ctx);
    bool par = n >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t c = 1; c < chunks; c++) run_chunk(node, in, out, &one, f32, c, n, NULL);
    return OT_OK;
}

ot_status ot_cpu_unary_any(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    return elementwise_any(node, in, out, ctx, ot_cpu_unary, err);
}

ot_status ot_cpu_binary_any(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                            ot_error *err) {
    return elementwise_any(node, in, out, ctx, ot_cpu_binary, err);
}

ot_status ot_cpu_act_grad_any(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                              ot_error *err) {
    return elementwise_any(node, in, out, ctx, ot_cpu_act_grad, err);
}

size_t ot_cpu_elementwise_any_workspace(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    if (!ot_cpu_lowp_any(node, in, out) || node->n_outputs < 1) return 0;
    /* workspace queries see no data: counts decide */
    int64_t n = ot_kernel_numel(&out[0]);
    bool same = node->n_inputs <= LOWP_CHUNK_IN && node->n_outputs == 1;
    for (int k = 0; k < node->n_inputs; k++)
        if (ot_kernel_numel(&in[k]) != n) same = false;
    return same ? 0 : ot_cpu_lowp_workspace(node, in, out, 0x7u, NULL);
}
