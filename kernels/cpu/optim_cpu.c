/* optim_cpu.c — CPU kernels of the optimizer nodes (SgdStep, AdamStep) and the update
 * maths they share with the tests. Operation order mirrors torch.optim's
 * single-tensor code (PyTorch 1.13) so results agree to rounding; every element is
 * independent, so the OpenMP split never changes the bits. "x + alpha*y" is an fmaf
 * because that is what ATen's add/addcmul kernels compile to on x86-64 (AVX2 builds,
 * vec::fmadd); other products are rounded separately, as in torch. ISO C mode
 * (-std=c11 implies -ffp-contract=off) keeps the compiler from fusing anything else. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/grad_norm_sum.h" /* ot_grad_sum_sq_visit: the gradient sums on the way */
#include "kernels/cpu/optim_cpu.h"
#include "kernels/kernel_common.h"

/* Hyper-parameters travel as float attributes, but torch.optim computes its scalars
 * (1 - beta, beta^step) from the user's Python double. The shortest decimal that
 * reads back as the same float is what the user typed (for up to 7 significant
 * digits), so parsing it as a double recovers that double. */
static double user_double(float f) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

/* The update loops run on contiguous chunks, one per thread, compiled twice
 * (target_clones): for an x86-64-v3 CPU (AVX2 and FMA), where fmaf is the vfmadd
 * instruction and the loop is vectorised (CMakeLists.txt builds this file with -O3, whose loop
 * unswitching takes the hyper-parameter tests out of the loop), and for any other
 * x86-64, where fmaf is libm's. Both are the exactly rounded a*b+c, as are the vector
 * add, multiply, divide and square root, so the two clones and the scalar loop they
 * replace give the same bits. Each chunk also says whether every value it wrote is
 * finite (the largest magnitude's bits, an integer max in any order, is below the
 * exponent of Inf), so the training loop's check of the updated params needs no pass
 * of its own. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OT_OPTIM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OT_OPTIM_CLONES
#endif

/* |x|'s bits, which order like |x| (NaN above Inf). */
static inline uint32_t abs_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x7fffffffu;
}
#define OT_INF_BITS 0x7f800000u

typedef struct sgd_args {
    float *p, *buf;
    const float *g;
    float neg_lr, grad_scale, momentum, weight_decay;
    bool nesterov;
} sgd_args;

OT_OPTIM_CLONES static bool sgd_chunk(const sgd_args *a, long long lo, long long hi) {
    float *restrict p = a->p, *restrict buf = a->buf;
    const float *restrict g = a->g;
    const float neg_lr = a->neg_lr, gs = a->grad_scale, mom = a->momentum, wd = a->weight_decay;
    const bool scale = gs != 1.0f, decay = wd != 0.0f, nest = a->nesterov;
    uint32_t top = 0;
    if (mom != 0.0f && buf) {
        for (long long i = lo; i < hi; i++) {
            float d = g[i];
            if (scale) d = d * gs;
            if (decay) d = fmaf(wd, p[i], d);
            float b = buf[i] * mom + d; /* dampening 0: alpha 1 - 0 */
            buf[i] = b;
            d = nest ? fmaf(mom, b, d) : b;
            float q = fmaf(neg_lr, d, p[i]);
            p[i] = q;
            uint32_t m = abs_bits(q) > abs_bits(b) ? abs_bits(q) : abs_bits(b);
            top = m > top ? m : top;
        }
    } else {
        for (long long i = lo; i < hi; i++) {
            float d = g[i];
            if (scale) d = d * gs;
            if (decay) d = fmaf(wd, p[i], d);
            float q = fmaf(neg_lr, d, p[i]);
            p[i] = q;
            top = abs_bits(q) > top ? abs_bits(q) : top;
        }
    }
    return top < OT_INF_BITS;
}

/* Threads for an element-wise update of n floats: one per 64 Ki elements (a smaller
 * loop costs less than waking a thread), at most the caller's count. */
static int update_threads(size_t n, int n_threads) {
    int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
    size_t most = n / 65536;
    return most < (size_t)nt ? (most ? (int)most : 1) : nt;
}

/* One update over parts (count of them, `size` bytes apart, n_elems[j] floats each) as
 * one index space split evenly over the threads: one OpenMP team for all of them
 * instead of one per param (a passive worker costs ~15 us to wake and join, and
 * chain48 has 48 params). chunk(part, lo, hi) updates [lo, hi) of one part and says
 * whether what it wrote is finite. With one part the split is the per-param one. */
typedef bool (*update_chunk_fn)(const void *part, long long lo, long long hi);

static bool update_parts(update_chunk_fn chunk, const void *parts, size_t size, const long long *n_elems, int count,
                         int n_threads) {
    const char *base = parts;
    long long total = 0;
    for (int j = 0; j < count; j++) total += n_elems[j];
    int nt = update_threads((size_t)total, n_threads);
    bool finite = true;
    if (nt == 1) {
        for (int j = 0; j < count; j++) finite = chunk(base + size * (size_t)j, 0, n_elems[j]) && finite;
        return finite;
    }
#pragma omp parallel num_threads(nt) reduction(&& : finite)
    {
        long long t = omp_get_thread_num(), k = omp_get_num_threads();
        long long lo = total * t / k, hi = total * (t + 1) / k, at = 0;
        for (int j = 0; j < count && at < hi; at += n_elems[j], j++) {
            long long a = lo > at ? lo - at : 0, b = hi - at < n_elems[j] ? hi - at : n_elems[j];
            if (a < b) finite = chunk(base + size * (size_t)j, a, b) && finite;
        }
    }
    return finite;
}

static bool sgd_part(const void *a, long long lo, long long hi) { return sgd_chunk(a, lo, hi); }

bool ot_sgd_update(float *p, const float *g, float *buf, size_t n, double lr, float grad_scale,
                   float momentum, float weight_decay, bool nesterov, int n_threads) {
    const sgd_args a = {.p = p, .buf = buf, .g = g, .neg_lr = (float)-lr, .grad_scale = grad_scale,
                        .momentum = momentum, .weight_decay = weight_decay, .nesterov = nesterov};
    const long long nn = (long long)n;
    return update_parts(sgd_part, &a, sizeof a, &nn, 1, n_threads);
}

typedef struct adam_args {
    float *p, *m, *v;
    const float *g;
    float grad_scale, beta1, beta2, eps, weight_decay;
    float neg_step_size, bc2_sqrt, one_m_b1, one_m_b2, decay;
    bool decoupled;
    bool hf; /* eps_hf (train/optim.h): eps already divided by bc2_sqrt, decay after the update */
} adam_args;

OT_OPTIM_CLONES static bool adam_chunk(const adam_args *a, long long lo, long long hi) {
    float *restrict p = a->p, *restrict m = a->m, *restrict v = a->v;
    const float *restrict g = a->g;
    const float gs = a->grad_scale, b1 = a->beta1, b2 = a->beta2, eps = a->eps, wdv = a->weight_decay;
    const float nss = a->neg_step_size, bc2s = a->bc2_sqrt, omb1 = a->one_m_b1, omb2 = a->one_m_b2, decay = a->decay;
    const bool scale = gs != 1.0f, dwd = wdv != 0.0f && a->decoupled && !a->hf, lwd = wdv != 0.0f && !a->decoupled;
    const bool dwd_after = wdv != 0.0f && a->decoupled && a->hf;
    uint32_t top = 0;
    for (long long i = lo; i < hi; i++) {
        float d = g[i];
        d = scale ? d * gs : d;
        float pi = p[i];
        pi = dwd ? pi * decay : pi;
        d = lwd ? fmaf(wdv, pi, d) : d;
        float mi = fmaf(omb1, d, m[i] * b1);
        float vi = fmaf(omb2 * d, d, v[i] * b2);
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2s + eps;
        float q = pi + nss * mi / denom;
        q = dwd_after ? q * decay : q;
        p[i] = q;
        uint32_t t = abs_bits(q) > abs_bits(mi) ? abs_bits(q) : abs_bits(mi);
        t = t > abs_bits(vi) ? t : abs_bits(vi);
        top = t > top ? t : top;
    }
    return top < OT_INF_BITS;
}

static bool adam_part(const void *a, long long lo, long long hi) { return adam_chunk(a, lo, hi); }

/* Adam's per-step scalars, for params p, g, m, v. */
static adam_args adam_args_of(float *p, const float *g, float *m, float *v, double lr, float grad_scale, float beta1,
                              float beta2, float eps, float weight_decay, bool decoupled, int64_t step) {
    /* Python computes these scalars in double; PyTorch casts them to float when they
     * meet a float tensor. */
    const double b1 = user_double(beta1), b2 = user_double(beta2);
    const double bc1 = 1.0 - pow(b1, (double)step);
    const double bc2 = 1.0 - pow(b2, (double)step);
    return (adam_args){.p = p, .m = m, .v = v, .g = g, .grad_scale = grad_scale, .beta1 = beta1, .beta2 = beta2,
                       .eps = eps, .weight_decay = weight_decay,
                       .neg_step_size = (float)(-((double)lr / bc1)), .bc2_sqrt = (float)sqrt(bc2),
                       .one_m_b1 = (float)(1.0 - b1), .one_m_b2 = (float)(1.0 - b2),
                       .decay = (float)(1.0 - lr * user_double(weight_decay)), .decoupled = decoupled};
}

bool ot_adam_update(float *p, const float *g, float *m, float *v, size_t n, double lr, float grad_scale,
                    float beta1, float beta2, float eps, float weight_decay, bool decoupled, int64_t step,
                    int n_threads) {
    const adam_args a = adam_args_of(p, g, m, v, lr, grad_scale, beta1, beta2, eps, weight_decay, decoupled, step);
    const long long nn = (long long)n;
    return update_parts(adam_part, &a, sizeof a, &nn, 1, n_threads);
}

static ot_status check_same(const ot_node *node, const ot_tensor *in, int n, ot_error *err) {
    for (int k = 0; k < n; k++) {
        if (in[k].dtype != OT_F32 || !in[k].data)
            return ot_fail(err, OT_E_UNSUPPORTED, "node '%s' (%s): input %d must be float32 (got %s)",
                           node->name ? node->name : "?", ot_op_name(node->op), k, ot_dtype_name(in[k].dtype));
        if (ot_kernel_numel(&in[k]) != ot_kernel_numel(&in[0]))
            return ot_fail(err, OT_E_SHAPE, "node '%s' (%s): input %d has %lld elements, the param %lld",
                           node->name ? node->name : "?", ot_op_name(node->op), k,
                           (long long)ot_kernel_numel(&in[k]), (long long)ot_kernel_numel(&in[0]));
    }
    return OT_OK;
}

/* The per-step scalars: from the float64[4] input when the node has one (the
 * training graph always does, see train/optim.h), else from ctx. A zero grad scale
 * in a zero-initialised context means "no scaling" rather than "scale by zero". */
typedef struct step_scalars {
    double lr;
    float grad_scale;
    int64_t step;
    bool apply;
} step_scalars;

static ot_status scalars_of(const ot_node *node, const ot_tensor *in, int slot, const ot_kernel_ctx *ctx,
                            step_scalars *s, ot_error *err) {
    s->lr = ctx->opt_lr;
    s->grad_scale = ctx->opt_grad_scale != 0.0f ? ctx->opt_grad_scale : 1.0f;
    s->step = ctx->opt_step;
    s->apply = true;
    if (node->n_inputs <= slot || !in[slot].data) return OT_OK;
    if (in[slot].dtype != OT_F64 || ot_kernel_numel(&in[slot]) < 4)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): input %d must be the float64[4] optimizer scalars",
                       node->name ? node->name : "?", ot_op_name(node->op), slot);
    const double *d = (const double *)in[slot].data;
    s->lr = d[0];
    s->grad_scale = (float)d[1];
    s->step = (int64_t)d[2];
    s->apply = d[3] != 0.0;
    return OT_OK;
}

/* Tells the training loop (through ctx->update_check) what the update wrote. */
static void report_update(const ot_kernel_ctx *ctx, bool finite) {
    if (!ctx->update_check) return;
    ctx->update_check->checked++;
    if (!finite) ctx->update_check->nonfinite = true;
}

/* How many nodes of ctx's run (kernel_ctx.h), from this one (op, n_in inputs, the
 * scalars last), one pass may update with it: each of the same op with the same
 * hyper-parameters and scalars, its other inputs float32 of its param's size (absent
 * where this node's are: SGD's momentum buffer). 1 without a run. */
static int run_len_of(const ot_node *node, const ot_tensor *in, const ot_optim_params *o0, const ot_kernel_ctx *ctx) {
    int n_in = node->n_inputs, m = 1;
    if (ctx->run_len < 2 || !ctx->run_done) return 1;
    for (; m < ctx->run_len; m++) {
        const ot_node *nd = ctx->run_nodes[m];
        const ot_tensor *t = ctx->run_in[m];
        ot_op_params scratch;
        const ot_op_params *pp;
        ot_error ignored = {0};
        if (nd->op != node->op || nd->n_inputs != n_in || t[n_in - 1].data != in[n_in - 1].data) break;
        if (ot_node_params(nd, &scratch, &pp, &ignored)) break;
        const ot_optim_params *o = &pp->u.optim;
        if (o->momentum != o0->momentum || o->weight_decay != o0->weight_decay || o->nesterov != o0->nesterov ||
            o->beta1 != o0->beta1 || o->beta2 != o0->beta2 || o->epsilon != o0->epsilon || o->decoupled != o0->decoupled)
            break;
        int64_t n = ot_kernel_numel(&t[0]);
        bool ok = true;
        for (int k = 0; k + 1 < n_in && ok; k++)
            ok = !in[k].data ? !t[k].data : t[k].dtype == OT_F32 && t[k].data && ot_kernel_numel(&t[k]) == n;
        if (!ok) break;
    }
    return m;
}

/* Fills part j of m (`size` bytes each, part 0 given) for node j of ctx's run. */
typedef void (*part_fill_fn)(void *part, const ot_tensor *in);

static void sgd_fill(void *part, const ot_tensor *in) {
    sgd_args *a = part;
    a->p = (float *)in[0].data;
    a->g = (const float *)in[1].data;
    a->buf = a->buf ? (float *)in[2].data : NULL;
}

static void adam_fill(void *part, const ot_tensor *in) {
    adam_args *a = part;
    a->p = (float *)in[0].data;
    a->g = (const float *)in[1].data;
    a->m = (float *)in[2].data;
    a->v = (float *)in[3].data;
}

/* The parts of an update that also sums its gradients' squares (ctx->grad_ss). */
typedef struct ss_parts {
    update_chunk_fn chunk;
    const char *parts;
    size_t size;
} ss_parts;

static bool ss_visit(const void *user, int k, size_t lo, size_t hi) {
    const ss_parts *u = user;
    return u->chunk(u->parts + u->size * (size_t)k, (long long)lo, (long long)hi);
}

/* update_parts, and the sum of squares of each part's gradient (input 1 of node j of
 * the run) into ctx->grad_ss[j] where that slot is NaN (wanted), block by block on the
 * way (kernels/cpu/grad_norm_sum.h: the same bits as a pass of its own; every
 * element's update is the same whichever thread runs its block). Without a wanted
 * slot, or out of memory, only the update. */
static bool update_parts_ss(update_chunk_fn chunk, const void *parts, size_t size, const long long *n_elems, int count,
                            const ot_tensor *in, const ot_kernel_ctx *ctx) {
    bool any = false; /* a slot marked NaN: its sum is wanted */
    for (int j = 0; ctx->grad_ss && j < count && !any; j++) any = isnan(ctx->grad_ss[j]);
    const float **g = any ? malloc(sizeof *g * (size_t)count) : NULL;
    size_t *n = g ? malloc(sizeof *n * (size_t)count) : NULL;
    bool *want = n ? malloc(sizeof *want * (size_t)count) : NULL;
    bool finite = true, done = false;
    if (want) {
        long long total = 0;
        for (int j = 0; j < count; j++) {
            g[j] = (const float *)(j ? ctx->run_in[j] : in)[1].data;
            n[j] = (size_t)n_elems[j];
            want[j] = isnan(ctx->grad_ss[j]);
            total += n_elems[j];
        }
        const ss_parts u = {.chunk = chunk, .parts = parts, .size = size};
        done = ot_grad_sum_sq_visit(g, n, count, ctx->grad_ss, want, update_threads((size_t)total, ctx->n_threads),
                                    ss_visit, &u, &finite);
    }
    free(g), free(n), free(want);
    return done ? finite : update_parts(chunk, parts, size, n_elems, count, ctx->n_threads);
}

/* The update of this node (part a0) and, when ctx has a run, of the nodes after it
 * that run_len_of accepts, in one pass; reports each node it updated to the update
 * check and their count in *ctx->run_done. Out of memory for the run: this node
 * alone. */
static void update_run(const ot_node *node, const ot_tensor *in, const ot_optim_params *o, const void *a0, size_t size,
                       update_chunk_fn chunk, part_fill_fn fill, const ot_kernel_ctx *ctx) {
    int m = run_len_of(node, in, o, ctx);
    char *parts = m > 1 ? malloc(size * (size_t)m) : NULL;
    long long *n_elems = m > 1 ? malloc(sizeof *n_elems * (size_t)m) : NULL;
    if (!parts || !n_elems) {
        free(parts), free(n_elems);
        const long long n = (long long)ot_kernel_numel(&in[0]);
        report_update(ctx, update_parts_ss(chunk, a0, size, &n, 1, in, ctx));
        return;
    }
    for (int j = 0; j < m; j++) {
        memcpy(parts + size * (size_t)j, a0, size);
        fill(parts + size * (size_t)j, j ? ctx->run_in[j] : in);
        n_elems[j] = (long long)ot_kernel_numel(j ? &ctx->run_in[j][0] : &in[0]);
    }
    bool finite = update_parts_ss(chunk, parts, size, n_elems, m, in, ctx);
    for (int j = 0; j < m; j++) report_update(ctx, finite);
    *ctx->run_done = m;
    free(parts), free(n_elems);
}

ot_status ot_cpu_sgd_step(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                          ot_error *err) {
    (void)out;
    step_scalars sc;
    ot_status st = scalars_of(node, in, 3, ctx, &sc, err);
    if (st || !sc.apply) return st;
    bool has_buf = node->n_inputs >= 3 && in[2].data;
    if ((st = check_same(node, in, 2, err)) || (has_buf && (st = check_same(node, in, 3, err)))) return st;
    ot_op_params scratch;
    const ot_op_params *pp;
    if ((st = ot_node_params(node, &scratch, &pp, err))) return st;
    const ot_optim_params *op_ = &pp->u.optim;
    float momentum = op_->momentum;
    if (momentum != 0.0f && !has_buf)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (SgdStep): momentum %g without a momentum buffer input",
                       node->name ? node->name : "?", (double)momentum);
    const sgd_args a = {.p = (float *)in[0].data, .buf = has_buf ? (float *)in[2].data : NULL,
                        .g = (const float *)in[1].data, .neg_lr = (float)-sc.lr, .grad_scale = sc.grad_scale,
                        .momentum = momentum, .weight_decay = op_->weight_decay, .nesterov = op_->nesterov};
    update_run(node, in, op_, &a, sizeof a, sgd_part, sgd_fill, ctx);
    return OT_OK;
}

ot_status ot_cpu_adam_step(const ot_node *node, const ot_tensor *in, ot_tensor *out, const ot_kernel_ctx *ctx,
                           ot_error *err) {
    (void)out;
    step_scalars sc;
    ot_status st = scalars_of(node, in, 4, ctx, &sc, err);
    if (st || !sc.apply) return st;
    if ((st = check_same(node, in, 4, err))) return st;
    ot_op_params scratch;
    const ot_op_params *pp;
    if ((st = ot_node_params(node, &scratch, &pp, err))) return st;
    const ot_optim_params *op_ = &pp->u.optim;
    if (sc.step < 1)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (AdamStep): step count %lld, must be >= 1",
                       node->name ? node->name : "?", (long long)sc.step);
    adam_args a = adam_args_of((float *)in[0].data, (const float *)in[1].data, (float *)in[2].data,
                               (float *)in[3].data, sc.lr, sc.grad_scale, op_->beta1, op_->beta2, op_->epsilon,
                               op_->weight_decay, op_->decoupled, sc.step);
    if (op_->eps_hf) a.hf = true, a.eps = a.eps / a.bc2_sqrt;
    update_run(node, in, op_, &a, sizeof a, adam_part, adam_fill, ctx);
    return OT_OK;
}
