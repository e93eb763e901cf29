/* test_optim.c — optimizer kernels and schedules against torch.optim (PyTorch 1.13).
 * The reference numbers below were produced by /usr/bin/python3 with torch.optim on a
 * 5-element float32 param and three fixed gradients (script: the comment at the end
 * of this file); the C side runs the SgdStep / AdamStep nodes built by
 * ot_optim_build through their CPU kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "kernels/cpu/optim_cpu.h"
#include "train/optim.h"

static const float sgd_nesterov_ref[3][5] = {
    {0.480049998f, -1.20962501f, 1.93920004f, 0.0759999976f, -0.394430012f},
    {0.280632883f, -1.28511417f, 1.9570955f, 0.0845055953f, -0.0539375655f},
    {0.248056352f, -1.43970144f, 1.94682825f, 0.388318479f, 0.0342531167f},
};
static const float sgd_momentum_clip_ref[3][5] = {
    {0.496629f, -1.243258f, 1.989887f, 0.0134839788f, -0.316854984f},
    {0.483101606f, -1.2432797f, 1.98450422f, 0.0229173359f, -0.308677763f},
    {0.476706713f, -1.25362682f, 1.98005044f, 0.052599173f, -0.305087328f},
};
static const float adam_ref[3][5] = {
    {0.49000001f, -1.24000001f, 1.99000001f, 0.00999999978f, -0.310000002f},
    {0.48168546f, -1.24125051f, 1.98408949f, 0.0141539667f, -0.304260015f},
    {0.476910353f, -1.24671948f, 1.97742081f, 0.021170767f, -0.300355792f},
};
static const float adamw_ref[3][5] = {
    {0.479500204f, -1.22875011f, 1.97800004f, 0.0199999511f, -0.319699973f},
    {0.462175846f, -1.23742437f, 1.97642469f, 0.027306702f, -0.307211787f},
    {0.454081804f, -1.2517668f, 1.97437537f, 0.0423098803f, -0.299499869f},
};
static const double warmup_ref[12] = {0.025000000000000001, 0.050000000000000003, 0.075000000000000011, 0.10000000000000001, 0.10000000000000001, 0.10000000000000001, 0.10000000000000001, 0.10000000000000001, 0.10000000000000001, 0.10000000000000001, 0.10000000000000001, 0.10000000000000001};
static const double cosine_ref[12] = {0.025000000000000001, 0.050000000000000003, 0.075000000000000011, 0.10000000000000001, 0.10000000000000001, 0.096193976625564337, 0.085355339059327379, 0.069134171618254497, 0.050000000000000003, 0.030865828381745515, 0.014644660940672627, 0.0038060233744356634};
static const double cosine_nowarm_ref[12] = {0.10000000000000001, 0.098296291314453416, 0.093301270189221949, 0.085355339059327379, 0.075000000000000011, 0.062940952255126054, 0.05000000000000001, 0.037059047744873973, 0.025000000000000015, 0.01464466094067263, 0.0066987298107780658, 0.0017037086855465904};

static const float p0[5] = {0.5f, -1.25f, 2.0f, 0.0f, -0.3f};
static const float grads[3][5] = {
    {0.1f, -0.2f, 0.3f, -0.4f, 0.5f}, {1.0f, 0.5f, -0.25f, 0.125f, -2.0f}, {-0.3f, 0.7f, 0.01f, -1.5f, 0.2f}};

/* torch and we round the same operations; allow a couple of ulps for libm/pow. */
static void assert_close_f(const float *got, const float *want, int n, const char *what, int step) {
    for (int i = 0; i < n; i++) {
        double tol = 4e-7 * fmax(1.0, fabs((double)want[i]));
        if (fabs((double)got[i] - (double)want[i]) > tol) {
            fail_msg("%s step %d element %d: got %.9g, torch %.9g", what, step, i, (double)got[i], (double)want[i]);
        }
    }
}

/* Builds a one-param graph, appends the optimizer and runs its node for 3 steps
 * through the CPU kernel, clipping like clip_grad_norm_ when clip > 0. The per-step
 * scalars go through the float64[4] input (via_ctx false) or through ot_kernel_ctx. */
static void run_case(const ot_optim_config *c, double clip, const float (*want)[5], const char *what, bool via_ctx) {
    ot_graph *g = ot_graph_new("opt");
    int64_t d = 5;
    ot_shape s = ot_shape_make(1, &d);
    int p = ot_graph_add_value(g, "w", OT_F32, &s, OT_VK_PARAM);
    /* the gradient comes from a node, as from the backward pass */
    int x = ot_graph_add_value(g, "x", OT_F32, &s, OT_VK_INPUT);
    int gr = ot_graph_add_value(g, "w_grad", OT_F32, &s, OT_VK_GRADIENT);
    ot_graph_add_node(g, OT_OP_NEG, "neg", &x, 1, &gr, 1, OT_PHASE_BACKWARD);
    ot_optim_graph og = {0};
    ot_error err = {0};
    assert_int_equal(ot_optim_build(g, c, &p, &gr, 1, &og, &err), OT_OK);
    assert_int_equal(og.n_params, 1);
    const ot_node *n = &g->nodes[og.step_nodes[0]];
    assert_int_equal(n->phase, OT_PHASE_OPTIMIZER);
    assert_int_equal(n->n_outputs, 0);
    assert_int_equal(n->inputs[n->n_inputs - 1], og.scalars);
    if (ot_graph_verify(g, &err) != OT_OK) fail_msg("%s", err.msg);
    float param[5], grad[5], st[2][5] = {{0}};
    double scalars[OT_OPT_N_SCALARS];
    memcpy(param, p0, sizeof param);
    ot_tensor in[5];
    memset(in, 0, sizeof in);
    int n_state = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v < 0) continue;
        in[k].dtype = g->values[v].dtype;
        in[k].shape = g->values[v].shape;
        if (v == og.scalars) {
            in[k].data = via_ctx ? NULL : scalars;
            in[k].nbytes = sizeof scalars;
            continue;
        }
        in[k].data = k == 0 ? (void *)param : k == 1 ? (void *)grad : (void *)st[n_state++];
        in[k].nbytes = sizeof param;
        if (k >= 2) assert_int_equal(g->values[v].kind, OT_VK_OPT_STATE);
    }
    assert_int_equal(n_state, og.n_state);
    for (int step = 0; step < 3; step++) {
        memcpy(grad, grads[step], sizeof grad);
        const float *gp = grad;
        size_t cnt = 5;
        float scale = ot_clip_scale(ot_grad_global_norm(&gp, &cnt, 1), clip);
        ot_kernel_ctx ctx = {0};
        ctx.n_threads = 1;
        if (via_ctx) {
            ctx.opt_lr = ot_optim_lr_at(c, step);
            ctx.opt_grad_scale = scale;
            ctx.opt_step = step + 1;
        } else {
            scalars[OT_OPT_LR] = ot_optim_lr_at(c, step);
            scalars[OT_OPT_GRAD_SCALE] = scale;
            scalars[OT_OPT_STEP] = step + 1;
            scalars[OT_OPT_APPLY] = 0; /* an accumulation micro-batch: nothing changes */
            float before[5];
            memcpy(before, param, sizeof before);
            ot_status st0 = n->op == OT_OP_SGD_STEP ? ot_cpu_sgd_step(n, in, NULL, &ctx, &err)
                                                    : ot_cpu_adam_step(n, in, NULL, &ctx, &err);
            assert_int_equal(st0, OT_OK);
            assert_memory_equal(before, param, sizeof before);
            scalars[OT_OPT_APPLY] = 1;
        }
        ot_status st_run = n->op == OT_OP_SGD_STEP ? ot_cpu_sgd_step(n, in, NULL, &ctx, &err)
                                                   : ot_cpu_adam_step(n, in, NULL, &ctx, &err);
        assert_int_equal(st_run, OT_OK);
        assert_close_f(param, want[step], 5, what, step);
    }
    ot_optim_graph_free(&og);
    ot_graph_free(g);
}

static void test_sgd_nesterov(void **state) {
    (void)state;
    ot_optim_config c;
    ot_optim_config_default(&c, OT_OPTIM_SGD);
    c.lr = 0.1;
    c.momentum = 0.9;
    c.nesterov = true;
    c.weight_decay = 0.01;
    run_case(&c, 0.0, sgd_nesterov_ref, "sgd nesterov", false);
    run_case(&c, 0.0, sgd_nesterov_ref, "sgd nesterov (ctx)", true);
}

static void test_sgd_momentum_clip(void **state) {
    (void)state;
    ot_optim_config c;
    ot_optim_config_default(&c, OT_OPTIM_SGD);
    c.lr = 0.05;
    c.momentum = 0.8;
    run_case(&c, 0.5, sgd_momentum_clip_ref, "sgd momentum clip 0.5", false);
}

static void test_adam(void **state) {
    (void)state;
    ot_optim_config c;
    ot_optim_config_default(&c, OT_OPTIM_ADAM);
    c.lr = 0.01;
    c.weight_decay = 0.1;
    run_case(&c, 0.0, adam_ref, "adam", false);
    run_case(&c, 0.0, adam_ref, "adam (ctx)", true);
}

static void test_adamw(void **state) {
    (void)state;
    ot_optim_config c;
    ot_optim_config_default(&c, OT_OPTIM_ADAMW);
    c.lr = 0.02;
    c.beta1 = 0.8;
    c.beta2 = 0.99;
    c.eps = 1e-6;
    c.weight_decay = 0.05;
    run_case(&c, 0.0, adamw_ref, "adamw", false);
}

/* Element-wise updates must not depend on the thread count (bitwise). */
static void test_threads_bitwise(void **state) {
    (void)state;
    enum { N = 200003 };
    float *p1 = malloc(N * sizeof(float)), *p2 = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    float *m1 = calloc(N, sizeof(float)), *m2 = calloc(N, sizeof(float));
    float *v1 = calloc(N, sizeof(float)), *v2 = calloc(N, sizeof(float));
    for (int i = 0; i < N; i++) {
        p1[i] = p2[i] = sinf((float)i);
        g[i] = cosf((float)i * 0.5f);
    }
    for (int s = 1; s <= 3; s++) {
        ot_adam_update(p1, g, m1, v1, N, 1e-3, 0.5f, 0.9f, 0.999f, 1e-8f, 0.01f, true, s, 1);
        ot_adam_update(p2, g, m2, v2, N, 1e-3, 0.5f, 0.9f, 0.999f, 1e-8f, 0.01f, true, s, 2);
    }
    assert_memory_equal(p1, p2, N * sizeof(float));
    free(p1), free(p2), free(g), free(m1), free(m2), free(v1), free(v2);
}

static void check_schedule(const ot_optim_config *c, const double *want, const char *what) {
    for (int s = 0; s < 12; s++) {
        double got = ot_optim_lr_at(c, s);
        if (fabs(got - want[s]) > 1e-12 * fabs(want[s]) + 1e-15)
            fail_msg("%s step %d: lr %.17g, torch %.17g", what, s, got, want[s]);
    }
}

static void test_schedules(void **state) {
    (void)state;
    ot_optim_config c;
    ot_optim_config_default(&c, OT_OPTIM_SGD);
    c.lr = 0.1;
    for (int s = 0; s < 12; s++) assert_true(ot_optim_lr_at(&c, s) == 0.1);
    c.schedule = OT_SCHED_WARMUP;
    c.warmup_steps = 4;
    check_schedule(&c, warmup_ref, "warmup");
    c.schedule = OT_SCHED_COSINE;
    c.total_steps = 12;
    check_schedule(&c, cosine_ref, "cosine+warmup");
    c.warmup_steps = 0;
    check_schedule(&c, cosine_nowarm_ref, "cosine (CosineAnnealingLR)");
}

static void test_config_errors(void **state) {
    (void)state;
    ot_optim_config c;
    ot_error err = {0};
    ot_optim_kind k;
    ot_schedule_kind sk;
    assert_int_equal(ot_optim_kind_parse("adamw", &k, &err), OT_OK);
    assert_int_equal(k, OT_OPTIM_ADAMW);
    assert_int_equal(ot_optim_kind_parse("lbfgs", &k, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "lbfgs"));
    assert_int_equal(ot_schedule_kind_parse("cosine", &sk, &err), OT_OK);
    assert_int_equal(ot_schedule_kind_parse("step", &sk, &err), OT_E_USAGE);
    ot_optim_config_default(&c, OT_OPTIM_SGD);
    assert_int_equal(ot_optim_config_check(&c, &err), OT_OK);
    c.nesterov = true;
    assert_int_equal(ot_optim_config_check(&c, &err), OT_E_USAGE);
    assert_non_null(strstr(err.msg, "nesterov"));
    ot_optim_config_default(&c, OT_OPTIM_ADAM);
    c.lr = -1;
    assert_int_equal(ot_optim_config_check(&c, &err), OT_E_USAGE);
    ot_optim_config_default(&c, OT_OPTIM_ADAM);
    c.schedule = OT_SCHED_COSINE;
    c.warmup_steps = 10;
    c.total_steps = 5;
    assert_int_equal(ot_optim_config_check(&c, &err), OT_E_USAGE);
}

static void test_global_norm(void **state) {
    (void)state;
    const float a[2] = {3.0f, 0.0f}, b[1] = {4.0f};
    const float *gs[2] = {a, b};
    size_t cnt[2] = {2, 1};
    assert_true(ot_grad_global_norm(gs, cnt, 2) == 5.0);
    assert_true(ot_clip_scale(5.0, 0.0) == 1.0f);
    assert_true(ot_clip_scale(5.0, 10.0) == 1.0f);
    assert_true(fabsf(ot_clip_scale(5.0, 1.0) - 0.2f) < 1e-7f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_nesterov),    cmocka_unit_test(test_sgd_momentum_clip),
        cmocka_unit_test(test_adam),            cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_threads_bitwise), cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_config_errors),   cmocka_unit_test(test_global_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Reference generator (run with /usr/bin/python3, PyTorch 1.13):
 *   p0 and grads as above; for each case:
 *     p = torch.nn.Parameter(torch.tensor(p0)); opt = <optimizer>([p])
 *     for g in grads: p.grad = torch.tensor(g); [clip_grad_norm_([p], 0.5)]; opt.step(); record p
 *   SGD(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
 *   SGD(lr=0.05, momentum=0.8) with clip_grad_norm_(max_norm=0.5)
 *   Adam(lr=0.01, weight_decay=0.1, foreach=False)
 *   AdamW(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05, foreach=False)
 *   schedules on SGD(lr=0.1), W=4, T=12, recording param_groups[0]['lr'] before each step:
 *     LambdaLR(lambda s: min(1.0, (s+1)/W));
 *     LambdaLR(lambda s: (s+1)/W if s < W else 0.5*(1+cos(pi*(s-W)/(T-W))));
 *     CosineAnnealingLR(T_max=T). */
