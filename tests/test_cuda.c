/* test_cuda.c — the CUDA backend against the CPU backend: per op, forward and
 * backward on random inputs (within 1e-5 relative, 1e-4 for reductions and
 * convolutions; Dropout masks bitwise), and end to end (loss and every parameter
 * gradient of each sample model, within 1e-4). Backend selection by name and the
 * loading of the CUDA module (libonnxtrain_cuda.so, through kernels/backend_select.h;
 * this test links no CUDA library) are tested everywhere, and so are the host-side
 * parts of the module, the pointwise element code included (its host mode; issue 27:
 * its bfloat16 / float16 paths against the CPU's float32 kernels on the same values,
 * rounded, bit for bit). In a
 * build with CUDA a module that cannot be loaded fails the test; on a machine without
 * a usable GPU the GPU tests are skipped with "no CUDA GPU found (<reason>): skipping". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "importer/importer.h"
#include "kernels/backend_select.h"
#include "exec/executor.h"
#include "train/optim.h"
#include "train/train.h"
#include "remat/remat.h"
#include "test_kernels_cpu_util.h"
#ifdef OT_HAVE_CUDA
#include "kernels/cuda/cuda_module.h" /* the module's table: host-side hooks */
#include "kernels/cpu/cpu_common.h" /* ot_f32_to_f16, ot_f32_to_bf16 */
#include "exec/rng.h"
#include "kernels/kernel.h"
#endif

/* ---- backend selection (no GPU needed) --------------------------------------------- */

static void test_select_names(void **state) {
    (void)state;
    ot_error e = {0};
    ot_backend *be = ot_backend_new_by_name("cpu", 1, &e);
    assert_non_null(be);
    assert_string_equal(be->name, "cpu");
    ot_backend_free(be);
    const char *bad[] = {"tpu", "cuda:", "cuda:x", "cuda:-1", "cuda0", "cudax"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        assert_null(ot_backend_new_by_name(bad[i], 1, &e));
        assert_int_equal(e.code, OT_E_USAGE);
        assert_non_null(strstr(e.msg, bad[i]));
    }
}

/* "cuda" either opens a GPU or fails with OT_E_DEVICE saying why. */
static void test_select_cuda(void **state) {
    (void)state;
    ot_error e = {0};
    ot_backend *be = ot_backend_new_by_name("cuda", 0, &e);
#ifdef OT_HAVE_CUDA
    char reason[1024];
    bool have = ot_cuda_available(reason, sizeof reason);
    if (have) {
        assert_non_null(be);
        assert_string_equal(be->name, "cuda:0");
        ot_backend_free(be);
        memset(&e, 0, sizeof e);
        assert_null(ot_backend_new_by_name("cuda:1000", 0, &e));
        assert_int_equal(e.code, OT_E_DEVICE);
    } else {
        assert_null(be);
        assert_int_equal(e.code, OT_E_DEVICE);
        assert_non_null(strstr(e.msg, "no CUDA GPU found"));
    }
#else
    assert_null(be);
    assert_int_equal(e.code, OT_E_DEVICE);
    assert_non_null(strstr(e.msg, "built without CUDA"));
    char reason[1024];
    assert_false(ot_cuda_available(reason, sizeof reason));
    assert_non_null(strstr(reason, "built without CUDA"));
    assert_null(ot_cuda_module_load(&e));
    assert_int_equal(e.code, OT_E_DEVICE);
    ot_backend *cpu = ot_backend_cpu_new(1, &e);
    assert_non_null(cpu);
    size_t fb = 0, tb = 0;
    assert_int_equal(ot_backend_cuda_mem_info(cpu, &fb, &tb, &e), OT_E_DEVICE);
    ot_backend_free(cpu);
#endif
}

#ifdef OT_HAVE_CUDA

/* ---- the module loader (no GPU needed) ------------------------------------------------ */

/* The module of this build; the test stops here when it cannot be loaded. */
static const ot_cuda_module *mod(void) {
    ot_error e = {0};
    const ot_cuda_module *m = ot_cuda_module_load(&e);
    if (!m) fail_msg("the CUDA module does not load: %s", e.msg);
    return m;
}

/* Loading twice gives the same table; a bad ONNXTRAIN_CUDA_MODULE is reported with
 * OT_E_DEVICE naming the variable, and so is a library that is not the module; the
 * CPU backend is refused by mem_info without loading anything. */
static void test_module_loader(void **state) {
    (void)state;
    const ot_cuda_module *m = mod();
    assert_ptr_equal(m, mod());
    assert_int_equal(m->abi, OT_CUDA_MODULE_ABI);
    assert_int_equal(m->layout(), ot_cuda_module_layout());
    const char *saved = getenv(OT_CUDA_MODULE_ENV);
    char *keep = saved ? strdup(saved) : NULL;
    ot_error e = {0};
    assert_int_equal(setenv(OT_CUDA_MODULE_ENV, "/nonexistent/" OT_CUDA_MODULE_FILE, 1), 0);
    assert_null(ot_cuda_module_load(&e));
    assert_int_equal(e.code, OT_E_DEVICE);
    assert_non_null(strstr(e.msg, OT_CUDA_MODULE_ENV));
    memset(&e, 0, sizeof e);
    assert_null(ot_backend_new_by_name("cuda:0", 0, &e));
    assert_int_equal(e.code, OT_E_DEVICE);
    assert_non_null(strstr(e.msg, "device 'cuda:0'"));
    memset(&e, 0, sizeof e);
    assert_int_equal(setenv(OT_CUDA_MODULE_ENV, "libm.so.6", 1), 0); /* loads, but has no entry point */
    assert_null(ot_cuda_module_load(&e));
    assert_int_equal(e.code, OT_E_DEVICE);
    assert_non_null(strstr(e.msg, "not a CUDA backend module"));
    if (keep) {
        setenv(OT_CUDA_MODULE_ENV, keep, 1);
        free(keep);
    } else {
        unsetenv(OT_CUDA_MODULE_ENV);
    }
    memset(&e, 0, sizeof e);
    ot_backend *cpu = ot_backend_cpu_new(1, &e);
    assert_non_null(cpu);
    size_t fb = 0, tb = 0;
    assert_int_equal(ot_backend_cuda_mem_info(cpu, &fb, &tb, &e), OT_E_USAGE);
    ot_backend_free(cpu);
}

/* ---- host-side parts of the CUDA backend (no GPU needed) ------------------------------ */

/* The module's op table says of every op what the library's ot_cuda_op_status says
 * (both from kernels/cuda/cuda_ops.def); a launcher is a kernel, the shape-only ops
 * are CPU only, and a CPU-only op takes the CPU's supports answer. */
static void test_op_table(void **state) {
    (void)state;
    const ot_cuda_module *m = mod();
    for (int op = OT_OP_UNKNOWN + 1; op < (int)OT_OP_COUNT; op++) {
        if (m->op_status((ot_op)op) != ot_cuda_op_status((ot_op)op)) fail_msg("%s differs", ot_op_name((ot_op)op));
        if (ot_cuda_op_status((ot_op)op) == OT_CUDA_CPU_ONLY && !ot_cpu_has_kernel((ot_op)op))
            fail_msg("%s is CPU only without a CPU kernel", ot_op_name((ot_op)op));
    }
    assert_int_equal(m->op_status(OT_OP_GEMM), OT_CUDA_KERNEL);
    assert_int_equal(m->op_status(OT_OP_SHAPE), OT_CUDA_CPU_ONLY);
    assert_int_equal(m->op_status(OT_OP_UNKNOWN), OT_CUDA_MISSING);
    assert_int_equal(ot_cuda_op_status(OT_OP_COUNT), OT_CUDA_MISSING);
    int64_t d = 4;
    ot_node n = {.op = OT_OP_RANGE, .n_inputs = 3, .n_outputs = 1, .name = (char *)"r", .op_type = (char *)"Range"};
    ot_tensor in[3], out[1];
    for (int k = 0; k < 3; k++) in[k] = (ot_tensor){.dtype = OT_I64, .shape = ot_shape_make(0, NULL)};
    out[0] = (ot_tensor){.dtype = OT_I64, .shape = ot_shape_make(1, &d)};
    assert_true(m->supports_node(&n, in, out));
    assert_int_equal(m->supports_node(&n, in, out), ot_cpu_supports(&n, in, out));
    for (int k = 0; k < 3; k++) in[k].dtype = OT_BOOL;
    assert_false(m->supports_node(&n, in, out));
}

/* The kernels' Philox (compiled by nvcc for host and device from one source) gives
 * the CPU generator's uniforms bit for bit, so Dropout masks agree. */
static void test_philox_matches_cpu(void **state) {
    (void)state;
    const uint64_t seeds[] = {0, 1, 0x123456789abcdefULL, UINT64_MAX};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
        for (uint64_t i = 0; i < 5000; i += 7) {
            uint64_t index = i * 0x9E3779B97F4A7C15ULL; /* high bits too */
            float a = mod()->philox_uniform(seeds[s], i % 13, (uint32_t)(i % 5), index);
            float b = ot_philox_uniform(seeds[s], i % 13, (uint32_t)(i % 5), index);
            if (memcmp(&a, &b, sizeof a) != 0) fail_msg("seed %llu index %llu: %.9g vs %.9g", (unsigned long long)seeds[s],
                                                        (unsigned long long)index, a, b);
        }
}

/* cuDNN pads both ends alike: pads it cannot express are accepted through the explicit
 * zero-pad path, and so are 3-D convolutions; more than 3 spatial dims are refused by
 * supports (so the executor names the node before running anything). */
static void test_conv_geometry(void **state) {
    (void)state;
    float dummy = 0;
    ot_node n = tk_node(OT_OP_CONV, 2, 1);
    int64_t pads_sym[4] = {1, 1, 1, 1}, pads_asym[4] = {0, 0, 2, 2}, ks[2] = {3, 3};
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_ints(&n, "pads", pads_sym, 4);
    ot_tensor in[2] = {tk_t(OT_F32, &dummy, 4, 2, 3, 8, 8), tk_t(OT_F32, &dummy, 4, 4, 3, 3, 3)};
    ot_tensor out[1] = {tk_t(OT_F32, &dummy, 4, 2, 4, 8, 8)};
    assert_true(mod()->conv_supported(&n, in, out));
    assert_true(mod()->supports_node(&n, in, out));
    ot_node_set_attr_ints(&n, "pads", pads_asym, 4);
    ot_tensor out2[1] = {tk_t(OT_F32, &dummy, 4, 2, 4, 8, 8)};
    assert_true(mod()->conv_supported(&n, in, out2)); /* explicit zero padding */
    int64_t pads3[6] = {1, 1, 1, 1, 1, 1}, ks3[3] = {3, 3, 3};
    ot_node_set_attr_ints(&n, "kernel_shape", ks3, 3);
    ot_node_set_attr_ints(&n, "pads", pads3, 6);
    ot_tensor in3[2] = {tk_t(OT_F32, &dummy, 5, 1, 3, 4, 4, 4), tk_t(OT_F32, &dummy, 5, 4, 3, 3, 3, 3)};
    ot_tensor out3[1] = {tk_t(OT_F32, &dummy, 5, 1, 4, 4, 4, 4)};
    assert_true(mod()->conv_supported(&n, in3, out3)); /* 3-D: cuDNN's Nd descriptors */
    int64_t pads4[8] = {1, 1, 1, 1, 1, 1, 1, 1}, ks4[4] = {3, 3, 3, 3};
    ot_node_set_attr_ints(&n, "kernel_shape", ks4, 4);
    ot_node_set_attr_ints(&n, "pads", pads4, 8);
    ot_tensor in4[2] = {tk_t(OT_F32, &dummy, 6, 1, 3, 4, 4, 4, 4), tk_t(OT_F32, &dummy, 6, 4, 3, 3, 3, 3, 3)};
    ot_tensor out4[1] = {tk_t(OT_F32, &dummy, 6, 1, 4, 4, 4, 4, 4)};
    assert_false(mod()->conv_supported(&n, in4, out4));
    assert_false(mod()->supports_node(&n, in4, out4));
    tk_node_free(&n);
}

/* What supports() accepts beyond float32: the integer arithmetic and Clip of the CPU
 * kernels, Cast to and from float16 / bfloat16; and what it still refuses. */
static void test_supports_dtypes(void **state) {
    (void)state;
    int64_t dummy[4] = {0};
    const ot_dtype ints[] = {OT_I64, OT_I32, OT_I8, OT_U8};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        ot_node d = tk_node(OT_OP_DIV, 2, 1);
        ot_tensor in[2] = {tk_t(ints[i], dummy, 1, 2), tk_t(ints[i], dummy, 1, 2)};
        ot_tensor out[1] = {tk_t(ints[i], dummy, 1, 2)};
        assert_true(mod()->supports_node(&d, in, out));
        assert_int_equal(mod()->workspace_bytes(&d, in, out), 8); /* the zero-divisor flag */
        tk_node_free(&d);
        ot_node c = tk_node(OT_OP_CLIP, 1, 1);
        assert_true(mod()->supports_node(&c, in, out));
        tk_node_free(&c);
    }
    ot_node c = tk_node(OT_OP_CAST, 1, 1);
    ot_tensor cin[1] = {tk_t(OT_F32, dummy, 1, 2)};
    ot_tensor h[1] = {tk_t(OT_F16, dummy, 1, 2)}, b[1] = {tk_t(OT_BF16, dummy, 1, 2)}, str[1] = {tk_t(OT_STRING, dummy, 1, 2)};
    assert_true(mod()->supports_node(&c, cin, h));
    assert_true(mod()->supports_node(&c, h, b));
    assert_false(mod()->supports_node(&c, cin, str));
    tk_node_free(&c);
    ot_node p = tk_node(OT_OP_POW, 2, 1);
    ot_tensor pin[2] = {tk_t(OT_I64, dummy, 1, 2), tk_t(OT_F32, dummy, 1, 2)};
    ot_tensor pout[1] = {tk_t(OT_I64, dummy, 1, 2)};
    assert_true(mod()->supports_node(&p, pin, pout));
    tk_node_free(&p);
    ot_node r = tk_node(OT_OP_REDUCE_SUM, 1, 1); /* float32 only, as on the CPU */
    ot_tensor rin[1] = {tk_t(OT_I64, dummy, 1, 2)};
    ot_tensor rout[1] = {tk_t(OT_I64, dummy, 0)};
    assert_false(mod()->supports_node(&r, rin, rout));
    tk_node_free(&r);
}

/* issue 27: Gemm / MatMul take bfloat16 or float16 A and B into float32 or their
 * dtype, as on the CPU; cuDNN convolutions take X, W, Y of one low-precision dtype
 * with pads it can express (the zero-pad copy is float32 only); mixed dtypes are
 * refused. The library's ot_cuda_op_status agrees that both ops have kernels. */
static void test_supports_lowp(void **state) {
    (void)state;
    float dummy[8] = {0};
    const ot_dtype lp[2] = {OT_BF16, OT_F16};
    for (int k = 0; k < 2; k++) {
        ot_dtype t = lp[k], other = lp[1 - k];
        ot_node mm = tk_node(OT_OP_MATMUL, 2, 1), gm = tk_node(OT_OP_GEMM, 3, 1);
        ot_tensor in[3] = {tk_t(t, dummy, 2, 4, 3), tk_t(t, dummy, 2, 3, 5), tk_t(OT_F32, dummy, 1, 5)};
        ot_tensor y32[1] = {tk_t(OT_F32, dummy, 2, 4, 5)}, ylp[1] = {tk_t(t, dummy, 2, 4, 5)},
                  yot[1] = {tk_t(other, dummy, 2, 4, 5)};
        assert_true(mod()->supports_node(&mm, in, y32));
        assert_true(mod()->supports_node(&mm, in, ylp));
        assert_true(mod()->supports_node(&gm, in, ylp));
        assert_false(mod()->supports_node(&mm, in, yot));
        assert_int_equal(mod()->supports_node(&mm, in, ylp), ot_cpu_supports(&mm, in, ylp));
        in[1].dtype = OT_F32;
        assert_false(mod()->supports_node(&mm, in, y32));
        tk_node_free(&mm), tk_node_free(&gm);
        ot_node cv = tk_node(OT_OP_CONV, 2, 1);
        int64_t ks[2] = {3, 3}, sym[4] = {1, 1, 1, 1}, asym[4] = {0, 0, 2, 2};
        ot_node_set_attr_ints(&cv, "kernel_shape", ks, 2);
        ot_node_set_attr_ints(&cv, "pads", sym, 4);
        ot_tensor cin[2] = {tk_t(t, dummy, 4, 2, 3, 8, 8), tk_t(t, dummy, 4, 4, 3, 3, 3)};
        ot_tensor cout[1] = {tk_t(t, dummy, 4, 2, 4, 8, 8)}, cout32[1] = {tk_t(OT_F32, dummy, 4, 2, 4, 8, 8)};
        assert_true(mod()->supports_node(&cv, cin, cout));
        assert_false(mod()->supports_node(&cv, cin, cout32)); /* cuDNN writes X's dtype */
        ot_node_set_attr_ints(&cv, "pads", asym, 4);
        assert_false(mod()->supports_node(&cv, cin, cout));
        tk_node_free(&cv);
    }
    assert_int_equal(ot_cuda_op_status(OT_OP_MATMUL), OT_CUDA_KERNEL);
}

/* Scratch the CUDA kernels ask the planner for, where they share the CPU's layout. */
static void test_workspace_sizes(void **state) {
    (void)state;
    float dummy = 0;
    ot_node n = tk_node(OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS, 2, 1);
    ot_tensor in[2] = {tk_t(OT_F32, &dummy, 3, 4, 10, 3), tk_t(OT_I64, &dummy, 2, 4, 3)};
    ot_tensor out[1] = {tk_t(OT_F32, &dummy, 0)};
    assert_int_equal(mod()->workspace_bytes(&n, in, out), ot_cpu_workspace_bytes(&n, in, out));
    ot_node_set_attr_string(&n, "reduction", "none");
    assert_int_equal(mod()->workspace_bytes(&n, in, out), 0);
    tk_node_free(&n);
    ot_node g = tk_node(OT_OP_LAYER_NORM_GRAD, 3, 3);
    ot_tensor gin[3] = {tk_t(OT_F32, &dummy, 3, 2, 5, 8), tk_t(OT_F32, &dummy, 3, 2, 5, 8), tk_t(OT_F32, &dummy, 1, 8)};
    ot_tensor gout[3] = {gin[0], gin[2], gin[2]};
    assert_int_equal(mod()->workspace_bytes(&g, gin, gout), 10 * 2 * sizeof(double));
    tk_node_free(&g);
}

/* ---- per-op comparison harness ------------------------------------------------------ */

#define TC_MAX 12 /* RnnGrad: 11 inputs */

/* Owns every buffer a test allocates. */
typedef struct tc_pool {
    void *p[64];
    int n;
} tc_pool;

static void *tc_alloc(tc_pool *pool, size_t n) {
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    assert_true(pool->n < 64);
    pool->p[pool->n++] = p;
    return p;
}
static void tc_free(tc_pool *pool) {
    for (int i = 0; i < pool->n; i++) free(pool->p[i]);
    pool->n = 0;
}

static ot_tensor tc_tensor(tc_pool *pool, ot_dtype t, int rank, const int64_t *dims) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = t;
    x.shape = ot_shape_make(rank, dims);
    x.nbytes = (size_t)ot_shape_numel(&x.shape) * ot_dtype_size(t);
    x.data = tc_alloc(pool, x.nbytes);
    return x;
}

/* Random float32 tensor in [lo, hi). */
static ot_tensor tc_rand(tc_pool *pool, uint32_t seed, float lo, float hi, int rank, ...) {
    int64_t d[OT_MAX_RANK];
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) d[i] = va_arg(ap, int);
    va_end(ap);
    ot_tensor x = tc_tensor(pool, OT_F32, rank, d);
    tk_fill(x.data, ot_shape_numel(&x.shape), seed, lo, hi);
    return x;
}

/* int64 tensor from values. */
static ot_tensor tc_ints(tc_pool *pool, int n, const int64_t *v) {
    int64_t d = n;
    ot_tensor x = tc_tensor(pool, OT_I64, 1, &d);
    memcpy(x.data, v, (size_t)n * 8);
    return x;
}

/* An output slot: dtype and shape, no data. */
static ot_tensor tc_out(ot_dtype t, int rank, ...) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    int64_t d[OT_MAX_RANK];
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) d[i] = va_arg(ap, int);
    va_end(ap);
    x.dtype = t;
    x.shape = ot_shape_make(rank, d);
    x.nbytes = (size_t)ot_shape_numel(&x.shape) * ot_dtype_size(t);
    return x;
}

/* Where two buffers differ most: float32 within a tolerance relative to
 * max(1, |cpu|) (NaN must match NaN), anything else (and float32 when `bitwise`)
 * bit for bit. */
typedef struct tc_worst {
    double d;      /* the largest error (INFINITY: a bitwise or NaN mismatch) */
    int64_t index; /* its element, -1 when all agree */
    double gpu, cpu; /* the two values there (integers and bools as numbers) */
} tc_worst;

static double tc_value(ot_dtype t, const void *p, int64_t i) {
    double v = 0.0;
    if (!ot_kernel_load_double(t, p, i, &v)) v = NAN;
    return v;
}

static tc_worst tc_diff(ot_dtype t, const void *gpu, const void *cpu, size_t nbytes, bool bitwise) {
    tc_worst w = {0.0, -1, 0.0, 0.0};
    size_t es = ot_dtype_size(t) ? ot_dtype_size(t) : 1;
    for (size_t i = 0; i < nbytes / es; i++) {
        double d;
        if ((t == OT_F16 || t == OT_BF16) && !bitwise) { /* issue 27: by value, as float32 */
            double a = tc_value(t, gpu, (int64_t)i), b = tc_value(t, cpu, (int64_t)i);
            if (isnan(a) || isnan(b)) d = isnan(a) && isnan(b) ? 0.0 : INFINITY;
            else d = fabs(a - b) / (fabs(b) > 1.0 ? fabs(b) : 1.0);
        } else if (t == OT_F32 && !bitwise) {
            float a = ((const float *)gpu)[i], b = ((const float *)cpu)[i];
            if (isnan(a) || isnan(b)) d = isnan(a) && isnan(b) ? 0.0 : INFINITY;
            else d = fabs((double)a - b) / (fabs(b) > 1.0 ? fabs(b) : 1.0);
        } else {
            d = memcmp((const char *)gpu + i * es, (const char *)cpu + i * es, es) == 0 ? 0.0 : INFINITY;
        }
        if (d > w.d || (w.index < 0 && d > 0.0)) {
            w.d = d;
            w.index = (int64_t)i;
            w.gpu = tc_value(t, gpu, (int64_t)i);
            w.cpu = tc_value(t, cpu, (int64_t)i);
            if (isinf(d)) break; /* the first mismatch says enough */
        }
    }
    return w;
}

/* "[2,3,4]" */
static const char *tc_shape_str(const ot_shape *s, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < s->rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ",%lld" : "%lld", (long long)s->dim[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

#define TC_ALIGN 256
static size_t tc_round(size_t n) { return (n + TC_ALIGN - 1) / TC_ALIGN * TC_ALIGN; }

/* Runs node n on the CPU (host copies) and on the GPU backend with the same inputs;
 * compares every output, and every input too (optimizer steps update in place). */
/* ref: when not NULL, the expected outputs (for what the CPU backend has no kernel
 * for, e.g. 3-D Conv), instead of running the CPU kernel. */
static void tc_check_ref(ot_backend *be, const char *label, const ot_node *n, const ot_tensor *in,
                         const ot_tensor *out, double tol, uint64_t seed, uint64_t step, int rng_node,
                         const float *const *ref) {
    tc_pool pool = {0};
    int ni = n->n_inputs, no = n->n_outputs;
    ot_tensor cin[TC_MAX], cout[TC_MAX], gin[TC_MAX], gout[TC_MAX];
    assert_true(ni <= TC_MAX && no <= TC_MAX);
    for (int k = 0; k < ni; k++) {
        cin[k] = in[k];
        if (in[k].data) {
            cin[k].data = tc_alloc(&pool, in[k].nbytes);
            memcpy(cin[k].data, in[k].data, in[k].nbytes);
        }
    }
    for (int k = 0; k < no; k++) {
        cout[k] = out[k];
        cout[k].data = out[k].dtype ? tc_alloc(&pool, out[k].nbytes) : NULL;
    }
    ot_error e = {0};
    if (ref) {
        for (int k = 0; k < no; k++)
            if (cout[k].data) memcpy(cout[k].data, ref[k], out[k].nbytes);
    } else if (tk_run_ex(n, cin, cout, 2, seed, step, rng_node, &e) != OT_OK) {
        fail_msg("%s: CPU kernel failed: %s", label, e.msg);
    }

    /* the GPU side: one arena holding inputs, outputs and the workspace */
    size_t total = 0, off_in[TC_MAX], off_out[TC_MAX];
    for (int k = 0; k < ni; k++) off_in[k] = total, total += tc_round(in[k].nbytes);
    for (int k = 0; k < no; k++) off_out[k] = total, total += tc_round(out[k].nbytes);
    for (int k = 0; k < ni; k++) gin[k] = in[k];
    for (int k = 0; k < no; k++) gout[k] = out[k];
    if (!be->supports(be, n, gin, gout)) fail_msg("%s: the CUDA backend does not support the node", label);
    size_t ws = be->workspace_bytes(be, n, gin, gout), ws_off = total;
    total += tc_round(ws);
    char *base = NULL;
    if (be->arena_alloc(be, total, (void **)&base, &e) != OT_OK) fail_msg("%s: %s", label, e.msg);
    for (int k = 0; k < ni; k++) {
        gin[k].data = in[k].data ? base + off_in[k] : NULL;
        if (in[k].data) assert_int_equal(be->copy_in(be, gin[k].data, in[k].data, in[k].nbytes, &e), OT_OK);
    }
    for (int k = 0; k < no; k++) gout[k].data = out[k].dtype ? base + off_out[k] : NULL;
    ot_kernel_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.seed = seed;
    ctx.step = step;
    ctx.rng_node = rng_node;
    ctx.workspace = ws ? base + ws_off : NULL;
    ctx.workspace_bytes = ws;
    ot_status st = be->run_node(be, NULL, n, gin, gout, &ctx, &e);
    if (!st) st = be->synchronize(be, &e);
    if (st) {
        be->arena_free(be, base);
        fail_msg("%s: CUDA kernel failed: %s", label, e.msg);
    }
    double worst = 0.0;
    for (int k = 0; k < no + ni; k++) {
        const ot_tensor *g = k < no ? &gout[k] : &gin[k - no], *c = k < no ? &cout[k] : &cin[k - no];
        if (!g->data || !g->nbytes) continue;
        void *host = tc_alloc(&pool, g->nbytes);
        assert_int_equal(be->copy_out(be, host, g->data, g->nbytes, &e), OT_OK);
        tc_worst w = tc_diff(g->dtype, host, c->data, g->nbytes, false);
        if (w.d > tol) {
            char shp[128];
            tc_shape_str(&g->shape, shp, sizeof shp);
            be->arena_free(be, base);
            tc_free(&pool);
            fail_msg("%s (%s): %s %d (%s %s) differs from the CPU%s by %g (tolerance %g): at flat index %lld the GPU "
                     "has %.9g, the CPU %.9g",
                     label, n->op_type, k < no ? "output" : "input", k < no ? k : k - no, ot_dtype_name(g->dtype), shp,
                     ref ? " reference" : "", w.d, tol, (long long)w.index, w.gpu, w.cpu);
        }
        if (w.d > worst) worst = w.d;
    }
    be->arena_free(be, base);
    tc_free(&pool);
}

static void tc_check(ot_backend *be, const char *label, const ot_node *n, const ot_tensor *in, const ot_tensor *out,
                     double tol, uint64_t seed, uint64_t step, int rng_node) {
    tc_check_ref(be, label, n, in, out, tol, seed, step, rng_node, NULL);
}

#define TOL 1e-5
#define TOL_RED 1e-4

static ot_backend *backend_of(void **state) { return (ot_backend *)*state; }

/* ---- host mode of the pointwise kernels (no GPU needed) --------------------------------- */

/* Runs n through the CPU kernel and through the CUDA kernels' element code on the host
 * (the module's pointwise_host) with the same inputs. The statuses must agree and, on
 * success, every output byte: these rules have no rounding latitude (comparisons,
 * integer arithmetic, conversions), so the GPU, running the same code, matches the
 * CPU bit for bit. */
/* The random-op context of a host-mode comparison. */
typedef struct hm_rng {
    uint64_t seed, step;
    int node;
} hm_rng;

/* Bitwise comparison of one buffer of the CPU kernel with the host mode's; fails
 * naming the element and both values. */
static void hm_same(const char *label, const char *what, int k, const ot_tensor *t, const void *cpu, const void *host,
                    double tol) {
    tc_worst w = tc_diff(t->dtype, host, cpu, t->nbytes, tol == 0.0);
    if (w.index >= 0 && w.d > tol) {
        char shp[128];
        fail_msg("%s: %s %d (%s %s) differs from the CPU's at flat index %lld: host mode %.9g, CPU %.9g", label, what,
                 k, ot_dtype_name(t->dtype), tc_shape_str(&t->shape, shp, sizeof shp), (long long)w.index,
                 tc_value(t->dtype, host, w.index), tc_value(t->dtype, cpu, w.index));
    }
}

/* hm_compare with a seed, step and node id for the random ops, and, with `inplace`,
 * every input compared too (the optimizer steps update theirs): each side then runs
 * on its own copies of the inputs. tol 0: bit for bit; else float32 outputs within tol
 * (relative to max(1, |CPU|)). */
static ot_status hm_compare_tol(const char *label, const ot_node *n, ot_tensor *in, const ot_tensor *outs, hm_rng r,
                                bool inplace, double tol) {
    tc_pool p = {0};
    int ni = n->n_inputs, no = n->n_outputs;
    ot_tensor cin[TC_MAX], hin[TC_MAX], cout[TC_MAX], hout[TC_MAX];
    assert_true(ni <= TC_MAX && no <= TC_MAX);
    for (int k = 0; k < ni; k++) {
        cin[k] = hin[k] = in[k];
        if (inplace && in[k].data) {
            cin[k].data = tc_alloc(&p, in[k].nbytes);
            hin[k].data = tc_alloc(&p, in[k].nbytes);
            memcpy(cin[k].data, in[k].data, in[k].nbytes);
            memcpy(hin[k].data, in[k].data, in[k].nbytes);
        }
    }
    for (int k = 0; k < no; k++) {
        cout[k] = hout[k] = outs[k];
        cout[k].data = outs[k].dtype ? tc_alloc(&p, outs[k].nbytes) : NULL;
        hout[k].data = outs[k].dtype ? tc_alloc(&p, outs[k].nbytes) : NULL;
    }
    ot_error ce = {0}, he = {0};
    ot_status cs = tk_run_ex(n, cin, cout, 1, r.seed, r.step, r.node, &ce);
    ot_kernel_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.seed = r.seed;
    ctx.step = r.step;
    ctx.rng_node = r.node;
    ctx.workspace_bytes = mod()->workspace_bytes(n, hin, hout);
    ctx.workspace = ctx.workspace_bytes ? tc_alloc(&p, ctx.workspace_bytes) : NULL;
    ot_status hs = mod()->pointwise_host(n, hin, hout, &ctx, &he);
    if (cs != hs) fail_msg("%s: CPU status %d (%s), CUDA host mode %d (%s)", label, cs, ce.msg, hs, he.msg);
    for (int k = 0; k < no && cs == OT_OK; k++)
        if (cout[k].data) hm_same(label, "output", k, &outs[k], cout[k].data, hout[k].data, tol);
    for (int k = 0; inplace && k < ni && cs == OT_OK; k++)
        if (in[k].data) hm_same(label, "input", k, &in[k], cin[k].data, hin[k].data, tol);
    tc_free(&p);
    return cs;
}

/* hm_compare_tol with tol 0: bit for bit. */
static ot_status hm_compare_ex(const char *label, const ot_node *n, ot_tensor *in, const ot_tensor *outs, hm_rng r,
                               bool inplace) {
    return hm_compare_tol(label, n, in, outs, r, inplace, 0.0);
}

static ot_status hm_compare(const char *label, const ot_node *n, ot_tensor *in, const ot_tensor *outs) {
    hm_rng r = {0, 0, 0};
    return hm_compare_ex(label, n, in, outs, r, false);
}

/* A 1-D float32 tensor over a caller array. */
static ot_tensor hm_f32(float *v, int n) { return tk_t(OT_F32, v, 1, n); }

/* ClipGrad passes dY strictly inside (min, max) on both backends: 0 at either bound,
 * NaN blocked by a finite bound; bounds from attributes or one-element inputs. */
static void test_host_clip_grad(void **state) {
    (void)state;
    float x[] = {-1.0f, -0.999f, 0.0f, 1.999f, 2.0f, 2.5f, -3.0f, NAN, INFINITY, -INFINITY, -0.0f, 1.0f};
    float dy[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    enum { N = sizeof x / sizeof x[0] };
    ot_tensor out[1] = {tc_out(OT_F32, 1, N)};
    ot_node g = tk_node(OT_OP_CLIP_GRAD, 2, 1);
    ot_node_set_attr_float(&g, "min", -1.0f);
    ot_node_set_attr_float(&g, "max", 2.0f);
    ot_tensor in[4] = {hm_f32(dy, N), hm_f32(x, N)};
    assert_int_equal(hm_compare("ClipGrad [-1, 2]", &g, in, out), OT_OK);
    tk_node_free(&g);
    /* Clip(0, inf) is ReLU6's and ReLU's shape: 0 at x == 0 */
    ot_node r = tk_node(OT_OP_CLIP_GRAD, 2, 1);
    ot_node_set_attr_float(&r, "min", 0.0f);
    assert_int_equal(hm_compare("ClipGrad [0, inf)", &r, in, out), OT_OK);
    tk_node_free(&r);
    ot_node u = tk_node(OT_OP_CLIP_GRAD, 2, 1); /* no bound: everything passes, NaN included */
    assert_int_equal(hm_compare("ClipGrad unbounded", &u, in, out), OT_OK);
    tk_node_free(&u);
    /* opset-11 form: bounds as inputs 2 and 3 (int64 and float) */
    int64_t lo = -1;
    float hi = 2.0f, two[2] = {0.0f, 0.0f};
    ot_node b = tk_node(OT_OP_CLIP_GRAD, 4, 1);
    ot_tensor bin[4] = {hm_f32(dy, N), hm_f32(x, N), tk_t(OT_I64, &lo, 0), tk_t(OT_F32, &hi, 0)};
    assert_int_equal(hm_compare("ClipGrad bounds as inputs", &b, bin, out), OT_OK);
    bin[3] = hm_f32(two, 2); /* not one element: ignored by both */
    assert_int_equal(hm_compare("ClipGrad two-element max", &b, bin, out), OT_OK);
    tk_node_free(&b);
    /* and the rule itself, spelled out */
    ot_node c = tk_node(OT_OP_CLIP_GRAD, 2, 1);
    ot_node_set_attr_float(&c, "min", -1.0f);
    ot_node_set_attr_float(&c, "max", 2.0f);
    float dx[N];
    ot_tensor o[1] = {hm_f32(dx, N)};
    ot_kernel_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ot_error e = {0};
    assert_int_equal(mod()->pointwise_host(&c, in, o, &ctx, &e), OT_OK);
    const float want[N] = {0, 2, 3, 4, 0, 0, 0, 0, 0, 0, 11, 12};
    for (int i = 0; i < N; i++)
        if (dx[i] != want[i]) fail_msg("ClipGrad at x = %g: %g, want %g", x[i], dx[i], want[i]);
    tk_node_free(&c);
}

static void test_host_clip(void **state) {
    (void)state;
    float x[] = {-7.5f, -1.0f, 0.0f, -0.0f, 0.5f, 6.0f, 6.5f, NAN, INFINITY, -INFINITY, 3.25f};
    enum { N = sizeof x / sizeof x[0] };
    ot_tensor in[3] = {hm_f32(x, N)}, out[1] = {tc_out(OT_F32, 1, N)};
    ot_node c = tk_node(OT_OP_CLIP, 1, 1);
    ot_node_set_attr_float(&c, "min", 0.0f);
    ot_node_set_attr_float(&c, "max", 6.0f);
    assert_int_equal(hm_compare("Clip [0, 6]", &c, in, out), OT_OK);
    tk_node_free(&c);
    float lo = -1.0f;
    ot_node ci = tk_node(OT_OP_CLIP, 2, 1); /* min as an input, no max */
    ot_tensor cin[2] = {hm_f32(x, N), tk_t(OT_F32, &lo, 0)};
    assert_int_equal(hm_compare("Clip min input", &ci, cin, out), OT_OK);
    tk_node_free(&ci);
    /* integers: bounds from inputs (exact) or float attributes rounded inward */
    int64_t v64[] = {INT64_MIN, -300, -4, -3, 0, 99, 100, 101, INT64_MAX};
    int32_t v32[] = {INT32_MIN, -300, -4, -3, 0, 99, 100, 101, INT32_MAX};
    int8_t v8[] = {-128, -100, -4, -3, 0, 99, 100, 101, 127};
    uint8_t vu8[] = {0, 1, 2, 3, 4, 99, 100, 101, 255};
    struct {
        ot_dtype t;
        void *v;
    } cases[] = {{OT_I64, v64}, {OT_I32, v32}, {OT_I8, v8}, {OT_U8, vu8}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ot_tensor iin[3] = {tk_t(cases[k].t, cases[k].v, 1, 9)}, iout[1] = {tc_out(cases[k].t, 1, 9)};
        ot_node a = tk_node(OT_OP_CLIP, 1, 1);
        ot_node_set_attr_float(&a, "min", -3.5f);
        ot_node_set_attr_float(&a, "max", 100.7f);
        assert_int_equal(hm_compare(ot_dtype_name(cases[k].t), &a, iin, iout), OT_OK);
        tk_node_free(&a);
        int64_t mn = -4, mx = 99;
        float fmn = 2.0f;
        ot_node b = tk_node(OT_OP_CLIP, 3, 1);
        ot_tensor bin[3] = {iin[0], tk_t(OT_I64, &mn, 0), tk_t(OT_I64, &mx, 0)};
        assert_int_equal(hm_compare("int Clip, bounds as inputs", &b, bin, iout), OT_OK);
        bin[1] = tk_t(OT_F32, &fmn, 0); /* a float bound of an integer Clip: ignored by both */
        assert_int_equal(hm_compare("int Clip, float min input", &b, bin, iout), OT_OK);
        tk_node_free(&b);
    }
}

/* Relu maps NaN and -0 to +0; ReluGrad and LeakyReluGrad at exactly 0. */
static void test_host_relu(void **state) {
    (void)state;
    float x[] = {-1.0f, -0.0f, 0.0f, 1e-45f, NAN, -NAN, INFINITY, -INFINITY, 2.0f};
    float dy[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    enum { N = sizeof x / sizeof x[0] };
    ot_tensor out[1] = {tc_out(OT_F32, 1, N)};
    ot_op un[] = {OT_OP_RELU, OT_OP_LEAKY_RELU, OT_OP_NEG};
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
        ot_node n = tk_node(un[i], 1, 1);
        ot_tensor in[1] = {hm_f32(x, N)};
        assert_int_equal(hm_compare(ot_op_name(un[i]), &n, in, out), OT_OK);
        tk_node_free(&n);
    }
    ot_op gr[] = {OT_OP_RELU_GRAD, OT_OP_LEAKY_RELU_GRAD};
    for (size_t i = 0; i < sizeof gr / sizeof gr[0]; i++) {
        ot_node n = tk_node(gr[i], 2, 1);
        ot_tensor in[2] = {hm_f32(dy, N), hm_f32(x, N)};
        assert_int_equal(hm_compare(ot_op_name(gr[i]), &n, in, out), OT_OK);
        tk_node_free(&n);
    }
}

/* Integer Add / Sub / Mul wrap; Div truncates toward zero, MIN / -1 wraps, broadcasts,
 * and a zero divisor is OT_E_DATA on both backends. */
static void test_host_int_arith(void **state) {
    (void)state;
    int64_t a64[6] = {-7, 7, INT64_MIN, INT64_MAX, -1, 123456789012345LL}, b64[3] = {2, -1, -3};
    int32_t a32[6] = {-7, 7, INT32_MIN, INT32_MAX, -1, 1234567}, b32[3] = {2, -1, -3};
    int8_t a8[6] = {-7, 7, -128, 127, -1, 100}, b8[3] = {2, -1, -3};
    uint8_t au8[6] = {7, 200, 255, 0, 1, 100}, bu8[3] = {2, 3, 255};
    struct {
        ot_dtype t;
        void *a, *b;
    } cases[] = {{OT_I64, a64, b64}, {OT_I32, a32, b32}, {OT_I8, a8, b8}, {OT_U8, au8, bu8}};
    ot_op ops[] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            char label[64];
            snprintf(label, sizeof label, "%s %s", ot_op_name(ops[o]), ot_dtype_name(cases[k].t));
            ot_node n = tk_node(ops[o], 2, 1);
            ot_tensor in[2] = {tk_t(cases[k].t, cases[k].a, 2, 2, 3), tk_t(cases[k].t, cases[k].b, 1, 3)};
            ot_tensor out[1] = {tc_out(cases[k].t, 2, 2, 3)};
            assert_int_equal(hm_compare(label, &n, in, out), OT_OK);
            tk_node_free(&n);
        }
    int64_t z[3] = {1, 0, 1};
    ot_node d = tk_node(OT_OP_DIV, 2, 1);
    ot_tensor din[2] = {tk_t(OT_I64, a64, 2, 2, 3), tk_t(OT_I64, z, 1, 3)};
    ot_tensor dout[1] = {tc_out(OT_I64, 2, 2, 3)};
    assert_int_equal(hm_compare("Div int64 by zero", &d, din, dout), OT_E_DATA);
    tk_node_free(&d);
}

static void test_host_int_pow(void **state) {
    (void)state;
    int64_t base[8] = {2, 3, -2, 0, 1, -1, 7, -3}, e64[8] = {10, 3, 3, -1, -5, -3, 0, 63};
    int32_t base32[8] = {2, 3, -2, 0, 1, -1, 7, -3}, e32[8] = {10, 3, 3, -1, -5, -4, 0, 31};
    float ef[8] = {0.5f, 2.0f, 3.0f, 1.0f, -1.0f, 2.0f, 1.5f, 2.0f};
    struct {
        ot_dtype tb, te;
        void *b, *e;
    } cases[] = {{OT_I64, OT_I64, base, e64}, {OT_I64, OT_F32, base, ef}, {OT_I64, OT_I32, base, e32},
                 {OT_I32, OT_I64, base32, e64}, {OT_I32, OT_F32, base32, ef}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ot_node n = tk_node(OT_OP_POW, 2, 1);
        ot_tensor in[2] = {tk_t(cases[k].tb, cases[k].b, 1, 8), tk_t(cases[k].te, cases[k].e, 1, 8)};
        ot_tensor out[1] = {tc_out(cases[k].tb, 1, 8)};
        assert_int_equal(hm_compare("Pow integer base", &n, in, out), OT_OK);
        tk_node_free(&n);
    }
}

/* Cast between every pair of the nine dtypes both backends cast, float16 and bfloat16
 * included: rounding to nearest even, NaN, infinities, signed zeros, half subnormals,
 * overflow, saturation of float -> int, wrapping of int -> narrower int. */
static void test_host_cast(void **state) {
    (void)state;
    const double vals[] = {0.0, -0.0, 1.0, -1.5, 2.5, 0.5, 300.7, -129.9, 65504.0, 65520.0, 65519.99, 1e-8, 5.96e-8,
                           6.1e-5, 1.0009765625, 1.00048828125, 3e38, -1e20, 1e19, 16777217.0, 255.0, 256.0, -128.0,
                           127.0, NAN, INFINITY, -INFINITY};
    enum { N = sizeof vals / sizeof vals[0] };
    const ot_dtype types[] = {OT_F32, OT_F64, OT_F16, OT_BF16, OT_I64, OT_I32, OT_I8, OT_U8, OT_BOOL};
    enum { NT = sizeof types / sizeof types[0] };
    tc_pool p = {0};
    ot_tensor src[NT];
    for (int t = 0; t < NT; t++) {
        int64_t n = N;
        src[t] = tc_tensor(&p, types[t], 1, &n);
        for (int i = 0; i < N; i++) {
            double v = vals[i];
            /* integer sources get the saturated integer of the value (NaN: a pattern) */
            int64_t iv = isnan(v) ? 0x5a5a : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
            switch (types[t]) {
            case OT_F32: ((float *)src[t].data)[i] = (float)v; break;
            case OT_F64: ((double *)src[t].data)[i] = v; break;
            case OT_F16: ((uint16_t *)src[t].data)[i] = ot_f32_to_f16((float)v); break;
            case OT_BF16: ((uint16_t *)src[t].data)[i] = ot_f32_to_bf16((float)v); break;
            case OT_I64: ((int64_t *)src[t].data)[i] = iv; break;
            case OT_I32: ((int32_t *)src[t].data)[i] = (int32_t)iv; break;
            case OT_I8: ((int8_t *)src[t].data)[i] = (int8_t)iv; break;
            case OT_U8: ((uint8_t *)src[t].data)[i] = (uint8_t)iv; break;
            default: ((uint8_t *)src[t].data)[i] = (uint8_t)(i % 2); break;
            }
        }
    }
    for (int s = 0; s < NT; s++)
        for (int d = 0; d < NT; d++) {
            char label[64];
            snprintf(label, sizeof label, "Cast %s -> %s", ot_dtype_name(types[s]), ot_dtype_name(types[d]));
            ot_node n = tk_node(OT_OP_CAST, 1, 1);
            ot_tensor in[1] = {src[s]};
            ot_tensor out[1] = {tc_out(types[d], 1, N)};
            assert_int_equal(hm_compare(label, &n, in, out), OT_OK);
            tk_node_free(&n);
        }
    /* every float16 bit pattern to float32 and back */
    int64_t all = 65536;
    ot_tensor h = tc_tensor(&p, OT_F16, 1, &all), f = tc_tensor(&p, OT_F32, 1, &all);
    for (int64_t i = 0; i < all; i++) ((uint16_t *)h.data)[i] = (uint16_t)i;
    ot_node n = tk_node(OT_OP_CAST, 1, 1);
    ot_tensor hin[1] = {h}, hout[1] = {tc_out(OT_F32, 1, (int)all)};
    assert_int_equal(hm_compare("Cast all float16 -> float32", &n, hin, hout), OT_OK);
    /* a dense walk over float32 bit patterns to float16 and bfloat16 */
    for (int64_t i = 0; i < all; i++) {
        uint32_t bits = (uint32_t)i * 65537u + 12345u;
        memcpy((float *)f.data + i, &bits, 4);
    }
    ot_tensor fin[1] = {f}, f16out[1] = {tc_out(OT_F16, 1, (int)all)}, bfout[1] = {tc_out(OT_BF16, 1, (int)all)};
    assert_int_equal(hm_compare("Cast float32 walk -> float16", &n, fin, f16out), OT_OK);
    assert_int_equal(hm_compare("Cast float32 walk -> bfloat16", &n, fin, bfout), OT_OK);
    tk_node_free(&n);
    tc_free(&p);
}

/* Where, Expand, ExpandLike, Sum (broadcast, inputs added in order), the fills and
 * the views: the element code of the GPU kernels against the CPU's, bit for bit. */
static void test_host_broadcast_ops(void **state) {
    (void)state;
    tc_pool p = {0};
    int64_t cd[2] = {2, 3};
    ot_tensor cond = tc_tensor(&p, OT_BOOL, 2, cd);
    for (int i = 0; i < 6; i++)
        ((uint8_t *)cond.data)[i] = (uint8_t)(i % 3 == 1);
    ot_node w = tk_node(OT_OP_WHERE, 3, 1);
    ot_tensor win[3] = {cond, tc_rand(&p, 1, -1, 1, 3, 4, 2, 3), tc_rand(&p, 2, -1, 1, 1, 3)};
    ot_tensor wout[1] = {tc_out(OT_F32, 3, 4, 2, 3)};
    assert_int_equal(hm_compare("Where f32", &w, win, wout), OT_OK);
    int64_t a[6] = {1, -2, 3, INT64_MAX, INT64_MIN, 6}, b[3] = {7, 8, 9};
    ot_tensor wi[3] = {cond, tc_ints(&p, 6, a), tc_ints(&p, 3, b)};
    wi[1].shape = ot_shape_make(2, cd);
    ot_tensor wiout[1] = {tc_out(OT_I64, 2, 2, 3)};
    assert_int_equal(hm_compare("Where i64", &w, wi, wiout), OT_OK);
    tk_node_free(&w);

    ot_node x = tk_node(OT_OP_EXPAND, 2, 1);
    int64_t shp[4] = {2, 3, 4, 5};
    ot_tensor xin[2] = {tc_rand(&p, 3, -1, 1, 3, 3, 1, 5), tc_ints(&p, 4, shp)};
    ot_tensor xout[1] = {tc_out(OT_F32, 4, 2, 3, 4, 5)};
    assert_int_equal(hm_compare("Expand", &x, xin, xout), OT_OK);
    tk_node_free(&x);
    ot_node el = tk_node(OT_OP_EXPAND_LIKE, 2, 1);
    ot_tensor elin[2] = {tc_rand(&p, 4, -1, 1, 2, 4, 1), xout[0]};
    elin[1].data = xin[0].data; /* only its shape is read */
    assert_int_equal(hm_compare("ExpandLike", &el, elin, xout), OT_OK);
    tk_node_free(&el);

    ot_node sm = tk_node(OT_OP_SUM, 3, 1);
    ot_tensor sin[3] = {tc_rand(&p, 5, -1, 1, 3, 2, 3, 4), tc_rand(&p, 6, -1e3f, 1e3f, 1, 4),
                        tc_rand(&p, 7, -1e-3f, 1e-3f, 2, 3, 1)};
    ot_tensor sout[1] = {tc_out(OT_F32, 3, 2, 3, 4)};
    assert_int_equal(hm_compare("Sum (rounding in input order)", &sm, sin, sout), OT_OK);
    tk_node_free(&sm);

    ot_op fills[] = {OT_OP_ZEROS_LIKE, OT_OP_ONES_LIKE};
    for (int f = 0; f < 2; f++) {
        ot_node n = tk_node(fills[f], 1, 1);
        ot_tensor fin[1] = {sin[0]}, fout[1] = {tc_out(OT_F32, 3, 2, 3, 4)};
        assert_int_equal(hm_compare(ot_op_name(fills[f]), &n, fin, fout), OT_OK);
        ot_tensor dout[1] = {tc_out(OT_F64, 3, 2, 3, 4)};
        assert_int_equal(hm_compare(ot_op_name(fills[f]), &n, fin, dout), OT_OK);
        tk_node_free(&n);
    }
    int64_t rs[2] = {6, 4};
    ot_node r = tk_node(OT_OP_RESHAPE, 2, 1);
    ot_tensor rin[2] = {sin[0], tc_ints(&p, 2, rs)};
    ot_tensor rout[1] = {tc_out(OT_F32, 2, 6, 4)};
    assert_int_equal(hm_compare("Reshape (a copy when not in place)", &r, rin, rout), OT_OK);
    tk_node_free(&r);
    tc_free(&p);
}

/* The strided copies of Transpose, Concat, Split, Slice and SliceGrad, and Gather /
 * GatherGrad (also onto a base): the index arithmetic the GPU runs, against the CPU
 * kernels, bit for bit. */
static void test_host_layout(void **state) {
    (void)state;
    tc_pool p = {0};
    ot_node t = tk_node(OT_OP_TRANSPOSE, 1, 1);
    int64_t perm[5] = {3, 0, 4, 2, 1};
    ot_node_set_attr_ints(&t, "perm", perm, 5);
    ot_tensor tin[1] = {tc_rand(&p, 10, -1, 1, 5, 2, 3, 4, 5, 6)};
    ot_tensor tout[1] = {tc_out(OT_F32, 5, 5, 2, 6, 4, 3)};
    assert_int_equal(hm_compare("Transpose rank 5", &t, tin, tout), OT_OK);
    tk_node_free(&t);
    ot_node t2 = tk_node(OT_OP_TRANSPOSE, 1, 1); /* no perm: reversed; int64 elements */
    int64_t iv[6] = {1, 2, 3, 4, 5, 6};
    ot_tensor t2in[1] = {tc_ints(&p, 6, iv)};
    t2in[0].shape = ot_shape_make(2, (int64_t[]){2, 3});
    ot_tensor t2out[1] = {tc_out(OT_I64, 2, 3, 2)};
    assert_int_equal(hm_compare("Transpose int64, default perm", &t2, t2in, t2out), OT_OK);
    tk_node_free(&t2);

    ot_node c = tk_node(OT_OP_CONCAT, 3, 1);
    ot_node_set_attr_int(&c, "axis", -2);
    ot_tensor cin[3] = {tc_rand(&p, 11, -1, 1, 3, 2, 1, 4), tc_rand(&p, 12, -1, 1, 3, 2, 3, 4),
                        tc_rand(&p, 13, -1, 1, 3, 2, 2, 4)};
    ot_tensor cout[1] = {tc_out(OT_F32, 3, 2, 6, 4)};
    assert_int_equal(hm_compare("Concat", &c, cin, cout), OT_OK);
    tk_node_free(&c);

    ot_node sp = tk_node(OT_OP_SPLIT, 1, 3);
    int64_t parts[3] = {1, 3, 2};
    ot_node_set_attr_int(&sp, "axis", 1);
    ot_node_set_attr_ints(&sp, "split", parts, 3);
    ot_tensor spin[1] = {tc_rand(&p, 14, -1, 1, 3, 2, 6, 5)};
    ot_tensor spout[3] = {tc_out(OT_F32, 3, 2, 1, 5), tc_out(OT_F32, 3, 2, 3, 5), tc_out(OT_F32, 3, 2, 2, 5)};
    assert_int_equal(hm_compare("Split", &sp, spin, spout), OT_OK);
    tk_node_free(&sp);

    /* steps of both signs, clamped and negative bounds */
    ot_node sl = tk_node(OT_OP_SLICE, 5, 1);
    int64_t st[3] = {-1, 1, -100}, en[3] = {-100, 100, 3}, ax[3] = {0, 2, 1}, stp[3] = {-2, 3, 1};
    ot_tensor slin[5] = {tc_rand(&p, 15, -1, 1, 3, 5, 6, 8), tc_ints(&p, 3, st), tc_ints(&p, 3, en), tc_ints(&p, 3, ax),
                         tc_ints(&p, 3, stp)};
    ot_tensor slout[1] = {tc_out(OT_F32, 3, 3, 3, 3)};
    assert_int_equal(hm_compare("Slice", &sl, slin, slout), OT_OK);
    tk_node_free(&sl);
    ot_node sg = tk_node(OT_OP_SLICE_GRAD, 6, 1);
    ot_tensor sgin[6] = {tc_rand(&p, 16, -1, 1, 3, 3, 3, 3), slin[0], slin[1], slin[2], slin[3], slin[4]};
    ot_tensor sgout[1] = {tc_out(OT_F32, 3, 5, 6, 8)};
    assert_int_equal(hm_compare("SliceGrad", &sg, sgin, sgout), OT_OK);
    tk_node_free(&sg);

    int64_t idx[6] = {3, 0, -1, 3, 2, -5};
    for (int axis = 0; axis < 2; axis++) {
        ot_node g = tk_node(OT_OP_GATHER, 2, 1);
        ot_node_set_attr_int(&g, "axis", axis);
        ot_tensor gin[2] = {tc_rand(&p, 17, -1, 1, 3, 5, 5, 3), tc_ints(&p, 6, idx)};
        gin[1].shape = ot_shape_make(2, (int64_t[]){2, 3});
        ot_tensor gout[1] = {axis ? tc_out(OT_F32, 4, 5, 2, 3, 3) : tc_out(OT_F32, 4, 2, 3, 5, 3)};
        assert_int_equal(hm_compare(axis ? "Gather axis 1" : "Gather axis 0", &g, gin, gout), OT_OK);
        tk_node_free(&g);
        ot_node gg = tk_node(OT_OP_GATHER_GRAD, 3, 1); /* repeated indices add up in order */
        ot_node_set_attr_int(&gg, "axis", axis);
        ot_tensor dy = axis ? tc_rand(&p, 18, -1, 1, 4, 5, 2, 3, 3) : tc_rand(&p, 18, -1, 1, 4, 2, 3, 5, 3);
        ot_tensor ggin[3] = {dy, gin[1], gin[0]};
        ot_tensor ggout[1] = {tc_out(OT_F32, 3, 5, 5, 3)};
        assert_int_equal(hm_compare("GatherGrad", &gg, ggin, ggout), OT_OK);
        tk_node_free(&gg);
        /* onto a base (a tied weight's other contribution), -0 in it and in dY */
        ot_node gb = tk_node(OT_OP_GATHER_GRAD, 4, 1);
        ot_node_set_attr_int(&gb, "axis", axis);
        ot_tensor base = tc_rand(&p, 20, -1, 1, 3, 5, 5, 3);
        for (int64_t e = 0; e < 75; e += 4) ((float *)base.data)[e] = -0.0f;
        for (int64_t e = 0; e < 90; e += 9) ((float *)dy.data)[e] = -0.0f;
        ot_tensor gbin[4] = {dy, gin[1], gin[0], base};
        assert_int_equal(hm_compare("GatherGrad onto base", &gb, gbin, ggout), OT_OK);
        tk_node_free(&gb);
    }
    int32_t i32[4] = {1, -1, 0, 1};
    ot_node g32 = tk_node(OT_OP_GATHER, 2, 1);
    int64_t four = 4;
    ot_tensor g32in[2] = {tc_rand(&p, 19, -1, 1, 2, 3, 7), tc_tensor(&p, OT_I32, 1, &four)};
    memcpy(g32in[1].data, i32, sizeof i32);
    ot_tensor g32out[1] = {tc_out(OT_F32, 2, 4, 7)};
    assert_int_equal(hm_compare("Gather int32 indices", &g32, g32in, g32out), OT_OK);
    tk_node_free(&g32);
    tc_free(&p);
}

/* MaxPool (with Indices, both storage orders, dilation), AveragePool (with and
 * without the pad in the divisor) and their gradients: the gradients gather on the
 * GPU in the order the CPU scatters, so they too agree bit for bit. */
static void test_host_pool(void **state) {
    (void)state;
    tc_pool p = {0};
    struct {
        int64_t ks[2], st[2], pads[4], dil[2];
    } geo[] = {{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
               {{2, 3}, {1, 2}, {0, 1, 1, 0}, {2, 1}},
               {{3, 2}, {3, 1}, {2, 0, 0, 1}, {1, 1}}};
    for (size_t gi = 0; gi < sizeof geo / sizeof geo[0]; gi++)
        for (int mx = 0; mx < 2; mx++)
            for (int variant = 0; variant < 2; variant++) {
                char label[96];
                /* ONNX's output size (floor); AveragePool here without dilations */
                int64_t dh = mx ? geo[gi].dil[0] : 1, dw = mx ? geo[gi].dil[1] : 1;
                int oh =
                    (int)((9 + geo[gi].pads[0] + geo[gi].pads[2] - dh * (geo[gi].ks[0] - 1) - 1) / geo[gi].st[0] + 1);
                int ow =
                    (int)((9 + geo[gi].pads[1] + geo[gi].pads[3] - dw * (geo[gi].ks[1] - 1) - 1) / geo[gi].st[1] + 1);
                snprintf(label, sizeof label, "%s geometry %zu variant %d", mx ? "MaxPool" : "AveragePool", gi,
                         variant);
                ot_node n = tk_node(mx ? OT_OP_MAX_POOL : OT_OP_AVERAGE_POOL, 1, mx ? 2 : 1);
                ot_node_set_attr_ints(&n, "kernel_shape", geo[gi].ks, 2);
                ot_node_set_attr_ints(&n, "strides", geo[gi].st, 2);
                ot_node_set_attr_ints(&n, "pads", geo[gi].pads, 4);
                if (mx) {
                    ot_node_set_attr_ints(&n, "dilations", geo[gi].dil, 2);
                    ot_node_set_attr_int(&n, "storage_order", variant);
                } else {
                    ot_node_set_attr_int(&n, "count_include_pad", variant);
                }
                ot_tensor in[1] = {tc_rand(&p, 20 + (uint32_t)gi, -1, 1, 4, 2, 3, 9, 9)};
                ot_tensor out[2] = {tc_out(OT_F32, 4, 2, 3, oh, ow), tc_out(OT_I64, 4, 2, 3, oh, ow)};
                assert_int_equal(hm_compare(label, &n, in, out), OT_OK);
                ot_node g = tk_node(mx ? OT_OP_MAX_POOL_GRAD : OT_OP_AVERAGE_POOL_GRAD, 2, 1);
                ot_node_copy_attrs(&g, &n);
                ot_tensor gin[2] = {tc_rand(&p, 30 + (uint32_t)gi, -1, 1, 4, 2, 3, oh, ow), in[0]};
                /* ties, so "first maximum in window order" matters */
                float *xv = in[0].data;
                for (int k = 0; k < 2 * 3 * 81; k += 5)
                    xv[k] = 0.25f;
                ot_tensor gout[1] = {tc_out(OT_F32, 4, 2, 3, 9, 9)};
                strcat(label, " gradient");
                assert_int_equal(hm_compare(label, &g, gin, gout), OT_OK);
                tk_node_free(&n);
                tk_node_free(&g);
            }
    tc_free(&p);
}

/* Dropout and DropoutGrad: the kernels' mask (Philox keyed by seed, step, node and
 * the element index) is the CPU's, including past the CPU's blocks of 256 and 8. */
static void test_host_dropout(void **state) {
    (void)state;
    tc_pool p = {0};
    const int N = 4099;
    ot_tensor x = tc_rand(&p, 40, -1, 1, 2, 17, N / 17 + 1);
    x.shape = ot_shape_make(1, (int64_t[]){N});
    x.nbytes = (size_t)N * 4;
    const float ratios[] = {0.3f, 0.0f, 1.0f, 0.9999f};
    for (size_t r = 0; r < sizeof ratios / sizeof ratios[0]; r++)
        for (int training = 0; training < 2; training++) {
            char label[80];
            snprintf(label, sizeof label, "Dropout ratio %g training %d", (double)ratios[r], training);
            ot_node n = tk_node(OT_OP_DROPOUT, 1, 2);
            ot_node_set_attr_float(&n, "ratio", ratios[r]);
            ot_node_set_attr_int(&n, "training_mode", training);
            ot_tensor in[1] = {x}, out[2] = {tc_out(OT_F32, 1, N), tc_out(OT_BOOL, 1, N)};
            hm_rng rng = {0x123456789abcdefULL + r, 7 + r, 42};
            assert_int_equal(hm_compare_ex(label, &n, in, out, rng, false), OT_OK);
            tk_node_free(&n);
        }
    /* opset-12 form: ratio and training_mode as inputs */
    float ratio = 0.25f;
    uint8_t yes = 1;
    ot_node n12 = tk_node(OT_OP_DROPOUT, 3, 2);
    ot_tensor in12[3] = {x, tk_t(OT_F32, &ratio, 0), tk_t(OT_BOOL, &yes, 0)};
    ot_tensor out12[2] = {tc_out(OT_F32, 1, N), tc_out(OT_BOOL, 1, N)};
    hm_rng r12 = {99, 3, 5};
    assert_int_equal(hm_compare_ex("Dropout, ratio and training_mode as inputs", &n12, in12, out12, r12, false), OT_OK);
    tk_node_free(&n12);
    ot_node g = tk_node(OT_OP_DROPOUT_GRAD, 2, 1);
    ot_node_set_attr_float(&g, "ratio", 0.3f);
    ot_node_set_attr_int(&g, "rng_node", 42); /* the forward node's id, not the context's */
    ot_tensor gin[2] = {tc_rand(&p, 41, -1, 1, 1, N), x};
    ot_tensor gout[1] = {tc_out(OT_F32, 1, N)};
    hm_rng rg = {0x123456789abcdefULL, 7, 3};
    assert_int_equal(hm_compare_ex("DropoutGrad", &g, gin, gout, rg, false), OT_OK);
    tk_node_free(&g);
    tc_free(&p);
}

/* RandomUniformLike / RandomUniform (issue 13): the kernel's draws are the CPU's bit
 * for bit (the same Philox uniform, the same unfused scaling), past the CPU's blocks. */
static void test_host_random_uniform(void **state) {
    (void)state;
    tc_pool p = {0};
    const int N = 4099;
    ot_tensor x = tc_rand(&p, 42, -1, 1, 1, N);
    const float lows[] = {0.0f, -2.5f, 0.1f}, highs[] = {1.0f, 3.25f, 0.1f};
    for (int like = 0; like < 2; like++)
        for (size_t r = 0; r < sizeof lows / sizeof lows[0]; r++) {
            char label[80];
            snprintf(label, sizeof label, "Random%s [%g, %g)", like ? "UniformLike" : "Uniform", (double)lows[r],
                     (double)highs[r]);
            ot_node n = tk_node(like ? OT_OP_RANDOM_UNIFORM_LIKE : OT_OP_RANDOM_UNIFORM, like, 1);
            ot_node_set_attr_float(&n, "low", lows[r]);
            ot_node_set_attr_float(&n, "high", highs[r]);
            ot_tensor in[1] = {x}, out[1] = {tc_out(OT_F32, 1, N)};
            hm_rng rng = {0x123456789abcdefULL + r, 7 + r, 42};
            assert_int_equal(hm_compare_ex(label, &n, in, out, rng, false), OT_OK);
            tk_node_free(&n);
        }
    tc_free(&p);
}

static void test_host_mse_grad(void **state) {
    (void)state;
    tc_pool p = {0};
    ot_node n = tk_node(OT_OP_MSE_LOSS_GRAD, 3, 1);
    ot_tensor in[3] = {tc_rand(&p, 50, 0.5f, 1.5f, 0), tc_rand(&p, 51, -3, 3, 2, 7, 13),
                       tc_rand(&p, 52, -3, 3, 2, 7, 13)};
    ot_tensor out[1] = {tc_out(OT_F32, 2, 7, 13)};
    assert_int_equal(hm_compare("MseLossGrad", &n, in, out), OT_OK);
    tk_node_free(&n);
    tc_free(&p);
}

/* SgdStep and AdamStep (in place on param and state): every option, bit for bit with
 * optim_cpu.c, fmaf where it fuses and separately rounded products elsewhere; the
 * APPLY flag of the step scalars off leaves everything untouched. */
static void test_host_optim(void **state) {
    (void)state;
    tc_pool p = {0};
    const int N = 1031;
    int64_t four = 4;
    struct {
        float momentum, wd;
        int nesterov;
        double scal[4];
    } sgd[] = {{0.0f, 0.0f, 0, {0.01, 1.0, 1, 1}},
               {0.9f, 0.0f, 0, {0.05, 1.0, 3, 1}},
               {0.9f, 1e-4f, 1, {0.1, 0.5, 2, 1}},
               {0.0f, 5e-4f, 0, {0.3, 0.125, 9, 1}},
               {0.9f, 1e-4f, 1, {0.1, 0.5, 2, 0}}};
    for (size_t c = 0; c < sizeof sgd / sizeof sgd[0]; c++) {
        char label[96];
        snprintf(label, sizeof label, "SgdStep momentum %g wd %g nesterov %d apply %g", (double)sgd[c].momentum,
                 (double)sgd[c].wd, sgd[c].nesterov, sgd[c].scal[3]);
        ot_tensor sc = tc_tensor(&p, OT_F64, 1, &four);
        memcpy(sc.data, sgd[c].scal, sizeof sgd[c].scal);
        bool buf = sgd[c].momentum != 0.0f;
        ot_node n = tk_node(OT_OP_SGD_STEP, 4, 0);
        ot_node_set_attr_float(&n, "momentum", sgd[c].momentum);
        ot_node_set_attr_float(&n, "weight_decay", sgd[c].wd);
        ot_node_set_attr_int(&n, "nesterov", sgd[c].nesterov);
        ot_tensor in[4] = {tc_rand(&p, 60, -1, 1, 1, N), tc_rand(&p, 61, -1, 1, 1, N),
                           buf ? tc_rand(&p, 62, -1, 1, 1, N) : tk_absent(), sc};
        hm_rng r = {0, 0, 0};
        assert_int_equal(hm_compare_ex(label, &n, in, NULL, r, true), OT_OK);
        tk_node_free(&n);
    }
    struct {
        float wd, beta1, beta2, eps;
        int decoupled;
        double scal[4];
    } adam[] = {{0.0f, 0.9f, 0.999f, 1e-8f, 0, {0.001, 1.0, 1, 1}},
                {1e-2f, 0.9f, 0.999f, 1e-8f, 1, {0.001, 1.0, 5, 1}},
                {1e-4f, 0.8f, 0.99f, 1e-6f, 0, {0.01, 0.25, 100, 1}},
                {1e-2f, 0.9f, 0.95f, 1e-8f, 1, {3e-4, 1.0, 7, 1}},
                {1e-2f, 0.9f, 0.95f, 1e-8f, 1, {3e-4, 1.0, 7, 0}}};
    for (size_t c = 0; c < sizeof adam / sizeof adam[0]; c++) {
        char label[112];
        snprintf(label, sizeof label, "AdamStep wd %g decoupled %d betas %g %g step %g apply %g", (double)adam[c].wd,
                 adam[c].decoupled, (double)adam[c].beta1, (double)adam[c].beta2, adam[c].scal[2], adam[c].scal[3]);
        ot_tensor sc = tc_tensor(&p, OT_F64, 1, &four);
        memcpy(sc.data, adam[c].scal, sizeof adam[c].scal);
        ot_node n = tk_node(OT_OP_ADAM_STEP, 5, 0);
        ot_node_set_attr_float(&n, "weight_decay", adam[c].wd);
        ot_node_set_attr_float(&n, "beta1", adam[c].beta1);
        ot_node_set_attr_float(&n, "beta2", adam[c].beta2);
        ot_node_set_attr_float(&n, "epsilon", adam[c].eps);
        ot_node_set_attr_int(&n, "decoupled", adam[c].decoupled);
        ot_tensor in[5] = {tc_rand(&p, 70, -1, 1, 1, N), tc_rand(&p, 71, -1, 1, 1, N),
                           tc_rand(&p, 72, -0.1f, 0.1f, 1, N), tc_rand(&p, 73, 0, 0.01f, 1, N), sc};
        hm_rng r = {0, 0, 0};
        assert_int_equal(hm_compare_ex(label, &n, in, NULL, r, true), OT_OK);
        tk_node_free(&n);
    }
    tc_free(&p);
}

/* Gradient accumulation's operands: floats over a wide range of exponents and signs,
 * with the specials (signed zeros, infinities, NaN, subnormals) sprinkled in. */
static void acc_operands(float *a, float *b, size_t n) {
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-42f, 3.4e38f, -3.4e38f};
    uint32_t r = 777;
    for (size_t i = 0; i < n; i++) {
        float v[2];
        for (int k = 0; k < 2; k++) {
            r = r * 1664525u + 1013904223u;
            v[k] = ldexpf((float)((double)(r >> 8) / 16777216.0 * 2.0 - 1.0), (int)(r % 40) - 20);
            if (r % 23 == 0) v[k] = special[(r >> 5) % (sizeof special / sizeof special[0])];
        }
        a[i] = v[0];
        b[i] = i % 17 == 0 ? -a[i] : v[1]; /* exact cancellations too */
    }
}

/* Bit for bit, except that any NaN equals any NaN: IEEE leaves the sign and payload
 * of NaN + NaN to the hardware and the compiler's operand order (a GPU always
 * returns its canonical NaN). */
static bool acc_same(float x, float y) { return (isnan(x) && isnan(y)) || !memcmp(&x, &y, sizeof x); }

/* ot_backend.accumulate_f32 (--accum's sums in device memory): the CUDA element code
 * in host mode against the CPU backend's, bit for bit, both with and without zeroing
 * the source (the fold of an accumulator back into the gradient). */
static void test_host_accumulate(void **state) {
    (void)state;
    enum { N = 4099 };
    ot_error e = {0};
    ot_backend *cpu = ot_backend_cpu_new(1, &e);
    assert_non_null(cpu);
    assert_non_null(cpu->accumulate_f32);
    float *a = malloc(4 * N * sizeof *a);
    assert_non_null(a);
    float *b = a + N, *ca = a + 2 * N, *cb = a + 3 * N;
    for (int clear = 0; clear < 2; clear++) {
        acc_operands(a, b, N);
        memcpy(ca, a, N * sizeof *a);
        memcpy(cb, b, N * sizeof *b);
        assert_int_equal(mod()->accumulate_host(a, b, N, clear, &e), OT_OK);
        assert_int_equal(cpu->accumulate_f32(cpu, ca, cb, N, clear, &e), OT_OK);
        for (size_t i = 0; i < N; i++)
            if (!acc_same(a[i], ca[i]) || !acc_same(b[i], cb[i]))
                fail_msg("accumulate (clear %d) at %zu: host mode %.9g (source %.9g), CPU %.9g (source %.9g)", clear, i,
                         (double)a[i], (double)b[i], (double)ca[i], (double)cb[i]);
        if (clear)
            for (size_t i = 0; i < N; i++) assert_true(b[i] == 0.0f && !signbit(b[i]));
    }
    free(a);
    ot_backend_free(cpu);
}

/* ---- comparison, logic and pointwise math (issue 13) ---------------------------------- */

/* Issue 13's ops through the CUDA element code on the host against the CPU kernels,
 * bit for bit: both call kernels/pointwise_math.h, and the host's libm is the same. */
static void test_host_pointwise_math(void **state) {
    (void)state;
    float xf[12] = {-4.0f, -3.0f, -0.5f, -0.0f, 0.0f, 0.5f, 3.0f, 4.0f, NAN, INFINITY, -INFINITY, 90.0f};
    float bf[4] = {2.0f, -1.5f, 0.0f, NAN}, dy[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int64_t a64[12] = {7, -7, 7, -7, 0, 13, -13, INT64_MIN, 5, -5, 1, INT64_MAX}, b64[4] = {3, -3, 5, -1};
    int32_t a32[12] = {7, -7, 7, -7, 0, 13, -13, INT32_MIN, 5, -5, 1, INT32_MAX}, b32[4] = {3, -3, 5, -1};
    uint8_t ab[12] = {0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0}, bb[4] = {0, 1, 1, 0};
    /* comparisons on three dtypes, logic on bool, a [3, 4] against a [4] */
    ot_op cmp[4] = {OT_OP_LESS, OT_OP_GREATER, OT_OP_LESS_OR_EQUAL, OT_OP_GREATER_OR_EQUAL};
    struct {
        ot_dtype t;
        void *a, *b;
    } cases[3] = {{OT_F32, xf, bf}, {OT_I64, a64, b64}, {OT_I32, a32, b32}};
    ot_tensor bout[1] = {tc_out(OT_BOOL, 2, 3, 4)};
    for (int o = 0; o < 4; o++)
        for (int k = 0; k < 3; k++) {
            ot_node n = tk_node(cmp[o], 2, 1);
            ot_tensor in[2] = {tk_t(cases[k].t, cases[k].a, 2, 3, 4), tk_t(cases[k].t, cases[k].b, 1, 4)};
            assert_int_equal(hm_compare(ot_op_name(cmp[o]), &n, in, bout), OT_OK);
            tk_node_free(&n);
        }
    ot_op logic[3] = {OT_OP_AND, OT_OP_OR, OT_OP_XOR};
    for (int o = 0; o < 3; o++) {
        ot_node n = tk_node(logic[o], 2, 1);
        ot_tensor in[2] = {tk_t(OT_BOOL, ab, 2, 3, 4), tk_t(OT_BOOL, bb, 1, 4)};
        assert_int_equal(hm_compare(ot_op_name(logic[o]), &n, in, bout), OT_OK);
        tk_node_free(&n);
    }
    ot_node nt = tk_node(OT_OP_NOT, 1, 1), nn = tk_node(OT_OP_IS_NAN, 1, 1);
    ot_tensor bin[1] = {tk_t(OT_BOOL, ab, 2, 3, 4)}, fin[1] = {tk_t(OT_F32, xf, 2, 3, 4)};
    assert_int_equal(hm_compare("Not", &nt, bin, bout), OT_OK);
    assert_int_equal(hm_compare("IsNaN", &nn, fin, bout), OT_OK);
    for (int neg = 0; neg < 2; neg++) {
        ot_node ii = tk_node(OT_OP_IS_INF, 1, 1);
        ot_node_set_attr_int(&ii, "detect_negative", neg);
        ot_node_set_attr_int(&ii, "detect_positive", !neg);
        assert_int_equal(hm_compare("IsInf", &ii, fin, bout), OT_OK);
        tk_node_free(&ii);
    }
    double xd[4] = {1e300, NAN, INFINITY, -INFINITY};
    ot_tensor din[1] = {tk_t(OT_F64, xd, 1, 4)}, dout[1] = {tc_out(OT_BOOL, 1, 4)};
    ot_node id = tk_node(OT_OP_IS_INF, 1, 1);
    assert_int_equal(hm_compare("IsInf float64", &id, din, dout), OT_OK);
    assert_int_equal(hm_compare("IsNaN float64", &nn, din, dout), OT_OK);
    tk_node_free(&nt), tk_node_free(&nn), tk_node_free(&id);
    /* unary maths, their gradients (dY, X) */
    ot_tensor fout[1] = {tc_out(OT_F32, 2, 3, 4)};
    ot_op un[7] = {OT_OP_ABS, OT_OP_SIN, OT_OP_COS, OT_OP_HARD_SIGMOID, OT_OP_HARD_SWISH, OT_OP_SOFTPLUS, OT_OP_MISH};
    for (int o = 0; o < 7; o++) {
        ot_node n = tk_node(un[o], 1, 1);
        if (un[o] == OT_OP_HARD_SIGMOID) ot_node_set_attr_float(&n, "alpha", 0.25f);
        assert_int_equal(hm_compare(ot_op_name(un[o]), &n, fin, fout), OT_OK);
        tk_node_free(&n);
    }
    ot_op gr[4] = {OT_OP_ABS_GRAD, OT_OP_HARD_SIGMOID_GRAD, OT_OP_HARD_SWISH_GRAD, OT_OP_MISH_GRAD};
    ot_tensor gin[2] = {tk_t(OT_F32, dy, 2, 3, 4), tk_t(OT_F32, xf, 2, 3, 4)};
    for (int o = 0; o < 4; o++) {
        ot_node n = tk_node(gr[o], 2, 1);
        assert_int_equal(hm_compare(ot_op_name(gr[o]), &n, gin, fout), OT_OK);
        tk_node_free(&n);
    }
    /* Abs on integers; Min / Max (variadic, broadcast, NaN); Mod in both modes */
    ot_node ai = tk_node(OT_OP_ABS, 1, 1);
    ot_tensor iin[1] = {tk_t(OT_I64, a64, 1, 12)}, iout[1] = {tc_out(OT_I64, 1, 12)};
    assert_int_equal(hm_compare("Abs int64", &ai, iin, iout), OT_OK);
    tk_node_free(&ai);
    float c1 = 0.25f;
    for (int mx = 0; mx < 2; mx++) {
        ot_node n = tk_node(mx ? OT_OP_MAX : OT_OP_MIN, 3, 1);
        ot_tensor in[3] = {tk_t(OT_F32, xf, 2, 3, 4), tk_t(OT_F32, bf, 1, 4), tk_t(OT_F32, &c1, 0)};
        assert_int_equal(hm_compare(mx ? "Max" : "Min", &n, in, fout), OT_OK);
        ot_tensor in2[2] = {tk_t(OT_I32, a32, 2, 3, 4), tk_t(OT_I32, b32, 1, 4)};
        n.n_inputs = 2;
        ot_tensor o32[1] = {tc_out(OT_I32, 2, 3, 4)};
        assert_int_equal(hm_compare(mx ? "Max int32" : "Min int32", &n, in2, o32), OT_OK);
        tk_node_free(&n);
    }
    for (int fm = 0; fm < 2; fm++) {
        ot_node n = tk_node(OT_OP_MOD, 2, 1);
        ot_node_set_attr_int(&n, "fmod", fm);
        ot_tensor in[2] = {tk_t(OT_I64, a64, 2, 3, 4), tk_t(OT_I64, b64, 1, 4)}, o64[1] = {tc_out(OT_I64, 2, 3, 4)};
        assert_int_equal(hm_compare("Mod int64", &n, in, o64), OT_OK);
        int64_t z[4] = {1, 0, 1, 1};
        in[1] = tk_t(OT_I64, z, 1, 4);
        assert_int_equal(hm_compare("Mod int64 by zero", &n, in, o64), OT_E_DATA);
        ot_tensor fi[2] = {tk_t(OT_F32, xf, 2, 3, 4), tk_t(OT_F32, bf, 1, 4)};
        assert_int_equal(hm_compare("Mod float32", &n, fi, fout), fm ? OT_OK : OT_E_MODEL);
        tk_node_free(&n);
    }
    /* ModGrad; MaxGrad / MinGrad with ties, NaN and a broadcast input */
    ot_node mg = tk_node(OT_OP_MOD_GRAD, 3, 1);
    ot_tensor mgi[3] = {tk_t(OT_F32, dy, 2, 3, 4), tk_t(OT_F32, xf, 2, 3, 4), tk_t(OT_F32, bf, 1, 4)};
    assert_int_equal(hm_compare("ModGrad", &mg, mgi, fout), OT_OK);
    tk_node_free(&mg);
    float x1[12] = {-4.0f, -2.0f, -0.5f, 0.0f, -0.0f, 1.0f, 3.0f, 4.0f, 1.0f, 1.0f, INFINITY, 0.0f}, y[12];
    for (int mx = 0; mx < 2; mx++) {
        for (int i = 0; i < 12; i++) y[i] = mx ? fmaxf(xf[i], x1[i]) : fminf(xf[i], x1[i]);
        y[8] = NAN;
        for (int k = 0; k < 3; k++) {
            ot_node n = tk_node(mx ? OT_OP_MAX_GRAD : OT_OP_MIN_GRAD, 5, 1);
            ot_node_set_attr_int(&n, "index", k);
            ot_tensor in[5] = {tk_t(OT_F32, dy, 2, 3, 4), tk_t(OT_F32, y, 2, 3, 4), tk_t(OT_F32, xf, 2, 3, 4),
                               tk_t(OT_F32, x1, 2, 3, 4), tk_t(OT_F32, bf, 1, 4)};
            assert_int_equal(hm_compare(mx ? "MaxGrad" : "MinGrad", &n, in, fout), OT_OK);
            tk_node_free(&n);
        }
    }
}

/* The same ops on the GPU against the CPU: exact where the rule is (comparisons,
 * integers, selections), within float32 rounding where the device's libm is used. */
static void test_pointwise_math(void **state) {
    tc_pool p = {0};
    ot_op un[7] = {OT_OP_ABS, OT_OP_SIN, OT_OP_COS, OT_OP_HARD_SIGMOID, OT_OP_HARD_SWISH, OT_OP_SOFTPLUS, OT_OP_MISH};
    for (int o = 0; o < 7; o++) {
        ot_node n = tk_node(un[o], 1, 1);
        ot_tensor in[1] = {tc_rand(&p, 60 + (uint32_t)o, -8.0f, 8.0f, 2, 37, 29)}, out[1] = {tc_out(OT_F32, 2, 37, 29)};
        tc_check(backend_of(state), ot_op_name(un[o]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
    }
    ot_op gr[4] = {OT_OP_ABS_GRAD, OT_OP_HARD_SIGMOID_GRAD, OT_OP_HARD_SWISH_GRAD, OT_OP_MISH_GRAD};
    for (int o = 0; o < 4; o++) {
        ot_node n = tk_node(gr[o], 2, 1);
        ot_tensor in[2] = {tc_rand(&p, 70 + (uint32_t)o, -2, 2, 1, 1000), tc_rand(&p, 80 + (uint32_t)o, -5, 5, 1, 1000)};
        ot_tensor out[1] = {tc_out(OT_F32, 1, 1000)};
        tc_check(backend_of(state), ot_op_name(gr[o]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
    }
    ot_op bin[5] = {OT_OP_LESS, OT_OP_GREATER_OR_EQUAL, OT_OP_MAX, OT_OP_MIN, OT_OP_MOD};
    for (int o = 0; o < 5; o++) {
        ot_node n = tk_node(bin[o], 2, 1);
        if (bin[o] == OT_OP_MOD) ot_node_set_attr_int(&n, "fmod", 1);
        ot_tensor in[2] = {tc_rand(&p, 90 + (uint32_t)o, -3, 3, 3, 2, 3, 4), tc_rand(&p, 95 + (uint32_t)o, 0.5f, 2, 2, 3, 1)};
        bool to_bool = bin[o] == OT_OP_LESS || bin[o] == OT_OP_GREATER_OR_EQUAL;
        ot_tensor out[1] = {tc_out(to_bool ? OT_BOOL : OT_F32, 3, 2, 3, 4)};
        tc_check(backend_of(state), ot_op_name(bin[o]), &n, in, out, 0, 0, 0, 0);
        tk_node_free(&n);
    }
    int64_t a[6] = {7, -7, 7, -7, INT64_MIN, 13}, b[3] = {3, -3, 5};
    ot_node m = tk_node(OT_OP_MOD, 2, 1);
    ot_tensor min[2] = {tc_ints(&p, 6, a), tc_ints(&p, 3, b)};
    min[0].shape = ot_shape_make(2, (int64_t[]){2, 3});
    ot_tensor mout[1] = {tc_out(OT_I64, 2, 2, 3)};
    tc_check(backend_of(state), "Mod int64 (fmod 0)", &m, min, mout, 0, 0, 0, 0);
    tk_node_free(&m);
    ot_node g = tk_node(OT_OP_MAX_GRAD, 4, 1);
    ot_tensor x0 = tc_rand(&p, 101, -1, 1, 1, 500), x1 = tc_rand(&p, 102, -1, 1, 1, 500);
    ot_tensor yv = tc_tensor(&p, OT_F32, 1, (int64_t[]){500});
    for (int i = 0; i < 500; i++) {
        if (i % 7 == 0) ((float *)x1.data)[i] = ((float *)x0.data)[i]; /* ties */
        ((float *)yv.data)[i] = fmaxf(((float *)x0.data)[i], ((float *)x1.data)[i]);
    }
    ot_tensor gin[4] = {tc_rand(&p, 103, -1, 1, 1, 500), yv, x0, x1}, gout[1] = {tc_out(OT_F32, 1, 500)};
    tc_check(backend_of(state), "MaxGrad", &g, gin, gout, 0, 0, 0, 0);
    tk_node_free(&g);
    tc_free(&p);
}

/* ---- matmul family ------------------------------------------------------------------ */

static void test_gemm(void **state) {
    tc_pool p = {0};
    ot_node n = tk_node(OT_OP_GEMM, 3, 1);
    ot_node_set_attr_int(&n, "transB", 1);
    ot_node_set_attr_float(&n, "alpha", 0.5f);
    ot_tensor in[3] = {tc_rand(&p, 1, -1, 1, 2, 17, 33), tc_rand(&p, 2, -1, 1, 2, 9, 33), tc_rand(&p, 3, -1, 1, 1, 9)};
    ot_tensor out[1] = {tc_out(OT_F32, 2, 17, 9)};
    tc_check(backend_of(state), "Gemm transB + bias", &n, in, out, TOL, 0, 0, 0);
    ot_node_set_attr_int(&n, "transB", 0);
    ot_node_set_attr_int(&n, "transA", 1);
    ot_tensor in2[3] = {tc_rand(&p, 4, -1, 1, 2, 33, 17), tc_rand(&p, 5, -1, 1, 2, 33, 9), tc_rand(&p, 6, -1, 1, 2, 17, 1)};
    tc_check(backend_of(state), "Gemm transA + column bias", &n, in2, out, TOL, 0, 0, 0);
    tk_node_free(&n);
    tc_free(&p);
}

static void test_matmul(void **state) {
    tc_pool p = {0};
    ot_node n = tk_node(OT_OP_MATMUL, 2, 1);
    ot_tensor a[2] = {tc_rand(&p, 1, -1, 1, 3, 4, 5, 6), tc_rand(&p, 2, -1, 1, 2, 6, 7)};
    ot_tensor o1[1] = {tc_out(OT_F32, 3, 4, 5, 7)};
    tc_check(backend_of(state), "MatMul shared B", &n, a, o1, TOL, 0, 0, 0);
    ot_tensor b[2] = {tc_rand(&p, 3, -1, 1, 4, 2, 3, 5, 6), tc_rand(&p, 4, -1, 1, 4, 2, 3, 6, 4)};
    ot_tensor o2[1] = {tc_out(OT_F32, 4, 2, 3, 5, 4)};
    tc_check(backend_of(state), "MatMul batched", &n, b, o2, TOL, 0, 0, 0);
    ot_tensor c[2] = {tc_rand(&p, 5, -1, 1, 4, 2, 1, 5, 6), tc_rand(&p, 6, -1, 1, 3, 3, 6, 4)};
    ot_tensor o3[1] = {tc_out(OT_F32, 4, 2, 3, 5, 4)};
    tc_check(backend_of(state), "MatMul mixed broadcast", &n, c, o3, TOL, 0, 0, 0);
    ot_tensor d[2] = {tc_rand(&p, 7, -1, 1, 1, 6), tc_rand(&p, 8, -1, 1, 3, 3, 6, 4)};
    ot_tensor o4[1] = {tc_out(OT_F32, 2, 3, 4)};
    tc_check(backend_of(state), "MatMul vector x batch", &n, d, o4, TOL, 0, 0, 0);
    tk_node_free(&n);
    tc_free(&p);
}

/* ---- pointwise ------------------------------------------------------------------------ */

static void test_binary(void **state) {
    tc_pool p = {0};
    ot_op ops[] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV, OT_OP_POW};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ot_node n = tk_node(ops[i], 2, 1);
        ot_tensor in[2] = {tc_rand(&p, 10 + (uint32_t)i, 0.5f, 2, 3, 2, 3, 4), tc_rand(&p, 20 + (uint32_t)i, 0.5f, 2, 2, 3, 1)};
        ot_tensor out[1] = {tc_out(OT_F32, 3, 2, 3, 4)};
        tc_check(backend_of(state), ot_op_name(ops[i]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
    }
    ot_node n = tk_node(OT_OP_ADD, 2, 1);
    int64_t a[6] = {1, -2, 3, INT64_MAX, 5, 6}, b[1] = {7};
    ot_tensor in[2] = {tc_ints(&p, 6, a), tc_ints(&p, 1, b)};
    ot_tensor out[1] = {tc_out(OT_I64, 1, 6)};
    tc_check(backend_of(state), "Add int64 (wraps)", &n, in, out, 0, 0, 0, 0);
    tk_node_free(&n);
    ot_node d = tk_node(OT_OP_DIV, 2, 1);
    int64_t num[6] = {-7, 7, INT64_MIN, INT64_MAX, -1, 5}, den[3] = {2, -1, -3};
    ot_tensor din[2] = {tc_ints(&p, 6, num), tc_ints(&p, 3, den)};
    din[0].shape = ot_shape_make(2, (int64_t[]){2, 3});
    ot_tensor dout[1] = {tc_out(OT_I64, 2, 2, 3)};
    tc_check(backend_of(state), "Div int64 (truncates, MIN / -1 wraps)", &d, din, dout, 0, 0, 0, 0);
    tk_node_free(&d);
    ot_node pw = tk_node(OT_OP_POW, 2, 1);
    int64_t e[6] = {10, 3, 0, 1, -1, 2};
    ot_tensor pin[2] = {tc_ints(&p, 6, num), tc_ints(&p, 6, e)};
    ot_tensor pout[1] = {tc_out(OT_I64, 1, 6)};
    tc_check(backend_of(state), "Pow int64", &pw, pin, pout, 0, 0, 0, 0);
    tk_node_free(&pw);
    tc_free(&p);
}

static void test_unary(void **state) {
    tc_pool p = {0};
    ot_op ops[] = {OT_OP_SQRT, OT_OP_RECIPROCAL, OT_OP_NEG, OT_OP_EXP, OT_OP_LOG, OT_OP_ERF, OT_OP_TANH,
                   OT_OP_SIGMOID, OT_OP_RELU, OT_OP_LEAKY_RELU, OT_OP_CLIP, OT_OP_GELU};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ot_node n = tk_node(ops[i], 1, 1);
        bool pos = ops[i] == OT_OP_SQRT || ops[i] == OT_OP_LOG;
        if (ops[i] == OT_OP_CLIP) {
            ot_node_set_attr_float(&n, "min", 0.0f);
            ot_node_set_attr_float(&n, "max", 6.0f);
        }
        ot_tensor in[1] = {tc_rand(&p, 30 + (uint32_t)i, pos ? 0.1f : -8.0f, 8.0f, 2, 37, 29)};
        ot_tensor out[1] = {tc_out(OT_F32, 2, 37, 29)};
        tc_check(backend_of(state), ot_op_name(ops[i]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
    }
    ot_node c = tk_node(OT_OP_CLIP, 1, 1);
    ot_node_set_attr_float(&c, "min", -3.5f);
    ot_node_set_attr_float(&c, "max", 100.7f);
    int64_t v[6] = {INT64_MIN, -4, -3, 100, 101, INT64_MAX};
    ot_tensor cin[1] = {tc_ints(&p, 6, v)};
    ot_tensor cout[1] = {tc_out(OT_I64, 1, 6)};
    tc_check(backend_of(state), "Clip int64", &c, cin, cout, 0, 0, 0, 0);
    tk_node_free(&c);
    tc_free(&p);
}

static void test_act_grads(void **state) {
    tc_pool p = {0};
    ot_op ops[] = {OT_OP_RELU_GRAD, OT_OP_LEAKY_RELU_GRAD, OT_OP_SIGMOID_GRAD, OT_OP_TANH_GRAD,
                   OT_OP_GELU_GRAD, OT_OP_ERF_GRAD, OT_OP_CLIP_GRAD};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ot_node n = tk_node(ops[i], 2, 1);
        if (ops[i] == OT_OP_CLIP_GRAD) {
            ot_node_set_attr_float(&n, "min", -1.0f);
            ot_node_set_attr_float(&n, "max", 2.0f);
        }
        ot_tensor in[2] = {tc_rand(&p, 40 + (uint32_t)i, -2, 2, 1, 1000), tc_rand(&p, 50 + (uint32_t)i, -3, 3, 1, 1000)};
        ot_tensor out[1] = {tc_out(OT_F32, 1, 1000)};
        /* values exactly at the bounds (and at ReLU's 0), where the rules must agree */
        float *xv = in[1].data;
        for (int k = 0; k < 1000; k += 10) xv[k] = k % 30 == 0 ? -1.0f : k % 30 == 10 ? 2.0f : 0.0f;
        tc_check(backend_of(state), ot_op_name(ops[i]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
    }
    tc_free(&p);
}

/* Masks must be bitwise the CPU's: Philox with the same key layout. */
static void test_dropout(void **state) {
    tc_pool p = {0};
    ot_node n = tk_node(OT_OP_DROPOUT, 1, 2);
    ot_node_set_attr_float(&n, "ratio", 0.3f);
    ot_node_set_attr_int(&n, "training_mode", 1);
    ot_tensor in[1] = {tc_rand(&p, 60, -1, 1, 2, 100, 77)};
    ot_tensor out[2] = {tc_out(OT_F32, 2, 100, 77), tc_out(OT_BOOL, 2, 100, 77)};
    tc_check(backend_of(state), "Dropout", &n, in, out, 0.0, 0x123456789abcdefULL, 7, 42);
    tk_node_free(&n);
    ot_node g = tk_node(OT_OP_DROPOUT_GRAD, 2, 1);
    ot_node_set_attr_float(&g, "ratio", 0.3f);
    ot_node_set_attr_int(&g, "rng_node", 42);
    ot_tensor gin[2] = {tc_rand(&p, 61, -1, 1, 2, 100, 77), in[0]};
    ot_tensor gout[1] = {tc_out(OT_F32, 2, 100, 77)};
    tc_check(backend_of(state), "DropoutGrad", &g, gin, gout, 0.0, 0x123456789abcdefULL, 7, 5);
    tk_node_free(&g);
    /* the random sources of issue 13 draw from the same generator: bitwise too */
    ot_node u = tk_node(OT_OP_RANDOM_UNIFORM_LIKE, 1, 1);
    ot_node_set_attr_float(&u, "low", -0.5f);
    ot_node_set_attr_float(&u, "high", 2.0f);
    ot_tensor uout[1] = {tc_out(OT_F32, 2, 100, 77)};
    tc_check(backend_of(state), "RandomUniformLike", &u, in, uout, 0.0, 0x123456789abcdefULL, 7, 42);
    tk_node_free(&u);
    tc_free(&p);
}

static void test_where_equal_cast_expand(void **state) {
    tc_pool p = {0};
    int64_t a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 3, 0, 5, 0};
    ot_node eq = tk_node(OT_OP_EQUAL, 2, 1);
    ot_tensor ein[2] = {tc_ints(&p, 6, a), tc_ints(&p, 6, b)};
    ot_tensor eout[1] = {tc_out(OT_BOOL, 1, 6)};
    tc_check(backend_of(state), "Equal", &eq, ein, eout, 0, 0, 0, 0);
    tk_node_free(&eq);

    ot_node w = tk_node(OT_OP_WHERE, 3, 1);
    int64_t cd[2] = {2, 3};
    ot_tensor cond = tc_tensor(&p, OT_BOOL, 2, cd);
    for (int i = 0; i < 6; i++) ((uint8_t *)cond.data)[i] = (uint8_t)(i % 2);
    ot_tensor win[3] = {cond, tc_rand(&p, 70, -1, 1, 2, 2, 3), tc_rand(&p, 71, -1, 1, 1, 3)};
    ot_tensor wout[1] = {tc_out(OT_F32, 2, 2, 3)};
    tc_check(backend_of(state), "Where", &w, win, wout, 0, 0, 0, 0);
    tk_node_free(&w);

    ot_node c = tk_node(OT_OP_CAST, 1, 1);
    ot_tensor cin[1] = {tc_rand(&p, 72, -100, 100, 1, 50)};
    ot_tensor cout[1] = {tc_out(OT_I64, 1, 50)};
    tc_check(backend_of(state), "Cast f32->i64", &c, cin, cout, 0, 0, 0, 0);
    ot_tensor hout[1] = {tc_out(OT_F16, 1, 50)}, bout[1] = {tc_out(OT_BF16, 1, 50)};
    tc_check(backend_of(state), "Cast f32->f16", &c, cin, hout, 0, 0, 0, 0);
    tc_check(backend_of(state), "Cast f32->bf16", &c, cin, bout, 0, 0, 0, 0);
    int64_t fifty = 50;
    ot_tensor hin[1] = {tc_tensor(&p, OT_F16, 1, &fifty)};
    for (int i = 0; i < 50; i++) ((uint16_t *)hin[0].data)[i] = (uint16_t)(i * 1297 + 3);
    ot_tensor fout[1] = {tc_out(OT_F32, 1, 50)};
    tc_check(backend_of(state), "Cast f16->f32", &c, hin, fout, 0, 0, 0, 0);
    tk_node_free(&c);

    ot_node x = tk_node(OT_OP_EXPAND, 2, 1);
    int64_t shp[3] = {2, 3, 4};
    ot_tensor xin[2] = {tc_rand(&p, 73, -1, 1, 2, 3, 1), tc_ints(&p, 3, shp)};
    ot_tensor xout[1] = {tc_out(OT_F32, 3, 2, 3, 4)};
    tc_check(backend_of(state), "Expand", &x, xin, xout, 0, 0, 0, 0);
    tk_node_free(&x);

    ot_node s = tk_node(OT_OP_SUM, 3, 1);
    ot_tensor sin[3] = {tc_rand(&p, 74, -1, 1, 2, 3, 4), tc_rand(&p, 75, -1, 1, 1, 4), tc_rand(&p, 76, -1, 1, 2, 3, 1)};
    ot_tensor sout[1] = {tc_out(OT_F32, 2, 3, 4)};
    tc_check(backend_of(state), "Sum", &s, sin, sout, TOL, 0, 0, 0);
    tk_node_free(&s);
    tc_free(&p);
}

/* ---- layout ----------------------------------------------------------------------------- */

static void test_layout(void **state) {
    tc_pool p = {0};
    ot_node t = tk_node(OT_OP_TRANSPOSE, 1, 1);
    int64_t perm[4] = {0, 2, 3, 1};
    ot_node_set_attr_ints(&t, "perm", perm, 4);
    ot_tensor tin[1] = {tc_rand(&p, 80, -1, 1, 4, 2, 3, 4, 5)};
    ot_tensor tout[1] = {tc_out(OT_F32, 4, 2, 4, 5, 3)};
    tc_check(backend_of(state), "Transpose", &t, tin, tout, 0, 0, 0, 0);
    tk_node_free(&t);

    ot_node c = tk_node(OT_OP_CONCAT, 3, 1);
    ot_node_set_attr_int(&c, "axis", 1);
    ot_tensor cin[3] = {tc_rand(&p, 81, -1, 1, 3, 2, 1, 4), tc_rand(&p, 82, -1, 1, 3, 2, 3, 4),
                        tc_rand(&p, 83, -1, 1, 3, 2, 2, 4)};
    ot_tensor cout[1] = {tc_out(OT_F32, 3, 2, 6, 4)};
    tc_check(backend_of(state), "Concat", &c, cin, cout, 0, 0, 0, 0);
    tk_node_free(&c);

    ot_node s = tk_node(OT_OP_SPLIT, 1, 2);
    int64_t sp[2] = {2, 4};
    ot_node_set_attr_int(&s, "axis", -1);
    ot_node_set_attr_ints(&s, "split", sp, 2);
    ot_tensor sin[1] = {tc_rand(&p, 84, -1, 1, 2, 3, 6)};
    ot_tensor sout[2] = {tc_out(OT_F32, 2, 3, 2), tc_out(OT_F32, 2, 3, 4)};
    tc_check(backend_of(state), "Split", &s, sin, sout, 0, 0, 0, 0);
    tk_node_free(&s);

    ot_node sl = tk_node(OT_OP_SLICE, 5, 1);
    int64_t st[2] = {1, -1}, en[2] = {5, 0}, ax[2] = {1, 2}, stp[2] = {2, -2};
    ot_tensor slin[5] = {tc_rand(&p, 85, -1, 1, 3, 2, 6, 5), tc_ints(&p, 2, st), tc_ints(&p, 2, en), tc_ints(&p, 2, ax),
                         tc_ints(&p, 2, stp)};
    ot_tensor slout[1] = {tc_out(OT_F32, 3, 2, 2, 2)};
    tc_check(backend_of(state), "Slice with steps", &sl, slin, slout, 0, 0, 0, 0);
    tk_node_free(&sl);

    ot_node sg = tk_node(OT_OP_SLICE_GRAD, 6, 1);
    ot_tensor sgin[6] = {tc_rand(&p, 86, -1, 1, 3, 2, 2, 2), slin[0], slin[1], slin[2], slin[3], slin[4]};
    ot_tensor sgout[1] = {tc_out(OT_F32, 3, 2, 6, 5)};
    tc_check(backend_of(state), "SliceGrad", &sg, sgin, sgout, 0, 0, 0, 0);
    tk_node_free(&sg);

    ot_node g = tk_node(OT_OP_GATHER, 2, 1);
    int64_t idx[5] = {3, 0, -1, 3, 2};
    ot_tensor gin[2] = {tc_rand(&p, 87, -1, 1, 2, 5, 7), tc_ints(&p, 5, idx)};
    ot_tensor gout[1] = {tc_out(OT_F32, 2, 5, 7)};
    tc_check(backend_of(state), "Gather", &g, gin, gout, 0, 0, 0, 0);
    tk_node_free(&g);

    ot_node gg = tk_node(OT_OP_GATHER_GRAD, 3, 1);
    ot_tensor ggin[3] = {tc_rand(&p, 88, -1, 1, 2, 5, 7), gin[1], gin[0]};
    ot_tensor ggout[1] = {tc_out(OT_F32, 2, 5, 7)};
    tc_check(backend_of(state), "GatherGrad (repeated indices)", &gg, ggin, ggout, TOL, 0, 0, 0);
    tk_node_free(&gg);
    tc_free(&p);
}

/* ot_backend.scan_f32 (the training loop's NaN checks and gradient norm without a
 * copy): a grid-stride scan over more elements than one launch covers, the first bad
 * index past the first block's range, and the sum of squares against the CPU's. */
static void test_scan(void **state) {
    ot_backend *be = backend_of(state);
    ot_error err = {0};
    assert_non_null(be->scan_f32);
    size_t n = 3000000;
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    uint32_t r = 12345;
    double want = 0.0;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        h[i] = (float)((double)(r >> 8) / 16777216.0 * 2.0 - 1.0);
        want += (double)h[i] * (double)h[i];
    }
    void *d = NULL;
    if (be->arena_alloc(be, n * sizeof *h, &d, &err)) fail_msg("%s", err.msg);
    if (be->copy_in(be, d, h, n * sizeof *h, &err)) fail_msg("%s", err.msg);
    int64_t bad = 0;
    double ss = 0.0;
    if (be->scan_f32(be, d, n, &bad, &ss, &err)) fail_msg("%s", err.msg);
    assert_int_equal(bad, -1);
    if (fabs(ss - want) > 1e-12 * want) fail_msg("scan_f32: sum of squares %.17g, CPU %.17g", ss, want);
    if (be->scan_f32(be, d, 0, &bad, &ss, &err)) fail_msg("%s", err.msg); /* empty: nothing bad, sum 0 */
    assert_int_equal(bad, -1);
    assert_true(ss == 0.0);
    h[2999999] = INFINITY;
    h[2500001] = NAN;
    if (be->copy_in(be, d, h, n * sizeof *h, &err)) fail_msg("%s", err.msg);
    if (be->scan_f32(be, d, n, &bad, NULL, &err)) fail_msg("%s", err.msg);
    if (bad != 2500001) fail_msg("scan_f32: first non-finite at %lld, want 2500001", (long long)bad);
    be->arena_free(be, d);
    free(h);
}

/* The same accumulation on the GPU, over more elements than one launch's blocks
 * cover, against the CPU backend's bit for bit. */
static void test_accumulate(void **state) {
    ot_backend *be = backend_of(state);
    ot_error err = {0};
    assert_non_null(be->accumulate_f32);
    ot_backend *cpu = ot_backend_cpu_new(1, &err);
    assert_non_null(cpu);
    size_t n = 3000001;
    float *h = malloc(4 * n * sizeof *h);
    assert_non_null(h);
    float *a = h, *b = h + n, *ga = h + 2 * n, *gb = h + 3 * n;
    void *d = NULL;
    if (be->arena_alloc(be, 2 * n * sizeof *h, &d, &err)) fail_msg("%s", err.msg);
    float *da = d, *db = da + n;
    for (int clear = 0; clear < 2; clear++) {
        acc_operands(a, b, n);
        if (be->copy_in(be, da, a, n * sizeof *a, &err) || be->copy_in(be, db, b, n * sizeof *b, &err))
            fail_msg("%s", err.msg);
        if (be->accumulate_f32(be, da, db, n, clear, &err)) fail_msg("%s", err.msg);
        if (be->copy_out(be, ga, da, n * sizeof *a, &err) || be->copy_out(be, gb, db, n * sizeof *b, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(cpu->accumulate_f32(cpu, a, b, n, clear, &err), OT_OK);
        for (size_t i = 0; i < n; i++)
            if (!acc_same(a[i], ga[i]) || !acc_same(b[i], gb[i]))
                fail_msg("accumulate_f32 (clear %d) at %zu: GPU %.9g (source %.9g), CPU %.9g (source %.9g)", clear, i,
                         (double)ga[i], (double)gb[i], (double)a[i], (double)b[i]);
    }
    be->arena_free(be, d);
    free(h);
    ot_backend_free(cpu);
}

/* ---- reductions and normalisation ------------------------------------------------------- */

static void test_reduce(void **state) {
    tc_pool p = {0};
    ot_node r = tk_node(OT_OP_REDUCE_MEAN, 1, 1);
    int64_t axes[2] = {0, 2};
    ot_node_set_attr_ints(&r, "axes", axes, 2);
    ot_node_set_attr_int(&r, "keepdims", 1);
    ot_tensor rin[1] = {tc_rand(&p, 90, -1, 1, 3, 6, 5, 300)};
    ot_tensor rout[1] = {tc_out(OT_F32, 3, 1, 5, 1)};
    tc_check(backend_of(state), "ReduceMean", &r, rin, rout, TOL_RED, 0, 0, 0);
    tk_node_free(&r);

    ot_node s = tk_node(OT_OP_REDUCE_SUM, 1, 1);
    ot_tensor sout[1] = {tc_out(OT_F32, 0)};
    tc_check(backend_of(state), "ReduceSum all", &s, rin, sout, TOL_RED, 0, 0, 0);
    tk_node_free(&s);

    ot_node rl = tk_node(OT_OP_REDUCE_TO_LIKE, 2, 1);
    ot_tensor rlin[2] = {tc_rand(&p, 91, -1, 1, 3, 4, 3, 5), tc_rand(&p, 92, -1, 1, 2, 3, 1)};
    ot_tensor rlout[1] = {tc_out(OT_F32, 2, 3, 1)};
    tc_check(backend_of(state), "ReduceToLike", &rl, rlin, rlout, TOL_RED, 0, 0, 0);
    tk_node_free(&rl);

    ot_node el = tk_node(OT_OP_EXPAND_LIKE, 2, 1);
    ot_tensor elin[2] = {rlout[0], rlin[0]};
    elin[0] = tc_rand(&p, 93, -1, 1, 2, 3, 1);
    ot_tensor elout[1] = {tc_out(OT_F32, 3, 4, 3, 5)};
    tc_check(backend_of(state), "ExpandLike", &el, elin, elout, 0, 0, 0, 0);
    tk_node_free(&el);
    tc_free(&p);
}

static void test_softmax(void **state) {
    tc_pool p = {0};
    for (int axis = -1; axis <= 1; axis += 2) {
        for (int lg = 0; lg < 2; lg++) {
            ot_node n = tk_node(lg ? OT_OP_LOG_SOFTMAX : OT_OP_SOFTMAX, 1, 1);
            ot_node_set_attr_int(&n, "axis", axis);
            ot_tensor in[1] = {tc_rand(&p, 100 + (uint32_t)lg, -5, 5, 3, 4, 70, 9)};
            ot_tensor out[1] = {tc_out(OT_F32, 3, 4, 70, 9)};
            tc_check(backend_of(state), lg ? "LogSoftmax" : "Softmax", &n, in, out, TOL, 0, 0, 0);
            tk_node_free(&n);
            ot_node gn = tk_node(lg ? OT_OP_LOG_SOFTMAX_GRAD : OT_OP_SOFTMAX_GRAD, 2, 1);
            ot_node_set_attr_int(&gn, "axis", axis);
            ot_tensor gin[2] = {tc_rand(&p, 110 + (uint32_t)lg, -1, 1, 3, 4, 70, 9), tc_rand(&p, 120, 0.01f, 0.5f, 3, 4, 70, 9)};
            tc_check(backend_of(state), lg ? "LogSoftmaxGrad" : "SoftmaxGrad", &gn, gin, out, TOL_RED, 0, 0, 0);
            tk_node_free(&gn);
        }
    }
    tc_free(&p);
}

static void test_layer_norm(void **state) {
    tc_pool p = {0};
    ot_node n = tk_node(OT_OP_LAYER_NORM, 3, 3);
    ot_node_set_attr_int(&n, "axis", -1);
    ot_tensor in[3] = {tc_rand(&p, 130, -2, 3, 3, 2, 7, 96), tc_rand(&p, 131, 0.5f, 1.5f, 1, 96),
                       tc_rand(&p, 132, -1, 1, 1, 96)};
    ot_tensor out[3] = {tc_out(OT_F32, 3, 2, 7, 96), tc_out(OT_F32, 3, 2, 7, 1), tc_out(OT_F32, 3, 2, 7, 1)};
    tc_check(backend_of(state), "LayerNormalization", &n, in, out, TOL_RED, 0, 0, 0);
    tk_node_free(&n);
    ot_node g = tk_node(OT_OP_LAYER_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&g, "axis", -1);
    ot_tensor gin[3] = {tc_rand(&p, 133, -1, 1, 3, 2, 7, 96), in[0], in[1]};
    ot_tensor gout[3] = {tc_out(OT_F32, 3, 2, 7, 96), tc_out(OT_F32, 1, 96), tc_out(OT_F32, 1, 96)};
    tc_check(backend_of(state), "LayerNormGrad", &g, gin, gout, TOL_RED, 0, 0, 0);
    tk_node_free(&g);
    tc_free(&p);
}

static void test_batch_norm(void **state) {
    tc_pool p = {0};
    ot_node n = tk_node(OT_OP_BATCH_NORM, 5, 3);
    ot_node_set_attr_int(&n, "training_mode", 1);
    ot_node_set_attr_int(&n, "unbiased_running_var", 1);
    ot_tensor in[5] = {tc_rand(&p, 140, -2, 3, 4, 4, 6, 5, 5), tc_rand(&p, 141, 0.5f, 1.5f, 1, 6),
                       tc_rand(&p, 142, -1, 1, 1, 6), tc_rand(&p, 143, -1, 1, 1, 6), tc_rand(&p, 144, 0.5f, 2, 1, 6)};
    ot_tensor out[3] = {tc_out(OT_F32, 4, 4, 6, 5, 5), tc_out(OT_F32, 1, 6), tc_out(OT_F32, 1, 6)};
    tc_check(backend_of(state), "BatchNormalization training", &n, in, out, TOL_RED, 0, 0, 0);
    ot_node_set_attr_int(&n, "training_mode", 0);
    tc_check(backend_of(state), "BatchNormalization inference", &n, in, out, TOL, 0, 0, 0);
    tk_node_free(&n);
    ot_node g = tk_node(OT_OP_BATCH_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&g, "training_mode", 1);
    ot_tensor gin[3] = {tc_rand(&p, 145, -1, 1, 4, 4, 6, 5, 5), in[0], in[1]};
    ot_tensor gout[3] = {tc_out(OT_F32, 4, 4, 6, 5, 5), tc_out(OT_F32, 1, 6), tc_out(OT_F32, 1, 6)};
    tc_check(backend_of(state), "BatchNormGrad", &g, gin, gout, TOL_RED, 0, 0, 0);
    tk_node_free(&g);
    tc_free(&p);
}

static void test_losses(void **state) {
    tc_pool p = {0};
    int64_t lab[12] = {0, 3, 9, 2, 2, 5, -100, 7, 1, 0, 8, 4};
    for (int sm = 0; sm < 2; sm++) {
        ot_node n = tk_node(sm ? OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS : OT_OP_NLL_LOSS, 2, 1);
        ot_node_set_attr_int(&n, "ignore_index", -100);
        ot_tensor in[2] = {tc_rand(&p, 150, -3, 3, 2, 12, 10), tc_ints(&p, 12, lab)};
        ot_tensor out[1] = {tc_out(OT_F32, 0)};
        tc_check(backend_of(state), sm ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss", &n, in, out, TOL_RED,
                 0, 0, 0);
        tk_node_free(&n);
        ot_node g = tk_node(sm ? OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD : OT_OP_NLL_LOSS_GRAD, 3, 1);
        ot_node_set_attr_int(&g, "ignore_index", -100);
        ot_tensor dl = tc_rand(&p, 151, 0.5f, 1.5f, 0);
        ot_tensor gin[3] = {dl, in[0], in[1]};
        ot_tensor gout[1] = {tc_out(OT_F32, 2, 12, 10)};
        tc_check(backend_of(state), sm ? "SoftmaxCrossEntropyLossGrad" : "NegativeLogLikelihoodLossGrad", &g, gin, gout,
                 TOL_RED, 0, 0, 0);
        tk_node_free(&g);
    }
    ot_node m = tk_node(OT_OP_MSE_LOSS, 2, 1);
    ot_tensor min[2] = {tc_rand(&p, 152, -1, 1, 2, 8, 9), tc_rand(&p, 153, -1, 1, 2, 8, 9)};
    ot_tensor mout[1] = {tc_out(OT_F32, 0)};
    tc_check(backend_of(state), "MseLoss", &m, min, mout, TOL_RED, 0, 0, 0);
    tk_node_free(&m);
    ot_node mg = tk_node(OT_OP_MSE_LOSS_GRAD, 3, 1);
    ot_tensor mgin[3] = {tc_rand(&p, 154, 0.5f, 1.5f, 0), min[0], min[1]};
    ot_tensor mgout[1] = {tc_out(OT_F32, 2, 8, 9)};
    tc_check(backend_of(state), "MseLossGrad", &mg, mgin, mgout, TOL, 0, 0, 0);
    tk_node_free(&mg);
    /* BceWithLogitsLoss, L1Loss (issue 29): logits past +-20 (the stable form), equal
     * pairs (L1's gradient is 0 there) */
    for (int k = 0; k < 2; k++) {
        ot_op f = k ? OT_OP_L1_LOSS : OT_OP_BCE_LOGITS_LOSS, fg = k ? OT_OP_L1_LOSS_GRAD : OT_OP_BCE_LOGITS_LOSS_GRAD;
        ot_node e = tk_node(f, 2, 1);
        ot_tensor ein[2] = {tc_rand(&p, 155, -30, 30, 2, 8, 9), tc_rand(&p, 156, 0, 1, 2, 8, 9)};
        memcpy(ein[1].data, ein[0].data, 5 * sizeof(float)); /* x = y: L1's kink */
        ot_tensor eout[1] = {tc_out(OT_F32, 0)};
        tc_check(backend_of(state), k ? "L1Loss" : "BceWithLogitsLoss", &e, ein, eout, TOL_RED, 0, 0, 0);
        tk_node_free(&e);
        ot_node eg = tk_node(fg, 3, 1);
        ot_tensor egin[3] = {tc_rand(&p, 157, 0.5f, 1.5f, 0), ein[0], ein[1]};
        ot_tensor egout[1] = {tc_out(OT_F32, 2, 8, 9)};
        tc_check(backend_of(state), k ? "L1LossGrad" : "BceWithLogitsLossGrad", &eg, egin, egout, TOL, 0, 0, 0);
        tk_node_free(&eg);
    }
    tc_free(&p);
}

/* LinearCrossEntropy and its gradient (issue 28): 12 rows in chunks of 5, a bias, W
 * as [V, D] (transposed) and as [D, V]. */
static void test_linear_ce(void **state) {
    tc_pool p = {0};
    int64_t lab[12] = {0, 3, 9, 2, 2, 5, -100, 7, 1, 0, 8, 4};
    for (int tw = 0; tw < 2; tw++) {
        ot_node n = tk_node(OT_OP_LINEAR_CROSS_ENTROPY, 4, 1);
        ot_node_set_attr_int(&n, "ignore_index", -100);
        ot_node_set_attr_int(&n, "chunk_rows", 5);
        ot_node_set_attr_int(&n, "trans_w", tw);
        ot_tensor h = tc_rand(&p, 170, -1, 1, 3, 2, 6, 16);
        ot_tensor w = tw ? tc_rand(&p, 171, -1, 1, 2, 10, 16) : tc_rand(&p, 171, -1, 1, 2, 16, 10);
        ot_tensor in[4] = {h, w, tc_ints(&p, 12, lab), tc_rand(&p, 172, -1, 1, 1, 10)};
        ot_tensor out[1] = {tc_out(OT_F32, 0)};
        tc_check(backend_of(state), "LinearCrossEntropy", &n, in, out, TOL_RED, 0, 0, 0);
        tk_node_free(&n);
        ot_node g = tk_node(OT_OP_LINEAR_CROSS_ENTROPY_GRAD, 5, 3);
        ot_node_set_attr_int(&g, "ignore_index", -100);
        ot_node_set_attr_int(&g, "chunk_rows", 5);
        ot_node_set_attr_int(&g, "trans_w", tw);
        ot_tensor gin[5] = {tc_rand(&p, 173, 0.5f, 1.5f, 0), h, w, in[2], in[3]};
        ot_tensor gout[3] = {tc_out(OT_F32, 3, 2, 6, 16), tw ? tc_out(OT_F32, 2, 10, 16) : tc_out(OT_F32, 2, 16, 10),
                             tc_out(OT_F32, 1, 10)};
        tc_check(backend_of(state), "LinearCrossEntropyGrad", &g, gin, gout, TOL_RED, 0, 0, 0);
        tk_node_free(&g);
    }
    tc_free(&p);
}

/* ---- convolution and pooling ----------------------------------------------------------- */

static void conv_case(void **state, tc_pool *p, const char *label, int C, int M, int H, int K, int stride, int pad,
                      int group) {
    int OH = (H + 2 * pad - K) / stride + 1;
    int64_t pads[4] = {pad, pad, pad, pad}, strides[2] = {stride, stride}, ks[2] = {K, K};
    ot_node n = tk_node(OT_OP_CONV, 3, 1);
    ot_node_set_attr_ints(&n, "pads", pads, 4);
    ot_node_set_attr_ints(&n, "strides", strides, 2);
    ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
    ot_node_set_attr_int(&n, "group", group);
    ot_tensor x = tc_rand(p, 160, -1, 1, 4, 2, C, H, H), w = tc_rand(p, 161, -1, 1, 4, M, C / group, K, K);
    ot_tensor in[3] = {x, w, tc_rand(p, 162, -1, 1, 1, M)};
    ot_tensor out[1] = {tc_out(OT_F32, 4, 2, M, OH, OH)};
    tc_check(backend_of(state), label, &n, in, out, TOL_RED, 0, 0, 0);
    ot_node gi = tk_node(OT_OP_CONV_GRAD_INPUT, 3, 1), gw = tk_node(OT_OP_CONV_GRAD_WEIGHT, 3, 1);
    ot_node_copy_attrs(&gi, &n);
    ot_node_copy_attrs(&gw, &n);
    ot_tensor dy = tc_rand(p, 163, -1, 1, 4, 2, M, OH, OH);
    ot_tensor giin[3] = {dy, w, x}, gwin[3] = {dy, x, w};
    ot_tensor giout[1] = {tc_out(OT_F32, 4, 2, C, H, H)}, gwout[1] = {tc_out(OT_F32, 4, M, C / group, K, K)};
    tc_check(backend_of(state), "ConvGradInput", &gi, giin, giout, TOL_RED, 0, 0, 0);
    tc_check(backend_of(state), "ConvGradWeight", &gw, gwin, gwout, TOL_RED, 0, 0, 0);
    tk_node_free(&n);
    tk_node_free(&gi);
    tk_node_free(&gw);
}

/* A direct convolution in double, the reference where the CPU backend has no Conv
 * kernel (3-D): spatial dims lifted to three, no dilation. */
static void conv_ref(int nsp, const int64_t *xd, const int64_t *wd, const int64_t *yd, const int64_t *pads,
                     const int64_t *strides, int group, const float *x, const float *w, const float *b, float *y) {
    int64_t X[3] = {1, 1, 1}, K[3] = {1, 1, 1}, Y[3] = {1, 1, 1}, P[3] = {0, 0, 0}, S[3] = {1, 1, 1};
    for (int s = 0; s < nsp; s++) {
        int d = 3 - nsp + s;
        X[d] = xd[2 + s], K[d] = wd[2 + s], Y[d] = yd[2 + s], P[d] = pads[s], S[d] = strides[s];
    }
    int64_t N = xd[0], C = xd[1], M = wd[0], cg = C / group, mg = M / group;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t o0 = 0; o0 < Y[0]; o0++)
                for (int64_t o1 = 0; o1 < Y[1]; o1++)
                    for (int64_t o2 = 0; o2 < Y[2]; o2++) {
                        double acc = b ? b[m] : 0.0;
                        for (int64_t c = 0; c < cg; c++)
                            for (int64_t k0 = 0; k0 < K[0]; k0++)
                                for (int64_t k1 = 0; k1 < K[1]; k1++)
                                    for (int64_t k2 = 0; k2 < K[2]; k2++) {
                                        int64_t i0 = o0 * S[0] - P[0] + k0, i1 = o1 * S[1] - P[1] + k1,
                                                i2 = o2 * S[2] - P[2] + k2;
                                        if (i0 < 0 || i0 >= X[0] || i1 < 0 || i1 >= X[1] || i2 < 0 || i2 >= X[2])
                                            continue;
                                        int64_t ci = (m / mg) * cg + c;
                                        acc += (double)x[(((n * C + ci) * X[0] + i0) * X[1] + i1) * X[2] + i2] *
                                               w[(((m * cg + c) * K[0] + k0) * K[1] + k1) * K[2] + k2];
                                    }
                        y[(((n * M + m) * Y[0] + o0) * Y[1] + o1) * Y[2] + o2] = (float)acc;
                    }
}

/* Conv and both gradients on any geometry: X and W dims, pads (begin..., end...),
 * strides, group. The CPU backend's Conv runs 1-D and 2-D; 3-D is checked against
 * conv_ref (its gradients against the CPU's, which handle 3-D). */
static void conv_case_nd(void **state, tc_pool *p, const char *label, int nsp, const int64_t *xd, const int64_t *wd,
                         const int64_t *pads, const int64_t *strides, int group) {
    int64_t yd[5] = {xd[0], wd[0]}, ks[3];
    for (int s = 0; s < nsp; s++) {
        ks[s] = wd[2 + s];
        yd[2 + s] = (xd[2 + s] + pads[s] + pads[nsp + s] - wd[2 + s]) / strides[s] + 1;
    }
    ot_node n = tk_node(OT_OP_CONV, 3, 1);
    ot_node_set_attr_ints(&n, "pads", pads, 2 * nsp);
    ot_node_set_attr_ints(&n, "strides", strides, nsp);
    ot_node_set_attr_ints(&n, "kernel_shape", ks, nsp);
    ot_node_set_attr_int(&n, "group", group);
    ot_tensor x = tc_tensor(p, OT_F32, nsp + 2, xd), w = tc_tensor(p, OT_F32, nsp + 2, wd);
    ot_tensor b = tc_tensor(p, OT_F32, 1, wd), dy = tc_tensor(p, OT_F32, nsp + 2, yd);
    tk_fill(x.data, ot_shape_numel(&x.shape), 164, -1, 1);
    tk_fill(w.data, ot_shape_numel(&w.shape), 165, -1, 1);
    tk_fill(b.data, ot_shape_numel(&b.shape), 166, -1, 1);
    tk_fill(dy.data, ot_shape_numel(&dy.shape), 167, -1, 1);
    ot_tensor in[3] = {x, w, b}, out[1] = {dy};
    out[0].data = NULL;
    if (nsp == 3) {
        ot_tensor yref = tc_tensor(p, OT_F32, nsp + 2, yd);
        conv_ref(nsp, xd, wd, yd, pads, strides, group, x.data, w.data, b.data, yref.data);
        const float *ref[1] = {yref.data};
        tc_check_ref(backend_of(state), label, &n, in, out, TOL_RED, 0, 0, 0, ref);
    } else {
        tc_check(backend_of(state), label, &n, in, out, TOL_RED, 0, 0, 0);
    }
    ot_node gi = tk_node(OT_OP_CONV_GRAD_INPUT, 3, 1), gw = tk_node(OT_OP_CONV_GRAD_WEIGHT, 3, 1);
    ot_node_copy_attrs(&gi, &n);
    ot_node_copy_attrs(&gw, &n);
    ot_tensor giin[3] = {dy, w, x}, gwin[3] = {dy, x, w}, giout[1] = {x}, gwout[1] = {w};
    giout[0].data = gwout[0].data = NULL;
    tc_check(backend_of(state), label, &gi, giin, giout, TOL_RED, 0, 0, 0);
    tc_check(backend_of(state), label, &gw, gwin, gwout, TOL_RED, 0, 0, 0);
    tk_node_free(&n);
    tk_node_free(&gi);
    tk_node_free(&gw);
}

static void test_conv(void **state) {
    tc_pool p = {0};
    conv_case(state, &p, "Conv 3x3", 3, 8, 10, 3, 1, 1, 1);
    conv_case(state, &p, "Conv 3x3 stride 2 depthwise", 8, 8, 9, 3, 2, 1, 8);
    conv_case(state, &p, "Conv 1x1 grouped", 8, 4, 6, 1, 1, 0, 2);
    /* pads cuDNN cannot express: the explicit zero-pad path (forward, and the crop of dX) */
    int64_t x2[4] = {2, 3, 9, 9}, w2[4] = {4, 3, 3, 3}, pads2[4] = {1, 0, 0, 1}, s2[2] = {2, 2};
    conv_case_nd(state, &p, "Conv asymmetric pads", 2, x2, w2, pads2, s2, 1);
    int64_t x1[3] = {2, 4, 11}, w1[3] = {6, 2, 4}, pads1[2] = {0, 3}, s1[1] = {1};
    conv_case_nd(state, &p, "Conv 1-D asymmetric pads, grouped", 1, x1, w1, pads1, s1, 2);
    int64_t x3[5] = {2, 3, 5, 6, 7}, w3[5] = {4, 3, 3, 3, 3}, pads3[6] = {1, 1, 1, 1, 1, 1}, s3[3] = {1, 1, 1};
    conv_case_nd(state, &p, "Conv 3-D", 3, x3, w3, pads3, s3, 1);
    int64_t pads3a[6] = {0, 1, 1, 1, 0, 1}, s3a[3] = {2, 1, 2};
    conv_case_nd(state, &p, "Conv 3-D asymmetric pads, strided", 3, x3, w3, pads3a, s3a, 1);
    tc_free(&p);
}

/* issue 27: a random tensor of dtype t (float32 values rounded to it). */
static ot_tensor tc_rand_lp(tc_pool *pool, uint32_t seed, ot_dtype t, int rank, const int64_t *dims) {
    ot_tensor x = tc_tensor(pool, t, rank, dims);
    uint32_t s = seed * 2654435761u + 7;
    int64_t n = ot_kernel_numel(&x);
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)((int)(s >> 9) % 2001 - 1000) / 1000.0f;
        ((uint16_t *)x.data)[i] = t == OT_BF16 ? ot_f32_to_bf16(v) : ot_f32_to_f16(v);
    }
    return x;
}

/* issue 27: bfloat16 / float16 Gemm, MatMul and the cuDNN convolutions on tensor cores
 * against the CPU's low-precision kernels (float32 sums on both, in other orders):
 * float32 outputs within 1e-4, low-precision ones within two of their ulps. */
static void test_lowp(void **state) {
    tc_pool p = {0};
    const ot_dtype lp[2] = {OT_BF16, OT_F16};
    for (int k = 0; k < 2; k++) {
        ot_dtype t = lp[k];
        double tol_lp = t == OT_BF16 ? 1.6e-2 : 2e-3;
        ot_node g = tk_node(OT_OP_GEMM, 3, 1);
        ot_node_set_attr_int(&g, "transB", 1);
        int64_t a[2] = {37, 64}, b[2] = {19, 64}, c[1] = {19};
        ot_tensor gin[3] = {tc_rand_lp(&p, 1, t, 2, a), tc_rand_lp(&p, 2, t, 2, b), tc_rand_lp(&p, 3, t, 1, c)};
        ot_tensor y32[1] = {tc_out(OT_F32, 2, 37, 19)}, ylp[1] = {tc_out(t, 2, 37, 19)};
        tc_check(backend_of(state), "Gemm lowp transB + bias -> f32", &g, gin, y32, 1e-4, 0, 0, 0);
        tc_check(backend_of(state), "Gemm lowp transB + bias -> lowp", &g, gin, ylp, tol_lp, 0, 0, 0);
        tk_node_free(&g);
        ot_node m = tk_node(OT_OP_MATMUL, 2, 1);
        int64_t ma[4] = {2, 1, 5, 48}, mb[3] = {3, 48, 7};
        ot_tensor min[2] = {tc_rand_lp(&p, 4, t, 4, ma), tc_rand_lp(&p, 5, t, 3, mb)};
        ot_tensor m32[1] = {tc_out(OT_F32, 4, 2, 3, 5, 7)}, mlp[1] = {tc_out(t, 4, 2, 3, 5, 7)};
        tc_check(backend_of(state), "MatMul lowp broadcast -> f32", &m, min, m32, 1e-4, 0, 0, 0);
        tc_check(backend_of(state), "MatMul lowp broadcast -> lowp", &m, min, mlp, tol_lp, 0, 0, 0);
        tk_node_free(&m);
        ot_node cv = tk_node(OT_OP_CONV, 2, 1);
        int64_t ks[2] = {3, 3}, pads[4] = {1, 1, 1, 1}, xd[4] = {2, 16, 8, 8}, wd[4] = {8, 16, 3, 3};
        ot_node_set_attr_ints(&cv, "kernel_shape", ks, 2);
        ot_node_set_attr_ints(&cv, "pads", pads, 4);
        ot_tensor cin[2] = {tc_rand_lp(&p, 6, t, 4, xd), tc_rand_lp(&p, 7, t, 4, wd)};
        ot_tensor cout[1] = {tc_out(t, 4, 2, 8, 8, 8)};
        tc_check(backend_of(state), "Conv lowp 3x3", &cv, cin, cout, tol_lp, 0, 0, 0);
        tk_node_free(&cv);
    }
    tc_free(&p);
}

/* ---- issue 27: element-wise, softmax and norm kernels in bfloat16 / float16 ---------- */

/* The reference of a low-precision node: the CPU's float32 kernel on the inputs made
 * float32 (exact), its low-precision outputs rounded to nearest even (what a low kernel
 * with float32 math must give); other outputs (a Dropout mask, float32 statistics) as
 * the float32 kernel writes them. ref[k] gets output k's bytes in out[k]'s dtype. */
static void lp_reference(tc_pool *p, const char *label, const ot_node *n, const ot_tensor *in, const ot_tensor *out,
                         hm_rng r, void **ref) {
    ot_tensor in32[TC_MAX], out32[TC_MAX];
    for (int k = 0; k < n->n_inputs; k++) {
        in32[k] = in[k];
        if (!in[k].data || (in[k].dtype != OT_BF16 && in[k].dtype != OT_F16)) continue;
        int64_t m = ot_kernel_numel(&in[k]);
        in32[k].dtype = OT_F32;
        in32[k].nbytes = (size_t)m * 4;
        in32[k].data = tc_alloc(p, in32[k].nbytes);
        for (int64_t i = 0; i < m; i++)
            ((float *)in32[k].data)[i] = in[k].dtype == OT_BF16 ? ot_bf16_to_f32(((uint16_t *)in[k].data)[i])
                                                                : ot_f16_to_f32(((uint16_t *)in[k].data)[i]);
    }
    for (int k = 0; k < n->n_outputs; k++) {
        out32[k] = out[k];
        if (out[k].dtype == OT_BF16 || out[k].dtype == OT_F16) {
            out32[k].dtype = OT_F32;
            out32[k].nbytes = (size_t)ot_kernel_numel(&out[k]) * 4;
        }
        out32[k].data = out[k].dtype ? tc_alloc(p, out32[k].nbytes) : NULL;
    }
    ot_error e = {0};
    if (tk_run_ex(n, in32, out32, 1, r.seed, r.step, r.node, &e) != OT_OK)
        fail_msg("%s: the CPU's float32 reference failed: %s", label, e.msg);
    for (int k = 0; k < n->n_outputs; k++) {
        ref[k] = out32[k].data;
        if (!out[k].dtype || out32[k].dtype == out[k].dtype) continue;
        int64_t m = ot_kernel_numel(&out[k]);
        uint16_t *h = tc_alloc(p, (size_t)m * 2);
        for (int64_t i = 0; i < m; i++)
            h[i] = out[k].dtype == OT_BF16 ? ot_f32_to_bf16(((float *)out32[k].data)[i])
                                           : ot_f32_to_f16(((float *)out32[k].data)[i]);
        ref[k] = h;
    }
}

/* Host mode: the CUDA element code on low tensors gives the reference bit for bit
 * (the same float32 rules, one rounding) and, where the CPU has a low kernel for the
 * node, that kernel's bits too. */
static void lp_check_host(void *state, const char *label, const ot_node *n, ot_tensor *in, ot_tensor *out, hm_rng r,
                          double tol) {
    (void)state, (void)tol;
    tc_pool p = {0};
    void *ref[TC_MAX] = {0};
    lp_reference(&p, label, n, in, out, r, ref);
    ot_tensor hout[TC_MAX];
    for (int k = 0; k < n->n_outputs; k++) {
        hout[k] = out[k];
        hout[k].data = out[k].dtype ? tc_alloc(&p, out[k].nbytes) : NULL;
    }
    ot_kernel_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.seed = r.seed, ctx.step = r.step, ctx.rng_node = r.node;
    ot_error e = {0};
    if (!mod()->supports_node(n, in, out)) fail_msg("%s: the CUDA table does not take the node's dtypes", label);
    if (mod()->pointwise_host(n, in, hout, &ctx, &e) != OT_OK) fail_msg("%s: host mode failed: %s", label, e.msg);
    for (int k = 0; k < n->n_outputs; k++)
        if (hout[k].data) hm_same(label, "output (against the rounded float32 reference)", k, &out[k], ref[k], hout[k].data, 0.0);
    if (ot_cpu_supports(n, in, out)) assert_int_equal(hm_compare_ex(label, n, in, out, r, false), OT_OK);
    tc_free(&p);
}

/* On the GPU: the low kernel against the same reference, within two of the low
 * dtype's ulps (the float32 sums and transcendental functions differ from the CPU's by
 * float32 rounding, which can move a rounded result by one ulp). */
static void lp_check_gpu(void *state, const char *label, const ot_node *n, ot_tensor *in, ot_tensor *out, hm_rng r,
                         double tol) {
    tc_pool p = {0};
    void *ref[TC_MAX] = {0};
    lp_reference(&p, label, n, in, out, r, ref);
    tc_check_ref(backend_of(state), label, n, in, out, tol, r.seed, r.step, r.node, (const float *const *)ref);
    tc_free(&p);
}

typedef void (*lp_checker)(void *state, const char *label, const ot_node *n, ot_tensor *in, ot_tensor *out, hm_rng r,
                           double tol);

/* Random low-precision values in [lo, hi). */
static ot_tensor lp_rand(tc_pool *p, uint32_t seed, ot_dtype t, float lo, float hi, int rank, const int64_t *dims) {
    ot_tensor x = tc_tensor(p, t, rank, dims);
    int64_t n = ot_kernel_numel(&x);
    float *f = malloc((size_t)(n ? n : 1) * 4);
    assert_non_null(f);
    tk_fill(f, n, seed, lo, hi);
    for (int64_t i = 0; i < n; i++) ((uint16_t *)x.data)[i] = t == OT_BF16 ? ot_f32_to_bf16(f[i]) : ot_f32_to_f16(f[i]);
    free(f);
    return x;
}

static ot_tensor lp_out(ot_dtype t, int rank, const int64_t *dims) {
    ot_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = t;
    x.shape = ot_shape_make(rank, dims);
    x.nbytes = (size_t)ot_shape_numel(&x.shape) * ot_dtype_size(t);
    return x;
}

/* The element-wise cases, run by the host mode and on the GPU alike. */
static void lp_elementwise_cases(void *state, lp_checker check, ot_dtype t, double tol) {
    tc_pool p = {0};
    char label[96];
    const char *tn = ot_dtype_name(t);
    int64_t d[2] = {37, 64}, b[1] = {64};
    hm_rng r0 = {0, 0, 0};
    static const struct { ot_op op; const char *name; int positive; const char *approx; } un[] = {
        {OT_OP_RELU, "Relu", 0, NULL},       {OT_OP_GELU, "Gelu", 0, "none"},  {OT_OP_GELU, "Gelu tanh", 0, "tanh"},
        {OT_OP_TANH, "Tanh", 0, NULL},       {OT_OP_SIGMOID, "Sigmoid", 0, NULL}, {OT_OP_EXP, "Exp", 0, NULL},
        {OT_OP_ERF, "Erf", 0, NULL},         {OT_OP_LEAKY_RELU, "LeakyRelu", 0, NULL}, {OT_OP_NEG, "Neg", 0, NULL},
        {OT_OP_SQRT, "Sqrt", 1, NULL},       {OT_OP_LOG, "Log", 1, NULL},      {OT_OP_RECIPROCAL, "Reciprocal", 1, NULL},
    };
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
        ot_node n = tk_node(un[i].op, 1, 1);
        if (un[i].approx) ot_node_set_attr_string(&n, "approximate", un[i].approx);
        ot_tensor in[1] = {lp_rand(&p, 300 + (uint32_t)i, t, un[i].positive ? 0.01f : -4, 4, 2, d)};
        ot_tensor out[1] = {lp_out(t, 2, d)};
        snprintf(label, sizeof label, "%s %s", un[i].name, tn);
        check(state, label, &n, in, out, r0, tol);
        tk_node_free(&n);
    }
    const ot_op bin[4] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV};
    for (int i = 0; i < 4; i++) {
        ot_node n = tk_node(bin[i], 2, 1);
        /* the second operand broadcasts (a bias) for Add and Div, not for Sub and Mul */
        bool bc = i == 0 || i == 3;
        ot_tensor in[2] = {lp_rand(&p, 320 + (uint32_t)i, t, -3, 3, 2, d),
                           bc ? lp_rand(&p, 330 + (uint32_t)i, t, 0.5f, 2, 1, b) : lp_rand(&p, 330 + (uint32_t)i, t, -3, 3, 2, d)};
        ot_tensor out[1] = {lp_out(t, 2, d)};
        snprintf(label, sizeof label, "%s %s%s", ot_op_name(bin[i]), tn, bc ? " broadcast" : "");
        check(state, label, &n, in, out, r0, tol);
        tk_node_free(&n);
    }
    static const struct { ot_op op; const char *name; float lo, hi; } gr[] = {
        {OT_OP_RELU_GRAD, "ReluGrad", -2, 2}, {OT_OP_GELU_GRAD, "GeluGrad", -3, 3},
        {OT_OP_TANH_GRAD, "TanhGrad", -1, 1}, {OT_OP_SIGMOID_GRAD, "SigmoidGrad", 0, 1},
    };
    for (size_t i = 0; i < sizeof gr / sizeof gr[0]; i++) {
        ot_node n = tk_node(gr[i].op, 2, 1);
        ot_tensor in[2] = {lp_rand(&p, 340 + (uint32_t)i, t, -2, 2, 2, d), lp_rand(&p, 350 + (uint32_t)i, t, gr[i].lo, gr[i].hi, 2, d)};
        ot_tensor out[1] = {lp_out(t, 2, d)};
        snprintf(label, sizeof label, "%s %s", gr[i].name, tn);
        check(state, label, &n, in, out, r0, tol);
        tk_node_free(&n);
    }
    /* Dropout: the mask is the float32 kernel's (the same Philox draws), bit for bit */
    ot_node dn = tk_node(OT_OP_DROPOUT, 1, 2);
    ot_node_set_attr_float(&dn, "ratio", 0.3f);
    ot_node_set_attr_int(&dn, "training_mode", 1);
    ot_tensor din[1] = {lp_rand(&p, 360, t, -3, 3, 2, d)};
    ot_tensor dout[2] = {lp_out(t, 2, d), lp_out(OT_BOOL, 2, d)};
    hm_rng rd = {0x5eed, 3, 17};
    snprintf(label, sizeof label, "Dropout %s", tn);
    check(state, label, &dn, din, dout, rd, tol);
    tk_node_free(&dn);
    ot_node dg = tk_node(OT_OP_DROPOUT_GRAD, 2, 1);
    ot_node_set_attr_float(&dg, "ratio", 0.3f);
    ot_node_set_attr_int(&dg, "rng_node", 17);
    ot_tensor dgin[2] = {lp_rand(&p, 361, t, -3, 3, 2, d), din[0]};
    ot_tensor dgout[1] = {lp_out(t, 2, d)};
    snprintf(label, sizeof label, "DropoutGrad %s", tn);
    check(state, label, &dg, dgin, dgout, rd, tol);
    tk_node_free(&dg);
    /* a gradient sum: three inputs added in order in float32, rounded once */
    ot_node sn = tk_node(OT_OP_SUM, 3, 1);
    ot_tensor sin[3] = {lp_rand(&p, 370, t, -3, 3, 2, d), lp_rand(&p, 371, t, -1e-2f, 1e-2f, 2, d),
                        lp_rand(&p, 372, t, -3, 3, 2, d)};
    ot_tensor sout[1] = {lp_out(t, 2, d)};
    snprintf(label, sizeof label, "Sum of 3 %s", tn);
    check(state, label, &sn, sin, sout, r0, tol);
    tk_node_free(&sn);
    tc_free(&p);
}

static void test_host_lowp_elementwise(void **state) {
    lp_elementwise_cases(state, lp_check_host, OT_BF16, 0.0);
    lp_elementwise_cases(state, lp_check_host, OT_F16, 0.0);
}

/* What the autocast pass asks (autodiff/autocast.c through supports): the element-wise,
 * softmax and norm ops take their data in bfloat16 / float16 on CUDA, every float
 * tensor of one dtype (a norm's scale, bias and statistics also float32); mixed low
 * dtypes, a low Pow and a broadcasting low Sum are refused. */
static void test_supports_lowp_elementwise(void **state) {
    (void)state;
    float dummy[8] = {0};
    const ot_dtype lp[2] = {OT_BF16, OT_F16};
    for (int k = 0; k < 2; k++) {
        ot_dtype t = lp[k], o = lp[1 - k];
        const ot_op un[] = {OT_OP_RELU, OT_OP_GELU, OT_OP_TANH, OT_OP_SIGMOID, OT_OP_EXP, OT_OP_SOFTMAX,
                            OT_OP_LOG_SOFTMAX, OT_OP_NEG, OT_OP_SQRT, OT_OP_CLIP};
        for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
            ot_node n = tk_node(un[i], 1, 1);
            ot_tensor in[1] = {tk_t(t, dummy, 2, 4, 8)}, out[1] = {tk_t(t, dummy, 2, 4, 8)}, oo[1] = {tk_t(o, dummy, 2, 4, 8)};
            assert_true(mod()->supports_node(&n, in, out));
            assert_false(mod()->supports_node(&n, in, oo));
            tk_node_free(&n);
        }
        const ot_op bin[] = {OT_OP_ADD, OT_OP_SUB, OT_OP_MUL, OT_OP_DIV, OT_OP_RELU_GRAD, OT_OP_GELU_GRAD,
                             OT_OP_SOFTMAX_GRAD, OT_OP_LOG_SOFTMAX_GRAD};
        for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++) {
            ot_node n = tk_node(bin[i], 2, 1);
            ot_tensor in[2] = {tk_t(t, dummy, 2, 4, 8), tk_t(t, dummy, 2, 4, 8)}, out[1] = {tk_t(t, dummy, 2, 4, 8)};
            assert_true(mod()->supports_node(&n, in, out));
            in[1].dtype = o;
            assert_false(mod()->supports_node(&n, in, out));
            tk_node_free(&n);
        }
        ot_node pw = tk_node(OT_OP_POW, 2, 1);
        ot_tensor pin[2] = {tk_t(t, dummy, 1, 4), tk_t(t, dummy, 1, 4)}, pout[1] = {tk_t(t, dummy, 1, 4)};
        assert_false(mod()->supports_node(&pw, pin, pout)); /* on autocast's float32 list, no low kernel */
        tk_node_free(&pw);
        ot_node dr = tk_node(OT_OP_DROPOUT, 2, 2);
        ot_tensor drin[2] = {tk_t(t, dummy, 1, 4), tk_t(OT_F32, dummy, 0)};
        ot_tensor drout[2] = {tk_t(t, dummy, 1, 4), tk_t(OT_BOOL, dummy, 1, 4)};
        assert_true(mod()->supports_node(&dr, drin, drout)); /* the ratio keeps its dtype */
        tk_node_free(&dr);
        ot_node sm = tk_node(OT_OP_SUM, 2, 1);
        ot_tensor smin[2] = {tk_t(t, dummy, 2, 4, 2), tk_t(t, dummy, 2, 4, 2)}, smout[1] = {tk_t(t, dummy, 2, 4, 2)};
        assert_true(mod()->supports_node(&sm, smin, smout));
        smin[1] = tk_t(t, dummy, 1, 2); /* broadcasts */
        assert_false(mod()->supports_node(&sm, smin, smout));
        tk_node_free(&sm);
        /* LayerNorm: X, Y low; scale and bias low or float32; Mean / InvStdDev float32 or low */
        ot_node ln = tk_node(OT_OP_LAYER_NORM, 3, 3);
        ot_tensor lin[3] = {tk_t(t, dummy, 2, 4, 8), tk_t(t, dummy, 1, 8), tk_t(OT_F32, dummy, 1, 8)};
        ot_tensor lout[3] = {tk_t(t, dummy, 2, 4, 8), tk_t(OT_F32, dummy, 2, 4, 1), tk_t(t, dummy, 2, 4, 1)};
        assert_true(mod()->supports_node(&ln, lin, lout));
        lin[2].dtype = o;
        assert_false(mod()->supports_node(&ln, lin, lout));
        tk_node_free(&ln);
        ot_node lg = tk_node(OT_OP_LAYER_NORM_GRAD, 3, 3);
        ot_tensor lgin[3] = {tk_t(t, dummy, 2, 4, 8), tk_t(t, dummy, 2, 4, 8), tk_t(t, dummy, 1, 8)};
        ot_tensor lgout[3] = {tk_t(t, dummy, 2, 4, 8), tk_t(t, dummy, 1, 8), tk_t(t, dummy, 1, 8)};
        assert_true(mod()->supports_node(&lg, lgin, lgout));
        lgin[1].dtype = OT_F32; /* X must be dY's dtype */
        assert_false(mod()->supports_node(&lg, lgin, lgout));
        tk_node_free(&lg);
        /* BatchNorm of a low model: X, scale, B low, the running statistics float32 */
        ot_node bn = tk_node(OT_OP_BATCH_NORM, 5, 3);
        ot_tensor bin5[5] = {tk_t(t, dummy, 4, 2, 3, 4, 4), tk_t(t, dummy, 1, 3), tk_t(t, dummy, 1, 3),
                             tk_t(OT_F32, dummy, 1, 3), tk_t(OT_F32, dummy, 1, 3)};
        ot_tensor bout[3] = {tk_t(t, dummy, 4, 2, 3, 4, 4), tk_t(OT_F32, dummy, 1, 3), tk_t(OT_F32, dummy, 1, 3)};
        assert_true(mod()->supports_node(&bn, bin5, bout));
        bout[0].dtype = OT_F32; /* Y in X's dtype */
        assert_false(mod()->supports_node(&bn, bin5, bout));
        tk_node_free(&bn);
        ot_node bg = tk_node(OT_OP_BATCH_NORM_GRAD, 3, 3);
        ot_tensor bgin[3] = {tk_t(t, dummy, 4, 2, 3, 4, 4), tk_t(t, dummy, 4, 2, 3, 4, 4), tk_t(t, dummy, 1, 3)};
        ot_tensor bgout[3] = {tk_t(t, dummy, 4, 2, 3, 4, 4), tk_t(t, dummy, 1, 3), tk_t(t, dummy, 1, 3)};
        assert_true(mod()->supports_node(&bg, bgin, bgout));
        tk_node_free(&bg);
    }
    /* float32 nodes are asked what they always were */
    ot_node r = tk_node(OT_OP_RELU, 1, 1);
    ot_tensor rin[1] = {tk_t(OT_F32, dummy, 1, 4)}, rout[1] = {tk_t(OT_F32, dummy, 1, 4)};
    assert_true(mod()->supports_node(&r, rin, rout));
    tk_node_free(&r);
}

/* The GPU: the element-wise cases, then Softmax / LogSoftmax, LayerNorm, BatchNorm and
 * their gradients on low data against the rounded float32 reference. */
static void lp_norm_cases(void **state, ot_dtype t, double tol) {
    tc_pool p = {0};
    char label[96];
    const char *tn = ot_dtype_name(t);
    hm_rng r0 = {0, 0, 0};
    int64_t sd[3] = {4, 70, 9};
    for (int axis = -1; axis <= 1; axis += 2)
        for (int lg = 0; lg < 2; lg++) {
            ot_node n = tk_node(lg ? OT_OP_LOG_SOFTMAX : OT_OP_SOFTMAX, 1, 1);
            ot_node_set_attr_int(&n, "axis", axis);
            ot_tensor in[1] = {lp_rand(&p, 400 + (uint32_t)lg, t, -5, 5, 3, sd)}, out[1] = {lp_out(t, 3, sd)};
            snprintf(label, sizeof label, "%s axis %d %s", lg ? "LogSoftmax" : "Softmax", axis, tn);
            lp_check_gpu(state, label, &n, in, out, r0, tol);
            tk_node_free(&n);
            ot_node gn = tk_node(lg ? OT_OP_LOG_SOFTMAX_GRAD : OT_OP_SOFTMAX_GRAD, 2, 1);
            ot_node_set_attr_int(&gn, "axis", axis);
            ot_tensor gin[2] = {lp_rand(&p, 410 + (uint32_t)lg, t, -1, 1, 3, sd),
                                lp_rand(&p, 420, t, lg ? -4.0f : 0.01f, lg ? -0.1f : 0.5f, 3, sd)};
            snprintf(label, sizeof label, "%sGrad axis %d %s", lg ? "LogSoftmax" : "Softmax", axis, tn);
            lp_check_gpu(state, label, &gn, gin, out, r0, tol);
            tk_node_free(&gn);
        }
    int64_t xd[3] = {2, 7, 96}, cd[1] = {96}, md[3] = {2, 7, 1};
    for (int f32p = 0; f32p < 2; f32p++) { /* scale and bias low, or float32 masters */
        ot_node n = tk_node(OT_OP_LAYER_NORM, 3, 3);
        ot_node_set_attr_int(&n, "axis", -1);
        ot_tensor sc = f32p ? tc_rand(&p, 431, 0.5f, 1.5f, 1, 96) : lp_rand(&p, 431, t, 0.5f, 1.5f, 1, cd);
        ot_tensor bi = f32p ? tc_rand(&p, 432, -1, 1, 1, 96) : lp_rand(&p, 432, t, -1, 1, 1, cd);
        ot_tensor in[3] = {lp_rand(&p, 430, t, -2, 3, 3, xd), sc, bi};
        ot_tensor out[3] = {lp_out(t, 3, xd), lp_out(OT_F32, 3, md), lp_out(OT_F32, 3, md)};
        snprintf(label, sizeof label, "LayerNormalization %s, %s scale", tn, f32p ? "float32" : "low");
        lp_check_gpu(state, label, &n, in, out, r0, tol);
        tk_node_free(&n);
        ot_node g = tk_node(OT_OP_LAYER_NORM_GRAD, 3, 3);
        ot_node_set_attr_int(&g, "axis", -1);
        ot_tensor gin[3] = {lp_rand(&p, 433, t, -1, 1, 3, xd), in[0], sc};
        ot_dtype pt = f32p ? OT_F32 : t;
        ot_tensor gout[3] = {lp_out(t, 3, xd), lp_out(pt, 1, cd), lp_out(pt, 1, cd)};
        snprintf(label, sizeof label, "LayerNormGrad %s, %s scale", tn, f32p ? "float32" : "low");
        lp_check_gpu(state, label, &g, gin, gout, r0, tol);
        tk_node_free(&g);
    }
    int64_t bd[4] = {4, 6, 5, 5}, c6[1] = {6};
    ot_node n = tk_node(OT_OP_BATCH_NORM, 5, 3);
    ot_node_set_attr_int(&n, "training_mode", 1);
    ot_tensor in[5] = {lp_rand(&p, 440, t, -2, 3, 4, bd), lp_rand(&p, 441, t, 0.5f, 1.5f, 1, c6),
                       lp_rand(&p, 442, t, -1, 1, 1, c6), tc_rand(&p, 443, -1, 1, 1, 6), tc_rand(&p, 444, 0.5f, 2, 1, 6)};
    ot_tensor out[3] = {lp_out(t, 4, bd), lp_out(OT_F32, 1, c6), lp_out(OT_F32, 1, c6)};
    snprintf(label, sizeof label, "BatchNormalization training %s", tn);
    lp_check_gpu(state, label, &n, in, out, r0, tol);
    ot_node_set_attr_int(&n, "training_mode", 0);
    snprintf(label, sizeof label, "BatchNormalization inference %s", tn);
    lp_check_gpu(state, label, &n, in, out, r0, tol);
    tk_node_free(&n);
    ot_node g = tk_node(OT_OP_BATCH_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&g, "training_mode", 1);
    ot_tensor gin[3] = {lp_rand(&p, 445, t, -1, 1, 4, bd), in[0], in[1]};
    ot_tensor gout[3] = {lp_out(t, 4, bd), lp_out(t, 1, c6), lp_out(t, 1, c6)};
    snprintf(label, sizeof label, "BatchNormGrad %s", tn);
    lp_check_gpu(state, label, &g, gin, gout, r0, tol);
    tk_node_free(&g);
    tc_free(&p);
}

static void test_lowp_elementwise_norm(void **state) {
    /* two ulps of each dtype, relative to max(1, |x|), as test_lowp */
    lp_elementwise_cases(state, lp_check_gpu, OT_BF16, 1.6e-2);
    lp_elementwise_cases(state, lp_check_gpu, OT_F16, 2e-3);
    lp_norm_cases(state, OT_BF16, 1.6e-2);
    lp_norm_cases(state, OT_F16, 2e-3);
}

/* The autocast pass asking the CUDA table (autodiff/autocast.c through
 * precision_supports, as a session on a GPU asks its backend): every node of the
 * training step it builds is one the CUDA backend runs, and the element-wise, softmax,
 * norm and Dropout values stay low. tinygpt under --precision bf16 / fp16: its Dropouts
 * and its backward element ops run low (on the CPU the Dropouts fall back to float32);
 * a GPT exported in bfloat16 and a CNN in float16 (tests/fixtures/lowp): their LayerNorms,
 * Softmaxes and BatchNorms run in the model's dtype, with no casts around them. */
static bool cuda_table_supports(void *ctx, const ot_node *n, const ot_tensor *in, const ot_tensor *out) {
    (void)ctx;
    return mod()->supports_node(n, in, out);
}

typedef struct lp_census {
    int low[OT_OP_COUNT]; /* nodes whose input 0 is low, by op */
    int wrapped;          /* casts to float32 the legalization put around a node */
} lp_census;

static lp_census lp_session_census(const char *path, ot_precision p, int64_t batch) {
    ot_error err = {0};
    ot_model *m = NULL;
    if (ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &m, &err) != OT_OK)
        fail_msg("%s: %s", path, err.msg);
    ot_train_options o;
    ot_train_options_default(&o);
    o.plan_only = true;
    o.batch_size = batch;
    o.remat = "selective";
    o.precision = p;
    o.precision_supports = cuda_table_supports;
    ot_train_session *s = NULL;
    if (ot_train_session_new(m, &o, NULL, true, &s, &err)) fail_msg("%s: %s", path, err.msg);
    ot_graph *g = ot_train_graph(s);
    lp_census c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->removed) continue;
        ot_tensor in[16], out[8];
        memset(in, 0, sizeof in), memset(out, 0, sizeof out);
        assert_true(n->n_inputs <= 16 && n->n_outputs <= 8);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) in[k] = (ot_tensor){.dtype = g->values[n->inputs[k]].dtype, .shape = g->values[n->inputs[k]].shape};
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) out[k] = (ot_tensor){.dtype = g->values[n->outputs[k]].dtype, .shape = g->values[n->outputs[k]].shape};
        if (!mod()->supports_node(n, in, out))
            fail_msg("%s: node '%s' (%s, %s) is one the CUDA backend cannot run", path, n->name, n->op_type,
                     ot_phase_name(n->phase));
        if (n->n_inputs > 0 && (in[0].dtype == OT_BF16 || in[0].dtype == OT_F16)) c.low[n->op]++;
        if (n->op == OT_OP_CAST && n->phase != OT_PHASE_RECOMPUTE) {
            const char *b = g->values[n->outputs[0]].name;
            size_t lb = strlen(b);
            c.wrapped += lb > 4 && !strcmp(b + lb - 4, ".f32") && in[0].dtype != OT_F32;
        }
    }
    ot_train_session_free(s);
    ot_model_free(m);
    return c;
}

static void test_autocast_cuda_table(void **state) {
    (void)state;
    const char *root = getenv("OT_SOURCE_DIR") ? getenv("OT_SOURCE_DIR") : OT_SOURCE_DIR;
    char path[1024];
    snprintf(path, sizeof path, "%s/samples/tinygpt.onnx", root);
    for (int k = 0; k < 2; k++) {
        ot_precision p = k ? OT_PRECISION_FP16 : OT_PRECISION_BF16;
        lp_census c = lp_session_census(path, p, 2);
        print_message("tinygpt %s on the CUDA table: low Dropout %d, DropoutGrad %d, Add %d, Sum %d; "
                      "%d casts up around nodes\n", ot_precision_name(p), c.low[OT_OP_DROPOUT], c.low[OT_OP_DROPOUT_GRAD],
                      c.low[OT_OP_ADD], c.low[OT_OP_SUM], c.wrapped);
        assert_true(c.low[OT_OP_DROPOUT] > 0 && c.low[OT_OP_DROPOUT_GRAD] > 0);
        assert_true(c.low[OT_OP_MATMUL] > 8 && c.low[OT_OP_ADD] > 0);
        /* Softmax and LayerNorm are on autocast's float32 list, as in torch.autocast */
        assert_int_equal(c.low[OT_OP_SOFTMAX] + c.low[OT_OP_LAYER_NORM], 0);
    }
    snprintf(path, sizeof path, "%s/tests/fixtures/lowp/gpt_bf16_ts.onnx", root);
    lp_census c = lp_session_census(path, OT_PRECISION_FP32, 4);
    print_message("gpt exported in bf16 on the CUDA table: low LayerNorm %d, Softmax %d, LayerNormGrad %d, "
                  "SoftmaxGrad %d; %d casts up around nodes\n", c.low[OT_OP_LAYER_NORM], c.low[OT_OP_SOFTMAX],
                  c.low[OT_OP_LAYER_NORM_GRAD], c.low[OT_OP_SOFTMAX_GRAD], c.wrapped);
    assert_true(c.low[OT_OP_LAYER_NORM] > 0 && c.low[OT_OP_LAYER_NORM_GRAD] > 0);
    assert_true(c.low[OT_OP_SOFTMAX] > 0 && c.low[OT_OP_SOFTMAX_GRAD] > 0);
    snprintf(path, sizeof path, "%s/tests/fixtures/lowp/cnn_fp16_ts.onnx", root);
    c = lp_session_census(path, OT_PRECISION_FP32, 4);
    print_message("cnn exported in fp16 on the CUDA table: low BatchNormalization %d, BatchNormGrad %d, Relu %d, "
                  "ReluGrad %d, Add %d; %d casts up around nodes\n", c.low[OT_OP_BATCH_NORM], c.low[OT_OP_BATCH_NORM_GRAD],
                  c.low[OT_OP_RELU], c.low[OT_OP_RELU_GRAD], c.low[OT_OP_ADD], c.wrapped);
    assert_true(c.low[OT_OP_BATCH_NORM] > 0 && c.low[OT_OP_BATCH_NORM_GRAD] > 0 && c.low[OT_OP_RELU_GRAD] > 0);
}

static void test_pool(void **state) {
    tc_pool p = {0};
    int64_t ks[2] = {3, 3}, st[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
    for (int mx = 0; mx < 2; mx++) {
        ot_node n = tk_node(mx ? OT_OP_MAX_POOL : OT_OP_AVERAGE_POOL, 1, 1);
        ot_node_set_attr_ints(&n, "kernel_shape", ks, 2);
        ot_node_set_attr_ints(&n, "strides", st, 2);
        ot_node_set_attr_ints(&n, "pads", pads, 4);
        ot_tensor in[1] = {tc_rand(&p, 170, -1, 1, 4, 2, 3, 9, 9)};
        ot_tensor out[1] = {tc_out(OT_F32, 4, 2, 3, 5, 5)};
        tc_check(backend_of(state), mx ? "MaxPool" : "AveragePool", &n, in, out, TOL, 0, 0, 0);
        ot_node g = tk_node(mx ? OT_OP_MAX_POOL_GRAD : OT_OP_AVERAGE_POOL_GRAD, 2, 1);
        ot_node_copy_attrs(&g, &n);
        ot_tensor gin[2] = {tc_rand(&p, 171, -1, 1, 4, 2, 3, 5, 5), in[0]};
        ot_tensor gout[1] = {tc_out(OT_F32, 4, 2, 3, 9, 9)};
        tc_check(backend_of(state), mx ? "MaxPoolGrad" : "AveragePoolGrad", &g, gin, gout, TOL, 0, 0, 0);
        tk_node_free(&n);
        tk_node_free(&g);
    }
    ot_node n = tk_node(OT_OP_GLOBAL_AVERAGE_POOL, 1, 1);
    ot_tensor in[1] = {tc_rand(&p, 172, -1, 1, 4, 2, 3, 9, 9)};
    ot_tensor out[1] = {tc_out(OT_F32, 4, 2, 3, 1, 1)};
    tc_check(backend_of(state), "GlobalAveragePool", &n, in, out, TOL_RED, 0, 0, 0);
    tk_node_free(&n);
    tc_free(&p);
}

/* ---- optimizers ----------------------------------------------------------------------- */

static void test_optim(void **state) {
    tc_pool p = {0};
    int64_t four = 4;
    ot_tensor sc = tc_tensor(&p, OT_F64, 1, &four);
    double scal[4] = {0.01, 0.5, 3, 1};
    memcpy(sc.data, scal, sizeof scal);
    ot_node s = tk_node(OT_OP_SGD_STEP, 4, 0);
    ot_node_set_attr_float(&s, "momentum", 0.9f);
    ot_node_set_attr_float(&s, "weight_decay", 1e-4f);
    ot_tensor sin[4] = {tc_rand(&p, 180, -1, 1, 1, 777), tc_rand(&p, 181, -1, 1, 1, 777), tc_rand(&p, 182, -1, 1, 1, 777), sc};
    /* bit for bit: fmaf is a true FMA on both sides, every other product and sum is
     * rounded separately on the GPU too (test_host_optim checks the same code) */
    tc_check(backend_of(state), "SgdStep", &s, sin, NULL, 0.0, 0, 0, 0);
    tk_node_free(&s);
    ot_node a = tk_node(OT_OP_ADAM_STEP, 5, 0);
    ot_node_set_attr_float(&a, "weight_decay", 0.01f);
    ot_node_set_attr_int(&a, "decoupled", 1);
    ot_tensor ain[5] = {tc_rand(&p, 183, -1, 1, 1, 777), tc_rand(&p, 184, -1, 1, 1, 777), tc_rand(&p, 185, -1, 1, 1, 777),
                        tc_rand(&p, 186, 0, 1, 1, 777), sc};
    /* bit for bit as well, unless the device's double pow (2 ulp) moves a bias
     * correction across a float rounding boundary: see cuda_optim.cu */
    tc_check(backend_of(state), "AdamStep", &a, ain, NULL, 0.0, 0, 0, 0);
    tk_node_free(&a);
    tc_free(&p);
}

/* ---- shapes the small cases above miss -------------------------------------------------- */

/* Rows longer than a block (LayerNorm, BatchNorm, Softmax, the losses), partial warps
 * (lengths that are no multiple of 32), the class axis with trailing dims, class
 * weights, and the matmul forms autodiff emits: Gemm with transA = 1 on
 * [P*M, K] x [P*M, N] (weight gradients), both transposes, a shared A over a batch. */
static void test_shapes_more(void **state) {
    ot_backend *be = backend_of(state);
    tc_pool p = {0};
    ot_node g = tk_node(OT_OP_GEMM, 2, 1);
    ot_node_set_attr_int(&g, "transA", 1);
    ot_tensor gin[2] = {tc_rand(&p, 200, -1, 1, 2, 96, 40), tc_rand(&p, 201, -1, 1, 2, 96, 24)};
    ot_tensor gout[1] = {tc_out(OT_F32, 2, 40, 24)};
    tc_check(be, "Gemm transA (weight gradient form)", &g, gin, gout, TOL, 0, 0, 0);
    ot_node_set_attr_int(&g, "transB", 1);
    ot_tensor gin2[2] = {tc_rand(&p, 202, -1, 1, 2, 37, 19), tc_rand(&p, 203, -1, 1, 2, 23, 37)};
    ot_tensor gout2[1] = {tc_out(OT_F32, 2, 19, 23)};
    tc_check(be, "Gemm transA transB", &g, gin2, gout2, TOL, 0, 0, 0);
    tk_node_free(&g);
    ot_node mm = tk_node(OT_OP_MATMUL, 2, 1);
    ot_tensor min[2] = {tc_rand(&p, 204, -1, 1, 2, 5, 6), tc_rand(&p, 205, -1, 1, 3, 3, 6, 4)};
    ot_tensor mout[1] = {tc_out(OT_F32, 3, 3, 5, 4)};
    tc_check(be, "MatMul shared A over a batch", &mm, min, mout, TOL, 0, 0, 0);
    ot_tensor kin[2] = {tc_rand(&p, 206, -1, 1, 3, 2, 33, 2048), tc_rand(&p, 207, -1, 1, 2, 2048, 65)};
    ot_tensor kout[1] = {tc_out(OT_F32, 3, 2, 33, 65)};
    tc_check(be, "MatMul K = 2048", &mm, kin, kout, TOL, 0, 0, 0);
    tk_node_free(&mm);

    ot_node ln = tk_node(OT_OP_LAYER_NORM, 3, 3);
    ot_tensor lin[3] = {tc_rand(&p, 210, -2, 3, 2, 9, 1000), tc_rand(&p, 211, 0.5f, 1.5f, 1, 1000),
                        tc_rand(&p, 212, -1, 1, 1, 1000)};
    ot_tensor lout[3] = {tc_out(OT_F32, 2, 9, 1000), tc_out(OT_F32, 2, 9, 1), tc_out(OT_F32, 2, 9, 1)};
    tc_check(be, "LayerNormalization, rows of 1000", &ln, lin, lout, TOL_RED, 0, 0, 0);
    tk_node_free(&ln);
    ot_node lg = tk_node(OT_OP_LAYER_NORM_GRAD, 3, 3);
    ot_tensor lgin[3] = {tc_rand(&p, 213, -1, 1, 2, 9, 1000), lin[0], lin[1]};
    ot_tensor lgout[3] = {tc_out(OT_F32, 2, 9, 1000), tc_out(OT_F32, 1, 1000), tc_out(OT_F32, 1, 1000)};
    tc_check(be, "LayerNormGrad, rows of 1000", &lg, lgin, lgout, TOL_RED, 0, 0, 0);
    tk_node_free(&lg);

    ot_node bn = tk_node(OT_OP_BATCH_NORM, 5, 3);
    ot_node_set_attr_int(&bn, "training_mode", 1);
    ot_tensor bin[5] = {tc_rand(&p, 220, -2, 3, 4, 4, 3, 33, 33), tc_rand(&p, 221, 0.5f, 1.5f, 1, 3),
                        tc_rand(&p, 222, -1, 1, 1, 3), tc_rand(&p, 223, -1, 1, 1, 3), tc_rand(&p, 224, 0.5f, 2, 1, 3)};
    ot_tensor bout[3] = {tc_out(OT_F32, 4, 4, 3, 33, 33), tc_out(OT_F32, 1, 3), tc_out(OT_F32, 1, 3)};
    tc_check(be, "BatchNormalization, 4356 values per channel", &bn, bin, bout, TOL_RED, 0, 0, 0);
    tk_node_free(&bn);
    ot_node bg = tk_node(OT_OP_BATCH_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&bg, "training_mode", 1);
    ot_tensor bgin[3] = {tc_rand(&p, 225, -1, 1, 4, 4, 3, 33, 33), bin[0], bin[1]};
    ot_tensor bgout[3] = {tc_out(OT_F32, 4, 4, 3, 33, 33), tc_out(OT_F32, 1, 3), tc_out(OT_F32, 1, 3)};
    tc_check(be, "BatchNormGrad, 4356 values per channel", &bg, bgin, bgout, TOL_RED, 0, 0, 0);
    tk_node_free(&bg);

    ot_node sm = tk_node(OT_OP_SOFTMAX, 1, 1);
    ot_node_set_attr_int(&sm, "axis", -1);
    ot_tensor sin[1] = {tc_rand(&p, 230, -8, 8, 2, 7, 1001)};
    ot_tensor sout[1] = {tc_out(OT_F32, 2, 7, 1001)};
    tc_check(be, "Softmax, rows of 1001", &sm, sin, sout, TOL, 0, 0, 0);
    tk_node_free(&sm);

    /* scores [N, C, D]: classes on axis 1 with a trailing dim, weights, ignore_index */
    int64_t lab[15];
    for (int i = 0; i < 15; i++)
        lab[i] = (i * 337) % 1000;
    lab[4] = -100;
    for (int sm2 = 0; sm2 < 2; sm2++) {
        ot_node n = tk_node(sm2 ? OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS : OT_OP_NLL_LOSS, 3, 1);
        ot_node_set_attr_int(&n, "ignore_index", -100);
        ot_tensor in[3] = {tc_rand(&p, 240, -3, 3, 3, 3, 1000, 5), tc_ints(&p, 15, lab),
                           tc_rand(&p, 241, 0.1f, 2, 1, 1000)};
        in[1].shape = ot_shape_make(2, (int64_t[]){3, 5});
        ot_tensor out[1] = {tc_out(OT_F32, 0)};
        tc_check(be,
                 sm2 ? "SoftmaxCrossEntropyLoss [3,1000,5] weighted" : "NegativeLogLikelihoodLoss [3,1000,5] weighted",
                 &n, in, out, TOL_RED, 0, 0, 0);
        ot_node_set_attr_string(&n, "reduction", "none");
        ot_tensor nout[1] = {tc_out(OT_F32, 2, 3, 5)};
        tc_check(be, "class loss, reduction none", &n, in, nout, TOL_RED, 0, 0, 0);
        tk_node_free(&n);
        ot_node gn = tk_node(sm2 ? OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD : OT_OP_NLL_LOSS_GRAD, 4, 1);
        ot_node_set_attr_int(&gn, "ignore_index", -100);
        ot_tensor gin3[4] = {tc_rand(&p, 242, 0.5f, 1.5f, 0), in[0], in[1], in[2]};
        ot_tensor gout3[1] = {tc_out(OT_F32, 3, 3, 1000, 5)};
        tc_check(be, "class loss gradient [3,1000,5] weighted", &gn, gin3, gout3, TOL_RED, 0, 0, 0);
        tk_node_free(&gn);
    }
    tc_free(&p);
}

/* Shapes past the launch caps, where only the grid-stride loops reach the last
 * elements: more than 2^28 elements (OT_CU_MAX_BLOCKS blocks x 256 threads), more
 * than 2^23 lines (the one-warp-per-item loops: 2^20 blocks x 8 warps), more than
 * 65535 rows or channels (the one-block-per-row kernels' grid). Dropout is compared
 * bitwise, so its element indices above 2^28 are checked too. */
static void test_launch_limits(void **state) {
    ot_backend *be = backend_of(state);
    tc_pool p = {0};
    const int big = (1 << 28) + 4099, lines = (1 << 23) + 37, rows = 70001;
    ot_node d = tk_node(OT_OP_DROPOUT, 1, 2);
    ot_node_set_attr_float(&d, "ratio", 0.5f);
    ot_node_set_attr_int(&d, "training_mode", 1);
    ot_tensor din[1] = {tc_rand(&p, 300, -1, 1, 1, big)};
    ot_tensor dout[2] = {tc_out(OT_F32, 1, big), tc_out(OT_BOOL, 1, big)};
    tc_check(be, "Dropout over 2^28 + 4099 elements", &d, din, dout, 0.0, 0xfeedfaceULL, 3, 11);
    tk_node_free(&d);
    tc_free(&p);

    ot_node sm = tk_node(OT_OP_LOG_SOFTMAX, 1, 1);
    ot_node_set_attr_int(&sm, "axis", -1);
    ot_tensor sin[1] = {tc_rand(&p, 301, -5, 5, 2, lines, 3)};
    ot_tensor sout[1] = {tc_out(OT_F32, 2, lines, 3)};
    tc_check(be, "LogSoftmax over 2^23 + 37 lines", &sm, sin, sout, TOL, 0, 0, 0);
    tk_node_free(&sm);
    ot_node rs = tk_node(OT_OP_REDUCE_SUM, 1, 1);
    int64_t ax[1] = {1};
    ot_node_set_attr_ints(&rs, "axes", ax, 1);
    ot_node_set_attr_int(&rs, "keepdims", 0);
    ot_tensor rout[1] = {tc_out(OT_F32, 1, lines)};
    tc_check(be, "ReduceSum to 2^23 + 37 outputs", &rs, sin, rout, TOL_RED, 0, 0, 0);
    tk_node_free(&rs);
    ot_node gap = tk_node(OT_OP_GLOBAL_AVERAGE_POOL, 1, 1);
    ot_tensor gin[1] = {sin[0]};
    gin[0].shape = ot_shape_make(4, (int64_t[]){1, lines, 1, 3});
    ot_tensor gout[1] = {tc_out(OT_F32, 4, 1, lines, 1, 1)};
    tc_check(be, "GlobalAveragePool over 2^23 + 37 planes", &gap, gin, gout, TOL_RED, 0, 0, 0);
    tk_node_free(&gap);
    int64_t *lab = tc_alloc(&p, (size_t)lines * 8);
    for (int64_t i = 0; i < lines; i++)
        lab[i] = i % 3;
    ot_tensor labels = tc_tensor(&p, OT_I64, 1, (int64_t[]){lines});
    memcpy(labels.data, lab, (size_t)lines * 8);
    ot_node ce = tk_node(OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS, 2, 1);
    ot_tensor cin[2] = {sin[0], labels};
    ot_tensor cout[1] = {tc_out(OT_F32, 0)};
    tc_check(be, "SoftmaxCrossEntropyLoss over 2^23 + 37 samples", &ce, cin, cout, TOL_RED, 0, 0, 0);
    tk_node_free(&ce);
    ot_node cg = tk_node(OT_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD, 3, 1);
    ot_tensor cgin[3] = {tc_rand(&p, 302, 0.5f, 1.5f, 0), sin[0], labels};
    ot_tensor cgout[1] = {tc_out(OT_F32, 2, lines, 3)};
    tc_check(be, "SoftmaxCrossEntropyLossGrad over 2^23 + 37 samples", &cg, cgin, cgout, TOL_RED, 0, 0, 0);
    tk_node_free(&cg);
    tc_free(&p);

    ot_node ln = tk_node(OT_OP_LAYER_NORM, 3, 3);
    ot_tensor lin[3] = {tc_rand(&p, 310, -2, 3, 2, rows, 5), tc_rand(&p, 311, 0.5f, 1.5f, 1, 5),
                        tc_rand(&p, 312, -1, 1, 1, 5)};
    ot_tensor lout[3] = {tc_out(OT_F32, 2, rows, 5), tc_out(OT_F32, 2, rows, 1), tc_out(OT_F32, 2, rows, 1)};
    tc_check(be, "LayerNormalization over 70001 rows", &ln, lin, lout, TOL_RED, 0, 0, 0);
    tk_node_free(&ln);
    ot_node lg = tk_node(OT_OP_LAYER_NORM_GRAD, 3, 3);
    ot_tensor lgin[3] = {tc_rand(&p, 313, -1, 1, 2, rows, 5), lin[0], lin[1]};
    ot_tensor lgout[3] = {tc_out(OT_F32, 2, rows, 5), tc_out(OT_F32, 1, 5), tc_out(OT_F32, 1, 5)};
    tc_check(be, "LayerNormGrad over 70001 rows", &lg, lgin, lgout, TOL_RED, 0, 0, 0);
    tk_node_free(&lg);
    ot_node bn = tk_node(OT_OP_BATCH_NORM, 5, 3);
    ot_node_set_attr_int(&bn, "training_mode", 1);
    ot_tensor bin[5] = {tc_rand(&p, 320, -2, 3, 3, 2, rows, 2), tc_rand(&p, 321, 0.5f, 1.5f, 1, rows),
                        tc_rand(&p, 322, -1, 1, 1, rows), tc_rand(&p, 323, -1, 1, 1, rows),
                        tc_rand(&p, 324, 0.5f, 2, 1, rows)};
    ot_tensor bout[3] = {tc_out(OT_F32, 3, 2, rows, 2), tc_out(OT_F32, 1, rows), tc_out(OT_F32, 1, rows)};
    tc_check(be, "BatchNormalization over 70001 channels", &bn, bin, bout, TOL_RED, 0, 0, 0);
    tk_node_free(&bn);
    ot_node bg = tk_node(OT_OP_BATCH_NORM_GRAD, 3, 3);
    ot_node_set_attr_int(&bg, "training_mode", 1);
    ot_tensor bgin[3] = {tc_rand(&p, 325, -1, 1, 3, 2, rows, 2), bin[0], bin[1]};
    ot_tensor bgout[3] = {tc_out(OT_F32, 3, 2, rows, 2), tc_out(OT_F32, 1, rows), tc_out(OT_F32, 1, rows)};
    tc_check(be, "BatchNormGrad over 70001 channels", &bg, bgin, bgout, TOL_RED, 0, 0, 0);
    tk_node_free(&bg);
    tc_free(&p);
}

/* ---- end to end: 20 training steps of each sample model -------------------------------- */

typedef struct sample_case {
    const char *file;
    int64_t batch;   /* bound to the symbolic batch dim, if any */
    int64_t int_hi;  /* integer inputs (tokens, labels) are drawn from [0, int_hi) */
    const char *dir; /* the model's folder; NULL: the source tree's samples/ */
} sample_case;

/* Every sample of samples/ (README.md: mlp, resnet, mobilenet, tinygpt, chain48). */
static const sample_case SAMPLES[] = {{"mlp.onnx", 8, 10, NULL},
                                      {"resnet.onnx", 8, 10, NULL},
                                      {"mobilenet.onnx", 8, 10, NULL},
                                      {"tinygpt.onnx", 4, 64, NULL},
                                      {"chain48.onnx", 8, 10, NULL}};
#define N_SAMPLES (sizeof SAMPLES / sizeof SAMPLES[0])
#define TRAIN_STEPS 20

/* The training graph of a sample: cross-entropy loss, backward pass, SGD with
 * momentum. Fails the test with the library's message. */
typedef struct sample_graph {
    ot_model *m;
    int loss_v;
    ot_autodiff_result ad;
    ot_optim_graph og;
    int n_clones; /* recompute clones the remat policy added */
} sample_graph;

static void sample_graph_build(const sample_case *sc, const char *remat, sample_graph *sg) {
    char path[1024];
    /* a build carried to another machine finds the tree through the environment */
    const char *root = getenv("OT_SOURCE_DIR") ? getenv("OT_SOURCE_DIR") : OT_SOURCE_DIR;
    if (sc->dir) snprintf(path, sizeof path, "%s/%s", sc->dir, sc->file);
    else snprintf(path, sizeof path, "%s/samples/%s", root, sc->file);
    ot_error e = {0};
    memset(sg, 0, sizeof *sg);
    if (ot_model_load(path, &(ot_import_options){.fold_eval = ot_cpu_fold_eval}, &sg->m, &e) != OT_OK) fail_msg("%s", e.msg);
    ot_graph *g = sg->m->graph;
    if (ot_graph_find_sym(g, "batch") >= 0) assert_int_equal(ot_graph_bind_dim(g, "batch", sc->batch, &e), OT_OK);
    ot_loss_options lo;
    memset(&lo, 0, sizeof lo);
    lo.kind = OT_LOSS_CROSS_ENTROPY;
    lo.class_axis = -1;
    if (ot_loss_build(g, &lo, &sg->loss_v, &e) != OT_OK) fail_msg("%s: %s", sc->file, e.msg);
    ot_autodiff_options ao;
    memset(&ao, 0, sizeof ao);
    ao.loss_value = sg->loss_v;
    if (ot_autodiff_build(g, &ao, &sg->ad, &e) != OT_OK) fail_msg("%s: %s", sc->file, e.msg);
    g->values[sg->loss_v].is_graph_output = true;
    if (remat && strcmp(remat, "none") != 0) { /* a policy that needs no measuring */
        ot_remat_policy pol;
        ot_remat_analysis an;
        ot_remat_rewrite rw;
        memset(&pol, 0, sizeof pol);
        memset(&an, 0, sizeof an);
        memset(&rw, 0, sizeof rw);
        assert_int_equal(ot_remat_policy_parse(remat, &pol, &e), OT_OK);
        if (ot_remat_analyze(g, &an, &e) != OT_OK) fail_msg("%s: %s", sc->file, e.msg);
        bool *keep = calloc((size_t)an.n_values + 1, sizeof *keep);
        assert_non_null(keep);
        /* `all` measures candidate plans with the planner (no backend: workspaces do
         * not count, which only changes which segmentation wins) */
        if (ot_remat_choose(g, &an, &pol, ot_remat_measure_planner, NULL, keep, &e) != OT_OK ||
            ot_remat_apply(g, &an, keep, &rw, &e) != OT_OK)
            fail_msg("%s --remat %s: %s", sc->file, remat, e.msg);
        free(keep);
        sg->n_clones = rw.n_clones;
        ot_remat_rewrite_free(&rw);
        ot_remat_analysis_free(&an);
        ot_remat_policy_free(&pol);
    }
    ot_optim_config oc;
    ot_optim_config_default(&oc, OT_OPTIM_SGD);
    oc.momentum = 0.9f;
    if (ot_optim_build(g, &oc, sg->ad.params, sg->ad.grads, sg->ad.n_params, &sg->og, &e) != OT_OK)
        fail_msg("%s: %s", sc->file, e.msg);
}

static void sample_graph_free(sample_graph *sg) {
    ot_optim_graph_free(&sg->og);
    ot_autodiff_result_free(&sg->ad);
    ot_model_free(sg->m);
}

/* Every node of every sample's training graph has a CUDA kernel (no GPU needed:
 * supports looks at dtypes, shapes and attributes only). With OT_GPU_BENCH_DIR set (a
 * folder from tests/gpu/export_bench.py), the benchmark models at the benchmark's
 * batch sizes too, so an op the GPU would refuse shows here first. */
static void test_samples_supported(void **state) {
    (void)state;
    const char *bench = getenv("OT_GPU_BENCH_DIR");
    sample_case cases[N_SAMPLES + 2];
    size_t n_cases = 0;
    for (size_t c = 0; c < N_SAMPLES; c++) cases[n_cases++] = SAMPLES[c];
    if (bench && bench[0]) {
        cases[n_cases++] = (sample_case){"gpt2_small.onnx", 4, 50257, bench};
        cases[n_cases++] = (sample_case){"resnet50.onnx", 32, 1000, bench};
    }
    for (size_t c = 0; c < n_cases; c++) {
        sample_graph sg;
        sample_graph_build(&cases[c], "none", &sg);
        ot_graph *g = sg.m->graph;
        for (int i = 0; i < g->n_nodes; i++) {
            const ot_node *nd = &g->nodes[i];
            if (nd->removed) continue;
            ot_tensor *t = calloc((size_t)(nd->n_inputs + nd->n_outputs) + 1, sizeof *t);
            assert_non_null(t);
            for (int k = 0; k < nd->n_inputs + nd->n_outputs; k++) {
                int v = k < nd->n_inputs ? nd->inputs[k] : nd->outputs[k - nd->n_inputs];
                t[k].shape = ot_shape_make(0, NULL);
                if (v < 0) continue;
                t[k].dtype = g->values[v].dtype;
                t[k].shape = g->values[v].shape;
            }
            bool ok = mod()->supports_node(nd, t, t + nd->n_inputs);
            free(t);
            if (!ok) fail_msg("%s: node '%s' (%s) has no CUDA kernel", cases[c].file, nd->name, nd->op_type);
        }
        if (cases[c].dir) print_message("%s: every node of the training graph has a CUDA kernel\n", cases[c].file);
        sample_graph_free(&sg);
    }
}

typedef struct sample_run {
    float loss[TRAIN_STEPS];
    int n_clones;
    ot_tensor **grads; /* step 1's gradients */
    ot_tensor **params; /* after the last step */
    char **names;      /* the params' names */
    int n;
    ot_tensor **state; /* BatchNorm running statistics after the last step */
    char **state_names;
    int n_state;
} sample_run;

/* Trains the sample TRAIN_STEPS steps on `be` with the same random batch every step,
 * as the training loop does: scalars written per step, BatchNorm statistics copied
 * back after each run. */
static void sample_train(ot_backend *be, const sample_case *sc, const char *remat, int steps, sample_run *r) {
    sample_graph sg;
    sample_graph_build(sc, remat, &sg);
    ot_graph *g = sg.m->graph;
    ot_error e = {0};
    ot_exec_options eo;
    memset(&eo, 0, sizeof eo);
    eo.seed = 1234;
    ot_executor *ex = NULL;
    if (ot_executor_new(g, be, &eo, &ex, &e) != OT_OK) fail_msg("%s on %s: %s", sc->file, be->name, e.msg);
    for (int i = 0; i < g->n_inputs; i++) {
        const ot_value *v = &g->values[g->inputs[i]];
        ot_tensor *t = ot_tensor_new(v->dtype, &v->shape);
        assert_non_null(t);
        int64_t n = ot_shape_numel(&v->shape);
        if (v->dtype == OT_F32) {
            tk_fill(t->data, n, 500 + (uint32_t)i, -1, 1);
        } else {
            assert_int_equal(v->dtype, OT_I64);
            for (int64_t k = 0; k < n; k++) ((int64_t *)t->data)[k] = (k * 7919 + i * 13) % sc->int_hi;
        }
        if (ot_executor_set_input(ex, g->inputs[i], t, &e) != OT_OK) fail_msg("%s: %s", sc->file, e.msg);
        ot_tensor_free(t);
    }
    size_t free_after_first = 0;
    r->n = sg.ad.n_params;
    r->n_clones = sg.n_clones;
    r->grads = calloc((size_t)r->n + 1, sizeof *r->grads);
    r->params = calloc((size_t)r->n + 1, sizeof *r->params);
    r->names = calloc((size_t)r->n + 1, sizeof *r->names);
    r->n_state = sg.ad.n_state;
    r->state = calloc((size_t)r->n_state + 1, sizeof *r->state);
    r->state_names = calloc((size_t)r->n_state + 1, sizeof *r->state_names);
    assert_true(r->grads && r->params && r->names && r->state && r->state_names);
    for (int i = 0; i < r->n; i++) assert_non_null(r->names[i] = strdup(g->values[sg.ad.params[i]].name));
    for (int i = 0; i < r->n_state; i++)
        assert_non_null(r->state_names[i] = strdup(g->values[sg.ad.state_values[i]].name));
    for (int s = 0; s < steps; s++) {
        double scal[OT_OPT_N_SCALARS] = {0.01, 1.0, (double)(s + 1), 1.0};
        assert_int_equal(ot_executor_write(ex, sg.og.scalars, scal, sizeof scal, &e), OT_OK);
        ot_executor_set_step(ex, (uint64_t)s);
        if (ot_executor_run(ex, &e) != OT_OK) fail_msg("%s on %s, step %d: %s", sc->file, be->name, s + 1, e.msg);
        ot_tensor *lt = NULL;
        assert_int_equal(ot_executor_get(ex, sg.loss_v, &lt, &e), OT_OK);
        r->loss[s] = *(float *)lt->data;
        ot_tensor_free(lt);
        if (s == 0) {
            for (int i = 0; i < r->n; i++) assert_int_equal(ot_executor_get(ex, sg.ad.grads[i], &r->grads[i], &e), OT_OK);
            /* the arena's measured high-water mark is the plan's peak */
            size_t hw = ot_executor_high_water(ex), peak = ot_plan_peak_bytes(ot_executor_plan(ex));
            if (hw != peak)
                fail_msg("%s on %s --remat %s: measured high-water mark %zu bytes, planned peak %zu", sc->file,
                         be->name, remat, hw, peak);
        }
        for (int i = 0; i < sg.ad.n_state; i++)
            assert_int_equal(ot_executor_copy_value(ex, sg.ad.state_values[i], sg.ad.state_updates[i], &e), OT_OK);
        /* nothing but the arena on the device: free memory after step 1 (cuBLAS and
         * cuDNN set up lazily) stays the same to the last step */
        if (strncmp(be->name, "cuda", 4) == 0 && (s == 0 || s == steps - 1)) {
            size_t free_b = 0, total = 0;
            if (ot_backend_cuda_mem_info(be, &free_b, &total, &e) != OT_OK) fail_msg("%s", e.msg);
            if (s == 0) free_after_first = free_b;
            else if (free_b != free_after_first)
                fail_msg("%s: device free memory went from %zu to %zu bytes during training", sc->file,
                         free_after_first, free_b);
        }
    }
    for (int i = 0; i < r->n; i++) assert_int_equal(ot_executor_get(ex, sg.ad.params[i], &r->params[i], &e), OT_OK);
    for (int i = 0; i < r->n_state; i++)
        assert_int_equal(ot_executor_get(ex, sg.ad.state_values[i], &r->state[i], &e), OT_OK);
    ot_executor_free(ex);
    sample_graph_free(&sg);
}

static void sample_run_free(sample_run *r) {
    for (int i = 0; i < r->n; i++) {
        ot_tensor_free(r->grads[i]);
        ot_tensor_free(r->params[i]);
        free(r->names[i]);
    }
    for (int i = 0; i < r->n_state; i++) {
        ot_tensor_free(r->state[i]);
        free(r->state_names[i]);
    }
    free(r->grads);
    free(r->params);
    free(r->names);
    free(r->state);
    free(r->state_names);
}

/* Largest difference relative to the tensor's largest magnitude; where it is, and
 * the two values there. */
static double rel_to_max(const ot_tensor *a, const ot_tensor *b, int64_t *at, double *va, double *vb) {
    const float *x = a->data, *y = b->data;
    int64_t n = ot_shape_numel(&b->shape);
    double scale = 1e-6, worst = 0.0;
    *at = -1;
    *va = *vb = 0.0;
    for (int64_t k = 0; k < n; k++) scale = fmax(scale, fabs(y[k]));
    for (int64_t k = 0; k < n; k++) {
        double d = fabs((double)x[k] - y[k]) / scale;
        if (d > worst || (isnan(d) && !isnan(worst))) {
            worst = d;
            *at = k;
            *va = x[k];
            *vb = y[k];
        }
    }
    return worst;
}

/* First element where two tensors differ bitwise, -1 when none. */
static int64_t first_bit_diff(const ot_tensor *a, const ot_tensor *b) {
    size_t es = ot_dtype_size(a->dtype) ? ot_dtype_size(a->dtype) : 1;
    if (a->nbytes != b->nbytes) return 0;
    for (size_t i = 0; i < a->nbytes / es; i++)
        if (memcmp((const char *)a->data + i * es, (const char *)b->data + i * es, es) != 0) return (int64_t)i;
    return -1;
}

static void test_samples_train(void **state) {
    ot_error e = {0};
    ot_backend *cpu = ot_backend_cpu_new(2, &e);
    assert_non_null(cpu);
    for (size_t c = 0; c < N_SAMPLES; c++) {
        sample_run rc, rg;
        sample_train(cpu, &SAMPLES[c], "none", TRAIN_STEPS, &rc);
        sample_train(backend_of(state), &SAMPLES[c], "none", TRAIN_STEPS, &rg);
        assert_int_equal(rc.n, rg.n);
        for (int s = 0; s < TRAIN_STEPS; s++) {
            /* the issue's bound: 1e-4 relative to the CPU's loss */
            double d = fabs((double)rg.loss[s] - rc.loss[s]) / fmax(1e-30, fabs(rc.loss[s]));
            if (!(d <= TOL_RED))
                fail_msg("%s: step %d loss %.9g on CUDA, %.9g on the CPU (relative difference %g)", SAMPLES[c].file,
                         s + 1, rg.loss[s], rc.loss[s], d);
        }
        int64_t at;
        double vg, vc;
        for (int i = 0; i < rc.n; i++) {
            double d = rel_to_max(rg.grads[i], rc.grads[i], &at, &vg, &vc);
            if (!(d <= TOL_RED))
                fail_msg("%s: step-1 gradient of '%s' differs by %g (relative to its largest magnitude): at flat "
                         "index %lld CUDA %.9g, CPU %.9g",
                         SAMPLES[c].file, rc.names[i], d, (long long)at, vg, vc);
            d = rel_to_max(rg.params[i], rc.params[i], &at, &vg, &vc);
            if (!(d <= TOL_RED))
                fail_msg("%s: param '%s' after %d steps differs by %g: at flat index %lld CUDA %.9g, CPU %.9g",
                         SAMPLES[c].file, rc.names[i], TRAIN_STEPS, d, (long long)at, vg, vc);
        }
        for (int i = 0; i < rc.n_state; i++) {
            double d = rel_to_max(rg.state[i], rc.state[i], &at, &vg, &vc);
            if (!(d <= TOL_RED))
                fail_msg("%s: running statistic '%s' after %d steps differs by %g: at flat index %lld CUDA %.9g, CPU %.9g",
                         SAMPLES[c].file, rc.state_names[i], TRAIN_STEPS, d, (long long)at, vg, vc);
        }
        print_message("%s: %d steps, loss %.7g -> %.7g on CUDA, %.7g -> %.7g on the CPU\n", SAMPLES[c].file,
                      TRAIN_STEPS, rg.loss[0], rg.loss[TRAIN_STEPS - 1], rc.loss[0], rc.loss[TRAIN_STEPS - 1]);
        sample_run_free(&rc);
        sample_run_free(&rg);
    }
    ot_backend_free(cpu);
}

/* Remat never changes results: on the GPU, losses, gradients and updated params with
 * every policy that needs no measuring are bitwise those of --remat none. */
static void test_samples_remat_bitwise(void **state) {
    const char *policies[] = {"all", "sqrt", "selective", "every:1", "every:2"};
    enum { STEPS = 3 };
    int clones = 0;
    for (size_t c = 0; c < N_SAMPLES; c++) {
        sample_run r0;
        sample_train(backend_of(state), &SAMPLES[c], "none", STEPS, &r0);
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
            sample_run r1;
            sample_train(backend_of(state), &SAMPLES[c], policies[p], STEPS, &r1);
            assert_int_equal(r0.n, r1.n);
            clones += r1.n_clones;
            print_message("%s --remat %s: %d recompute clones, bitwise equal to none\n", SAMPLES[c].file, policies[p],
                          r1.n_clones);
            for (int s = 0; s < STEPS; s++)
                if (memcmp(&r0.loss[s], &r1.loss[s], sizeof(float)) != 0)
                    fail_msg("%s --remat %s: step %d loss %.9g, with --remat none %.9g", SAMPLES[c].file, policies[p],
                             s + 1, r1.loss[s], r0.loss[s]);
            for (int i = 0; i < r0.n; i++) {
                int64_t at = first_bit_diff(r1.grads[i], r0.grads[i]);
                if (at >= 0)
                    fail_msg("%s --remat %s: step-1 gradient of '%s' differs from --remat none at flat index %lld: "
                             "%.9g vs %.9g",
                             SAMPLES[c].file, policies[p], r0.names[i], (long long)at,
                             (double)((const float *)r1.grads[i]->data)[at], (double)((const float *)r0.grads[i]->data)[at]);
                at = first_bit_diff(r1.params[i], r0.params[i]);
                if (at >= 0)
                    fail_msg("%s --remat %s: param '%s' after %d steps differs from --remat none at flat index %lld",
                             SAMPLES[c].file, policies[p], r0.names[i], STEPS, (long long)at);
            }
            assert_int_equal(r0.n_state, r1.n_state);
            for (int i = 0; i < r0.n_state; i++) {
                int64_t at = first_bit_diff(r1.state[i], r0.state[i]);
                if (at >= 0)
                    fail_msg("%s --remat %s: running statistic '%s' differs from --remat none at flat index %lld",
                             SAMPLES[c].file, policies[p], r0.state_names[i], (long long)at);
            }
            sample_run_free(&r1);
        }
        sample_run_free(&r0);
    }
    assert_true(clones > 0); /* the comparison saw recomputation */
}

static int gpu_setup(void **state) {
    ot_error e = {0};
    ot_backend *be = ot_backend_new_by_name("cuda:0", 0, &e);
    if (!be) {
        print_error("cannot open cuda:0: %s\n", e.msg);
        return -1;
    }
    *state = be;
    return 0;
}

static int gpu_teardown(void **state) {
    ot_backend_free((ot_backend *)*state);
    return 0;
}

static void test_skipped(void **state) {
    (void)state;
    skip();
}

/* ---- layout and indexing (issue 13) ---- */

/* One case of the layout and indexing ops: on the host mode (be NULL: must match the
 * CPU bit for bit) or on the GPU against the CPU (exactly: the element code and its
 * summation order are the CPU's). */
static void ix_case(ot_backend *be, const char *label, const ot_node *n, ot_tensor *in, const ot_tensor *out) {
    if (!be) assert_int_equal(hm_compare(label, n, in, out), OT_OK);
    else tc_check(be, label, n, in, out, 0, 0, 0, 0);
}

static ot_tensor ix_scalar(tc_pool *p, int64_t v) {
    ot_tensor t = tc_ints(p, 1, &v);
    t.shape = ot_shape_make(0, NULL);
    return t;
}

/* Pad in every mode (pads beyond the axis size, a crop through the axes input, int64
 * data), PadGrad, Tile and TileGrad, Trilu, GatherElements and its gradient, CumSum,
 * ScatterND and ScatterElements with every reduction (repeated indices), GatherND. */
static void ix_cases(ot_backend *be) {
    tc_pool p = {0};
    const char *modes[4] = {"constant", "reflect", "edge", "wrap"};
    int64_t pads[6] = {0, 2, 3, 1, 2, 5};
    ot_tensor x = tc_rand(&p, 201, -1, 1, 3, 2, 3, 4), dy = tc_rand(&p, 202, -1, 1, 3, 3, 7, 12);
    ot_tensor value = tc_tensor(&p, OT_F32, 0, NULL);
    *(float *)value.data = 0.75f;
    for (int m = 0; m < 4; m++) {
        ot_node n = tk_node(OT_OP_PAD, 3, 1);
        ot_node_set_attr_string(&n, "mode", modes[m]);
        ot_tensor in[3] = {x, tc_ints(&p, 6, pads), value};
        ot_tensor out[1] = {tc_out(OT_F32, 3, 3, 7, 12)};
        ix_case(be, modes[m], &n, in, out);
        ot_node g = tk_node(OT_OP_PAD_GRAD, 3, 1);
        ot_node_set_attr_string(&g, "mode", modes[m]);
        ot_tensor gin[3] = {dy, x, in[1]};
        ot_tensor gout[1] = {tc_out(OT_F32, 3, 2, 3, 4)};
        ix_case(be, "PadGrad", &g, gin, gout);
        tk_node_free(&n);
        tk_node_free(&g);
    }
    int64_t xi[24], pads2[4] = {-1, 2, 0, 1}, axes2[2] = {2, -2};
    for (int i = 0; i < 24; i++) xi[i] = 100 + i;
    ot_tensor xin = tc_ints(&p, 24, xi);
    xin.shape = ot_shape_make(3, (int64_t[]){2, 3, 4});
    ot_node pc = tk_node(OT_OP_PAD, 4, 1);
    ot_tensor pcin[4] = {xin, tc_ints(&p, 4, pads2), ix_scalar(&p, 7), tc_ints(&p, 2, axes2)};
    ot_tensor pcout[1] = {tc_out(OT_I64, 3, 2, 6, 3)};
    ix_case(be, "Pad int64, axes, crop", &pc, pcin, pcout);

    int64_t rep[3] = {2, 3, 2};
    ot_node t = tk_node(OT_OP_TILE, 2, 1);
    ot_tensor tx = tc_rand(&p, 203, -1, 1, 3, 2, 1, 3);
    ot_tensor tin[2] = {tx, tc_ints(&p, 3, rep)};
    ot_tensor tout[1] = {tc_out(OT_F32, 3, 4, 3, 6)};
    ix_case(be, "Tile", &t, tin, tout);
    ot_node tg = tk_node(OT_OP_TILE_GRAD, 2, 1);
    ot_tensor tgin[2] = {tc_rand(&p, 204, -1, 1, 3, 4, 3, 6), tx};
    ot_tensor tgout[1] = {tc_out(OT_F32, 3, 2, 1, 3)};
    ix_case(be, "TileGrad", &tg, tgin, tgout);

    for (int upper = 0; upper < 2; upper++) {
        ot_node tr = tk_node(OT_OP_TRILU, 2, 1);
        ot_node_set_attr_int(&tr, "upper", upper);
        ot_tensor trin[2] = {tc_rand(&p, 205, -1, 1, 3, 2, 3, 5), ix_scalar(&p, upper ? -1 : 2)};
        ot_tensor trout[1] = {tc_out(OT_F32, 3, 2, 3, 5)};
        ix_case(be, upper ? "Trilu upper" : "Trilu lower", &tr, trin, trout);
        tk_node_free(&tr);
    }

    int64_t idx[6] = {2, 0, -1, 1, 2, 2};
    for (int axis = 0; axis < 2; axis++) {
        ot_node ge = tk_node(OT_OP_GATHER_ELEMENTS, 2, 1);
        ot_node_set_attr_int(&ge, "axis", axis);
        ot_tensor gx = tc_rand(&p, 206, -1, 1, 2, 3, 4), gi = tc_ints(&p, 6, idx);
        gi.shape = ot_shape_make(2, (int64_t[]){2, 3});
        ot_tensor gein[2] = {gx, gi};
        ot_tensor geout[1] = {tc_out(OT_F32, 2, 2, 3)};
        ix_case(be, "GatherElements", &ge, gein, geout);
        ot_node gg = tk_node(OT_OP_GATHER_ELEMENTS_GRAD, 3, 1);
        ot_node_set_attr_int(&gg, "axis", axis);
        ot_tensor ggin[3] = {tc_rand(&p, 207, -1, 1, 2, 2, 3), gi, gx};
        ot_tensor ggout[1] = {tc_out(OT_F32, 2, 3, 4)};
        ix_case(be, "GatherElementsGrad", &gg, ggin, ggout);
        tk_node_free(&ge);
        tk_node_free(&gg);
    }

    for (int mode = 0; mode < 4; mode++) {
        ot_node c = tk_node(OT_OP_CUMSUM, 2, 1);
        ot_node_set_attr_int(&c, "exclusive", mode & 1);
        ot_node_set_attr_int(&c, "reverse", mode >> 1);
        ot_tensor cin[2] = {tc_rand(&p, 208, -1, 1, 3, 3, 40, 5), ix_scalar(&p, mode == 3 ? -2 : 1)};
        ot_tensor cout[1] = {tc_out(OT_F32, 3, 3, 40, 5)};
        ix_case(be, "CumSum", &c, cin, cout);
        tk_node_free(&c);
    }

    const char *reds[5] = {"none", "add", "mul", "max", "min"};
    int64_t rows[3] = {1, -1, 1}, el[6] = {1, 0, 3, 1, 2, -1};
    ot_tensor sx = tc_rand(&p, 209, -1, 1, 2, 4, 3), ri = tc_ints(&p, 3, rows), ei = tc_ints(&p, 6, el);
    ri.shape = ot_shape_make(2, (int64_t[]){3, 1});
    ei.shape = ot_shape_make(2, (int64_t[]){2, 3});
    for (int r = 0; r < 5; r++) {
        ot_node s = tk_node(OT_OP_SCATTER_ND, 3, 1);
        ot_node_set_attr_string(&s, "reduction", reds[r]);
        ot_tensor sin[3] = {sx, ri, tc_rand(&p, 210, -1, 1, 2, 3, 3)};
        ot_tensor sout[1] = {tc_out(OT_F32, 2, 4, 3)};
        ix_case(be, "ScatterND", &s, sin, sout);
        ot_node e = tk_node(OT_OP_SCATTER_ELEMENTS, 3, 1);
        ot_node_set_attr_string(&e, "reduction", reds[r]);
        ot_tensor ein[3] = {sx, ei, tc_rand(&p, 211, -1, 1, 2, 2, 3)};
        ix_case(be, "ScatterElements", &e, ein, sout);
        tk_node_free(&s);
        tk_node_free(&e);
    }
    ot_node gn = tk_node(OT_OP_GATHER_ND, 2, 1);
    ot_tensor gnin[2] = {sx, ri};
    ot_tensor gnout[1] = {tc_out(OT_F32, 2, 3, 3)};
    ix_case(be, "GatherND", &gn, gnin, gnout);
    tc_free(&p);
}

static void test_host_index(void **state) {
    (void)state;
    ix_cases(NULL);
}

static void test_index(void **state) { ix_cases(backend_of(state)); }

/* ---- spatial ops (issue 26, ops batch 2) ---- */

/* Resize (linear pytorch_half_pixel by scales, cubic align_corners and nearest by
 * sizes, a downscale with exclude_outside) and ResizeGrad for each, DepthToSpace and
 * SpaceToDepth: host mode bit for bit with the CPU, the GPU exactly (the same element
 * code and summation order). */
static void rs_cases(ot_backend *be) {
    tc_pool p = {0};
    static const char *const modes[4] = {"linear", "cubic", "nearest", "cubic"};
    static const char *const ctms[4] = {"pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel"};
    int64_t yh[4] = {10, 7, 9, 3}, yw[4] = {12, 5, 4, 2};
    ot_tensor x = tc_rand(&p, 301, -1, 1, 4, 2, 3, 5, 6);
    for (int m = 0; m < 4; m++) {
        ot_tensor none;
        memset(&none, 0, sizeof none);
        ot_tensor scales = tc_tensor(&p, OT_F32, 1, (int64_t[]){4});
        float *sv = scales.data;
        sv[0] = sv[1] = 1.0f, sv[2] = 2.0f, sv[3] = 2.0f;
        int64_t sz[4] = {2, 3, yh[m], yw[m]};
        ot_tensor sizes = m == 0 ? none : tc_ints(&p, 4, sz);
        ot_node n = tk_node(OT_OP_RESIZE, 4, 1);
        ot_node_set_attr_string(&n, "mode", modes[m]);
        ot_node_set_attr_string(&n, "coordinate_transformation_mode", ctms[m]);
        ot_node_set_attr_string(&n, "nearest_mode", "floor");
        if (m == 3) ot_node_set_attr_int(&n, "exclude_outside", 1);
        ot_tensor in[4] = {x, none, m == 0 ? scales : none, sizes};
        ot_tensor out[1] = {tc_out(OT_F32, 4, 2, 3, yh[m], yw[m])};
        ix_case(be, modes[m], &n, in, out);
        ot_node g = tk_node(OT_OP_RESIZE_GRAD, 5, 1);
        ot_node_set_attr_string(&g, "mode", modes[m]);
        ot_node_set_attr_string(&g, "coordinate_transformation_mode", ctms[m]);
        ot_node_set_attr_string(&g, "nearest_mode", "floor");
        if (m == 3) ot_node_set_attr_int(&g, "exclude_outside", 1);
        ot_tensor gin[5] = {tc_rand(&p, 302, -1, 1, 4, 2, 3, yh[m], yw[m]), x, none, in[2], in[3]};
        ot_tensor gout[1] = {tc_out(OT_F32, 4, 2, 3, 5, 6)};
        ix_case(be, "ResizeGrad", &g, gin, gout);
        tk_node_free(&n);
        tk_node_free(&g);
    }
    /* DepthToSpace (DCR, CRD) and SpaceToDepth (DCR, and CRD as in DepthToSpace's
     * gradient), float32 and int64 */
    int64_t iv[48];
    for (int i = 0; i < 48; i++) iv[i] = 1000 + i;
    for (int k = 0; k < 4; k++) {
        bool to_space = k < 2;
        ot_node d = tk_node(to_space ? OT_OP_DEPTH_TO_SPACE : OT_OP_SPACE_TO_DEPTH, 1, 1);
        ot_node_set_attr_int(&d, "blocksize", 2);
        ot_node_set_attr_string(&d, "mode", k & 1 ? "CRD" : "DCR");
        ot_tensor din[1] = {to_space ? tc_rand(&p, 303, -1, 1, 4, 2, 8, 3, 2) : tc_rand(&p, 304, -1, 1, 4, 2, 2, 6, 4)};
        ot_tensor dout[1] = {to_space ? tc_out(OT_F32, 4, 2, 2, 6, 4) : tc_out(OT_F32, 4, 2, 8, 3, 2)};
        ix_case(be, to_space ? "DepthToSpace" : "SpaceToDepth", &d, din, dout);
        ot_tensor ii = tc_ints(&p, 48, iv);
        ii.shape = to_space ? ot_shape_make(4, (int64_t[]){1, 8, 3, 2}) : ot_shape_make(4, (int64_t[]){1, 2, 6, 4});
        ot_tensor iin[1] = {ii};
        ot_tensor iout[1] = {to_space ? tc_out(OT_I64, 4, 1, 2, 6, 4) : tc_out(OT_I64, 4, 1, 8, 3, 2)};
        ix_case(be, "DepthToSpace / SpaceToDepth int64", &d, iin, iout);
        tk_node_free(&d);
    }
    tc_free(&p);
}

/* ConvTranspose on cuDNN against the CPU (issue 26): k3 s2 p1 output_padding 1 with
 * bias (no explicit padding), and a grouped 1-D one whose pads cuDNN cannot express. */
static void test_conv_transpose(void **state) {
    ot_backend *be = backend_of(state);
    tc_pool p = {0};
    ot_node n = tk_node(OT_OP_CONV_TRANSPOSE, 3, 1);
    int64_t s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1}, op1[2] = {1, 1};
    ot_node_set_attr_ints(&n, "strides", s2, 2);
    ot_node_set_attr_ints(&n, "pads", p1, 4);
    ot_node_set_attr_ints(&n, "output_padding", op1, 2);
    ot_tensor in[3] = {tc_rand(&p, 401, -1, 1, 4, 2, 4, 5, 6), tc_rand(&p, 402, -1, 1, 4, 4, 3, 3, 3),
                       tc_rand(&p, 403, -1, 1, 1, 3)};
    ot_tensor out[1] = {tc_out(OT_F32, 4, 2, 3, 10, 12)};
    tc_check(be, "ConvTranspose 2-D", &n, in, out, TOL, 0, 0, 0);
    ot_node m = tk_node(OT_OP_CONV_TRANSPOSE, 2, 1);
    int64_t s1[1] = {2}, pads1[2] = {2, 1}, d1[1] = {2};
    ot_node_set_attr_ints(&m, "strides", s1, 1);
    ot_node_set_attr_ints(&m, "pads", pads1, 2);
    ot_node_set_attr_ints(&m, "dilations", d1, 1);
    ot_node_set_attr_int(&m, "group", 2);
    ot_tensor min[2] = {tc_rand(&p, 404, -1, 1, 3, 2, 4, 5), tc_rand(&p, 405, -1, 1, 3, 4, 3, 3)};
    ot_tensor mout[1] = {tc_out(OT_F32, 3, 2, 6, 10)};
    tc_check(be, "ConvTranspose 1-D grouped", &m, min, mout, TOL, 0, 0, 0);
    tk_node_free(&n);
    tk_node_free(&m);
    tc_free(&p);
}

static void test_host_resize(void **state) {
    (void)state;
    rs_cases(NULL);
}

static void test_resize(void **state) { rs_cases(backend_of(state)); }
/* ---- transformer ops (ops3, issue 26): RMSNormalization, RotaryEmbedding, Attention ---- */

/* Host mode: bit for bit, except Attention and AttentionGrad, whose CPU kernels run
 * their products through GEMMs (cpu_xfmr.c): within tol there. */
static void xf_case(ot_backend *be, const char *label, const ot_node *n, ot_tensor *in, const ot_tensor *out,
                    double tol) {
    bool gemm = n->op == OT_OP_ATTENTION || n->op == OT_OP_ATTENTION_GRAD;
    hm_rng r = {0, 0, 0};
    if (!be) assert_int_equal(hm_compare_tol(label, n, in, out, r, false, gemm ? tol : 0.0), OT_OK);
    else tc_check(be, label, n, in, out, tol, 0, 0, 0);
}

/* RMSNormalization and RMSNormGrad (per-column and one-element scale), RotaryEmbedding
 * and its inverse (3-D with position ids, 4-D interleaved with a partial rotary dim
 * and per-token caches), Attention and AttentionGrad (4-D GQA causal with a past
 * cache and a bool mask; 3-D with a float mask and softcap). */
static void xf_cases(ot_backend *be) {
    tc_pool p = {0};
    for (int scalar = 0; scalar < 2; scalar++) {
        ot_node n = tk_node(OT_OP_RMS_NORM, 2, 1);
        ot_tensor x = tc_rand(&p, 301, -2, 2, 3, 3, 5, 33);
        ot_tensor in[2] = {x, scalar ? tc_rand(&p, 302, 0.5f, 1.5f, 1, 1) : tc_rand(&p, 302, 0.5f, 1.5f, 1, 33)};
        ot_tensor out[1] = {tc_out(OT_F32, 3, 3, 5, 33)};
        xf_case(be, "RMSNormalization", &n, in, out, TOL);
        ot_node g = tk_node(OT_OP_RMS_NORM_GRAD, 3, 2);
        ot_tensor gin[3] = {tc_rand(&p, 303, -1, 1, 3, 3, 5, 33), x, in[1]};
        ot_tensor gout[2] = {tc_out(OT_F32, 3, 3, 5, 33), scalar ? tc_out(OT_F32, 1, 1) : tc_out(OT_F32, 1, 33)};
        xf_case(be, "RMSNormGrad", &g, gin, gout, TOL_RED);
        tk_node_free(&n);
        tk_node_free(&g);
    }
    for (int inv = 0; inv < 2; inv++) {
        ot_op op = inv ? OT_OP_ROTARY_EMBEDDING_GRAD : OT_OP_ROTARY_EMBEDDING;
        ot_node r3 = tk_node(op, 4, 1);
        ot_node_set_attr_int(&r3, "num_heads", 3);
        int64_t ids[8] = {0, 5, 2, 7, 1, 1, 3, 6};
        ot_tensor pos = tc_ints(&p, 8, ids);
        pos.shape = ot_shape_make(2, (int64_t[]){2, 4});
        ot_tensor in3[4] = {tc_rand(&p, 311, -1, 1, 3, 2, 4, 24), tc_rand(&p, 312, -1, 1, 2, 8, 4),
                            tc_rand(&p, 313, -1, 1, 2, 8, 4), pos};
        ot_tensor out3[1] = {tc_out(OT_F32, 3, 2, 4, 24)};
        xf_case(be, inv ? "RotaryEmbeddingGrad 3-D" : "RotaryEmbedding 3-D", &r3, in3, out3, TOL);
        if (!be) {
            /* an id past the caches: the same OT_E_MODEL on both, no read out of bounds */
            int64_t bad_ids[8] = {0, 5, 2, 8, 1, 1, 3, 6};
            ot_tensor bad = tc_ints(&p, 8, bad_ids);
            bad.shape = pos.shape;
            ot_tensor bin[4] = {in3[0], in3[1], in3[2], bad};
            assert_int_equal(hm_compare("RotaryEmbedding, id past the caches", &r3, bin, out3), OT_E_MODEL);
        }
        ot_node r4 = tk_node(op, 3, 1);
        ot_node_set_attr_int(&r4, "interleaved", 1);
        ot_node_set_attr_int(&r4, "rotary_embedding_dim", 4);
        ot_tensor in4[3] = {tc_rand(&p, 314, -1, 1, 4, 2, 3, 4, 6), tc_rand(&p, 315, -1, 1, 3, 2, 4, 2),
                            tc_rand(&p, 316, -1, 1, 3, 2, 4, 2)};
        ot_tensor out4[1] = {tc_out(OT_F32, 4, 2, 3, 4, 6)};
        xf_case(be, inv ? "RotaryEmbeddingGrad 4-D" : "RotaryEmbedding 4-D", &r4, in4, out4, TOL);
        tk_node_free(&r3);
        tk_node_free(&r4);
    }
    /* 4-D: B 2, Hq 4, Hkv 2, Sq 3, Skv 3, past 2 (T 5), D 8, Dv 5; causal, bool mask [3, 5] */
    ot_tensor q = tc_rand(&p, 321, -1, 1, 4, 2, 4, 3, 8), k = tc_rand(&p, 322, -1, 1, 4, 2, 2, 3, 8);
    ot_tensor v = tc_rand(&p, 323, -1, 1, 4, 2, 2, 3, 5), mask = tc_tensor(&p, OT_BOOL, 2, (int64_t[]){3, 5});
    for (int i = 0; i < 15; i++) ((uint8_t *)mask.data)[i] = (uint8_t)(i % 4 != 1);
    ot_tensor pk = tc_rand(&p, 324, -1, 1, 4, 2, 2, 2, 8), pv = tc_rand(&p, 325, -1, 1, 4, 2, 2, 2, 5);
    ot_node a = tk_node(OT_OP_ATTENTION, 6, 3);
    ot_node_set_attr_int(&a, "is_causal", 1);
    ot_tensor ain[6] = {q, k, v, mask, pk, pv};
    ot_tensor aout[3] = {tc_out(OT_F32, 4, 2, 4, 3, 5), tc_out(OT_F32, 4, 2, 2, 5, 8), tc_out(OT_F32, 4, 2, 2, 5, 5)};
    xf_case(be, "Attention 4-D", &a, ain, aout, TOL_RED);
    ot_node ag = tk_node(OT_OP_ATTENTION_GRAD, 7, 3);
    ot_node_set_attr_int(&ag, "is_causal", 1);
    ot_tensor agin[7] = {tc_rand(&p, 326, -1, 1, 4, 2, 4, 3, 5), q, k, v, mask, pk, pv};
    ot_tensor agout[3] = {tc_out(OT_F32, 4, 2, 4, 3, 8), tc_out(OT_F32, 4, 2, 2, 3, 8), tc_out(OT_F32, 4, 2, 2, 3, 5)};
    xf_case(be, "AttentionGrad 4-D", &ag, agin, agout, TOL_RED);
    /* 3-D: q_num_heads 2, kv_num_heads 2, Sq 4, Skv 6, D 4; float mask [2, 1, 4, 6], softcap */
    ot_tensor q3 = tc_rand(&p, 331, -1, 1, 3, 2, 4, 8), k3 = tc_rand(&p, 332, -1, 1, 3, 2, 6, 8);
    ot_tensor v3 = tc_rand(&p, 333, -1, 1, 3, 2, 6, 8), fm = tc_rand(&p, 334, -1, 1, 4, 2, 1, 4, 6);
    ot_node a3 = tk_node(OT_OP_ATTENTION, 4, 1);
    ot_node_set_attr_int(&a3, "q_num_heads", 2);
    ot_node_set_attr_int(&a3, "kv_num_heads", 2);
    ot_node_set_attr_float(&a3, "softcap", 2.0f);
    ot_tensor a3in[4] = {q3, k3, v3, fm};
    ot_tensor a3out[1] = {tc_out(OT_F32, 3, 2, 4, 8)};
    xf_case(be, "Attention 3-D", &a3, a3in, a3out, TOL_RED);
    ot_node a3g = tk_node(OT_OP_ATTENTION_GRAD, 5, 3);
    ot_node_set_attr_int(&a3g, "q_num_heads", 2);
    ot_node_set_attr_int(&a3g, "kv_num_heads", 2);
    ot_node_set_attr_float(&a3g, "softcap", 2.0f);
    ot_tensor a3gin[5] = {tc_rand(&p, 335, -1, 1, 3, 2, 4, 8), q3, k3, v3, fm};
    ot_tensor a3gout[3] = {tc_out(OT_F32, 3, 2, 4, 8), tc_out(OT_F32, 3, 2, 6, 8), tc_out(OT_F32, 3, 2, 6, 8)};
    xf_case(be, "AttentionGrad 3-D", &a3g, a3gin, a3gout, TOL_RED);
    /* Attention-24's nonpad_kv_seqlen (batch 0: 4 keys, batch 1: 6), causal from its end */
    int64_t lens[2] = {4, 6};
    ot_tensor npl = tc_ints(&p, 2, lens);
    ot_node an = tk_node(OT_OP_ATTENTION, 7, 1);
    ot_node_set_attr_int(&an, "q_num_heads", 2);
    ot_node_set_attr_int(&an, "kv_num_heads", 2);
    ot_node_set_attr_int(&an, "is_causal", 1);
    ot_tensor none;
    memset(&none, 0, sizeof none);
    ot_tensor anin[7] = {q3, k3, v3, none, none, none, npl};
    xf_case(be, "Attention nonpad_kv_seqlen", &an, anin, a3out, TOL_RED);
    ot_node ang = tk_node(OT_OP_ATTENTION_GRAD, 8, 3);
    ot_node_set_attr_int(&ang, "q_num_heads", 2);
    ot_node_set_attr_int(&ang, "kv_num_heads", 2);
    ot_node_set_attr_int(&ang, "is_causal", 1);
    ot_tensor angin[8] = {a3gin[0], q3, k3, v3, none, none, none, npl};
    xf_case(be, "AttentionGrad nonpad_kv_seqlen", &ang, angin, a3gout, TOL_RED);
    tk_node_free(&an);
    tk_node_free(&ang);
    tk_node_free(&a);
    tk_node_free(&ag);
    tk_node_free(&a3);
    tk_node_free(&a3g);
    tc_free(&p);
}

static void test_host_xfmr(void **state) {
    (void)state;
    xf_cases(NULL);
}

static void test_xfmr(void **state) { xf_cases(backend_of(state)); }

/* ---- ops batch 1 (issue 26): activations and rounding --------------------------------- */

/* The element code of cuda_activation.cu run on the host against the CPU kernels, bit
 * for bit (both call kernels/activation_math.h). */
static void test_host_activation(void **state) {
    (void)state;
    float xf[12] = {-4.0f, -2.5f, -0.5f, -0.0f, 0.0f, 0.5f, 1.5f, 2.5f, NAN, INFINITY, -INFINITY, 90.0f};
    float dy[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, sl[3] = {0.25f, -0.5f, 2.0f};
    ot_tensor fin[1] = {tk_t(OT_F32, xf, 2, 3, 4)}, fout[1] = {tc_out(OT_F32, 2, 3, 4)};
    ot_op un[9] = {OT_OP_ELU, OT_OP_SELU, OT_OP_CELU, OT_OP_THRESHOLDED_RELU, OT_OP_SOFTSIGN,
                   OT_OP_SIGN, OT_OP_FLOOR, OT_OP_CEIL, OT_OP_ROUND};
    for (int o = 0; o < 9; o++)
        for (int a = 0; a < 2; a++) {
            ot_node n = tk_node(un[o], 1, 1);
            if (a) ot_node_set_attr_float(&n, "alpha", 0.75f);
            assert_int_equal(hm_compare(ot_op_name(un[o]), &n, fin, fout), OT_OK);
            tk_node_free(&n);
        }
    int64_t a64[4] = {-7, 0, 7, INT64_MIN};
    ot_node sg = tk_node(OT_OP_SIGN, 1, 1);
    ot_tensor iin[1] = {tk_t(OT_I64, a64, 1, 4)}, iout[1] = {tc_out(OT_I64, 1, 4)};
    assert_int_equal(hm_compare("Sign int64", &sg, iin, iout), OT_OK);
    tk_node_free(&sg);
    ot_node pr = tk_node(OT_OP_PRELU, 2, 1);
    ot_tensor pin[2] = {tk_t(OT_F32, xf, 2, 3, 4), tk_t(OT_F32, sl, 2, 3, 1)};
    assert_int_equal(hm_compare("PRelu", &pr, pin, fout), OT_OK);
    tk_node_free(&pr);
    ot_op gr[3] = {OT_OP_ELU_GRAD, OT_OP_THRESHOLDED_RELU_GRAD, OT_OP_SOFTSIGN_GRAD};
    ot_tensor gin[2] = {tk_t(OT_F32, dy, 2, 3, 4), tk_t(OT_F32, xf, 2, 3, 4)};
    for (int o = 0; o < 3; o++) {
        ot_node n = tk_node(gr[o], 2, 1);
        ot_node_set_attr_float(&n, "alpha", 1.5f);
        ot_node_set_attr_float(&n, "scale", 1.25f);
        ot_node_set_attr_float(&n, "input_scale", 0.5f);
        assert_int_equal(hm_compare(ot_op_name(gr[o]), &n, gin, fout), OT_OK);
        tk_node_free(&n);
    }
    for (int k = 0; k < 2; k++) {
        ot_node n = tk_node(OT_OP_PRELU_GRAD, 3, 1);
        ot_node_set_attr_int(&n, "index", k);
        ot_tensor in[3] = {tk_t(OT_F32, dy, 2, 3, 4), tk_t(OT_F32, xf, 2, 3, 4), tk_t(OT_F32, sl, 2, 3, 1)};
        assert_int_equal(hm_compare("PReluGrad", &n, in, fout), OT_OK);
        tk_node_free(&n);
    }
}

/* The same ops on the GPU against the CPU, within float32 rounding (the device's expf). */
static void test_activation(void **state) {
    tc_pool p = {0};
    ot_op un[9] = {OT_OP_ELU, OT_OP_SELU, OT_OP_CELU, OT_OP_THRESHOLDED_RELU, OT_OP_SOFTSIGN,
                   OT_OP_SIGN, OT_OP_FLOOR, OT_OP_CEIL, OT_OP_ROUND};
    for (int o = 0; o < 9; o++) {
        ot_node n = tk_node(un[o], 1, 1);
        ot_tensor in[1] = {tc_rand(&p, 160 + (uint32_t)o, -6.0f, 6.0f, 2, 37, 29)}, out[1] = {tc_out(OT_F32, 2, 37, 29)};
        tc_check(backend_of(state), ot_op_name(un[o]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
    }
    ot_op gr[3] = {OT_OP_ELU_GRAD, OT_OP_THRESHOLDED_RELU_GRAD, OT_OP_SOFTSIGN_GRAD};
    for (int o = 0; o < 3; o++) {
        ot_node n = tk_node(gr[o], 2, 1);
        ot_tensor in[2] = {tc_rand(&p, 170 + (uint32_t)o, -2, 2, 1, 1000), tc_rand(&p, 180 + (uint32_t)o, -5, 5, 1, 1000)};
        ot_tensor out[1] = {tc_out(OT_F32, 1, 1000)};
        tc_check(backend_of(state), ot_op_name(gr[o]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
    }
    ot_node pr = tk_node(OT_OP_PRELU, 2, 1);
    ot_tensor pin[2] = {tc_rand(&p, 190, -3, 3, 4, 2, 3, 5, 7), tc_rand(&p, 191, -1, 1, 3, 3, 1, 1)};
    ot_tensor pout[1] = {tc_out(OT_F32, 4, 2, 3, 5, 7)};
    tc_check(backend_of(state), "PRelu", &pr, pin, pout, 0, 0, 0, 0);
    tk_node_free(&pr);
    for (int k = 0; k < 2; k++) {
        ot_node n = tk_node(OT_OP_PRELU_GRAD, 3, 1);
        ot_node_set_attr_int(&n, "index", k);
        ot_tensor in[3] = {tc_rand(&p, 192, -2, 2, 4, 2, 3, 5, 7), tc_rand(&p, 193, -3, 3, 4, 2, 3, 5, 7),
                           tc_rand(&p, 194, -1, 1, 3, 3, 1, 1)};
        ot_tensor out[1] = {tc_out(OT_F32, 4, 2, 3, 5, 7)};
        tc_check(backend_of(state), "PReluGrad", &n, in, out, 0, 0, 0, 0);
        tk_node_free(&n);
    }
    tc_free(&p);
}

/* Issue 26's reductions: the element code of cuda_reduce_ext.cu on the host against
 * the CPU kernels, bit for bit (one walker per output, kernels/reduce_ext.h), with
 * NaN, ties and zeros in the data. */
static const ot_op RX_OPS[7] = {OT_OP_REDUCE_MAX, OT_OP_REDUCE_MIN, OT_OP_REDUCE_PROD, OT_OP_REDUCE_L1,
                                OT_OP_REDUCE_L2, OT_OP_REDUCE_LOG_SUM_EXP, OT_OP_REDUCE_SUM_SQUARE};
static const char *RX_MODES[7] = {"max", "min", "prod", "l1", "l2", "log_sum_exp", "sum_square"};

static void test_host_reduce_ext(void **state) {
    (void)state;
    float x[24], y[8];
    tk_fill(x, 24, 9, -2, 2);
    x[3] = x[7] = 1.75f, x[5] = 0.0f, x[13] = NAN, x[20] = x[21] = 0.0f;
    int64_t ax[1] = {1};
    ot_tensor out[1] = {tc_out(OT_F32, 2, 2, 4)};
    for (int o = 0; o < 7; o++) {
        ot_node n = tk_node(RX_OPS[o], 2, 1);
        ot_node_set_attr_int(&n, "keepdims", 0);
        ot_tensor in[2] = {tk_t(OT_F32, x, 3, 2, 3, 4), tk_t(OT_I64, ax, 1, 1)};
        assert_int_equal(hm_compare(ot_op_name(RX_OPS[o]), &n, in, out), OT_OK);
        tk_node_free(&n);
        /* its gradient, Y from the CPU kernel */
        ot_node f = tk_node(RX_OPS[o], 1, 1);
        ot_node_set_attr_ints(&f, "axes", ax, 1);
        ot_node_set_attr_int(&f, "keepdims", 0);
        ot_tensor fo[1] = {tk_t(OT_F32, y, 2, 2, 4)};
        assert_int_equal(tk_run(&f, in, fo), OT_OK);
        tk_node_free(&f);
        ot_node g = tk_node(OT_OP_REDUCE_GRAD, 3, 1);
        ot_node_set_attr_ints(&g, "axes", ax, 1);
        ot_node_set_attr_string(&g, "mode", RX_MODES[o]);
        float dy8[8] = {1, -2, 0.5f, 3, -1, 2, 0.25f, -0.5f};
        ot_tensor gi[3] = {tk_t(OT_F32, dy8, 2, 2, 4), tk_t(OT_F32, x, 3, 2, 3, 4), tk_t(OT_F32, y, 2, 2, 4)};
        ot_tensor go[1] = {tc_out(OT_F32, 3, 2, 3, 4)};
        assert_int_equal(hm_compare("ReduceGrad", &g, gi, go), OT_OK);
        tk_node_free(&g);
    }
    int64_t ids[6] = {4, 9, 1, 7, 9, 0};
    for (int mx = 0; mx < 2; mx++) { /* int64 Max / Min over every axis */
        ot_node n = tk_node(mx ? OT_OP_REDUCE_MAX : OT_OP_REDUCE_MIN, 1, 1);
        ot_tensor ii[1] = {tk_t(OT_I64, ids, 2, 2, 3)}, io[1] = {tc_out(OT_I64, 2, 1, 1)};
        assert_int_equal(hm_compare("ReduceMax / ReduceMin int64", &n, ii, io), OT_OK);
        tk_node_free(&n);
    }
    for (int k = 0; k < 4; k++) {
        ot_node n = tk_node(k & 1 ? OT_OP_ARG_MIN : OT_OP_ARG_MAX, 1, 1);
        ot_node_set_attr_int(&n, "axis", 1);
        ot_node_set_attr_int(&n, "select_last_index", k >> 1);
        ot_tensor in[1] = {tk_t(OT_F32, x, 3, 2, 3, 4)}, ao[1] = {tc_out(OT_I64, 3, 2, 1, 4)};
        assert_int_equal(hm_compare("ArgMax / ArgMin", &n, in, ao), OT_OK);
        ot_tensor ii[1] = {tk_t(OT_I64, ids, 2, 2, 3)}, io[1] = {tc_out(OT_I64, 2, 2, 1)};
        assert_int_equal(hm_compare("ArgMax / ArgMin int64", &n, ii, io), OT_OK);
        tk_node_free(&n);
    }
}

/* The same on the GPU against the CPU: within float32 rounding (the device's libm). */
static void test_reduce_ext(void **state) {
    tc_pool p = {0};
    int64_t ax[2] = {0, 2};
    for (int o = 0; o < 7; o++) {
        ot_node n = tk_node(RX_OPS[o], 1, 1);
        ot_node_set_attr_ints(&n, "axes", ax, 2);
        ot_tensor in[1] = {tc_rand(&p, 200 + (uint32_t)o, 0.5f, 1.5f, 3, 5, 37, 9)}, out[1] = {tc_out(OT_F32, 3, 1, 37, 1)};
        tc_check(backend_of(state), ot_op_name(RX_OPS[o]), &n, in, out, TOL, 0, 0, 0);
        tk_node_free(&n);
        ot_node g = tk_node(OT_OP_REDUCE_GRAD, 3, 1);
        ot_node_set_attr_ints(&g, "axes", ax, 2);
        ot_node_set_attr_string(&g, "mode", RX_MODES[o]);
        ot_tensor gi[3] = {tc_rand(&p, 210 + (uint32_t)o, -1, 1, 3, 1, 37, 1), in[0],
                           tc_rand(&p, 220 + (uint32_t)o, 0.5f, 1.5f, 3, 1, 37, 1)};
        ot_tensor go[1] = {tc_out(OT_F32, 3, 5, 37, 9)};
        tc_check(backend_of(state), "ReduceGrad", &g, gi, go, TOL, 0, 0, 0);
        tk_node_free(&g);
    }
    ot_node a = tk_node(OT_OP_ARG_MAX, 1, 1);
    ot_node_set_attr_int(&a, "axis", 1);
    ot_tensor ai[1] = {tc_rand(&p, 230, -1, 1, 3, 5, 37, 9)}, ao[1] = {tc_out(OT_I64, 3, 5, 1, 9)};
    tc_check(backend_of(state), "ArgMax", &a, ai, ao, 0, 0, 0, 0);
    tk_node_free(&a);
    tc_free(&p);
}

/* InstanceNormalization / GroupNormalization and GroupNormGrad (issue 26): host mode
 * against the CPU kernels bit for bit; the GPU within float32 rounding. */
static void gn_cases(ot_backend *be) {
    tc_pool p = {0};
    struct {
        ot_op op;
        int groups, np;
    } c[3] = {{OT_OP_INSTANCE_NORM, 0, 6}, {OT_OP_GROUP_NORM, 3, 6}, {OT_OP_GROUP_NORM, 3, 3}};
    for (int k = 0; k < 3; k++) {
        ot_node n = tk_node(c[k].op, 3, 1);
        if (c[k].groups) ot_node_set_attr_int(&n, "num_groups", c[k].groups);
        ot_tensor in[3] = {tc_rand(&p, 240 + (uint32_t)k, -2, 2, 4, 2, 6, 3, 5), tc_rand(&p, 243, 0.5f, 1.5f, 1, c[k].np),
                           tc_rand(&p, 244, -1, 1, 1, c[k].np)};
        ot_tensor out[1] = {tc_out(OT_F32, 4, 2, 6, 3, 5)};
        ot_node gr = tk_node(OT_OP_GROUP_NORM_GRAD, 3, 3);
        if (c[k].groups) ot_node_set_attr_int(&gr, "num_groups", c[k].groups);
        ot_tensor gi[3] = {tc_rand(&p, 245, -1, 1, 4, 2, 6, 3, 5), in[0], in[1]};
        ot_tensor go[3] = {tc_out(OT_F32, 4, 2, 6, 3, 5), tc_out(OT_F32, 1, c[k].np), tc_out(OT_F32, 1, c[k].np)};
        if (be) {
            tc_check(be, ot_op_name(c[k].op), &n, in, out, TOL, 0, 0, 0);
            tc_check(be, "GroupNormGrad", &gr, gi, go, TOL, 0, 0, 0);
        } else {
            assert_int_equal(hm_compare(ot_op_name(c[k].op), &n, in, out), OT_OK);
            assert_int_equal(hm_compare("GroupNormGrad", &gr, gi, go), OT_OK);
        }
        tk_node_free(&n);
        tk_node_free(&gr);
        tc_free(&p);
    }
}
static void test_host_group_norm(void **state) {
    (void)state;
    gn_cases(NULL);
}
static void test_group_norm(void **state) { gn_cases(backend_of(state)); }

/* ops batch 4 (issue 26): Einsum, EinsumGrad, TopK, OneHot. Host mode against the
 * CPU kernels bit for bit; the GPU too (one thread per output element or row, the
 * CPU's order, rounding-exact double sums), so the tolerance is 0. */
static void sel_run_tol(ot_backend *be, const char *label, const ot_node *n, ot_tensor *in, const ot_tensor *out,
                        double tol) {
    if (be)
        tc_check(be, label, n, in, out, tol, 0, 0, 0);
    else
        assert_int_equal(hm_compare(label, n, in, out), OT_OK);
}
static void sel_run(ot_backend *be, const char *label, const ot_node *n, ot_tensor *in, const ot_tensor *out) {
    sel_run_tol(be, label, n, in, out, 0);
}

static void sel_cases(ot_backend *be) {
    tc_pool p = {0};
    static const struct {
        const char *eq;
        int n;
    } ein[3] = {{"bhqd,bhkd->bhqk", 2}, {"...ij,...kj->...ik", 2}, {"bi,oij,bj->bo", 3}};
    ot_tensor eq_in[3][3] = {
        {tc_rand(&p, 300, -1, 1, 4, 2, 3, 17, 8), tc_rand(&p, 301, -1, 1, 4, 2, 3, 9, 8)},
        {tc_rand(&p, 302, -1, 1, 3, 1, 5, 7), tc_rand(&p, 303, -1, 1, 3, 4, 6, 7)},
        {tc_rand(&p, 304, -1, 1, 2, 5, 6), tc_rand(&p, 305, -1, 1, 3, 3, 6, 4), tc_rand(&p, 306, -1, 1, 2, 5, 4)}};
    ot_tensor eq_out[3] = {tc_out(OT_F32, 4, 2, 3, 17, 9), tc_out(OT_F32, 3, 4, 5, 6), tc_out(OT_F32, 2, 5, 3)};
    for (int k = 0; k < 3; k++) {
        ot_node n = tk_node(OT_OP_EINSUM, ein[k].n, 1);
        ot_node_set_attr_string(&n, "equation", ein[k].eq);
        sel_run(be, ein[k].eq, &n, eq_in[k], &eq_out[k]);
        tk_node_free(&n);
    }
    /* EinsumGrad onto the broadcast [1, 5, 7] of the second form */
    ot_node g = tk_node(OT_OP_EINSUM_GRAD, 3, 1);
    ot_node_set_attr_string(&g, "equation", "...ij,...kj->...ik");
    ot_tensor gi[3] = {tc_rand(&p, 307, -1, 1, 3, 4, 5, 6), eq_in[1][0], eq_in[1][1]};
    ot_tensor go[1] = {tc_out(OT_F32, 3, 1, 5, 7)};
    sel_run(be, "EinsumGrad", &g, gi, go);
    tk_node_free(&g);
    /* TopK along the middle axis, both orders, with ties (values on a 0.25 grid) */
    ot_tensor tx = tc_rand(&p, 308, -2, 2, 3, 4, 33, 5);
    float *tv = tx.data;
    for (int i = 0; i < 4 * 33 * 5; i++) tv[i] = floorf(tv[i] * 4) / 4;
    int64_t k = 7;
    for (int largest = 0; largest < 2; largest++) {
        ot_node t = tk_node(OT_OP_TOP_K, 2, 2);
        ot_node_set_attr_int(&t, "axis", 1);
        ot_node_set_attr_int(&t, "largest", largest);
        ot_tensor ti[2] = {tx, tc_ints(&p, 1, &k)};
        ot_tensor to[2] = {tc_out(OT_F32, 3, 4, 7, 5), tc_out(OT_I64, 3, 4, 7, 5)};
        sel_run(be, "TopK", &t, ti, to);
        tk_node_free(&t);
    }
    /* OneHot: int64 indices with negatives and one out of range, float32 values */
    int64_t ind[6] = {0, -1, 4, 2, -5, 1}, depth = 5;
    float onoff[2] = {-1, 3};
    ot_tensor oi[3] = {tc_ints(&p, 6, ind), tc_ints(&p, 1, &depth), tc_rand(&p, 309, 0, 1, 1, 2)};
    memcpy(oi[2].data, onoff, sizeof onoff);
    ot_node o = tk_node(OT_OP_ONE_HOT, 3, 1);
    ot_node_set_attr_int(&o, "axis", 0);
    ot_tensor oo[1] = {tc_out(OT_F32, 2, 5, 6)};
    sel_run(be, "OneHot", &o, oi, oo);
    tk_node_free(&o);
    tc_free(&p);
}

/* RNN, GRU, LSTM and RnnGrad (issue 26): one thread per sequence, then per weight
 * gradient element, in the CPU's order: bit for bit in host mode; on the GPU within
 * float32 rounding (the device's expf / tanhf, through every step). */
static void rnn_cases(ot_backend *be) {
    tc_pool p = {0};
    const ot_op ops[3] = {OT_OP_RNN, OT_OP_GRU, OT_OP_LSTM};
    int32_t lens[3] = {5, 2, 0};
    ot_tensor absent;
    memset(&absent, 0, sizeof absent);
    for (int k = 0; k < 3; k++) {
        int G = k == 0 ? 1 : k == 1 ? 3 : 4, H = 4, I = 3, B = 3, T = 5, D = 2;
        ot_tensor x = tc_rand(&p, 320, -1, 1, 3, T, B, I), w = tc_rand(&p, 321, -0.7f, 0.7f, 3, D, G * H, I);
        ot_tensor r = tc_rand(&p, 322, -0.7f, 0.7f, 3, D, G * H, H), b = tc_rand(&p, 323, -0.5f, 0.5f, 2, D, 2 * G * H);
        ot_tensor seq = tc_tensor(&p, OT_I32, 1, (int64_t[]){B});
        memcpy(seq.data, lens, sizeof lens);
        ot_tensor h0 = tc_rand(&p, 324, -0.5f, 0.5f, 3, D, B, H), c0 = tc_rand(&p, 325, -0.5f, 0.5f, 3, D, B, H);
        ot_tensor pp = tc_rand(&p, 326, -0.5f, 0.5f, 2, D, 3 * H);
        int n_in = k == 2 ? 8 : 6, n_out = k == 2 ? 3 : 2;
        ot_tensor in[8] = {x, w, r, b, seq, h0, c0, pp};
        ot_tensor out[3] = {tc_out(OT_F32, 4, T, D, B, H), tc_out(OT_F32, 3, D, B, H), tc_out(OT_F32, 3, D, B, H)};
        ot_node n = tk_node(ops[k], n_in, n_out);
        ot_node_set_attr_string(&n, "direction", "bidirectional");
        if (k == 1) ot_node_set_attr_int(&n, "linear_before_reset", 1);
        sel_run_tol(be, ot_op_name(ops[k]), &n, in, out, TOL_RED);
        tk_node_free(&n);
        ot_node gnode = tk_node(OT_OP_RNN_GRAD, 11, 7);
        ot_node_set_attr_string(&gnode, "direction", "bidirectional");
        ot_node_set_attr_int(&gnode, "cell", ops[k]);
        if (k == 1) ot_node_set_attr_int(&gnode, "linear_before_reset", 1);
        ot_tensor gi[11] = {tc_rand(&p, 327, -1, 1, 4, T, D, B, H), tc_rand(&p, 328, -1, 1, 3, D, B, H),
                            k == 2 ? tc_rand(&p, 329, -1, 1, 3, D, B, H) : absent, x, w, r, b, seq, h0,
                            k == 2 ? c0 : absent, k == 2 ? pp : absent};
        ot_tensor go[7] = {tc_out(OT_F32, 3, T, B, I), tc_out(OT_F32, 3, D, G * H, I), tc_out(OT_F32, 3, D, G * H, H),
                           tc_out(OT_F32, 2, D, 2 * G * H), tc_out(OT_F32, 3, D, B, H),
                           k == 2 ? tc_out(OT_F32, 3, D, B, H) : absent, k == 2 ? tc_out(OT_F32, 2, D, 3 * H) : absent};
        sel_run_tol(be, "RnnGrad", &gnode, gi, go, TOL_RED);
        tk_node_free(&gnode);
    }
    tc_free(&p);
}

static void test_host_select(void **state) {
    (void)state;
    sel_cases(NULL);
    rnn_cases(NULL);
}
static void test_select(void **state) {
    sel_cases(backend_of(state));
    rnn_cases(backend_of(state));
}

#endif /* OT_HAVE_CUDA */

int main(void) {
    const struct CMUnitTest select_tests[] = {
        cmocka_unit_test(test_select_names),
        cmocka_unit_test(test_select_cuda),
    };
    int rc = cmocka_run_group_tests_name("backend selection", select_tests, NULL, NULL);
#ifdef OT_HAVE_CUDA
    /* a build with CUDA whose module does not load is broken, not GPU-less: fail */
    ot_error le = {0};
    if (!ot_cuda_module_load(&le)) {
        printf("the CUDA backend module does not load: %s\n", le.msg);
        return 1;
    }
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_module_loader),
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_philox_matches_cpu),
        cmocka_unit_test(test_conv_geometry),
        cmocka_unit_test(test_supports_dtypes),
        cmocka_unit_test(test_supports_lowp), /* issue 27 */
        cmocka_unit_test(test_supports_lowp_elementwise),
        cmocka_unit_test(test_host_lowp_elementwise),
        cmocka_unit_test(test_autocast_cuda_table),
        cmocka_unit_test(test_workspace_sizes),
        cmocka_unit_test(test_host_clip_grad),
        cmocka_unit_test(test_host_clip),
        cmocka_unit_test(test_host_relu),
        cmocka_unit_test(test_host_int_arith),
        cmocka_unit_test(test_host_int_pow),
        cmocka_unit_test(test_host_cast),
        cmocka_unit_test(test_host_broadcast_ops),
        cmocka_unit_test(test_host_layout),
        cmocka_unit_test(test_host_pool),
        cmocka_unit_test(test_host_dropout),
        cmocka_unit_test(test_host_random_uniform),
        cmocka_unit_test(test_host_mse_grad),
        cmocka_unit_test(test_host_optim),
        cmocka_unit_test(test_host_accumulate),
        cmocka_unit_test(test_host_index), /* layout and indexing (issue 13) */
        cmocka_unit_test(test_host_resize), /* spatial ops (issue 26) */
        cmocka_unit_test(test_samples_supported),
        cmocka_unit_test(test_host_pointwise_math),
        cmocka_unit_test(test_host_activation), /* ops batch 1 (issue 26) */
        cmocka_unit_test(test_host_reduce_ext),
        cmocka_unit_test(test_host_group_norm),
        cmocka_unit_test(test_host_xfmr), /* transformer ops (ops3, issue 26) */
        cmocka_unit_test(test_host_select), /* ops batch 4 (issue 26) */
    };
    rc |= cmocka_run_group_tests_name("cuda backend, host side", host_tests, NULL, NULL);
    char reason[1024];
    if (!ot_cuda_available(reason, sizeof reason)) {
        printf("no CUDA GPU found (%s): skipping\n", reason);
        fflush(stdout);
        const struct CMUnitTest skipped[] = {cmocka_unit_test(test_skipped)};
        return rc | cmocka_run_group_tests_name("cuda vs cpu (no GPU: skipped)", skipped, NULL, NULL);
    }
    const struct CMUnitTest gpu_tests[] = {
        cmocka_unit_test(test_gemm),          cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_binary),        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_act_grads),     cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_where_equal_cast_expand), cmocka_unit_test(test_layout),
        cmocka_unit_test(test_reduce),        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layer_norm),    cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_losses), cmocka_unit_test(test_linear_ce),        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pool),          cmocka_unit_test(test_optim),
        cmocka_unit_test(test_shapes_more),   cmocka_unit_test(test_launch_limits),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_samples_train),
        cmocka_unit_test(test_samples_remat_bitwise),
        cmocka_unit_test(test_pointwise_math),
        cmocka_unit_test(test_index), /* layout and indexing (issue 13) */
        cmocka_unit_test(test_activation), /* ops batch 1 (issue 26) */
        cmocka_unit_test(test_reduce_ext),
        cmocka_unit_test(test_group_norm),
        cmocka_unit_test(test_resize), /* spatial ops (issue 26) */
        cmocka_unit_test(test_conv_transpose),
        cmocka_unit_test(test_xfmr),  /* transformer ops (ops3, issue 26) */
        cmocka_unit_test(test_select), /* ops batch 4 (issue 26) */
        cmocka_unit_test(test_lowp), /* bf16 / fp16 GEMMs and convolutions (issue 27) */
        cmocka_unit_test(test_lowp_elementwise_norm), /* bf16 / fp16 element, softmax, norm kernels */
    };
    rc |= cmocka_run_group_tests_name("cuda vs cpu", gpu_tests, gpu_setup, gpu_teardown);
#else
    printf("no CUDA GPU found (onnxtrain was built without CUDA): skipping\n");
#endif
    return rc;
}
