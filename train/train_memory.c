/* train_memory.c — the memory budget check before allocation, --batch-size auto, and
 * the advice that follows an OT_E_MEMORY failure (see train_memory.h): every figure a
 * plan-only training session over the one imported model. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "remat/remat.h"
#include "train/train_memory.h"

static double mib(int64_t b) { return (double)b / 1048576.0; }

ot_status ot_train_check_budget(const ot_graph *g, ot_backend *be, const char *policy, int64_t budget, int64_t val_peak,
                                ot_error *err) {
    if (budget <= 0 || (policy && (!strcmp(policy, "auto") || !strcmp(policy, "optimal")))) return OT_OK;
    /* planned as the run will plan it: aiming at the budget (less validation's arena) */
    ot_remat_measurement m = {.fit_target = budget > val_peak ? budget - val_peak : 0};
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

/* A plan-only session over m (train/train.h) at `batch` (0: the model's fixed batch)
 * under `policy`, with `budget` (0: none). */
static ot_status plan_session(ot_model *m, const ot_train_options *o, bool with_opt, const char *policy,
                              int64_t batch, int64_t budget, ot_train_session **s, ot_error *err) {
    ot_train_options po = *o;
    po.remat = policy;
    po.batch_size = batch;
    po.memory_budget = budget;
    po.plan_only = true; /* measured, never run */
    po.validation = false;
    po.resume = NULL;
    return ot_train_session_new(m, &po, NULL, with_opt, s, err);
}

/* Planned peak of one training step (optimizer state and updates planned with it) at
 * `batch` under `policy`; -1 when it cannot be planned. */
static int64_t peak_at(ot_model *m, const ot_train_options *o, const char *policy, int64_t batch) {
    ot_train_session *s = NULL;
    int64_t peak = -1;
    if (plan_session(m, o, true, policy, batch, 0, &s, NULL) == OT_OK) peak = (int64_t)ot_plan_peak_bytes(ot_train_plan(s));
    ot_train_session_free(s);
    return peak;
}

/* Whether batch b fits the budget under o's policy (auto searching within it); *peak
 * gets its planned peak, -1 when auto found nothing. */
static ot_status probe(ot_model *m, const ot_train_options *o, bool with_opt, int64_t b, int64_t budget, bool *fits,
                       int64_t *peak, ot_error *err) {
    ot_train_session *s = NULL;
    ot_error e = {0};
    *fits = false;
    *peak = -1;
    ot_status st = plan_session(m, o, with_opt, o->remat, b, budget, &s, &e);
    if (st == OT_OK) {
        *peak = (int64_t)ot_plan_peak_bytes(ot_train_plan(s));
        *fits = true;
    } else if (st != OT_E_MEMORY && err) {
        *err = e;
    }
    ot_train_session_free(s);
    return st == OT_E_MEMORY ? OT_OK : st;
}

/* The least planned peak at batch b (--remat all), for messages. */
static int64_t least_peak(ot_model *m, const ot_train_options *o, bool with_opt, int64_t b) {
    ot_train_session *s = NULL;
    int64_t peak = -1;
    if (plan_session(m, o, with_opt, "all", b, 0, &s, NULL) == OT_OK) peak = (int64_t)ot_plan_peak_bytes(ot_train_plan(s));
    ot_train_session_free(s);
    return peak;
}

ot_status ot_train_find_batch(ot_model *m, const ot_train_options *o, bool with_opt, int64_t budget, int64_t max_batch,
                              int64_t *batch, ot_error *err) {
    bool fits = false;
    int64_t peak = -1;
    const ot_graph *g = m->graph;
    int64_t fixed = g->n_inputs > 0 && g->values[g->inputs[0]].shape.rank > 0 ? g->values[g->inputs[0]].shape.dim[0] : -1;
    int64_t lo = fixed >= 0 ? 0 : 1; /* 0: the model's own batch */
    ot_status st = probe(m, o, with_opt, lo, budget, &fits, &peak, err);
    if (st) return st;
    if (!fits) {
        if (peak < 0) peak = least_peak(m, o, with_opt, lo);
        if (fixed >= 0)
            return ot_fail(err, OT_E_MEMORY,
                           "--batch-size auto: the model's fixed batch of %lld does not fit --memory-budget %lld bytes "
                           "(planned peak %lld bytes)",
                           (long long)fixed, (long long)budget, (long long)peak);
        return ot_fail(err, OT_E_MEMORY,
                       "--batch-size auto: even batch 1 does not fit --memory-budget %lld bytes (its planned peak is "
                       "%lld bytes)",
                       (long long)budget, (long long)peak);
    }
    if (fixed >= 0) { /* nothing to choose */
        *batch = fixed;
        return OT_OK;
    }
    int64_t hi = -1; /* lo fits; hi does not (or -1: not found yet) */
    while (hi < 0) {
        int64_t b = lo * 2 > max_batch ? max_batch : lo * 2;
        if (b == lo) break;
        if ((st = probe(m, o, with_opt, b, budget, &fits, &peak, err))) return st;
        if (fits) lo = b;
        else hi = b;
    }
    while (hi > 0 && hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((st = probe(m, o, with_opt, mid, budget, &fits, &peak, err))) return st;
        if (fits) lo = mid;
        else hi = mid;
    }
    *batch = lo;
    return OT_OK;
}

void ot_train_memory_advice(ot_model *m, const ot_train_options *o, int64_t n_samples, ot_error *err) {
    if (!err || !m) return;
    int64_t budget = o->memory_budget;
    int64_t batch = o->batch_size ? o->batch_size : (n_samples < 32 ? n_samples : 32);
    const char *policy = o->remat ? o->remat : "none";
    bool is_auto = !strcmp(policy, "auto");
    int64_t all = peak_at(m, o, "all", batch);
    if (all < 0 && !o->batch_size) { /* a fixed-batch model: plan its own batch */
        batch = 0;
        all = peak_at(m, o, "all", 0);
    }
    if (all < 0) return;
    bool fits_all = budget > 0 && all <= budget;
    /* auto failed with validation although `all` fits the step alone: its message
     * already states both figures, and nothing measured here would add to it */
    if (is_auto && fits_all) return;
    append(err, ". Measured alternatives:");
    /* with validation these are the training step's figures: its plan comes on top */
    const char *alone = o->validation ? " for the training step, validation on top" : "";
    bool auto_said = is_auto && budget > 0; /* auto within a budget: its own message states the least peak */
    if (strcmp(policy, "all") && !auto_said)
        append(err, " --remat all needs %lld bytes (%.1f MiB)%s%s", (long long)all, mib(all), alone,
               fits_all && !o->validation ? ", within the budget (--remat auto picks the cheapest plan that fits)" : "");
    if (budget > 0) {
        if (fits_all) return;
        if (strcmp(policy, "all") && !auto_said) append(err, ";");
        /* the largest batch that fits, under the user's policy first, then the least-memory one */
        const char *tries[2] = {is_auto ? "all" : policy, "all"};
        for (int k = 0; k < 2; k++) {
            if (k == 1 && !strcmp(tries[0], "all")) break;
            ot_train_options po = *o;
            po.remat = tries[k];
            int64_t b = 0;
            if (ot_train_find_batch(m, &po, true, budget, n_samples, &b, NULL) == OT_OK && b >= 1) {
                int64_t p = peak_at(m, o, tries[k], b);
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
        int64_t half = peak_at(m, o, policy, batch / 2);
        if (half >= 0)
            append(err, " --batch-size %lld needs %lld bytes (%.1f MiB) with --remat %s", (long long)(batch / 2),
                   (long long)half, mib(half), policy);
    }
}
