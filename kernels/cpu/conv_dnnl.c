/* conv_dnnl.c — Conv, ConvGradInput and ConvGradWeight on oneDNN (conv_dnnl.h).
 *
 * The rule (shape only, so a given model always takes the same path, recompute
 * clones included, and `verify` stays bitwise): oneDNN runs a 2-D convolution with a
 * 3x3 kernel, no dilation, stride 1 or 2 and pads of 0 or 1 at each end when it is
 *   - depthwise (group == channels, one output channel per group), with an output
 *     plane OH*OW of at least 16 at stride 1 and 64 at stride 2, every direction;
 *   - dense (group 1) with 64 to 256 input and output channels, an output plane of
 *     at least 64; ConvGradInput at stride 1 already from 16;
 * and ResNet's stem, 7x7 stride 2 (pads up to 3) from 3 to 64 channels with an output
 * plane of at least 64: Conv and ConvGradWeight.
 * bench/conv_dnnl.sh measured each direction at ResNet-18's and MobileNetV2's shapes
 * (batch 8, 64x64 input, 2 threads, best of 29, load 5-6; "run" column: this file,
 * "ot": our kernels), ms fwd / dX / dW:
 *   dw 96ch 16x16: ours .248/.287/.209, oneDNN .126/.142/.107; 16ch 32x32: .175/.170/
 *   .138 vs .089/.101/.066; 288ch 4x4: .064/.063/.057 vs .039/.048/.037; stride 2, 96ch
 *   16x16: .109/.115/.099 vs .060/.085/.059; but stride 2 96ch 8x8 (4x4 outputs):
 *   .037/.037/.034 against oneDNN's .035/.049/.035, and 480ch 2x2 ties: ours.
 *   dense 64ch 16x16: 1.43/1.09/1.42 vs .73/.69/.80; 128ch 8x8: 1.09/.94/1.22 vs
 *   .69/.69/.75; 64->128 stride 2: .59/.58/.59 vs .40/.48/.42; 256ch 4x4: oneDNN's dX
 *   .69 beats our .97, its fwd ties and its dW loses (1.35 vs 1.08); 128->256 stride 2
 *   (4x4 outputs) loses in dX and dW; 512 channels lose 1.3-3x: ours.
 * Depthwise convs run on oneDNN with one thread whatever ctx->n_threads says: at 2
 * threads they were slower than at 1 in every run (96ch 8x8: .129 ms against .050 at
 * load 5; 2.5-3.5x slower at load 3.4, where the other core was busy and the team
 * waited for it), too short for a fork and join; oneDNN at 1 thread beat our kernels
 * at 2 threads on every shape of the rule (96ch 16x16: .200 against .50-.67 ms).
 * On plain NCHW memory oneDNN lost everywhere on depthwise (2.7 ms against our 0.7),
 * so the operands go through reorders into the layouts it picks (nChw16c on AVX-512),
 * each timed above. The stem (3->64, 7x7 stride 2, 64x64 input): oneDNN's fwd 1.00 and
 * dW 1.29 against our 1.75 and 2.02; its dX 3.88 against our 1.65.
 *
 * Memory: the blocked copies and oneDNN's scratchpad (user scratchpad mode) live in
 * the node's planned workspace, sized by ot_dnnl_conv_workspace (an upper bound for
 * the machine's core count: scratchpads grow with threads, dW keeps one partial sum
 * per thread); a build whose exact need does not fit (more threads than cores, or
 * another oneDNN) runs our kernel, the same way on every step.
 * Nothing is allocated per step: the primitives, built for the node's shapes and
 * thread count, are kept in the node's slot (ot_kernel_ctx.node_state) and rebuilt
 * only if either changes. oneDNN's OpenMP runtime takes its thread count from
 * omp_get_max_threads(), so it is set to ctx->n_threads around creation and runs and
 * put back after. cnn3 checked that its results have the same bits run to run at 1
 * and 2 threads; test_conv_dnnl checks it again. */
#include "kernels/cpu/conv_dnnl.h"

#ifdef OT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

/* Output planes (OH*OW) of the rule (file header). */
#define DNNL_SMALL_PLANE 16
#define DNNL_PLANE 64
/* Channels of the dense 3x3 convs sent to oneDNN (ResNet's 64 to 256). */
#define DNNL_DENSE_MIN_C 64
#define DNNL_DENSE_MAX_C 256
#define DNNL_ALIGN 64

/* One operand: our NCHW memory (`user`), the layout the primitive wants (`inner`,
 * the same object when they agree) and the reorder between them. */
typedef struct dnnl_operand {
    int arg;
    bool is_out;
    dnnl_memory_t user, inner;
    dnnl_primitive_t reorder; /* NULL: same layout */
    size_t off;               /* inner's place in the workspace */
} dnnl_operand;

/* The dtypes of one convolution's tensors (all dnnl_f32 on the float32 path). */
typedef struct conv_dts {
    dnnl_data_type_t x, w, y, bias;
} conv_dts;

#define KEY_LEN 20

typedef struct dnnl_conv_state {
    ot_cpu_node_state base; /* first: the backend frees any node state through it */
    int64_t key[KEY_LEN]; /* shape, direction, bias, thread count and dtypes it was built for */
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t scratch;
    int n;
    dnnl_operand op[4];
    size_t scratch_bytes, need;
    bool unavailable; /* oneDNN has no implementation for it here: ours runs, without asking again */
} dnnl_conv_state;

/* 2-D, k x k, no dilation, stride 1 or 2, begin and end pads of 0 to pmax. */
static bool window_kxk(const ot_conv3 *p, int64_t k, int64_t pmax) {
    const ot_window3 *s = &p->sp;
    if (s->in[0] != 1 || s->k[0] != 1 || s->k[1] != k || s->k[2] != k || p->N < 1) return false;
    for (int j = 1; j < 3; j++) {
        if (s->d[j] != 1 || (s->s[j] != 1 && s->s[j] != 2)) return false;
        int64_t pe = (s->out[j] - 1) * s->s[j] + s->k[j] - s->in[j] - s->pb[j];
        if (s->pb[j] < 0 || s->pb[j] > pmax || pe < 0 || pe > pmax) return false;
    }
    return true;
}

/* The rule of the file header, per direction. */
static bool rule(const ot_conv3 *p, ot_dnnl_dir dir) {
    int64_t plane = p->sp.out[1] * p->sp.out[2];
    bool s1 = p->sp.s[1] == 1 && p->sp.s[2] == 1;
    if (window_kxk(p, 7, 3)) /* ResNet's stem; its dX lost (3.9 ms vs 1.5) */
        return p->G == 1 && !s1 && p->Cin == 3 && p->Cout == 64 && plane >= DNNL_PLANE && dir != OT_DNNL_BWD_DATA;
    if (!window_kxk(p, 3, 1)) return false;
    if (p->Cig == 1 && p->Cog == 1 && p->G > 1) return plane >= (s1 ? DNNL_SMALL_PLANE : DNNL_PLANE);
    if (p->G != 1 || p->Cin < DNNL_DENSE_MIN_C || p->Cout < DNNL_DENSE_MIN_C || p->Cin > DNNL_DENSE_MAX_C ||
        p->Cout > DNNL_DENSE_MAX_C)
        return false;
    return plane >= (dir == OT_DNNL_BWD_DATA && s1 ? DNNL_SMALL_PLANE : DNNL_PLANE);
}

static void key_of(const ot_conv3 *p, ot_dnnl_dir dir, bool bias, int nt, const conv_dts *t, int64_t *k) {
    const ot_window3 *s = &p->sp;
    int64_t v[KEY_LEN] = {p->N, p->Cin, p->Cout, p->G, s->in[1], s->in[2], s->out[1], s->out[2],
                          s->k[1], s->k[2], s->s[1], s->s[2], s->pb[1], s->pb[2], (int64_t)dir * 2 + bias, nt,
                          s->d[1], s->d[2], (int64_t)t->x * 64 + t->w, (int64_t)t->y * 64 + t->bias};
    memcpy(k, v, sizeof v);
}

void ot_dnnl_state_free(void *state) {
    dnnl_conv_state *c = state;
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        dnnl_primitive_destroy(c->op[i].reorder);
        if (c->op[i].inner != c->op[i].user) dnnl_memory_destroy(c->op[i].inner);
        dnnl_memory_destroy(c->op[i].user);
    }
    dnnl_memory_destroy(c->scratch);
    dnnl_primitive_destroy(c->prim);
    dnnl_primitive_desc_destroy(c->pd);
    if (c->stream) dnnl_stream_destroy(c->stream);
    if (c->eng) dnnl_engine_destroy(c->eng);
    free(c);
}

static size_t align_up(size_t n) { return (n + DNNL_ALIGN - 1) / DNNL_ALIGN * DNNL_ALIGN; }

static dnnl_status_t scratch_attr(dnnl_primitive_attr_t *attr) {
    dnnl_status_t s = dnnl_primitive_attr_create(attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    return s;
}

static size_t scratch_size(const_dnnl_primitive_desc_t pd) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

/* Adds operand `arg` (our memory of descriptor `have`) in the layout pd wants for
 * query (q, idx). Its reorder gets no scratchpad of its own: one that wants one is
 * refused (dnnl_unimplemented), and our kernel runs. */
static dnnl_status_t add_operand(dnnl_conv_state *c, const_dnnl_primitive_desc_t pd, dnnl_query_t q, int idx, int arg,
                                 const dnnl_memory_desc_t *have, bool is_out, bool make) {
    dnnl_operand *o = &c->op[c->n++];
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, q, idx);
    o->arg = arg;
    o->is_out = is_out;
    dnnl_status_t s = dnnl_memory_create(&o->user, have, c->eng, DNNL_MEMORY_NONE);
    if (s != dnnl_success || !want) return s != dnnl_success ? s : dnnl_runtime_error;
    o->inner = o->user;
    if (dnnl_memory_desc_equal(want, have)) return dnnl_success;
    o->off = c->need;
    c->need += align_up(dnnl_memory_desc_get_size(want));
    dnnl_primitive_attr_t attr;
    if ((s = scratch_attr(&attr)) != dnnl_success) return s;
    dnnl_primitive_desc_t rpd;
    s = is_out ? dnnl_reorder_primitive_desc_create(&rpd, want, c->eng, have, c->eng, attr)
               : dnnl_reorder_primitive_desc_create(&rpd, have, c->eng, want, c->eng, attr);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return s;
    if (scratch_size(rpd) > 0) s = dnnl_unimplemented;
    if (make && s == dnnl_success) s = dnnl_primitive_create(&o->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (s != dnnl_success || !make) return s;
    s = dnnl_memory_create(&o->inner, want, c->eng, DNNL_MEMORY_NONE);
    if (s != dnnl_success) o->inner = o->user;
    return s;
}

/* The descriptors of the three directions over NCHW (`user`) or any layout. */
typedef struct conv_mds {
    dnnl_memory_desc_t x, w, y, bias, xa, wa, ya;
    dnnl_dims_t strides, dil, pl, pr;
} conv_mds;

static dnnl_status_t mds_init(conv_mds *m, const ot_conv3 *p, const conv_dts *t) {
    const ot_window3 *s = &p->sp;
    dnnl_dims_t xd = {p->N, p->Cin, s->in[1], s->in[2]}, yd = {p->N, p->Cout, s->out[1], s->out[2]};
    /* grouped weights as (G, Cout/G, Cin/G, KH, KW): ONNX's (Cout, Cin/G, KH, KW) bytes */
    dnnl_dims_t wd = {p->G, p->Cog, p->Cig, s->k[1], s->k[2]}, bd = {p->Cout};
    dnnl_dims_t wd4 = {p->Cout, p->Cin, s->k[1], s->k[2]};
    bool grouped = p->G > 1;
    dnnl_status_t st = dnnl_success;
    for (int j = 0; j < 2; j++) {
        m->strides[j] = s->s[j + 1];
        m->dil[j] = s->d[j + 1] - 1; /* oneDNN counts the gaps */
        m->pl[j] = s->pb[j + 1];
        m->pr[j] = (s->out[j + 1] - 1) * s->s[j + 1] + (s->k[j + 1] - 1) * s->d[j + 1] + 1 - s->in[j + 1] -
                   s->pb[j + 1];
    }
#define MD(md, nd, d, dt, tag) st = st != dnnl_success ? st : dnnl_memory_desc_init_by_tag(md, nd, d, dt, tag)
    MD(&m->x, 4, xd, t->x, dnnl_nchw);
    MD(&m->y, 4, yd, t->y, dnnl_nchw);
    if (grouped) MD(&m->w, 5, wd, t->w, dnnl_goihw);
    else MD(&m->w, 4, wd4, t->w, dnnl_oihw);
    MD(&m->bias, 1, bd, t->bias, dnnl_x);
    MD(&m->xa, 4, xd, t->x, dnnl_format_tag_any);
    MD(&m->ya, 4, yd, t->y, dnnl_format_tag_any);
    if (grouped) MD(&m->wa, 5, wd, t->w, dnnl_format_tag_any);
    else MD(&m->wa, 4, wd4, t->w, dnnl_format_tag_any);
#undef MD
    return st;
}

/* The direction's primitive descriptor (backward ones with the forward as hint). */
static dnnl_status_t make_pd(dnnl_conv_state *c, const conv_mds *m, ot_dnnl_dir dir, bool bias) {
    dnnl_convolution_desc_t fd, bd;
    /* the dilated forms only where there is a dilation (the float32 rule has none) */
    bool dil = m->dil[0] || m->dil[1];
    const dnnl_memory_desc_t *bmd = bias ? &m->bias : NULL;
    dnnl_status_t s =
        dil ? dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &m->xa,
                                                         &m->wa, bmd, &m->ya, m->strides, m->dil, m->pl, m->pr)
            : dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &m->xa, &m->wa,
                                                 bmd, &m->ya, m->strides, m->pl, m->pr);
    if (s != dnnl_success) return s;
    dnnl_primitive_attr_t attr;
    if ((s = scratch_attr(&attr)) != dnnl_success) return s;
    if (dir == OT_DNNL_FWD) {
        s = dnnl_primitive_desc_create(&c->pd, &fd, attr, c->eng, NULL);
    } else {
        dnnl_primitive_desc_t hint = NULL;
        s = dnnl_primitive_desc_create(&hint, &fd, NULL, c->eng, NULL);
        if (s == dnnl_success && dir == OT_DNNL_BWD_DATA)
            s = dil ? dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &m->xa, &m->wa,
                                                                       &m->ya, m->strides, m->dil, m->pl, m->pr)
                    : dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &m->xa, &m->wa, &m->ya,
                                                               m->strides, m->pl, m->pr);
        else if (s == dnnl_success)
            s = dil ? dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &m->xa,
                                                                          &m->wa, NULL, &m->ya, m->strides, m->dil,
                                                                          m->pl, m->pr)
                    : dnnl_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &m->xa, &m->wa, NULL,
                                                                  &m->ya, m->strides, m->pl, m->pr);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&c->pd, &bd, attr, c->eng, hint);
        if (hint) dnnl_primitive_desc_destroy(hint);
    }
    dnnl_primitive_attr_destroy(attr);
    return s;
}

/* Whether pd is oneDNN's reference implementation (plain loops: on a CPU without
 * AVX512-BF16 / AMX or AVX-512 for the low-precision convolutions). */
static bool is_reference(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return true;
    return !strncmp(impl, "ref", 3);
}

/* Builds the state for p at nt threads; make = false: descriptors and sizes only. A
 * low-precision one (t not all float32) refuses oneDNN's reference implementation:
 * the float32 path through converted copies is faster there. */
static dnnl_status_t build(dnnl_conv_state *c, const ot_conv3 *p, ot_dnnl_dir dir, bool bias, int nt, bool make,
                           const conv_dts *t) {
    conv_mds m;
    dnnl_status_t s = mds_init(&m, p, t);
    if (s == dnnl_success) s = dnnl_engine_create(&c->eng, dnnl_cpu, 0);
    if (s != dnnl_success) return s;
    int was = omp_get_max_threads();
    omp_set_num_threads(nt);
    s = make_pd(c, &m, dir, bias);
    bool lowp = t->x != dnnl_f32 || t->w != dnnl_f32 || t->y != dnnl_f32;
    if (s == dnnl_success && lowp && is_reference(c->pd)) s = dnnl_unimplemented;
    if (s == dnnl_success) {
        c->scratch_bytes = scratch_size(c->pd);
        if (dir == OT_DNNL_FWD) {
            s = add_operand(c, c->pd, dnnl_query_src_md, 0, DNNL_ARG_SRC, &m.x, false, make);
            if (!s) s = add_operand(c, c->pd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, &m.w, false, make);
            if (!s && bias) s = add_operand(c, c->pd, dnnl_query_weights_md, 1, DNNL_ARG_BIAS, &m.bias, false, make);
            if (!s) s = add_operand(c, c->pd, dnnl_query_dst_md, 0, DNNL_ARG_DST, &m.y, true, make);
        } else if (dir == OT_DNNL_BWD_DATA) {
            s = add_operand(c, c->pd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, &m.y, false, make);
            if (!s) s = add_operand(c, c->pd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, &m.w, false, make);
            if (!s) s = add_operand(c, c->pd, dnnl_query_diff_src_md, 0, DNNL_ARG_DIFF_SRC, &m.x, true, make);
        } else {
            s = add_operand(c, c->pd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, &m.y, false, make);
            if (!s) s = add_operand(c, c->pd, dnnl_query_src_md, 0, DNNL_ARG_SRC, &m.x, false, make);
            if (!s) s = add_operand(c, c->pd, dnnl_query_diff_weights_md, 0, DNNL_ARG_DIFF_WEIGHTS, &m.w, true, make);
        }
    }
    c->need += align_up(c->scratch_bytes);
    if (s == dnnl_success && make) s = dnnl_primitive_create(&c->prim, c->pd);
    if (s == dnnl_success && make) s = dnnl_stream_create(&c->stream, c->eng, dnnl_stream_default_flags);
    if (s == dnnl_success && make && c->scratch_bytes) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(c->pd, dnnl_query_scratchpad_md, 0);
        s = dnnl_memory_create(&c->scratch, md, c->eng, DNNL_MEMORY_NONE);
    }
    omp_set_num_threads(was);
    return s;
}

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

/* An upper bound of what build() finds, without creating anything (ot_cpu_run_node
 * asks for the workspace on every call; a descriptor costs 30-40 us): every operand
 * with its channels padded to 16 (oneDNN's widest f32 block: nChw16c, OIhw16i16o,
 * Goihw16g), plus a scratchpad of one padded copy of the weights and bias per core
 * (what dW's per-thread partial sums take; 0.7 KiB measured at 2 threads for 16
 * depthwise channels, none for dense ResNet shapes). A build that needs more runs our
 * kernel instead (ot_dnnl_conv_run checks). */
size_t ot_dnnl_conv_workspace(const ot_conv3 *p, ot_dnnl_dir dir) {
    if (!rule(p, dir)) return 0;
    int64_t cin = round16(p->Cin), cout = round16(p->Cout);
    int64_t w = p->G > 1 ? round16(p->G) * p->Cog * p->Cig * p->K : cout * round16(p->Cig) * p->K;
    int nt = omp_get_num_procs();
    size_t f = sizeof(float);
    size_t bytes = align_up((size_t)(p->N * cin * p->S) * f) + align_up((size_t)(p->N * cout * p->L) * f) +
                   align_up((size_t)w * f) + align_up((size_t)cout * f);
    return bytes + align_up((size_t)(nt > 1 ? nt : 1) * (size_t)(w + cout) * f);
}

/* Reorders in, the primitive, reorders out, on the workspace. */
static dnnl_status_t execute(dnnl_conv_state *c, void *ws, void *const *user) {
    dnnl_status_t s = dnnl_success;
    char *base = ws;
    if (c->scratch) s = dnnl_memory_set_data_handle(c->scratch, base + c->need - align_up(c->scratch_bytes));
    for (int i = 0; i < c->n && s == dnnl_success; i++) {
        s = dnnl_memory_set_data_handle(c->op[i].user, user[i]);
        if (s == dnnl_success && c->op[i].reorder) s = dnnl_memory_set_data_handle(c->op[i].inner, base + c->op[i].off);
    }
    for (int i = 0; i < c->n && s == dnnl_success; i++)
        if (c->op[i].reorder && !c->op[i].is_out) {
            dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, c->op[i].user}, {DNNL_ARG_TO, c->op[i].inner}};
            s = dnnl_primitive_execute(c->op[i].reorder, c->stream, 2, a);
        }
    dnnl_exec_arg_t args[5];
    int na = 0;
    for (int i = 0; i < c->n; i++) args[na++] = (dnnl_exec_arg_t){c->op[i].arg, c->op[i].inner};
    if (c->scratch) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->scratch};
    if (s == dnnl_success) s = dnnl_primitive_execute(c->prim, c->stream, na, args);
    for (int i = 0; i < c->n && s == dnnl_success; i++)
        if (c->op[i].reorder && c->op[i].is_out) {
            dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, c->op[i].inner}, {DNNL_ARG_TO, c->op[i].user}};
            s = dnnl_primitive_execute(c->op[i].reorder, c->stream, 2, a);
        }
    if (s == dnnl_success) s = dnnl_stream_wait(c->stream);
    return s;
}

static const conv_dts f32_dts = {dnnl_f32, dnnl_f32, dnnl_f32, dnnl_f32};

/* Runs p on oneDNN at nt threads with the state kept in ctx->node_state (built on
 * first use, rebuilt when the key changes), when it builds and its need fits the
 * workspace (*ran = true). */
static ot_status conv_run(const ot_node *node, const ot_conv3 *p, ot_dnnl_dir dir, const ot_kernel_ctx *ctx,
                          const conv_dts *t, int nt, const void *a, const void *b, const void *bias, void *out,
                          bool *ran, ot_error *err) {
    int64_t key[KEY_LEN];
    key_of(p, dir, bias != NULL, nt, t, key);
    dnnl_conv_state *c = ctx->node_state ? *ctx->node_state : NULL;
    if (c && (c->base.free != ot_dnnl_state_free || memcmp(c->key, key, sizeof key))) {
        /* shapes or threads changed (or another kernel's state): rebuild */
        c->base.free(c);
        c = *ctx->node_state = NULL;
    }
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return ot_fail(err, OT_E_MEMORY, "node '%s' (%s): out of memory for oneDNN's state", node->name,
                           node->op_type);
        c->base.free = ot_dnnl_state_free;
        memcpy(c->key, key, sizeof key);
        dnnl_status_t s = build(c, p, dir, bias != NULL, nt, true, t);
        if (s != dnnl_success) { /* kept as such, so a step does not build it again */
            ot_dnnl_state_free(c);
            if (!ctx->node_state || !(c = calloc(1, sizeof *c))) return OT_OK;
            c->base.free = ot_dnnl_state_free;
            memcpy(c->key, key, sizeof key);
            c->unavailable = true;
        }
        if (ctx->node_state) *ctx->node_state = c;
    }
    if (c->unavailable) return OT_OK;
    /* A thread count above the core count may want more scratchpad than was planned. */
    if (c->need > ctx->workspace_bytes || (c->need && !ctx->workspace)) {
        if (!ctx->node_state) ot_dnnl_state_free(c);
        return OT_OK;
    }
    void *user[4];
    int k = 0;
    user[k++] = (void *)a;
    user[k++] = (void *)b;
    if (bias) user[k++] = (void *)bias;
    user[k++] = out;
    int was = omp_get_max_threads();
    omp_set_num_threads(nt);
    dnnl_status_t s = execute(c, ctx->workspace, user);
    omp_set_num_threads(was);
    if (!ctx->node_state) ot_dnnl_state_free(c);
    if (s != dnnl_success)
        return ot_fail(err, OT_E_INTERNAL, "node '%s' (%s): oneDNN failed (status %d)", node->name, node->op_type,
                       (int)s);
    *ran = true;
    return OT_OK;
}

ot_status ot_dnnl_conv_run(const ot_node *node, const ot_conv3 *p, ot_dnnl_dir dir, const ot_kernel_ctx *ctx,
                           const float *a, const float *b, const float *bias, float *out, bool *ran, ot_error *err) {
    *ran = false;
    if (ctx->no_dnnl || !rule(p, dir)) return OT_OK;
    /* Depthwise convs take 10-200 us: one thread (file header). */
    int nt = p->Cig == 1 && p->Cog == 1 && p->G > 1 ? 1 : ot_cpu_threads(ctx);
    return conv_run(node, p, dir, ctx, &f32_dts, nt, a, b, bias, out, ran, err);
}

/* ---- bfloat16 ---------------------------------------------------------------------------
 * Every 2-D convolution (1-D ones as 2-D of height 1), any stride, dilation, group and
 * pads of 0 or more: oneDNN's bfloat16 kernels sum in float32 and are the only path
 * that does not convert (cpu_lowp.c's converts to float32 and back). The thread count
 * is capped at the core count, for which the workspace is planned. */

/* Where oneDNN's bfloat16 kernels lost to the float32 path through converted copies
 * (bench/conv_bf16.sh, ResNet-18's shapes at batch 8, 2 threads, CPU ms per call on
 * this AMX machine; bench/results_precision.md): the weight gradient at an output
 * plane under 28x28 (14x14: 29-49 against 11-16; 7x7: 49 against 31) or from fewer
 * than 16 input channels (the stem: 40 against 32), and 1x1 convolutions of stride 2
 * (the downsamples: 3-7 against 1.5-3.6 in every direction). Those run as float16 ones
 * do (conv_lowp.c); by shape only, so a node takes the same path on every step. */
#define LOWP_DW_MIN_PLANE (28 * 28)
#define LOWP_DW_MIN_CIN 16

static bool rule_lowp(const ot_conv3 *p, ot_dnnl_dir dir) {
    const ot_window3 *s = &p->sp;
    if (s->in[0] != 1 || s->k[0] != 1 || p->N < 1 || p->G < 1) return false;
    if (s->k[1] == 1 && s->k[2] == 1 && (s->s[1] > 1 || s->s[2] > 1)) return false;
    if (dir == OT_DNNL_BWD_WEIGHTS && (s->out[1] * s->out[2] < LOWP_DW_MIN_PLANE || p->Cin < LOWP_DW_MIN_CIN))
        return false;
    for (int j = 1; j < 3; j++) {
        int64_t pe = (s->out[j] - 1) * s->s[j] + (s->k[j] - 1) * s->d[j] + 1 - s->in[j] - s->pb[j];
        if (s->d[j] < 1 || s->s[j] < 1 || s->pb[j] < 0 || pe < 0) return false;
    }
    return true;
}

/* The direction's two inputs bfloat16, its output and the bias bfloat16 or float32. */
static bool lowp_dts(const ot_dnnl_lowp_dtypes *d, ot_dnnl_dir dir, conv_dts *t) {
    dnnl_data_type_t v[4];
    const ot_dtype in[4] = {d->x, d->w, d->y, d->bias};
    for (int i = 0; i < 4; i++) {
        if (in[i] == OT_BF16) v[i] = dnnl_bf16;
        else if (in[i] == OT_F32 || (i == 3 && in[i] == OT_UNDEFINED)) v[i] = dnnl_f32;
        else return false;
    }
    *t = (conv_dts){v[0], v[1], v[2], v[3]};
    if (dir == OT_DNNL_FWD) return t->x == dnnl_bf16 && t->w == dnnl_bf16;
    if (dir == OT_DNNL_BWD_DATA) return t->y == dnnl_bf16 && t->w == dnnl_bf16;
    return t->y == dnnl_bf16 && t->x == dnnl_bf16;
}

static int lowp_threads(const ot_conv3 *p, int want) {
    int cores = omp_get_num_procs();
    if (p->Cig == 1 && p->Cog == 1 && p->G > 1) return 1; /* depthwise: as the float32 rule */
    return want < 1 ? 1 : want > cores ? cores : want;
}

/* The answers of ot_dnnl_conv_lowp_workspace by key (thread count 0): the executor asks
 * on every run of a node, and two descriptors cost more than a small layer's run. A
 * pure function of the key on this machine, so a full table only costs time. */
#define WS_CACHE 256
static struct {
    int64_t key[KEY_LEN];
    size_t bytes;
    bool ok;
} ws_cache[WS_CACHE];
static int ws_cached;
static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;

static bool ws_lookup(const int64_t *key, bool *ok, size_t *bytes) {
    bool hit = false;
    pthread_mutex_lock(&ws_lock);
    for (int i = 0; i < ws_cached && !hit; i++)
        if (!memcmp(ws_cache[i].key, key, sizeof ws_cache[i].key)) {
            *ok = ws_cache[i].ok;
            *bytes = ws_cache[i].bytes;
            hit = true;
        }
    pthread_mutex_unlock(&ws_lock);
    return hit;
}

static void ws_store(const int64_t *key, bool ok, size_t bytes) {
    pthread_mutex_lock(&ws_lock);
    if (ws_cached < WS_CACHE) {
        memcpy(ws_cache[ws_cached].key, key, sizeof ws_cache[ws_cached].key);
        ws_cache[ws_cached].ok = ok;
        ws_cache[ws_cached].bytes = bytes;
        ws_cached++;
    }
    pthread_mutex_unlock(&ws_lock);
}

static bool lowp_workspace(const ot_conv3 *p, ot_dnnl_dir dir, const ot_dnnl_lowp_dtypes *d, const conv_dts *tp,
                           size_t *bytes) {
    conv_dts t = *tp;
    /* exact, at one thread and at the core count (scratchpads grow with threads) */
    int nts[2] = {1, lowp_threads(p, omp_get_num_procs())};
    for (int i = 0; i < 2; i++) {
        dnnl_conv_state c = {0};
        dnnl_status_t s = build(&c, p, dir, d->bias != OT_UNDEFINED, nts[i], false, &t);
        size_t need = c.need;
        for (int k = 0; k < c.n; k++) dnnl_memory_destroy(c.op[k].user);
        if (c.pd) dnnl_primitive_desc_destroy(c.pd);
        if (c.eng) dnnl_engine_destroy(c.eng);
        if (s != dnnl_success) return false;
        if (need > *bytes) *bytes = need;
    }
    return true;
}

bool ot_dnnl_conv_lowp_workspace(const ot_conv3 *p, ot_dnnl_dir dir, const ot_dnnl_lowp_dtypes *d, size_t *bytes) {
    conv_dts t;
    *bytes = 0;
    if (!rule_lowp(p, dir) || !lowp_dts(d, dir, &t)) return false;
    int64_t key[KEY_LEN];
    key_of(p, dir, d->bias != OT_UNDEFINED, 0, &t, key);
    bool ok;
    if (ws_lookup(key, &ok, bytes)) return ok;
    ok = lowp_workspace(p, dir, d, &t, bytes);
    if (!ok) *bytes = 0;
    ws_store(key, ok, *bytes);
    return ok;
}

ot_status ot_dnnl_conv_lowp_run(const ot_node *node, const ot_conv3 *p, ot_dnnl_dir dir, const ot_kernel_ctx *ctx,
                                const ot_dnnl_lowp_dtypes *d, const void *a, const void *b, const void *bias,
                                void *out, bool *ran, ot_error *err) {
    conv_dts t;
    *ran = false;
    /* not ctx->no_dnnl: it pits our float32 kernels against oneDNN's; this is the
     * bfloat16 kernel (as gemm_lowp.c's), and the workspace is planned for it */
    if (!rule_lowp(p, dir) || !lowp_dts(d, dir, &t)) return OT_OK;
    return conv_run(node, p, dir, ctx, &t, lowp_threads(p, ot_cpu_threads(ctx)), a, b, bias, out, ran, err);
}
#endif /* OT_HAVE_DNNL */
