/* gemm_lowp.c — bfloat16 / float16 GEMMs on the CPU (gemm_lowp.h): oneDNN's matmul
 * primitive for bfloat16, float32 panels and ot_gemm_run for float16.
 *
 * oneDNN 2.6 has no bf16 counterpart of dnnl_sgemm in its C API (only dnnl_sgemm and
 * the int8 ones), so bfloat16 goes through the matmul primitive: src = op(A) and
 * weights = op(B) described by strides (a transpose is a column-major stride, no
 * copy), dst float32 or bfloat16, alpha as the output scale and beta as a sum
 * post-op. oneDNN then picks its implementation once, when the primitive is created,
 * from the shape and the thread count (brgemm with AMX tiles or AVX512-BF16 dot
 * products here; the accumulation is float32 in every one): creating it once per key
 * and keeping it is what makes the bits repeatable, not a cache for speed alone.
 * Its scratchpad stays in oneDNN's library mode (packed B panels and partial sums,
 * reused across calls), outside the planned arena like OpenBLAS's own buffers.
 *
 * oneDNN 2.6's bfloat16 matmul needs AVX-512 (it answers "unimplemented" on an AVX2
 * CPU, seen on a 2-core AMD EPYC): there bfloat16 takes the converting path below, as
 * float16 does everywhere and bfloat16 in a build without oneDNN.
 *
 * float16: no x86 CPU here multiplies float16 (oneDNN's f16 matmul wants
 * AVX512-FP16), and PyTorch's CPU fp16 matmul runs at about 1 GFLOP/s (issue 27).
 * Converting A and B to float32 once (O(MK + KN)) and running the float32 GEMM
 * (O(MNK)) costs a few percent over float32 itself; the panels live in the node's
 * planned workspace. The products are exact in float32 (11-bit significands), so
 * only the float32 sums round. */
#include "kernels/cpu/gemm_lowp.h"

#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/gemm_select.h"
#include "kernels/cpu/cpu_lowp.h" /* ot_cpu_lowp_to_f32_serial / _from_f32_serial: the packed operands */
#ifdef OT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

bool ot_gemm_lowp_dtypes(ot_dtype ab, ot_dtype c) {
    return (ab == OT_BF16 || ab == OT_F16) && (c == OT_F32 || c == ab);
}

/* bfloat16 on oneDNN where it has a bfloat16 matmul (AVX-512: ot_gemm_dnnl_avx512);
 * the rest converts. */
static bool on_dnnl(ot_dtype ab) {
#ifdef OT_HAVE_DNNL
    return ab == OT_BF16 && ot_gemm_dnnl_avx512();
#else
    (void)ab;
    return false;
#endif
}

size_t ot_gemm_lowp_workspace(ot_dtype ab, ot_dtype c, int64_t M, int64_t N, int64_t K) {
    if (!ot_gemm_lowp_dtypes(ab, c) || on_dnnl(ab)) return 0;
    int64_t n = M * K + K * N + (c == OT_F32 ? 0 : M * N);
    return (size_t)n * sizeof(float);
}

/* ---- the converting path ------------------------------------------------------------ */

/* rows x cols of src (row length ld) into dst packed (row length cols) as float32. */
static void to_f32(ot_dtype t, const void *src, int64_t ld, int64_t rows, int64_t cols, float *dst, int nt) {
    const uint16_t *s = src;
    bool par = rows * cols >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t i = 0; i < rows; i++) ot_cpu_lowp_to_f32_serial(t, s + i * ld, dst + i * cols, cols);
}

/* packed float32 rows x cols into dst (row length ld) rounded to nearest even */
static void from_f32(ot_dtype t, const float *src, int64_t rows, int64_t cols, void *dst, int64_t ld, int nt) {
    uint16_t *o = dst;
    bool par = rows * cols >= OT_CPU_PAR_MIN_CHEAP && nt > 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t i = 0; i < rows; i++) ot_cpu_lowp_from_f32_serial(t, src + i * cols, o + i * ld, cols);
}

static ot_status run_converting(const ot_node *node, const ot_gemm_lowp_args *g, int nt, void *ws, size_t ws_bytes,
                                ot_error *err) {
    size_t need = ot_gemm_lowp_workspace(g->ab, g->c, g->M, g->N, g->K);
    /* a bf16 GEMM lands here only off oneDNN, where the workspace function asked for it */
    if (!need) need = (size_t)(g->M * g->K + g->K * g->N + (g->c == OT_F32 ? 0 : g->M * g->N)) * sizeof(float);
    if (!ws || ws_bytes < need)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): the %s GEMM needs %zu bytes of workspace, given %zu",
                       node->name, node->op_type, ot_dtype_name(g->ab), need, ws ? ws_bytes : (size_t)0);
    int64_t M = g->M, N = g->N, K = g->K;
    float *a = ws, *b = a + M * K, *c = g->C;
    int64_t ldc = g->ldc;
    to_f32(g->ab, g->A, g->lda, g->ta ? K : M, g->ta ? M : K, a, nt);
    to_f32(g->ab, g->B, g->ldb, g->tb ? N : K, g->tb ? K : N, b, nt);
    if (g->c != OT_F32) {
        c = b + K * N;
        ldc = N;
        if (g->beta != 0.0f) to_f32(g->c, g->C, g->ldc, M, N, c, nt);
    }
    ot_gemm_run(ot_gemm_select(g->ta, g->tb, (int)M, (int)N, (int)K, nt), nt, g->ta, g->tb, (int)M, (int)N, (int)K,
                g->alpha, a, g->ta ? (int)M : (int)K, b, g->tb ? (int)K : (int)N, g->beta, c, (int)ldc);
    if (g->c != OT_F32) from_f32(g->c, c, M, N, g->C, g->ldc, nt);
    return OT_OK;
}

/* ---- oneDNN ------------------------------------------------------------------------- */

#ifdef OT_HAVE_DNNL
enum { KEY_LEN = 13 };

/* One primitive per key, shared by every node with that key: creating a matmul
 * primitive allocates 0.2-0.7 MB of oneDNN's own (kernels, their tables) even when its
 * primitive cache hits, and GPT-2 small has 144 bf16 GEMM nodes but a dozen keys: kept
 * per node, they held about 100 MB outside the plan during the steps. The same key
 * gives the same implementation (oneDNN picks it from the descriptor and the thread
 * count, both in the key), so sharing changes no bit. One CPU engine serves them all
 * (a primitive runs on memory of its own engine); both live while any node holds a
 * state. Executing one primitive from several threads at once is allowed (oneDNN's
 * scratchpad is per thread); the memory objects, whose handles each call sets, stay
 * per node. */
typedef struct shared_prim {
    int64_t key[KEY_LEN];
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    int refs;
    struct shared_prim *next;
} shared_prim;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_prim *shared_list;
static dnnl_engine_t shared_engine;
static int engine_refs;

typedef struct lowp_state {
    ot_cpu_node_state base; /* first: the backend frees any node state through it */
    int64_t key[KEY_LEN];
    shared_prim *sp;
    bool has_engine; /* holds a reference to shared_engine */
    dnnl_stream_t stream;
    dnnl_memory_t a, b, c;
} lowp_state;

/* Drops one reference to sp (may be NULL) and, with has_engine, to the engine. */
static void release_shared(shared_prim *sp, bool has_engine) {
    pthread_mutex_lock(&shared_lock);
    if (sp && --sp->refs == 0) {
        for (shared_prim **pp = &shared_list; *pp; pp = &(*pp)->next)
            if (*pp == sp) {
                *pp = sp->next;
                break;
            }
        dnnl_primitive_destroy(sp->prim);
        dnnl_primitive_desc_destroy(sp->pd);
        free(sp);
    }
    if (has_engine && --engine_refs == 0) {
        dnnl_engine_destroy(shared_engine);
        shared_engine = NULL;
    }
    pthread_mutex_unlock(&shared_lock);
}

static void state_free(void *p) {
    lowp_state *s = p;
    if (!s) return;
    dnnl_memory_destroy(s->a);
    dnnl_memory_destroy(s->b);
    dnnl_memory_destroy(s->c);
    if (s->stream) dnnl_stream_destroy(s->stream);
    release_shared(s->sp, s->has_engine);
    free(s);
}

static void key_of(const ot_gemm_lowp_args *g, int nt, int64_t *k) {
    uint32_t al, be;
    memcpy(&al, &g->alpha, 4);
    memcpy(&be, &g->beta, 4);
    int64_t v[KEY_LEN] = {g->ta, g->tb, g->M, g->N, g->K, g->lda, g->ldb, g->ldc, g->ab, g->c, al, be, nt};
    memcpy(k, v, sizeof v);
}

static dnnl_data_type_t dnnl_type(ot_dtype t) { return t == OT_BF16 ? dnnl_bf16 : t == OT_F16 ? dnnl_f16 : dnnl_f32; }

static void descs_of(const ot_gemm_lowp_args *g, dnnl_memory_desc_t *am, dnnl_memory_desc_t *bm, dnnl_memory_desc_t *cm,
                     dnnl_status_t *st) {
    dnnl_dims_t ad = {g->M, g->K}, bd = {g->K, g->N}, cd = {g->M, g->N};
    dnnl_dims_t as = {g->ta ? 1 : g->lda, g->ta ? g->lda : 1}, bs = {g->tb ? 1 : g->ldb, g->tb ? g->ldb : 1};
    dnnl_dims_t cs = {g->ldc, 1};
    *st = dnnl_memory_desc_init_by_strides(am, 2, ad, dnnl_type(g->ab), as);
    if (*st == dnnl_success) *st = dnnl_memory_desc_init_by_strides(bm, 2, bd, dnnl_type(g->ab), bs);
    if (*st == dnnl_success) *st = dnnl_memory_desc_init_by_strides(cm, 2, cd, dnnl_type(g->c), cs);
}

/* A new primitive for g on the shared engine (called with shared_lock held). */
static dnnl_status_t make_prim(shared_prim *sp, const ot_gemm_lowp_args *g) {
    dnnl_memory_desc_t am, bm, cm;
    dnnl_status_t st;
    descs_of(g, &am, &bm, &cm, &st);
    dnnl_matmul_desc_t md;
    if (st == dnnl_success) st = dnnl_matmul_desc_init(&md, &am, &bm, NULL, &cm);
    if (st != dnnl_success) return st;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success && g->alpha != 1.0f) st = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &g->alpha);
    if (st == dnnl_success && g->beta != 0.0f) {
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success) st = dnnl_post_ops_append_sum(po, g->beta);
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&sp->pd, &md, attr, shared_engine, NULL);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (st == dnnl_success) st = dnnl_primitive_create(&sp->prim, sp->pd);
    return st;
}

/* The primitive for g on nt threads (oneDNN reads omp_get_max_threads() when it
 * creates it; the caller has set it): the shared one of s's key, made when there is
 * none; then s's own stream and memory objects. */
static dnnl_status_t build(lowp_state *s, const ot_gemm_lowp_args *g) {
    dnnl_status_t st = dnnl_success;
    pthread_mutex_lock(&shared_lock);
    if (!shared_engine) st = dnnl_engine_create(&shared_engine, dnnl_cpu, 0);
    if (st == dnnl_success) {
        engine_refs++;
        s->has_engine = true;
        for (shared_prim *sp = shared_list; sp && !s->sp; sp = sp->next)
            if (memcmp(sp->key, s->key, sizeof s->key) == 0) s->sp = sp;
        if (!s->sp) {
            shared_prim *sp = calloc(1, sizeof *sp);
            st = sp ? make_prim(sp, g) : dnnl_out_of_memory;
            if (st == dnnl_success) {
                memcpy(sp->key, s->key, sizeof sp->key);
                sp->next = shared_list;
                shared_list = sp;
                s->sp = sp;
            } else if (sp) {
                if (sp->prim) dnnl_primitive_destroy(sp->prim);
                if (sp->pd) dnnl_primitive_desc_destroy(sp->pd);
                free(sp);
            }
        }
        if (s->sp) s->sp->refs++;
    }
    pthread_mutex_unlock(&shared_lock);
    dnnl_memory_desc_t am, bm, cm;
    if (st == dnnl_success) descs_of(g, &am, &bm, &cm, &st);
    if (st == dnnl_success) st = dnnl_stream_create(&s->stream, shared_engine, dnnl_stream_default_flags);
    if (st == dnnl_success) st = dnnl_memory_create(&s->a, &am, shared_engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = dnnl_memory_create(&s->b, &bm, shared_engine, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = dnnl_memory_create(&s->c, &cm, shared_engine, DNNL_MEMORY_NONE);
    return st;
}

/* The state for g at nt threads: the slot's when its key matches, else a new one
 * (kept in the slot when there is one). */
static ot_status state_for(const ot_node *node, const ot_gemm_lowp_args *g, int nt, void **slot, lowp_state **out,
                           ot_error *err) {
    int64_t key[KEY_LEN];
    key_of(g, nt, key);
    lowp_state *s = slot ? *slot : NULL;
    if (s && s->base.free == state_free && memcmp(s->key, key, sizeof key) == 0) {
        *out = s;
        return OT_OK;
    }
    if (s) { /* another shape (a MatMul whose batch changed) or another kernel's state */
        s->base.free(s);
        *slot = NULL;
    }
    if (!(s = calloc(1, sizeof *s)))
        return ot_fail(err, OT_E_MEMORY, "node '%s' (%s): out of memory for oneDNN's state", node->name, node->op_type);
    s->base.free = state_free;
    memcpy(s->key, key, sizeof key);
    int was = omp_get_max_threads();
    omp_set_num_threads(nt);
    dnnl_status_t st = build(s, g);
    omp_set_num_threads(was);
    if (st != dnnl_success) {
        state_free(s);
        return ot_fail(err, OT_E_UNSUPPORTED,
                       "node '%s' (%s): oneDNN has no %s matmul for %lld x %lld x %lld here (status %d)", node->name,
                       node->op_type, ot_dtype_name(g->ab), (long long)g->M, (long long)g->K, (long long)g->N,
                       (int)st);
    }
    if (slot) *slot = s;
    *out = s;
    return OT_OK;
}

static ot_status run_dnnl(const ot_node *node, const ot_gemm_lowp_args *g, int nt, void **slot, ot_error *err) {
    lowp_state *s = NULL;
    ot_status st = state_for(node, g, nt, slot, &s, err);
    if (st) return st;
    dnnl_status_t ds = dnnl_memory_set_data_handle(s->a, (void *)g->A);
    if (ds == dnnl_success) ds = dnnl_memory_set_data_handle(s->b, (void *)g->B);
    if (ds == dnnl_success) ds = dnnl_memory_set_data_handle(s->c, g->C);
    int was = omp_get_max_threads();
    bool nested = omp_in_parallel();
    if (!nested && was != nt) omp_set_num_threads(nt);
    if (ds == dnnl_success) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, s->a}, {DNNL_ARG_WEIGHTS, s->b}, {DNNL_ARG_DST, s->c}};
        ds = dnnl_primitive_execute(s->sp->prim, s->stream, 3, args);
    }
    if (ds == dnnl_success) ds = dnnl_stream_wait(s->stream);
    if (!nested && was != nt) omp_set_num_threads(was);
    if (!slot) state_free(s);
    if (ds != dnnl_success)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): oneDNN's %s matmul failed (status %d)", node->name,
                       node->op_type, ot_dtype_name(g->ab), (int)ds);
    return OT_OK;
}
#endif /* OT_HAVE_DNNL */

ot_status ot_gemm_lowp_run(const ot_node *node, const ot_gemm_lowp_args *g, int threads, void **state, void *ws,
                           size_t ws_bytes, ot_error *err) {
    if (!ot_gemm_lowp_dtypes(g->ab, g->c))
        return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): no CPU GEMM of %s inputs into %s", node->name,
                       node->op_type, ot_dtype_name(g->ab), ot_dtype_name(g->c));
    if (g->M <= 0 || g->N <= 0 || g->K <= 0) return OT_OK; /* the callers handle empty products */
    int nt = omp_in_parallel() ? 1 : threads > 0 ? threads : 1;
#ifdef OT_HAVE_DNNL
    if (on_dnnl(g->ab)) return run_dnnl(node, g, nt, state, err);
#else
    (void)state;
#endif
    return run_converting(node, g, nt, ws, ws_bytes, err);
}

const char *ot_gemm_lowp_isa_note(void) {
#ifdef OT_HAVE_DNNL
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16)
        return NULL;
    if (!ot_gemm_dnnl_avx512())
        return "this CPU has no AVX-512 (oneDNN's bfloat16 matmul needs it): bfloat16 GEMMs convert to float32 "
               "(correct, slower)";
    return "this CPU has neither AVX512-BF16 nor AMX: oneDNN emulates the bfloat16 GEMMs (correct, slower)";
#else
    return "this build has no oneDNN: bfloat16 GEMMs convert to float32 (correct, slower)";
#endif
}

const char *ot_gemm_lowp_impl_name(const ot_gemm_lowp_args *g, int threads, char *buf, size_t n) {
    snprintf(buf, n, "convert+sgemm");
#ifdef OT_HAVE_DNNL
    if (on_dnnl(g->ab) && ot_gemm_lowp_dtypes(g->ab, g->c)) {
        lowp_state *s = NULL;
        char nm[] = "probe", ty[] = "MatMul";
        ot_node probe = {0};
        probe.name = nm;
        probe.op_type = ty;
        if (state_for(&probe, g, threads > 0 ? threads : 1, NULL, &s, NULL) == OT_OK) {
            const char *info = NULL;
            if (dnnl_primitive_desc_query(s->sp->pd, dnnl_query_impl_info_str, 0, &info) == dnnl_success && info)
                snprintf(buf, n, "%s", info);
            state_free(s);
        } else {
            snprintf(buf, n, "unavailable");
        }
    }
#else
    (void)g, (void)threads;
#endif
    return buf;
}
