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
 * what this path costs.
 *
 * Also here: the bfloat16 / float16 <-> float32 conversions every low path and Cast
 * use (AVX-512 or AVX2, bitwise half_float.h's scalar rule), the element-wise ops chunk by
 * chunk (Relu .. Gelu, Add .. Div, Clip, their gradients) and Dropout's keep-and-scale
 * on a low-precision block. */
#include "kernels/cpu/cpu_lowp.h"

#include <cpuid.h>
#include <immintrin.h>

#include "kernels/cpu/cpu_vecmath.h" /* ot_cpu_dropout_select */
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

/* The same on 8 lanes of AVX2, for CPUs without AVX-512F (before, the scalar loop:
 * tinygpt's bf16 step on a 2-core AVX2 EPYC spent half its time in it). */
__attribute__((target("avx2"))) static int64_t bf16_to_f32_avx2(const uint16_t *s, float *d, int64_t n, bool quiet) {
    const __m256i qbit = _mm256_set1_epi32(0x00400000), abs = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i))), 16);
        if (quiet) /* below 2^31 after the mask: a signed compare */
            x = _mm256_or_si256(x, _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf), qbit));
        _mm256_storeu_si256((__m256i *)(d + i), x);
    }
    return i;
}

__attribute__((target("avx2"))) static int64_t f32_to_bf16_avx2(const float *s, uint16_t *d, int64_t n) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), q = _mm256_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
        __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, half), odd), 16);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(x, 16), q), nan);
        /* every lane below 2^16: the unsigned-saturating pack keeps it */
        _mm_storeu_si128((__m128i *)(d + i), _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
    }
    return i;
}

/* ---- float16 <-> float32, 16 at a time -------------------------------------------------- */

/* F16C's conversions on 16 lanes (vcvtph2ps, vcvtps2ph with round to nearest even:
 * AVX-512F forms): exact one way, correctly rounded the other, subnormals and overflow
 * to infinity as half_float.h's rule gives them. NaNs alone differ: the hardware keeps
 * the payload's top bits and quiets a signalling NaN, the scalar rule keeps the payload
 * going up and writes the one quiet NaN going down, so NaN lanes are rewritten with the
 * scalar rule's integer result. The scalar loop (a branch per element, rintf for
 * subnormals) was what fp16 steps paid at every Cast and low-precision operand (MobileNetV2's
 * fp16 step: 3.7 s of CPU time, 1.0 s with these). A CPU without AVX-512F takes the
 * 8-lane F16C forms below, one without F16C the scalar loop. */
__attribute__((target("avx512f"))) static int64_t f16_to_f32_avx512(const uint16_t *s, float *d, int64_t n,
                                                                    bool quiet) {
    const __m512i mag = _mm512_set1_epi32(0x7fff), inf = _mm512_set1_epi32(0x7c00), sign = _mm512_set1_epi32(0x8000);
    const __m512i top = _mm512_set1_epi32(quiet ? 0x70400000 : 0x70000000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(s + i));
        __m512 f = _mm512_cvtph_ps(h);
        __m512i x = _mm512_cvtepu16_epi32(h);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, mag), inf);
        if (nan) { /* sign << 16 | (exponent 31 and payload) << 13 | the float32 exponent's top bits */
            __m512i r = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(x, sign), 16),
                                        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(x, mag), 13), top));
            f = _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(r));
        }
        _mm512_storeu_ps(d + i, f);
    }
    return i;
}

__attribute__((target("avx512f"))) static int64_t f32_to_f16_avx512(const float *s, uint16_t *d, int64_t n) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i sign = _mm512_set1_epi32(0x8000), qnan = _mm512_set1_epi32(0x7e00);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 f = _mm512_loadu_ps(s + i);
        __m256i h = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512i x = _mm512_castps_si512(f);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs), inf);
        if (nan) {
            __m512i r = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(x, 16), sign), qnan);
            h = _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(_mm512_cvtepu16_epi32(h), nan, r));
        }
        _mm256_storeu_si256((__m256i *)(d + i), h);
    }
    return i;
}

/* The same on 8 lanes with F16C and AVX2, for CPUs without AVX-512F. */
__attribute__((target("avx2,f16c"))) static int64_t f16_to_f32_f16c(const uint16_t *s, float *d, int64_t n,
                                                                    bool quiet) {
    const __m256i mag = _mm256_set1_epi32(0x7fff), inf = _mm256_set1_epi32(0x7c00), sign = _mm256_set1_epi32(0x8000);
    const __m256i top = _mm256_set1_epi32(quiet ? 0x70400000 : 0x70000000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(s + i));
        __m256 f = _mm256_cvtph_ps(h);
        __m256i x = _mm256_cvtepu16_epi32(h);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, mag), inf); /* below 2^15: a signed compare */
        if (!_mm256_testz_si256(nan, nan)) {
            __m256i r = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(x, sign), 16),
                                        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(x, mag), 13), top));
            f = _mm256_blendv_ps(f, _mm256_castsi256_ps(r), _mm256_castsi256_ps(nan));
        }
        _mm256_storeu_ps(d + i, f);
    }
    return i;
}

__attribute__((target("avx2,f16c"))) static int64_t f32_to_f16_f16c(const float *s, uint16_t *d, int64_t n) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i sign = _mm256_set1_epi32(0x8000), qnan = _mm256_set1_epi32(0x7e00);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(s + i);
        __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256i x = _mm256_castps_si256(f);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
        if (!_mm256_testz_si256(nan, nan)) {
            __m256i r = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(x, 16), sign), qnan);
            __m256i w = _mm256_blendv_epi8(_mm256_cvtepu16_epi32(h), r, nan);
            h = _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        }
        _mm_storeu_si128((__m128i *)(d + i), h);
    }
    return i;
}

static bool have_avx512(void) { return __builtin_cpu_supports("avx512f"); }
/* F16C from CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports knows no "f16c"
 * (the fuzzing build is clang's); AVX2 implies the OS saves the YMM state */
static bool have_f16c(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

int ot_cpu_f16_lanes(void) { return have_avx512() ? 16 : have_f16c() ? 8 : 0; }
int ot_cpu_bf16_lanes(void) { return have_avx512() ? 16 : __builtin_cpu_supports("avx2") ? 8 : 0; }

int64_t ot_cpu_bf16_to_f32_lanes(int lanes, const uint16_t *s, float *d, int64_t n, bool quiet) {
    if (lanes == 16 && have_avx512()) return bf16_to_f32_avx512(s, d, n, quiet);
    if (lanes == 8 && __builtin_cpu_supports("avx2")) return bf16_to_f32_avx2(s, d, n, quiet);
    return 0;
}

int64_t ot_cpu_f32_to_bf16_lanes(int lanes, const float *s, uint16_t *d, int64_t n) {
    if (lanes == 16 && have_avx512()) return f32_to_bf16_avx512(s, d, n);
    if (lanes == 8 && __builtin_cpu_supports("avx2")) return f32_to_bf16_avx2(s, d, n);
    return 0;
}

int64_t ot_cpu_f16_to_f32_lanes(int lanes, const uint16_t *s, float *d, int64_t n, bool quiet) {
    if (lanes == 16 && have_avx512()) return f16_to_f32_avx512(s, d, n, quiet);
    if (lanes == 8 && have_f16c()) return f16_to_f32_f16c(s, d, n, quiet);
    return 0;
}

int64_t ot_cpu_f32_to_f16_lanes(int lanes, const float *s, uint16_t *d, int64_t n) {
    if (lanes == 16 && have_avx512()) return f32_to_f16_avx512(s, d, n);
    if (lanes == 8 && have_f16c()) return f32_to_f16_f16c(s, d, n);
    return 0;
}

/* One thread's share: the vector body, the scalar tail. */
static void to_f32_part(ot_dtype t, const uint16_t *s, float *d, int64_t n, bool quiet) {
    int64_t i = t == OT_BF16 ? ot_cpu_bf16_to_f32_lanes(ot_cpu_bf16_lanes(), s, d, n, quiet)
                             : ot_cpu_f16_to_f32_lanes(ot_cpu_f16_lanes(), s, d, n, quiet);
    for (; i < n; i++) {
        float f = t == OT_BF16 ? ot_hf_bf16_to_f32(s[i]) : ot_hf_f16_to_f32(s[i]);
        d[i] = quiet && f != f ? ot_hf_from_bits(ot_hf_bits(f) | 0x00400000u) : f;
    }
}

static void from_f32_part(ot_dtype t, const float *s, uint16_t *d, int64_t n) {
    int64_t i = t == OT_BF16 ? ot_cpu_f32_to_bf16_lanes(ot_cpu_bf16_lanes(), s, d, n)
                             : ot_cpu_f32_to_f16_lanes(ot_cpu_f16_lanes(), s, d, n);
    if (t == OT_BF16)
        for (; i < n; i++) d[i] = ot_hf_f32_to_bf16(s[i]);
    else
        for (; i < n; i++) d[i] = ot_hf_f32_to_f16(s[i]);
}

/* Blocks of this many elements per thread task: a multiple of 16, so the split does
 * not change which elements take the vector path (it could not change bits anyway:
 * each element's conversion is exact integer arithmetic or one correctly rounded
 * conversion). */
#define CONV_BLOCK 16384

static void to_f32(ot_dtype t, const uint16_t *s, float *d, int64_t n, int nt, bool quiet) {
    bool par = n >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
    int64_t blocks = (n + CONV_BLOCK - 1) / CONV_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t o = b * CONV_BLOCK, len = n - o < CONV_BLOCK ? n - o : CONV_BLOCK;
        to_f32_part(t, s + o, d + o, len, quiet);
    }
}

void ot_cpu_bf16_to_f32(const uint16_t *s, float *d, int64_t n, int nt, bool quiet) {
    to_f32(OT_BF16, s, d, n, nt, quiet);
}
void ot_cpu_f16_to_f32(const uint16_t *s, float *d, int64_t n, int nt, bool quiet) {
    to_f32(OT_F16, s, d, n, nt, quiet);
}
void ot_cpu_lowp_to_f32(ot_dtype t, const uint16_t *s, float *d, int64_t n, int nt) { to_f32(t, s, d, n, nt, false); }

void ot_cpu_lowp_from_f32(ot_dtype t, const float *s, uint16_t *d, int64_t n, int nt) {
    bool par = n >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
    int64_t blocks = (n + CONV_BLOCK - 1) / CONV_BLOCK;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t o = b * CONV_BLOCK, len = n - o < CONV_BLOCK ? n - o : CONV_BLOCK;
        from_f32_part(t, s + o, d + o, len);
    }
}

void ot_cpu_lowp_to_f32_serial(ot_dtype t, const uint16_t *s, float *d, int64_t n) {
    to_f32_part(t, s, d, n, false);
}

void ot_cpu_lowp_from_f32_serial(ot_dtype t, const float *s, uint16_t *d, int64_t n) {
    from_f32_part(t, s, d, n);
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

/* The operands that run element by element: Clip's and ClipGrad's bounds (optional
 * scalar inputs, any float dtype) go to the float32 kernel as they are, which reads
 * them as one value each; every input of the other ops is an operand. */
static int elem_operands(const ot_node *node) {
    int n = node->op == OT_OP_CLIP ? 1 : node->op == OT_OP_CLIP_GRAD ? 2 : node->n_inputs;
    return n < node->n_inputs ? n : node->n_inputs;
}

static bool same_count(const ot_node *node, const ot_tensor *in, const ot_tensor *out) {
    int64_t n = ot_kernel_numel(&out[0]);
    int ne = elem_operands(node);
    for (int k = 0; k < ne; k++)
        if (!in[k].data || ot_kernel_numel(&in[k]) != n) return false;
    return ne <= LOWP_CHUNK_IN && node->n_inputs <= OT_CPU_LOWP_MAX_IN && node->n_outputs == 1;
}

/* Chunk c of n elements through f32: low-precision operands converted on the stack,
 * float32 ones read in place, a low-precision output rounded back. */
static ot_status run_chunk(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *one,
                           ot_cpu_kernel_fn f32, int64_t c, int64_t n, ot_error *err) {
    float buf[LOWP_CHUNK_IN][LOWP_CHUNK], ybuf[LOWP_CHUNK];
    int64_t off = c * LOWP_CHUNK, len = n - off < LOWP_CHUNK ? n - off : LOWP_CHUNK;
    ot_tensor ci[OT_CPU_LOWP_MAX_IN], co[1];
    int ne = elem_operands(node);
    for (int k = 0; k < node->n_inputs; k++) {
        ci[k] = in[k];
        if (k >= ne) continue;
        ci[k].dtype = OT_F32;
        ci[k].shape = ot_shape_make(1, &len);
        ci[k].nbytes = (size_t)len * sizeof(float);
        if (is_lowp(in[k].dtype)) {
            ot_cpu_lowp_to_f32_serial(in[k].dtype, (const uint16_t *)in[k].data + off, buf[k], len);
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
    if (st == OT_OK && is_lowp(out[0].dtype))
        ot_cpu_lowp_from_f32_serial(out[0].dtype, ybuf, (uint16_t *)out[0].data + off, len);
    return st;
}

/* Element-wise through f32: chunk by chunk when every operand has the output's count
 * (no workspace; chunks spread over the threads, each on one: the same bits on any
 * thread count), else on whole float32 copies in the workspace (broadcasting). */
static ot_status elementwise_any(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                                 ot_cpu_kernel_fn f32, ot_error *err) {
    if (!ot_cpu_lowp_any(node, in, out)) return f32(node, in, out, ctx, err);
    if (!same_count(node, in, out)) return ot_cpu_lowp_run(node, in, out, ctx, 0x7u, f32, err);
    for (int k = 0; k < elem_operands(node); k++)
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
    int ne = elem_operands(node);
    bool same = ne <= LOWP_CHUNK_IN && node->n_inputs <= OT_CPU_LOWP_MAX_IN && node->n_outputs == 1;
    for (int k = 0; k < ne; k++)
        if (ot_kernel_numel(&in[k]) != n) same = false;
    return same ? 0 : ot_cpu_lowp_workspace(node, in, out, 0x7u, NULL);
}

/* ---- Dropout's keep-and-scale ------------------------------------------------------------ */

void ot_cpu_dropout_select_any(ot_dtype t, const float *u, float ratio, const void *x, float scale, void *y,
                               uint8_t *mask, int64_t len) {
    if (!is_lowp(t)) {
        ot_cpu_dropout_select(u, ratio, x, scale, y, mask, len);
        return;
    }
    /* float32 on the stack, 256 at a time: the float32 select's bits on the widened
     * input, rounded as a Cast down of its float32 output would round them */
    for (int64_t o = 0; o < len; o += 256) {
        int64_t m = len - o < 256 ? len - o : 256;
        float xb[256], yb[256];
        ot_cpu_lowp_to_f32_serial(t, (const uint16_t *)x + o, xb, m);
        ot_cpu_dropout_select(u + o, ratio, xb, scale, yb, mask ? mask + o : NULL, m);
        ot_cpu_lowp_from_f32_serial(t, yb, (uint16_t *)y + o, m);
    }
}
