/* test_torch_index.c — the layout and indexing ops of issue 13 against PyTorch 1.13:
 * for each case of tests/fixtures/index/torch_grads.txt (made by make_fixtures.py
 * there) the op is built as a one-node graph with X (and a scatter's updates U)
 * params, loss = sum(Y * R),
 * differentiated by ot_autodiff_build and run by the reference evaluator; Y and dX
 * must match PyTorch's within float32 rounding (the largest differences are printed). */
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
#include "ref_eval.h"

#define FIXTURE OT_SOURCE_DIR "/tests/fixtures/index/torch_grads.txt"
#define MAXV 512

typedef struct tcase {
    char name[64], op[32], attrs[256];
    int rank[7];
    int64_t dims[7][OT_MAX_RANK];
    double v[7][MAXV]; /* x, r, y, dx, i, u, du */
    int n[7];
    bool has_u;
} tcase;

/* "key=value" from the case header; NULL when absent. */
static const char *attr_of(const tcase *c, const char *key, char *buf, size_t n) {
    char pat[40];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(c->attrs, pat);
    if (!p) return NULL;
    p += strlen(pat);
    size_t k = 0;
    while (p[k] && p[k] != ' ' && k + 1 < n) buf[k] = p[k], k++;
    buf[k] = 0;
    return buf;
}

static int ints_of(const char *s, int64_t *v) {
    int n = 0;
    for (char *end; *s; s = *end ? end + 1 : end) v[n++] = strtoll(s, &end, 10);
    return n;
}

/* Reads the next case; false at the end of the file. */
static bool read_case(FILE *f, tcase *c) {
    static const char *tags[7] = {"x", "r", "y", "dx", "i", "u", "du"};
    char *line = NULL;
    size_t cap = 0;
    bool got = false;
    memset(c, 0, sizeof *c);
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#') continue;
        if (!strncmp(line, "case ", 5)) {
            int off = 0;
            assert_int_equal(sscanf(line, "case %63s %31s %n", c->name, c->op, &off), 2);
            snprintf(c->attrs, sizeof c->attrs, " %s", line + off);
            c->attrs[strcspn(c->attrs, "\n")] = 0;
            got = true;
            continue;
        }
        if (!strncmp(line, "end", 3)) break;
        char *p = line, *end;
        char tag[8];
        int len = 0;
        assert_int_equal(sscanf(p, "%7s %n", tag, &len), 1);
        int t = -1;
        for (int k = 0; k < 7; k++)
            if (!strcmp(tag, tags[k])) t = k;
        assert_true(t >= 0);
        p += len;
        c->rank[t] = (int)strtol(p, &end, 10);
        p = end;
        for (int d = 0; d < c->rank[t]; d++) c->dims[t][d] = strtoll(p, &p, 10);
        for (;;) {
            double v = strtod(p, &end);
            if (end == p) break;
            assert_true(c->n[t] < MAXV);
            c->v[t][c->n[t]++] = v;
            p = end;
        }
        c->has_u |= t == 5;
    }
    free(line);
    return got;
}

static int f32_of(ot_graph *g, const char *name, ot_value_kind kind, const tcase *c, int t) {
    ot_shape s = ot_shape_make(c->rank[t], c->dims[t]);
    int v = ot_graph_add_value(g, name, OT_F32, &s, kind);
    if (t < 0) return v;
    float *buf = malloc(sizeof(float) * (size_t)(c->n[t] ? c->n[t] : 1));
    for (int i = 0; i < c->n[t]; i++) buf[i] = (float)c->v[t][i];
    assert_int_equal(ot_value_set_data(&g->values[v], buf, sizeof(float) * (size_t)c->n[t]), 0);
    free(buf);
    return v;
}

static int i64_const(ot_graph *g, const char *name, int rank, const int64_t *dims, const int64_t *vals) {
    ot_shape s = ot_shape_make(rank, dims);
    int v = ot_graph_add_value(g, name, OT_I64, &s, OT_VK_CONSTANT);
    assert_int_equal(ot_value_set_data(&g->values[v], vals, sizeof(int64_t) * (size_t)ot_shape_numel(&s)), 0);
    return v;
}

/* Builds Y = op(X [, U]) with the case's attributes and constant operands. */
static void build_op(ot_graph *g, const tcase *c, int x, int u, int y) {
    char buf[128];
    int in[4] = {x, -1, -1, -1}, n_in = 1;
    ot_op op = ot_op_from_name(c->op, false);
    assert_int_not_equal(op, OT_OP_UNKNOWN);
    int64_t v[2 * OT_MAX_RANK];
    if (op == OT_OP_PAD) {
        int np = ints_of(attr_of(c, "pads", buf, sizeof buf), v);
        int64_t d = np;
        in[1] = i64_const(g, "pads", 1, &d, v);
        ot_shape s = ot_shape_make(0, NULL);
        in[2] = ot_graph_add_value(g, "value", OT_F32, &s, OT_VK_CONSTANT);
        float val = (float)atof(attr_of(c, "value", buf, sizeof buf));
        assert_int_equal(ot_value_set_data(&g->values[in[2]], &val, sizeof val), 0);
        n_in = 3;
    } else if (op == OT_OP_TILE) {
        int64_t d = ints_of(attr_of(c, "repeats", buf, sizeof buf), v);
        in[1] = i64_const(g, "repeats", 1, &d, v);
        n_in = 2;
    } else if (op == OT_OP_TRILU || op == OT_OP_CUMSUM) {
        v[0] = atoll(attr_of(c, op == OT_OP_TRILU ? "k" : "axis", buf, sizeof buf));
        in[1] = i64_const(g, op == OT_OP_TRILU ? "k" : "axis", 0, NULL, v);
        n_in = 2;
    } else if (c->n[4] > 0) { /* the gathers and scatters */
        int64_t iv[MAXV];
        for (int i = 0; i < c->n[4]; i++) iv[i] = (int64_t)c->v[4][i];
        in[1] = i64_const(g, "indices", c->rank[4], c->dims[4], iv);
        in[2] = u;
        n_in = u >= 0 ? 3 : 2;
    }
    int id = ot_graph_add_node(g, op, c->name, in, n_in, &y, 1, OT_PHASE_FORWARD);
    assert_true(id >= 0);
    ot_node *n = &g->nodes[id];
    const char *ints_attrs[6] = {"upper", "axis", "exclusive", "reverse", "batch_dims", NULL};
    for (int k = 0; ints_attrs[k]; k++)
        if (attr_of(c, ints_attrs[k], buf, sizeof buf) && !(op == OT_OP_CUMSUM && !strcmp(ints_attrs[k], "axis")))
            ot_node_set_attr_int(n, ints_attrs[k], atoll(buf));
    if (attr_of(c, "mode", buf, sizeof buf)) ot_node_set_attr_string(n, "mode", buf);
    if (attr_of(c, "reduction", buf, sizeof buf)) ot_node_set_attr_string(n, "reduction", buf);
}

static double max_abs(const float *a, const double *b, int n) {
    double m = 0.0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)(float)b[i])); /* b: float32 as text */
    return m;
}

static void run_case(const tcase *c, double *worst_y, double *worst_dx) {
    ot_graph *g = ot_graph_new(c->name);
    int x = f32_of(g, "X", OT_VK_PARAM, c, 0), u = c->has_u ? f32_of(g, "U", OT_VK_PARAM, c, 5) : -1;
    ot_shape ys = ot_shape_make(c->rank[2], c->dims[2]), scalar = ot_shape_make(0, NULL);
    int y = ot_graph_add_value(g, "Y", OT_F32, &ys, OT_VK_ACTIVATION);
    build_op(g, c, x, u, y);
    int r = f32_of(g, "R", OT_VK_CONSTANT, c, 1);
    int prod = ot_graph_add_value(g, "YR", OT_F32, &ys, OT_VK_ACTIVATION);
    int loss = ot_graph_add_value(g, "loss", OT_F32, &scalar, OT_VK_ACTIVATION);
    assert_true(ot_graph_add_node(g, OT_OP_MUL, "yr", (int[]){y, r}, 2, &prod, 1, OT_PHASE_FORWARD) >= 0);
    int rs = ot_graph_add_node(g, OT_OP_REDUCE_SUM, "sum", &prod, 1, &loss, 1, OT_PHASE_FORWARD);
    assert_int_equal(ot_node_set_attr_int(&g->nodes[rs], "keepdims", 0), 0);
    ot_error err = {0};
    ot_autodiff_options ao = {.loss_value = loss};
    ot_autodiff_result res;
    if (ot_autodiff_build(g, &ao, &res, &err)) fail_msg("%s: autodiff: %s", c->name, err.msg);
    assert_int_equal(res.n_params, c->has_u ? 2 : 1);
    ot_ref_env *e = ot_ref_new(g);
    if (ot_ref_run(e, false, &err)) fail_msg("%s: run: %s", c->name, err.msg);
    double dy = max_abs(ot_ref_f32(e, y), c->v[2], c->n[2]), dd = 0.0;
    for (int p = 0; p < res.n_params; p++) { /* dX, and dU for a scatter */
        int t = res.params[p] == x ? 3 : 6;
        assert_int_equal((int)ot_shape_numel(&g->values[res.grads[p]].shape), c->n[t]);
        dd = fmax(dd, max_abs(ot_ref_f32(e, res.grads[p]), c->v[t], c->n[t]));
    }
    printf("  %-20s max |Y - torch| %.3g   max |dX%s - torch| %.3g\n", c->name, dy, c->has_u ? ", dU" : "", dd);
    if (!(dy <= 1e-6) || !(dd <= 1e-6)) fail_msg("%s: differs from PyTorch (Y %g, dX %g)", c->name, dy, dd);
    *worst_y = fmax(*worst_y, dy);
    *worst_dx = fmax(*worst_dx, dd);
    ot_ref_free(e);
    ot_autodiff_result_free(&res);
    ot_graph_free(g);
}

static void test_against_torch(void **state) {
    (void)state;
    FILE *f = fopen(FIXTURE, "r");
    if (!f) fail_msg("cannot open %s (make it with make_fixtures.py)", FIXTURE);
    tcase *c = malloc(sizeof *c);
    int cases = 0;
    double wy = 0.0, wd = 0.0;
    while (read_case(f, c)) {
        run_case(c, &wy, &wd);
        cases++;
    }
    fclose(f);
    free(c);
    printf("  %d cases: max |Y - torch| %.3g, max |dX - torch| %.3g\n", cases, wy, wd);
    assert_true(cases >= 16);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_against_torch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
