/* measure_print.c — a measurement (train/measure.h) as people and machines read it
 * (see measure_print.h). Spreads are interquartile ranges [q1..q3] on the terminal;
 * the JSON has min and max too. */
#include "cli/measure_print.h"

#include <math.h>
#include <string.h>

#include "ir/human_size.h"
#include "ir/json_write.h"

void ot_cli_print_busy(FILE *f, const ot_measure *mr, const char *indent) {
    if (!mr->busy) return;
    fprintf(f,
            "%sBUSY MACHINE: load average %.2f before the measurement on %d CPUs, with %d threads of ours: other "
            "work shares the CPUs, so these times are unreliable (the ratios less so: the rounds interleave)\n",
            indent, mr->load_before, mr->cpus, mr->threads);
}

/* What a ratio's IQR says about the policy against none. */
static const char *meaning(const ot_stats *r) {
    if (r->n < 5) return "too few rounds to tell (5 or more)"; /* quartiles of 2-4 values say little */
    if (r->q3 < 1.0) return "faster than none";
    if (r->q1 > 1.0) return "slower than none";
    return "no difference beyond the spread";
}

static void policy_label(const ot_measure_config *c, char *buf, size_t n) {
    if (c->memory_budget > 0) {
        char b[32];
        ot_human_size((double)c->memory_budget, b, sizeof b);
        snprintf(buf, n, "%s @ %s", c->remat, b);
    } else {
        snprintf(buf, n, "%s", c->remat);
    }
}

void ot_cli_print_time_line(FILE *f, const ot_measure *mr, int c, const char *indent) {
    const ot_measure_result *b = &mr->r[0], *p = &mr->r[c];
    char lb[160];
    policy_label(&p->cfg, lb, sizeof lb);
    fprintf(f,
            "%stime per training step, median [IQR] of %lld interleaved steps after a warm-up: %.3f ms [%.3f..%.3f] "
            "(none) -> %.3f ms [%.3f..%.3f] (%s): %.3fx [%.3f..%.3f], %s\n",
            indent, (long long)mr->steps, b->wall_s.median * 1e3, b->wall_s.q1 * 1e3, b->wall_s.q3 * 1e3,
            p->wall_s.median * 1e3, p->wall_s.q1 * 1e3, p->wall_s.q3 * 1e3, lb, p->ratio.median, p->ratio.q1,
            p->ratio.q3, meaning(&p->ratio));
    ot_cli_print_busy(f, mr, indent);
}

void ot_cli_print_measure_table(FILE *f, const ot_measure *mr) {
    fprintf(f, "%-22s %11s %11s %10s %26s %26s %24s %9s\n", "remat", "planned", "arena", "RSS +",
            "step ms median [IQR]", "CPU ms median [IQR]", "x none median [IQR]", "recompute");
    for (int c = 0; c < mr->n; c++) {
        const ot_measure_result *r = &mr->r[c];
        char lb[160], pl[32], ar[32], rs[32], w[64], cp[64], ra[64], fl[32];
        policy_label(&r->cfg, lb, sizeof lb);
        ot_human_size((double)r->planned_peak, pl, sizeof pl);
        ot_human_size((double)r->measured_peak, ar, sizeof ar);
        ot_human_size((double)r->rss_delta, rs, sizeof rs);
        snprintf(w, sizeof w, "%.3f [%.3f..%.3f]", r->wall_s.median * 1e3, r->wall_s.q1 * 1e3, r->wall_s.q3 * 1e3);
        snprintf(cp, sizeof cp, "%.3f [%.3f..%.3f]", r->cpu_s.median * 1e3, r->cpu_s.q1 * 1e3, r->cpu_s.q3 * 1e3);
        snprintf(ra, sizeof ra, "%.3f [%.3f..%.3f]", r->ratio.median, r->ratio.q1, r->ratio.q3);
        snprintf(fl, sizeof fl, "+%.1f%%", r->rs.step_flops > 0 ? 100.0 * r->rs.extra_flops / r->rs.step_flops : 0.0);
        fprintf(f, "%-22s %11s %11s %10s %26s %26s %24s %9s\n", lb, pl, ar, rs, w, cp, c ? ra : "1", fl);
    }
    fprintf(
        f,
        "\n%lld rounds after one warm-up step per configuration, interleaved (each round runs every row once, "
        "in order); batch %lld, %d threads on %d CPUs, load average %.2f before and %.2f after.\n"
        "planned: the planner's peak of the training arena; arena: its measured high-water mark; RSS +: "
        "resident memory the process gained building and warming that session (the first row also pays the process's "
        "one-time costs: thread pools, libraries' buffers).\n"
        "x none: per-round step time over none's in the same round; CPU: all threads of the process.\n",
        (long long)mr->steps, (long long)mr->batch, mr->threads, mr->cpus, mr->load_before, mr->load_after);
    for (int c = 1; c < mr->n; c++) {
        char lb[160];
        policy_label(&mr->r[c].cfg, lb, sizeof lb);
        fprintf(f, "%s: %s\n", lb, meaning(&mr->r[c].ratio));
    }
    ot_cli_print_busy(f, mr, "");
}

static void json_stats(FILE *f, const char *key, const ot_stats *s) {
    fprintf(f, "\"%s\": {\"median\": %.9g, \"q1\": %.9g, \"q3\": %.9g, \"min\": %.9g, \"max\": %.9g}", key, s->median,
            s->q1, s->q3, s->min, s->max);
}

static void json_array(FILE *f, const char *key, const double *x, int64_t n) {
    fprintf(f, "\"%s\": [", key);
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%s%.9g", i ? ", " : "", x[i]);
    fputc(']', f);
}

/* A load average, or null when it could not be read. */
static void json_load(FILE *f, const char *key, double v) {
    if (isnan(v))
        fprintf(f, "\"%s\": null", key);
    else
        fprintf(f, "\"%s\": %.2f", key, v);
}

void ot_cli_print_measure_json(FILE *f, const ot_measure *mr) {
    fprintf(f,
            "{\"method\": \"one warm-up step per configuration, then rounds of one step each, interleaved\", "
            "\"spread\": \"q1..q3 (interquartile), min..max\", \"steps\": %lld, \"warmup_steps\": 1, \"batch\": %lld, "
            "\"threads\": %d, \"cpus\": %d, ",
            (long long)mr->steps, (long long)mr->batch, mr->threads, mr->cpus);
    json_load(f, "load_before", mr->load_before);
    fputs(", ", f);
    json_load(f, "load_after", mr->load_after);
    fprintf(f, ", \"busy\": %s, \"max_rss_bytes\": %lld, \"configs\": [", mr->busy ? "true" : "false",
            (long long)mr->max_rss);
    for (int c = 0; c < mr->n; c++) {
        const ot_measure_result *r = &mr->r[c];
        fprintf(f, "%s{\"remat\": ", c ? ", " : "");
        ot_json_string(f, r->cfg.remat);
        fprintf(f,
                ", \"memory_budget\": %lld, \"planned_peak_bytes\": %zu, \"measured_peak_bytes\": %zu, "
                "\"planned_peak_step\": %d, \"measured_peak_step\": %d, \"rss_delta_bytes\": %lld, ",
                (long long)r->cfg.memory_budget, r->planned_peak, r->measured_peak, r->planned_peak_step,
                r->measured_peak_step, (long long)r->rss_delta);
        json_stats(f, "wall_seconds", &r->wall_s);
        fputs(", ", f);
        json_stats(f, "cpu_seconds", &r->cpu_s);
        fputs(", ", f);
        json_stats(f, "ratio_vs_none", &r->ratio);
        fprintf(f, ", \"recompute_nodes\": %d, \"extra_flops\": %.0f, \"step_flops\": %.0f, ", r->rs.n_clones,
                r->rs.extra_flops, r->rs.step_flops);
        if (isfinite(r->loss))
            fprintf(f, "\"loss\": %.9g, ", r->loss);
        else
            fputs("\"loss\": null, ", f);
        json_array(f, "wall_per_round", r->wall, mr->steps);
        fputs(", ", f);
        json_array(f, "cpu_per_round", r->cpu, mr->steps);
        fputc('}', f);
    }
    fputs("]}", f);
}
