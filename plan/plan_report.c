/* plan_report.c — what a plan reports: the accessors, the human summary and the JSON
 * object of a plan (`plan`, `plan --json`): peak, pinned region, bytes by category at
 * the peak and in total; and its release. */
#include <stdio.h>
#include <stdlib.h>

#include "ir/human_size.h"
#include "plan/planner.h"


void ot_plan_print_summary(const ot_plan *p, FILE *f) {
    char a[32], b[32];
    ot_human_size((double)p->peak_bytes, a, sizeof a);
    fprintf(f, "memory plan: peak %s over %d steps", a, p->n_steps);
    if (p->peak_step >= 0) fprintf(f, ", reached at step %d", p->peak_step);
    ot_human_size((double)p->pinned_bytes, b, sizeof b);
    fprintf(f, "; pinned region %s", b);
    if (p->external_bytes) {
        ot_human_size((double)p->external_bytes, b, sizeof b);
        fprintf(f, "; %s read from external memory", b);
    }
    fputc('\n', f);
    fprintf(f, "  %-18s %14s %14s\n", "category", "at peak", "total");
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        ot_human_size((double)ot_plan_bytes_at_peak(p, (ot_mem_category)c), a, sizeof a);
        ot_human_size((double)p->total[c], b, sizeof b);
        fprintf(f, "  %-18s %14s %14s\n", ot_mem_category_name((ot_mem_category)c), a, b);
    }
}

void ot_plan_write_json(const ot_plan *p, FILE *f) {
    fprintf(f, "{\"peak_bytes\": %zu, \"peak_step\": %d, \"steps\": %d, \"pinned_bytes\": %zu, "
            "\"pinned_padding_bytes\": %zu, \"at_peak\": {",
            p->peak_bytes, p->peak_step, p->n_steps, p->pinned_bytes, p->pinned_padding);
    for (int c = 0; c < OT_MEM_COUNT; c++)
        fprintf(f, "%s\"%s\": %zu", c ? ", " : "", ot_mem_category_name((ot_mem_category)c),
                ot_plan_bytes_at_peak(p, (ot_mem_category)c));
    fprintf(f, "}, \"total\": {");
    for (int c = 0; c < OT_MEM_COUNT; c++)
        fprintf(f, "%s\"%s\": %zu", c ? ", " : "", ot_mem_category_name((ot_mem_category)c), p->total[c]);
    fprintf(f, "}}");
}

const char *ot_mem_category_name(ot_mem_category c) {
    static const char *names[OT_MEM_COUNT] = {"params", "gradients", "optimizer_state", "state", "constants",
                                              "inputs_outputs", "kept_activations", "transient", "workspace"};
    return (c >= 0 && c < OT_MEM_COUNT) ? names[c] : "?";
}

size_t ot_plan_peak_bytes(const ot_plan *p) { return p ? p->peak_bytes : 0; }

void ot_plan_free(ot_plan *p) {
    if (!p) return;
    free(p->values);
    free(p->order);
    free(p->ws_offset);
    free(p->ws_bytes);
    free(p->timeline);
    free(p);
}

int64_t ot_plan_offset(const ot_plan *p, int value_id) {
    if (!p || value_id < 0 || value_id >= p->n_values) return -1;
    return p->values[value_id].offset;
}

size_t ot_plan_value_bytes(const ot_plan *p, int value_id) {
    if (!p || value_id < 0 || value_id >= p->n_values) return 0;
    return p->values[value_id].nbytes;
}

static bool live_at_peak(const ot_plan *p, int v) {
    const ot_plan_value *pv = &p->values[v];
    return pv->def_step <= p->peak_step && pv->last_step >= p->peak_step;
}

/* Whether value r's block was taken over in place by a value live at the peak (r's
 * last step is then the taker's first, the peak step). */
static bool taken_over_at_peak(const ot_plan *p, int r) {
    if (p->values[r].last_step != p->peak_step) return false;
    for (int v = 0; v < p->n_values; v++)
        if (p->values[v].inplace_of == r && live_at_peak(p, v)) return true;
    return false;
}

void ot_plan_bytes_by_dtype(const ot_plan *p, const ot_graph *g, ot_mem_category c, bool at_peak,
                            size_t by[OT_PLAN_DTYPES]) {
    for (int d = 0; d < OT_PLAN_DTYPES; d++) by[d] = 0;
    if (!p || !g) return;
    for (int v = 0; v < p->n_values && v < g->n_values; v++) {
        const ot_plan_value *pv = &p->values[v];
        if (pv->category != c || !pv->nbytes || pv->offset < 0 || pv->external || pv->alias_of >= 0 ||
            pv->slot_of >= 0)
            continue;
        if (at_peak && (p->peak_step < 0 || !live_at_peak(p, v))) continue;
        /* a block taken over in place is counted once, as the planner counts it at the
         * step of the take-over (planner.c, try_inplace): by the value that took it,
         * in that value's category, which may not be the first one's */
        if (at_peak && taken_over_at_peak(p, v)) continue;
        int d = (int)g->values[v].dtype;
        by[d >= 0 && d < OT_PLAN_DTYPES ? d : 0] += pv->nbytes;
    }
}

size_t ot_plan_bytes_at_peak(const ot_plan *p, ot_mem_category c) {
    return (p && c >= 0 && c < OT_MEM_COUNT) ? p->at_peak[c] : 0;
}
