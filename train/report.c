/* report.c — the JSON training report (report.h). Non-finite numbers are written as
 * null, since JSON has no NaN. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ir/atomic_file.h"
#include "ir/json_write.h"
#include "train/report.h"

char *ot_safe_file_stem(const char *name, const char *const *used, int n_used) {
    size_t n = strlen(name);
    char *s = malloc(n + 24);
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '-' || c == '_';
        s[i] = ok ? c : '_';
    }
    s[n] = 0;
    if (n == 0) strcpy(s, "_");
    if (s[0] == '.') s[0] = '_'; /* no hidden files, no "." or ".." */
    size_t base = strlen(s);
    for (int k = 1;; k++) {
        bool clash = false;
        for (int j = 0; j < n_used && !clash; j++) clash = !strcasecmp(used[j], s);
        if (!clash) return s;
        snprintf(s + base, 24, "_%d", k);
    }
}

static void num(FILE *f, double x) {
    if (isfinite(x))
        fprintf(f, "%.9g", x);
    else
        fputs("null", f);
}

static void array(FILE *f, const char *key, const double *v, int64_t n) {
    fprintf(f, "\"%s\": [", key);
    for (int64_t i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        num(f, v[i]);
    }
    fputs("]", f);
}

void ot_report_write_json(FILE *f, const ot_report_info *info, const ot_optim_config *opt,
                          const ot_train_result *r, const ot_plan *plan) {
    fputs("{\n  \"model\": ", f);
    ot_json_string(f, info->model);
    fputs(",\n  \"output\": ", f);
    if (info->output)
        ot_json_string(f, info->output);
    else
        fputs("null", f);
    fputs(",\n  \"loss_function\": ", f);
    ot_json_string(f, info->loss);
    fputs(",\n  \"remat\": ", f);
    ot_json_string(f, info->remat ? info->remat : "none");
    fprintf(f, ",\n  \"params\": {\"tensors\": %d, \"elements\": %lld}", info->n_params, (long long)info->n_param_elems);
    fprintf(f, ",\n  \"threads\": %d, \"seed\": %llu", info->n_threads, (unsigned long long)info->seed);
    fprintf(f, ",\n  \"optimizer\": {\"kind\": \"%s\", \"lr\": ", ot_optim_kind_name(opt->kind));
    num(f, opt->lr);
    fputs(", \"momentum\": ", f);
    num(f, opt->momentum);
    fprintf(f, ", \"nesterov\": %s, \"weight_decay\": ", opt->nesterov ? "true" : "false");
    num(f, opt->weight_decay);
    fputs(", \"betas\": [", f);
    num(f, opt->beta1);
    fputs(", ", f);
    num(f, opt->beta2);
    fputs("], \"eps\": ", f);
    num(f, opt->eps);
    fputs(", \"clip_grad_norm\": ", f);
    num(f, opt->clip_grad_norm);
    fprintf(f, ", \"schedule\": \"%s\", \"warmup_steps\": %lld, \"total_steps\": %lld}",
            ot_schedule_kind_name(opt->schedule), (long long)opt->warmup_steps, (long long)opt->total_steps);
    fprintf(f, ",\n  \"batch_size\": %lld, \"accum\": %lld, \"samples_per_epoch\": %lld, \"steps\": %lld",
            (long long)r->batch_size, (long long)r->accum, (long long)r->samples_per_epoch, (long long)r->n_steps);
    if (r->loss_scaling) /* fp16 loss scaling: steps skipped for an overflow, the final scale */
        fprintf(f, ",\n  \"loss_scale\": {\"skipped_steps\": %lld, \"final_scale\": %.17g}", (long long)r->skipped_steps,
                r->loss_scale);
    fputs(",\n  \"total_seconds\": ", f);
    num(f, r->total_seconds);
    fputs(",\n  ", f);
    array(f, "loss", r->loss, r->n_steps);
    fputs(",\n  ", f);
    array(f, "lr", r->lr, r->n_steps);
    fputs(",\n  ", f);
    array(f, "grad_norm", r->grad_norm, r->n_steps);
    fputs(",\n  ", f);
    array(f, "step_seconds", r->step_seconds, r->n_steps);
    fputs(",\n  \"epochs\": [", f);
    for (int64_t i = 0; i < r->n_epochs; i++) {
        const ot_train_epoch_stats *e = &r->epochs[i];
        fprintf(f, "%s{\"epoch\": %lld, \"step\": %lld, \"val_loss\": ", i ? ", " : "", (long long)e->epoch + 1,
                (long long)e->step);
        num(f, e->val_loss);
        fputs(", \"val_accuracy\": ", f);
        num(f, e->val_accuracy);
        fputs(", \"val_perplexity\": ", f);
        num(f, e->val_perplexity);
        fprintf(f, ", \"val_samples\": %lld}", (long long)e->val_samples);
    }
    fprintf(f, "],\n  \"memory\": {\"planned_peak\": %zu, \"measured_peak\": %zu", r->planned_peak, r->measured_peak);
    /* the forward-only validation arena, held besides the training one (0: no validation) */
    fprintf(f, ", \"val_planned_peak\": %zu, \"val_measured_peak\": %zu", r->val_planned_peak, r->val_measured_peak);
    /* The process's resident bytes during the steps (train/rss.h; null where Linux's
     * readings are unavailable): the peak holds the arenas' touched pages and what the
     * plan does not count: the binary and libraries (file), heap, thread stacks, BLAS
     * and OpenMP buffers, data (anonymous besides the arenas). */
    if (r->rss_steps_peak > 0)
        fprintf(f, ", \"rss\": {\"steps_peak\": %lld, \"before_steps\": %lld, \"file_at_end\": %lld, "
                "\"anon_at_end\": %lld}", (long long)r->rss_steps_peak, (long long)r->rss_before_steps,
                (long long)r->rss_file, (long long)r->rss_anon);
    else
        fputs(", \"rss\": null", f);
    if (plan) {
        fputs(", \"plan\": ", f);
        ot_plan_write_json(plan, f);
    }
    fputs("}\n}\n", f);
}

ot_status ot_report_write(const char *path, const ot_report_info *info, const ot_optim_config *opt,
                          const ot_train_result *r, const ot_plan *plan, ot_error *err) {
    ot_atomic_file *af;
    ot_status st = ot_atomic_open(path, &af, err);
    if (!st) {
        ot_report_write_json(ot_atomic_stream(af), info, opt, r, plan);
        st = ot_atomic_commit(af, err);
    }
    if (st && err) ot_error_prefix(err, "report ");
    return st;
}
