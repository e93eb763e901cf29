/* defaults.c — the defaults the commands share (see defaults.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/defaults.h"
#include "ir/human_size.h"
#include "remat/remat.h"
#include "train/kv_cache.h"
#include "train/train.h"

/* Whether a --bind spec ("NAME=SIZE[,NAME=SIZE]") names the dim. */
bool ot_cli_bound_by_user(const ot_common_args *ca, const char *dim) {
    size_t n = strlen(dim);
    for (int i = 0; i < ca->bind.n; i++)
        for (const char *p = ca->bind.v[i]; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
            if (!strncmp(p, dim, n) && p[n] == '=') return true;
    return false;
}

/* The symbolic dims past axis 0 of the model's inputs that no --bind names get
 * OT_CLI_DIM_NO_DATA: without data nothing else fixes them. */
static ot_status default_binds(const ot_graph *g, const ot_common_args *ca, ot_cli_batch_pick *p, ot_error *err) {
    bool *derived = ot_xcalloc((size_t)g->n_syms + 1, sizeof *derived);
    if (!derived) return ot_fail(err, OT_E_MEMORY, "out of memory");
    ot_status st = ot_kv_derived_syms(g, g->n_inputs, derived, err);
    for (int i = 0; !st && i < g->n_inputs; i++) {
        const ot_shape *sh = &g->values[g->inputs[i]].shape;
        /* a KV cache without data is empty (the session binds its past length to 0) */
        int past = ot_kv_role_of(g, g->n_inputs, g->inputs[i]) == OT_KV_PAST ? ot_kv_past_axis(g, g->inputs[i]) : -1;
        for (int a = 1; !st && a < sh->rank; a++) {
            int sym = sh->sym[a];
            if (sh->dim[a] >= 0 || sym < 0 || g->sym_values[sym] >= 0 || ot_cli_bound_by_user(ca, g->syms[sym]) ||
                derived[sym] || a == past)
                continue;
            bool dup = false;
            size_t sl = strlen(g->syms[sym]);
            for (int j = 0; j < p->n_own; j++)
                dup |= !strncmp(p->own[j], g->syms[sym], sl) && p->own[j][sl] == '=';
            if (dup) continue;
            if (p->n_own == OT_CLI_MAX_BINDS) {
                st = ot_fail(err, OT_E_USAGE, "the model has more than %d symbolic dims: give --bind NAME=SIZE",
                             OT_CLI_MAX_BINDS);
                break;
            }
            size_t len = sl + 24;
            if (!(p->own[p->n_own] = malloc(len))) {
                st = ot_fail(err, OT_E_MEMORY, "out of memory");
                break;
            }
            snprintf(p->own[p->n_own++], len, "%s=%d", g->syms[sym], OT_CLI_DIM_NO_DATA);
            size_t l = strlen(p->dims);
            snprintf(p->dims + l, sizeof p->dims - l, "%s%s", l ? ", " : "", g->syms[sym]);
        }
    }
    free(derived);
    return st;
}

ot_status ot_cli_pick_batch(const ot_graph *g, const ot_common_args *ca, int64_t n_samples, ot_cli_batch_pick *p,
                            ot_error *err) {
    memset(p, 0, sizeof *p);
    const ot_shape *in0 = g->n_inputs > 0 ? &g->values[g->inputs[0]].shape : NULL;
    bool symbolic = in0 && in0->rank > 0 && in0->dim[0] < 0;
    if (ca->batch_size)
        p->batch = ca->batch_size, p->from = OT_BATCH_GIVEN;
    else if (!symbolic)
        p->batch = 0, p->from = OT_BATCH_MODEL;
    else if (n_samples >= 0)
        p->batch = n_samples < OT_CLI_BATCH_DATA_MAX ? n_samples : OT_CLI_BATCH_DATA_MAX, p->from = OT_BATCH_DATA;
    else
        p->batch = OT_CLI_BATCH_NO_DATA, p->from = OT_BATCH_NO_DATA;
    for (int i = 0; i < ca->bind.n && i < OT_CLI_MAX_BINDS; i++)
        p->binds[p->n_binds++] = ca->bind.v[i];
    if (ca->bind.n > OT_CLI_MAX_BINDS) return ot_fail(err, OT_E_USAGE, "more than %d --bind options", OT_CLI_MAX_BINDS);
    if (n_samples < 0) {
        ot_status st = default_binds(g, ca, p, err);
        if (st) return st;
    }
    for (int i = 0; i < p->n_own; i++)
        p->binds[p->n_binds++] = p->own[i];
    return OT_OK;
}

void ot_cli_batch_pick_free(ot_cli_batch_pick *p) {
    for (int i = 0; i < p->n_own; i++)
        free(p->own[i]);
    p->n_own = 0;
}

const char *ot_cli_batch_note(const ot_cli_batch_pick *p) {
    switch (p->from) {
    case OT_BATCH_MODEL: return " (the model's)";
    case OT_BATCH_DATA: return " (train's default: min(32, samples); --batch-size N for another)";
    case OT_BATCH_NO_DATA: return " (a small default: the model's batch is symbolic; --batch-size N for another)";
    case OT_BATCH_GIVEN: break;
    }
    return "";
}

void ot_cli_peak_change(int64_t peak_none, int64_t peak, char *buf, size_t n) {
    if (peak == peak_none) {
        snprintf(buf, n, "the same peak");
        return;
    }
    double d = (double)(peak_none > peak ? peak_none - peak : peak - peak_none);
    char hb[32];
    ot_human_size(d, hb, sizeof hb);
    snprintf(buf, n, "%s %s (%.1f%%)", peak < peak_none ? "saves" : "costs", hb,
             peak_none > 0 ? 100.0 * d / (double)peak_none : 0.0);
}

void ot_cli_remat_label(const char *policy, int64_t budget, const ot_train_remat_summary *rs, char *buf, size_t n) {
    ot_remat_policy pol = {0};
    if (ot_remat_policy_parse(policy, &pol, NULL) == OT_OK)
        ot_remat_policy_str(&pol, buf, n);
    else
        snprintf(buf, n, "%s", policy);
    size_t l = strlen(buf);
    if ((pol.kind == OT_REMAT_AUTO || pol.kind == OT_REMAT_OPTIMAL) && budget > 0) {
        char hb[32];
        ot_human_size((double)budget, hb, sizeof hb);
        snprintf(buf + l, n - l, " (budget %s)", hb);
    } else if (pol.kind == OT_REMAT_AUTO && rs && rs->no_gain) {
        snprintf(buf + l, n - l, " (no budget: no remat helps here, so none's plan)");
    } else if (pol.kind == OT_REMAT_AUTO) {
        snprintf(buf + l, n - l, " (no budget: the least peak within +%.0f%% FLOPs)", 100.0 * OT_REMAT_AUTO_MODEST);
    }
    ot_remat_policy_free(&pol);
}
