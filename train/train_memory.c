/* train_memory.c — the memory budget check before allocation and the advice that
 * follows an OT_E_MEMORY failure (see train_memory.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "remat/remat.h"
#include "train/remat_session.h"
#include "train/train_memory.h"

static double mib(int64_t b) { return (double)b / 1048576.0; }

ot_status ot_train_check_budget(const ot_graph *g, ot_backend *be, const char *policy, int64_t budget, int64_t val_peak,
                                ot_error *err) {
    if (budget <= 0 || (policy && !strcmp(policy, "auto"))) return OT_OK;
    ot_remat_measurement m = {0};
    ot_status st = ot_remat_measure_planner(g, be, &m, err);
    if (st) return st;
    if (m.peak + val_peak <= budget) return OT_OK;
    if (val_peak > 0)
        return ot_fail(err, OT_E_MEMORY,
                       "the training step needs %lld bytes (%.1f MiB, planned peak with --remat %s) and validation "
                       "%lld bytes (%.1f MiB, its plan's peak): %lld bytes (%.1f MiB) together, more than "
                       "--memory-budget %lld bytes (%.1f MiB)",
                       (long long)m.peak, mib(m.peak), policy ? policy : "none", (long long)val_peak, mib(val_peak),
                       (long long)(m.peak + val_peak), mib(m.peak + val_peak), (long long)budget, mib(budget));
    return ot_fail(err, OT_E_MEMORY,
                   "the training step needs %lld bytes (%.1f MiB, planned peak with --remat %s), more than "
                   "--memory-budget %lld bytes (%.1f MiB)",
                   (long long)m.peak, mib(m.peak), policy ? policy : "none", (long long)budget, mib(budget));
}

static void append(ot_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(ot_error *err, const char *fmt, ...) {
    size_t n = strlen(err->msg);
    if (n + 1 >= sizeof err->msg) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - n, fmt, ap);
    va_end(ap);
}

static int64_t align_plan(int64_t b) { return (b + OT_PLAN_ALIGN - 1) / OT_PLAN_ALIGN * OT_PLAN_ALIGN; }

/* What the optimizer nodes add to the plan and the remat session (which has none)
 * leaves out: the state values and the step scalars, each in its own aligned slot
 * of the pinned region (as train.c's remat measure counts them). */
static int64_t opt_bytes(const ot_remat_session *s, const ot_train_options *o) {
    int per = o->optim.kind != OT_OPTIM_SGD ? 2 : o->optim.momentum != 0 ? 1 : 0;
    int64_t b = align_plan((int64_t)(OT_OPT_N_SCALARS * sizeof(double)));
    for (int i = 0; i < s->ad.n_params; i++)
        b += per * align_plan(ot_remat_value_bytes(s->g, s->ad.params[i]));
    return b;
}

/* Planned peak of one training step at `batch` (0: the model's fixed batch) under
 * `policy`, optimizer state included; -1 when it cannot be planned. */
static int64_t peak_at(const char *path, const ot_train_options *o, const char *policy, int64_t batch,
                       int64_t *opt_out) {
    ot_remat_session_options so = {.loss = o->loss,
                                   .batch_size = batch,
                                   .seed = o->seed,
                                   .n_threads = o->n_threads,
                                   .policy = policy,
                                   .plan_only = true}; /* measured, never run: no weights */
    ot_remat_session *s = NULL;
    ot_plan *plan = NULL;
    int64_t peak = -1;
    if (ot_remat_session_new(path, &so, &s, NULL) == OT_OK && ot_remat_session_plan(s, &plan, NULL) == OT_OK) {
        int64_t ob = opt_bytes(s, o);
        peak = (int64_t)ot_plan_peak_bytes(plan) + ob;
        if (opt_out) *opt_out = ob;
    }
    ot_plan_free(plan);
    ot_remat_session_free(s);
    return peak;
}

void ot_train_memory_advice(const char *path, const ot_train_options *o, int64_t n_samples, ot_error *err) {
    if (!err || !path) return;
    int64_t budget = o->memory_budget, ob = 0;
    int64_t batch = o->batch_size ? o->batch_size : (n_samples < 32 ? n_samples : 32);
    const char *policy = o->remat ? o->remat : "none";
    bool is_auto = !strcmp(policy, "auto");
    int64_t all = peak_at(path, o, "all", batch, &ob);
    if (all < 0 && !o->batch_size) { /* a fixed-batch model: plan its own batch */
        batch = 0;
        all = peak_at(path, o, "all", 0, &ob);
    }
    if (all < 0) return;
    bool fits_all = budget > 0 && all <= budget;
    /* auto failed with validation although `all` fits the step alone: its message
     * already states both figures, and nothing measured here would add to it */
    if (is_auto && fits_all) return;
    append(err, ". Measured alternatives:");
    /* with validation these are the training step's figures: its plan comes on top */
    const char *alone = o->validation ? " for the training step, validation on top" : "";
    if (strcmp(policy, "all") && !is_auto) /* auto's own message states the least peak */
        append(err, " --remat all needs %lld bytes (%.1f MiB)%s%s", (long long)all, mib(all), alone,
               fits_all && !o->validation ? ", within the budget (--remat auto picks the cheapest plan that fits)" : "");
    if (budget > 0) {
        if (fits_all) return;
        if (strcmp(policy, "all") && !is_auto) append(err, ";");
        /* the largest batch that fits, under the user's policy first, then the least-memory one */
        const char *tries[2] = {is_auto ? "all" : policy, "all"};
        for (int k = 0; k < 2; k++) {
            if (k == 1 && !strcmp(tries[0], "all")) break;
            ot_remat_session_options so = {
                .loss = o->loss, .seed = o->seed, .n_threads = o->n_threads, .policy = tries[k]};
            int64_t b = 0;
            if (budget <= ob) break;
            if (ot_remat_find_batch(path, &so, budget - ob, n_samples, &b, NULL) == OT_OK && b >= 1) {
                int64_t p = peak_at(path, o, tries[k], b, NULL);
                append(err, " --batch-size %lld with --remat %s fits (planned peak %lld bytes, %.1f MiB)%s", (long long)b,
                       tries[k], (long long)p, mib(p), alone);
                return;
            }
        }
        append(err, " no batch size fits %lld bytes even with --remat all%s", (long long)budget,
               batch == 0 ? " (the model's batch is fixed)" : "");
        return;
    }
    if (batch >= 2) {
        if (strcmp(policy, "all")) append(err, ";");
        int64_t half = peak_at(path, o, policy, batch / 2, NULL);
        if (half >= 0)
            append(err, " --batch-size %lld needs %lld bytes (%.1f MiB) with --remat %s", (long long)(batch / 2),
                   (long long)half, mib(half), policy);
    }
}
