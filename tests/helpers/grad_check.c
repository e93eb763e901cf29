/* grad_check.c — finite-difference gradient checks (see grad_check.h). */
#include "grad_check.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ref_eval.h"

ot_graph *gc_graph(void) {
    ot_graph *g = ot_graph_new("gradcheck");
    assert_non_null(g);
    g->opset = 17;
    return g;
}

float gc_rand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) * (1.0f / 16777216.0f);
}

int gc_param(ot_graph *g, const char *name, int rank, const int64_t *dims, uint32_t *rng, float lo, float hi,
             bool away_from_zero) {
    ot_shape s = ot_shape_make(rank, dims);
    int v = ot_graph_add_value(g, name, OT_F32, &s, OT_VK_PARAM);
    assert_true(v >= 0);
    int64_t n = ot_shape_numel(&s);
    float *d = malloc((size_t)(n ? n : 1) * sizeof(float));
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++) {
        float u = gc_rand(rng);
        if (away_from_zero) {
            float half = (hi - lo) / 2, mag = half * (0.2f + 0.8f * gc_rand(rng));
            d[i] = (lo + hi) / 2 + (u < 0.5f ? -mag : mag);
        } else {
            d[i] = lo + (hi - lo) * u;
        }
    }
    assert_int_equal(ot_value_set_data(&g->values[v], d, (size_t)n * sizeof(float)), 0);
    free(d);
    return v;
}

int gc_const(ot_graph *g, const char *name, ot_dtype dt, int rank, const int64_t *dims, const void *data) {
    ot_shape s = ot_shape_make(rank, dims);
    int v = ot_graph_add_value(g, name, dt, &s, OT_VK_CONSTANT);
    assert_true(v >= 0);
    assert_int_equal(ot_value_set_data(&g->values[v], data, (size_t)ot_shape_numel(&s) * ot_dtype_size(dt)), 0);
    return v;
}

int gc_val(ot_graph *g, const char *name, ot_dtype dt, int rank, const int64_t *dims) {
    ot_shape s = ot_shape_make(rank, dims);
    int v = ot_graph_add_value(g, name, dt, &s, OT_VK_ACTIVATION);
    assert_true(v >= 0);
    return v;
}

int gc_op(ot_graph *g, ot_op op, const int *in, int n_in, const int *out, int n_out) {
    char name[64];
    snprintf(name, sizeof name, "%s_%d", ot_op_name(op), g->n_nodes);
    int id = ot_graph_add_node(g, op, name, in, n_in, out, n_out, OT_PHASE_FORWARD);
    assert_true(id >= 0);
    return id;
}

/* Loss terms R_k are the constants right after each Mul; found again by gc_check. */
int gc_loss(ot_graph *g, const int *ys, int n_ys, uint32_t *rng) {
    int terms[16];
    assert_true(n_ys >= 1 && n_ys <= 16);
    ot_shape scalar = ot_shape_make(0, NULL);
    for (int k = 0; k < n_ys; k++) {
        ot_shape s = g->values[ys[k]].shape;
        int64_t n = ot_shape_numel(&s);
        float *r = malloc((size_t)(n ? n : 1) * sizeof(float));
        for (int64_t i = 0; i < n; i++) r[i] = 2.0f * gc_rand(rng) - 1.0f;
        int rv = gc_const(g, "loss_weight", OT_F32, s.rank, s.dim, r);
        free(r);
        int p = ot_graph_add_value(g, "loss_prod", OT_F32, &s, OT_VK_ACTIVATION);
        int in[2] = {ys[k], rv};
        gc_op(g, OT_OP_MUL, in, 2, &p, 1);
        terms[k] = ot_graph_add_value(g, "loss_term", OT_F32, &scalar, OT_VK_ACTIVATION);
        int rs = gc_op(g, OT_OP_REDUCE_SUM, &p, 1, &terms[k], 1);
        assert_int_equal(ot_node_set_attr_int(&g->nodes[rs], "keepdims", 0), 0);
    }
    if (n_ys == 1) return terms[0];
    int l = ot_graph_add_value(g, "loss", OT_F32, &scalar, OT_VK_ACTIVATION);
    gc_op(g, OT_OP_SUM, terms, n_ys, &l, 1);
    return l;
}

/* The loss in double from the float outputs: sum_k <Y_k, R_k>. */
static double loss_double(const ot_graph *g, ot_ref_env *e, const int *ys, const int *rs, int n_ys) {
    double s = 0.0;
    for (int k = 0; k < n_ys; k++) {
        const float *y = ot_ref_f32(e, ys[k]);
        const float *r = g->values[rs[k]].data;
        int64_t n = ot_shape_numel(&g->values[ys[k]].shape);
        for (int64_t i = 0; i < n; i++) s += (double)y[i] * r[i];
    }
    return s;
}

int gc_check(ot_graph *g, const int *ys, int n_ys, const gc_opts *opt) {
    gc_opts o = {.step = 1e-2, .rtol = 1e-2, .atol = 2e-3};
    if (opt) {
        if (opt->step > 0) o.step = opt->step;
        if (opt->rtol > 0) o.rtol = opt->rtol;
        if (opt->atol > 0) o.atol = opt->atol;
        o.seed = opt->seed;
        o.verbose = opt->verbose;
    }
    uint32_t rng = 12345;
    int loss = gc_loss(g, ys, n_ys, &rng);
    int rs[16];
    for (int k = 0; k < n_ys; k++) { /* the R_k constant read by the Mul consuming Y_k */
        const ot_value *y = &g->values[ys[k]];
        rs[k] = -1;
        for (int c = 0; c < y->n_consumers; c++) {
            const ot_node *n = &g->nodes[y->consumers[c]];
            if (n->op == OT_OP_MUL && n->inputs[0] == ys[k] && strcmp(g->values[n->inputs[1]].name, "loss_weight") == 0)
                rs[k] = n->inputs[1];
        }
        assert_true(rs[k] >= 0);
    }
    ot_error err = {0};
    ot_autodiff_options ao = {.loss_value = loss};
    ot_autodiff_result res;
    ot_status st = ot_autodiff_build(g, &ao, &res, &err);
    if (st) fprintf(stderr, "autodiff: %s\n", err.msg);
    assert_int_equal(st, OT_OK);
    st = ot_graph_verify(g, &err);
    if (st) fprintf(stderr, "verify: %s\n", err.msg);
    assert_int_equal(st, OT_OK);
    if (o.verbose) ot_graph_dump_text(g, stderr);
    ot_ref_env *e = ot_ref_new(g);
    assert_non_null(e);
    e->seed = o.seed;
    st = ot_ref_run(e, false, &err);
    if (st) fprintf(stderr, "ref_eval: %s\n", err.msg);
    assert_int_equal(st, OT_OK);
    int bad = 0;
    /* keep the analytic gradients: forward-only runs below drop computed values */
    float **ans = calloc((size_t)res.n_params + 1, sizeof(float *));
    for (int i = 0; i < res.n_params; i++) {
        int p = res.params[i], gv = res.grads[i];
        assert_true(ot_shape_equal(&g->values[p].shape, &g->values[gv].shape));
        assert_true(g->values[gv].is_graph_output);
        int64_t n = ot_shape_numel(&g->values[p].shape);
        ans[i] = malloc((size_t)(n ? n : 1) * sizeof(float));
        assert_non_null(ot_ref_f32(e, gv));
        memcpy(ans[i], ot_ref_f32(e, gv), (size_t)n * sizeof(float));
    }
    for (int i = 0; i < res.n_params; i++) {
        int p = res.params[i];
        int64_t n = ot_shape_numel(&g->values[p].shape);
        float *an = ans[i];
        float *data = g->values[p].data;
        for (int64_t j = 0; j < n; j++) {
            float keep = data[j];
            data[j] = keep + (float)o.step;
            double hp = (double)data[j] - keep;
            assert_int_equal(ot_ref_run(e, true, &err), OT_OK);
            double lp = loss_double(g, e, ys, rs, n_ys);
            data[j] = keep - (float)o.step;
            double hm = (double)keep - data[j];
            assert_int_equal(ot_ref_run(e, true, &err), OT_OK);
            double lm = loss_double(g, e, ys, rs, n_ys);
            data[j] = keep;
            double num = (lp - lm) / (hp + hm), a = an[j];
            double tol = o.atol + o.rtol * fmax(fabs(a), fabs(num));
            if (!(fabs(a - num) <= tol)) {
                if (bad < 10)
                    fprintf(stderr, "gradcheck: d loss / d %s[%lld]: analytic %.6g, numeric %.6g\n",
                            g->values[p].name, (long long)j, a, num);
                bad++;
            }
        }
        free(an);
    }
    free(ans);
    ot_ref_free(e);
    ot_autodiff_result_free(&res);
    return bad;
}

int gc_check1(ot_graph *g, int y) { return gc_check(g, &y, 1, NULL); }

void gc_check_unary(ot_op op, uint32_t seed, float lo, float hi, bool away, void (*attrs)(ot_node *)) {
    ot_graph *g = gc_graph();
    uint32_t rng = seed + (uint32_t)op;
    int64_t d[2] = {3, 4};
    int x = gc_param(g, "x", 2, d, &rng, lo, hi, away);
    int y = gc_val(g, "y", OT_F32, 2, d);
    int n = gc_op(g, op, &x, 1, &y, 1);
    if (attrs) attrs(&g->nodes[n]);
    assert_int_equal(gc_check1(g, y), 0);
    ot_graph_free(g);
}
