/* conv_cols.h — private to kernels/cpu: what the Conv forward (cpu_conv.c) and its
 * gradients (grad_conv.c) share: the convolution as a 3-D window (1-D and 2-D lifted
 * with leading sizes of 1), im2col / col2im with a row stride so that several images
 * sit side by side in one column matrix, and how many images one GEMM takes.
 *
 * Batching (issue 14): a GEMM per image multiplies W (Cout x Cin*K) by a column matrix
 * only L = output-volume wide; late ResNet layers have L = 4, so OpenBLAS spends its
 * time packing W again for every image. ot_conv_batch picks nb images per GEMM, so the
 * column matrix is nb * L wide, up to OT_CONV_BATCH_COLS columns and within
 * OT_CONV_BATCH_BYTES of workspace (one image when one is already wide enough, the
 * per-image path, or when one image alone is over the bytes). The workspace functions
 * and the kernels call the same ot_conv_batch, so the planner's workspace is exactly
 * what the kernel uses. */
#ifndef OT_CONV_COLS_H
#define OT_CONV_COLS_H

#include "kernels/cpu/cpu_common.h"
#include "kernels/pool_geometry.h"

/* Output columns one GEMM aims at: past this, OpenBLAS's packing of W is a small
 * share of the multiply (bench_conv.py measured the step). */
#define OT_CONV_BATCH_COLS 1024
/* Workspace bound of a batched GEMM's buffers (column matrix and the NC-order copies). */
#define OT_CONV_BATCH_BYTES ((size_t)32 << 20)

typedef struct ot_conv3 {
    ot_window3 sp; /* the spatial window as 3-D (kernels/pool_geometry.h) */
    int64_t N, Cin, Cout, G, Cig, Cog, K, L, S; /* K = kernel volume, L = output volume, S = input volume */
} ot_conv3;

/* From the shapes of X, W and Y (or dY): OT_E_SHAPE when ranks or channels disagree. */
ot_status ot_conv3_init(ot_conv3 *p, const ot_node *node, const ot_shape *x, const ot_shape *w, const ot_shape *y,
                        ot_error *err);
/* 1x1 kernel, stride 1, no padding: the column matrix is X itself. */
bool ot_conv3_pointwise(const ot_conv3 *p);
/* Images per GEMM when each column of the batched GEMM needs `rows` floats of
 * workspace: 1 means the per-image path. */
int64_t ot_conv_batch(const ot_conv3 *p, int64_t rows);

/* col[(ci*K + kk) * ld + l] = x[ci] at output l's window position kk (0 in the
 * padding), ci < Cig; x points at the group's first channel of one image. nt threads
 * (1: serial). */
void ot_conv3_im2col(const ot_conv3 *p, const float *x, float *col, int64_t ld, int nt);
/* ot_conv3_im2col of nimg images at once, image j (at x + j * xstride) into the
 * columns from j * L on: one parallel loop over every image's rows instead of one
 * per image (late ResNet layers: 4 outputs per row). */
void ot_conv3_im2col_images(const ot_conv3 *p, const float *x, int64_t xstride, int64_t nimg, float *col,
                            int64_t ld, int nt);
/* dx[ci] += the column rows of channel ci scattered back (taps in order), one thread
 * per channel; the inverse layout of ot_conv3_im2col. */
void ot_conv3_col2im(const ot_conv3 *p, const float *col, int64_t ld, float *dx, int nt);

/* Channels [c0, c0 + nc) of images n0 .. n0 + nb of an NC(L) tensor with C channels,
 * to and from a (nc x nb*L) matrix whose row c holds channel c0 + c of every image in
 * turn. */
void ot_conv_nc_to_rows(const float *t, int64_t C, int64_t L, int64_t n0, int64_t nb, int64_t c0, int64_t nc,
                        float *rows);
void ot_conv_rows_to_nc(const float *rows, int64_t C, int64_t L, int64_t n0, int64_t nb, int64_t c0, int64_t nc,
                        float *t);

/* The valid outputs of one tap per spatial dim (the rest read padding), and the input
 * index of output 0. */
typedef struct ot_conv_tap {
    int64_t a[3], b[3], base[3];
} ot_conv_tap;
void ot_conv_tap_init(const ot_conv3 *p, int64_t kk, ot_conv_tap *t);
/* The taps of one call, computed once: a tap's ranges cost more than copying a short
 * column row (late ResNet layers: 4 outputs per row) or scattering a small depthwise
 * plane; computed per tap they were 5% of a ResNet-18 / MobileNetV2 step. Kernels of
 * more than OT_CONV_TAPS_MAX taps get NULL and compute each tap where it is used
 * (ot_conv_tap_of). table holds OT_CONV_TAPS_MAX taps. */
#define OT_CONV_TAPS_MAX 64
const ot_conv_tap *ot_conv_taps(const ot_conv3 *p, ot_conv_tap *table);
/* Tap kk: from taps (ot_conv_taps), or, where that is NULL, computed into *own. */
static inline const ot_conv_tap *ot_conv_tap_of(const ot_conv3 *p, const ot_conv_tap *taps, int64_t kk,
                                                ot_conv_tap *own) {
    if (taps) return &taps[kk];
    ot_conv_tap_init(p, kk, own);
    return own;
}
/* xc += wv * cr (or cr, scale false) at the valid positions of tap t. */
void ot_conv_scatter_tap(const ot_conv3 *p, const ot_conv_tap *t, const float *cr, float wv, bool scale, float *xc);

/* Depthwise convs with 8 channels side by side (grad_conv.c, cpu_conv.c): each
 * image's planes copied interleaved ([position][lane]) so that a vector's lanes are
 * 8 channels at one position; each lane then does the one-channel loop's operations
 * in its order (same bits). Planes of up to OT_CONV_LANES_MAX floats (two interleaved
 * copies on a thread's stack: 64 KiB). Compiled for x86-64-v3 too (-std=c11 keeps
 * -ffp-contract=off: no FMA is formed). */
#define OT_CONV_LANES 8
#define OT_CONV_LANES_MAX 1024
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OT_CONV_LANES_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OT_CONV_LANES_CLONES
#endif
typedef float ot_v4f __attribute__((vector_size(16)));

/* acc[i] += w * x[i] for i < n, 4 lanes per step (-O2 at the x86-64 baseline leaves
 * the plain loop scalar: acc and x might overlap; they never do here). Each lane is
 * the plain loop's multiply, then its add, so the same bits. The one axpy of the conv
 * kernels: im2col-free depthwise forward, the padded depthwise dX, col2im's taps. */
static inline void ot_conv_axpy4(float *acc, const float *x, float w, int64_t n) {
    const ot_v4f w4 = {w, w, w, w};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        ot_v4f a, b;
        memcpy(&a, acc + i, sizeof a);
        memcpy(&b, x + i, sizeof b);
        a += w4 * b;
        memcpy(acc + i, &a, sizeof a);
    }
    for (; i < n; i++) acc[i] += w * x[i];
}

typedef float ot_v8f __attribute__((vector_size(32)));
/* 8 floats from ptr as one vector (a macro: a function returning a 32-byte vector
 * would change the ABI between the clones). */
#define ot_conv_load8(ptr) (__extension__({ ot_v8f v_; memcpy(&v_, (ptr), sizeof v_); v_; }))
/* t[l * 8 + j] = src[j * stride + l] for channels j < nc and l < len. */
void ot_conv_interleave(const float *src, int64_t stride, int64_t nc, int64_t len, float *t);
/* The inverse: dst[j * stride + l] = t[l * 8 + j] (+ add[j] where add is not NULL). */
void ot_conv_deinterleave(const float *t, int64_t nc, int64_t len, const float *add, float *dst, int64_t stride);
/* Every tap kk in order adds w[kk] (lane j: wl[j * K + kk]) times src at one end of
 * the tap to dst at the other, over the tap's valid outputs; `forward`: dst at the
 * outputs, src at the inputs (Conv), else the reverse (ConvGradInput). Interleaved
 * planes; lanes past nc get weight 0. */
void ot_conv_lanes_taps(const ot_conv3 *p, const ot_conv_tap *taps, const float *wl, int64_t nc, bool forward,
                        const float *src, float *dst);

#endif
