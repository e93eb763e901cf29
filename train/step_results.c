/* step_results.c — one step's results copied out of an executor, and their bitwise
 * comparison (see step_results.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/step_results.h"

void ot_step_results_free(ot_step_results *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free(r->names[i]);
        if (r->tensors[i]) ot_tensor_free(r->tensors[i]);
    }
    free(r->names);
    free(r->tensors);
    memset(r, 0, sizeof *r);
}

static ot_status add_result(ot_step_results *r, const char *kind, const char *name, ot_tensor *t, ot_error *err) {
    size_t len = strlen(kind) + strlen(name) + 2;
    char *nm = malloc(len);
    if (!nm) {
        ot_tensor_free(t);
        return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    snprintf(nm, len, "%s%s", kind, name);
    r->names[r->n] = nm;
    r->tensors[r->n++] = t;
    return OT_OK;
}

ot_status ot_step_results_collect(ot_executor *ex, const ot_graph *g, const ot_autodiff_result *ad, int loss_value,
                                  ot_step_results *r, ot_error *err) {
    ot_status st = OT_OK;
    r->planned_peak = ot_plan_peak_bytes(ot_executor_plan(ex));
    r->measured_peak = ot_executor_high_water(ex);
    int n = 1 + ad->n_params + ad->n_state;
    r->names = ot_xcalloc((size_t)n, sizeof(char *));
    r->tensors = ot_xcalloc((size_t)n, sizeof(ot_tensor *));
    if (!r->names || !r->tensors) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory copying a step's results");
        goto fail;
    }
    ot_tensor *t = NULL;
    if ((st = ot_executor_get(ex, loss_value, &t, err))) goto fail;
    r->loss = t->dtype == OT_F32 ? *(const float *)t->data : t->dtype == OT_F64 ? *(const double *)t->data : 0.0;
    if ((st = add_result(r, "loss", "", t, err))) goto fail;
    for (int i = 0; i < ad->n_params; i++) {
        if ((st = ot_executor_get(ex, ad->grads[i], &t, err))) goto fail;
        if ((st = add_result(r, "grad:", g->values[ad->params[i]].name, t, err))) goto fail;
    }
    for (int i = 0; i < ad->n_state; i++) {
        if ((st = ot_executor_get(ex, ad->state_updates[i], &t, err))) goto fail;
        if ((st = add_result(r, "state:", g->values[ad->state_values[i]].name, t, err))) goto fail;
    }
    return OT_OK;
fail:
    ot_step_results_free(r);
    return st;
}

double ot_tensor_bitwise_diff(const ot_tensor *a, const ot_tensor *b, bool *equal) {
    *equal = a->dtype == b->dtype && a->nbytes == b->nbytes && (!a->nbytes || !memcmp(a->data, b->data, a->nbytes));
    if (a->dtype != b->dtype || a->nbytes != b->nbytes) return NAN;
    if (*equal) return 0.0; /* same bits: NaNs included */
    double m = 0.0;
    size_t es = ot_dtype_size(a->dtype) ? ot_dtype_size(a->dtype) : 1, n = a->nbytes / es;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp((const char *)a->data + i * es, (const char *)b->data + i * es, es)) continue; /* NaN == NaN */
        double x, y;
        if (a->dtype == OT_F32) x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
        else if (a->dtype == OT_F64) x = ((const double *)a->data)[i], y = ((const double *)b->data)[i];
        else return NAN;
        double d = fabs(x - y);
        if (d > m || d != d) m = d;
    }
    return m;
}
