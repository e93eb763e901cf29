/* cmd_plan.c — `onnxtrain plan MODEL [--remat POLICY] ...`: runs nothing. Builds the
 * training graph, plans it with --remat none and with the chosen policy, and prints
 * for both the exact peak, bytes by category, the recompute cost (extra FLOPs and
 * share of the step) and the kept and recomputed values grouped by segment.
 * --json for machines, --dot for the rewritten graph, --timeline for an SVG. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "ir/atomic_file.h"
#include "ir/json_write.h"
#include "train/remat_session.h"
#include "remat/timeline.h"

static void usage(FILE *f) {
    fputs("usage: onnxtrain plan MODEL [options]\n\n"
          "Plans one training step (forward, loss, backward) without running it: the exact\n"
          "peak memory with --remat none and with POLICY, bytes by category, recompute cost,\n"
          "and which activations are kept or recomputed, segment by segment.\n\n"
          "options:\n"
          "  --loss KIND               cross-entropy (default), mse or output\n"
          "  --batch-size N|auto       batch to plan for (auto: the largest that fits --memory-budget)\n"
          "  --remat POLICY            none, all, sqrt, every:K, selective, manual:NAME,... or auto\n"
          "                            (default auto: selective, or the cheapest plan within the budget)\n"
          "  --memory-budget SIZE      e.g. 512M, 2G: the peak auto must fit\n"
          "  --json                    print the plans as JSON\n"
          "  --dot FILE                write the training graph (recompute nodes dashed, orange)\n"
          "  --timeline FILE.svg       draw bytes in use along the schedule for both plans\n",
          f);
}

typedef struct plan_opts {
    const char *model, *loss, *remat, *dot, *timeline;
    int64_t batch, budget;
    bool batch_auto, json;
} plan_opts;

static void human(double b, char *buf, size_t n) {
    if (b >= 1 << 30) snprintf(buf, n, "%.2f GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, n, "%.2f MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(buf, n, "%.1f KiB", b / (1 << 10));
    else snprintf(buf, n, "%.0f B", b);
}

/* Kept and recomputed saved values, by segment. */
static void print_segments(const ot_remat_session *s, bool json) {
    const ot_remat_analysis *a = &s->an;
    const ot_graph *g = s->g;
    int n_seg = a->n_art + 1;
    if (json) printf(", \"segments\": [");
    bool first_seg = true;
    for (int k = 0; k < n_seg; k++) {
        int n_kept = 0, n_rec = 0;
        for (int v = 0; v < a->n_values; v++) {
            if (!a->saved[v] || a->segment[v] != k) continue;
            if (s->keep[v]) n_kept++;
            else n_rec++;
        }
        if (!n_kept && !n_rec) continue;
        if (json) {
            printf("%s{\"segment\": %d, \"kept\": [", first_seg ? "" : ", ", k);
            bool first = true;
            for (int v = 0; v < a->n_values; v++)
                if (a->saved[v] && a->segment[v] == k && s->keep[v]) {
                    if (!first) printf(", ");
                    ot_json_string(stdout, g->values[v].name);
                    first = false;
                }
            printf("], \"recomputed\": [");
            first = true;
            for (int v = 0; v < a->n_values; v++)
                if (a->saved[v] && a->segment[v] == k && !s->keep[v]) {
                    if (!first) printf(", ");
                    ot_json_string(stdout, g->values[v].name);
                    first = false;
                }
            printf("]}");
        } else {
            printf("  segment %d:", k);
            if (n_kept) {
                printf(" kept");
                for (int v = 0; v < a->n_values; v++)
                    if (a->saved[v] && a->segment[v] == k && s->keep[v]) printf(" %s", g->values[v].name);
            }
            if (n_rec) {
                printf("%s recomputed", n_kept ? ";" : "");
                for (int v = 0; v < a->n_values; v++)
                    if (a->saved[v] && a->segment[v] == k && !s->keep[v]) printf(" %s", g->values[v].name);
            }
            putchar('\n');
        }
        first_seg = false;
    }
    if (json) printf("]");
}

static void print_plan(const char *label, const ot_remat_session *s, const ot_plan *p, bool json, bool segments) {
    double extra = s->rw.extra_flops, step = s->an.step_flops;
    if (json) {
        printf("{\"policy\": ");
        ot_json_string(stdout, label);
        printf(", \"peak_bytes\": %zu, \"extra_flops\": %.0f, \"step_flops\": %.0f, \"recompute_share\": %.6f, "
               "\"recompute_nodes\": %d, \"kept_activation_bytes\": %lld, \"choose_seconds\": %.6f, \"plan\": ",
               ot_plan_peak_bytes(p), extra, step, step > 0 ? extra / step : 0.0, s->rw.n_clones,
               (long long)s->rw.kept_bytes, s->choose_seconds);
        ot_plan_write_json(p, stdout);
        if (segments) print_segments(s, true);
        printf("}");
        return;
    }
    char pk[32], kb[32];
    human((double)ot_plan_peak_bytes(p), pk, sizeof pk);
    human((double)s->rw.kept_bytes, kb, sizeof kb);
    printf("--remat %s: peak %s (%zu bytes)\n", label, pk, ot_plan_peak_bytes(p));
    printf("  at the peak:");
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        char b[32];
        human((double)ot_plan_bytes_at_peak(p, (ot_mem_category)c), b, sizeof b);
        printf("%s %s %s", c ? "," : "", ot_mem_category_name((ot_mem_category)c), b);
    }
    printf("\n  activations held for the backward pass: %s; recompute: %d nodes, %.0f extra FLOPs "
           "(%.1f%% of the step's %.0f)\n",
           kb, s->rw.n_clones, extra, step > 0 ? 100.0 * extra / step : 0.0, step);
    if (segments) print_segments(s, false);
}

static ot_status write_dot(const char *path, const ot_graph *g, ot_error *err) {
    ot_atomic_file *af;
    ot_status st = ot_atomic_open(path, &af, err);
    if (!st) {
        ot_graph_dump_dot(g, ot_atomic_stream(af));
        st = ot_atomic_commit(af, err);
    }
    if (st && err) ot_error_prefix(err, "--dot ");
    return st;
}

static ot_status run_plan(const plan_opts *o, ot_error *err) {
    ot_status st = OT_OK;
    ot_remat_session *s0 = NULL, *s1 = NULL;
    ot_plan *p0 = NULL, *p1 = NULL;
    /* plan_only: nothing here runs, so the weights are never loaded */
    ot_remat_session_options so = {.memory_budget = o->budget, .batch_size = o->batch, .plan_only = true};
    if ((st = ot_loss_kind_parse(o->loss ? o->loss : "cross-entropy", &so.loss.kind, err))) goto fail;
    so.loss.class_axis = -1;
    const char *policy = o->remat ? o->remat : "auto";
    if (o->batch_auto) {
        if (!o->budget) {
            st = ot_fail(err, OT_E_USAGE, "--batch-size auto needs --memory-budget SIZE");
            goto fail;
        }
        so.policy = policy;
        if ((st = ot_remat_find_batch(o->model, &so, o->budget, 1 << 20, &so.batch_size, err))) goto fail;
    }
    so.policy = "none";
    if ((st = ot_remat_session_new(o->model, &so, &s0, err))) goto fail;
    if ((st = ot_remat_session_plan(s0, &p0, err))) goto fail;
    so.policy = policy;
    if ((st = ot_remat_session_new(o->model, &so, &s1, err))) goto fail;
    if ((st = ot_remat_session_plan(s1, &p1, err))) goto fail;
    char label[256];
    ot_remat_policy_str(&s1->policy, label, sizeof label);
    if (s1->policy.kind == OT_REMAT_AUTO && o->budget) {
        char hb[32];
        human((double)o->budget, hb, sizeof hb);
        size_t l = strlen(label);
        snprintf(label + l, sizeof label - l, " (budget %s)", hb);
    } else if (s1->policy.kind == OT_REMAT_AUTO) {
        size_t l = strlen(label);
        snprintf(label + l, sizeof label - l, " (no budget: selective)");
    }
    if (o->json) {
        printf("{\"model\": ");
        ot_json_string(stdout, o->model);
        printf(", \"batch\": %lld, \"nodes\": %d, \"forward_nodes\": %d, \"articulation_points\": %d, \"plans\": [",
               (long long)s1->batch, s0->g->n_nodes, s0->an.n_fwd, s0->an.n_art);
        print_plan("none", s0, p0, true, false);
        printf(", ");
        print_plan(label, s1, p1, true, true);
        printf("]}\n");
    } else {
        printf("%s: batch %lld%s, training graph %d nodes (%d forward), %d articulation points\n", o->model,
               (long long)s1->batch, o->batch_auto ? " (auto)" : "", s0->g->n_nodes, s0->an.n_fwd, s0->an.n_art);
        print_plan("none", s0, p0, false, false);
        print_plan(label, s1, p1, false, true);
        double saved = (double)ot_plan_peak_bytes(p0) - (double)ot_plan_peak_bytes(p1);
        char hb[32];
        human(saved < 0 ? -saved : saved, hb, sizeof hb);
        printf("%s %s (%.1f%% of the peak) for %.1f%% more FLOPs\n", saved >= 0 ? "saves" : "costs", hb,
               100.0 * (saved < 0 ? -saved : saved) / (double)ot_plan_peak_bytes(p0),
               s1->an.step_flops > 0 ? 100.0 * s1->rw.extra_flops / s1->an.step_flops : 0.0);
    }
    if (o->dot && (st = write_dot(o->dot, s1->g, err))) goto fail;
    if (o->timeline) {
        const ot_plan *plans[2] = {p0, p1};
        char l1[300];
        snprintf(l1, sizeof l1, "--remat %s", label);
        const char *labels[2] = {"--remat none", l1};
        char title[512];
        snprintf(title, sizeof title, "%s, batch %lld: bytes in use along the schedule", o->model,
                 (long long)s1->batch);
        if ((st = ot_remat_timeline_svg(o->timeline, plans, labels, 2, title, err))) goto fail;
    }
fail:
    ot_plan_free(p0);
    ot_plan_free(p1);
    ot_remat_session_free(s0);
    ot_remat_session_free(s1);
    return st;
}

int ot_cmd_plan(int argc, char **argv) {
    static const struct option longopts[] = {
        {"loss", required_argument, NULL, 'L'},       {"batch-size", required_argument, NULL, 'b'},
        {"remat", required_argument, NULL, 'r'},      {"memory-budget", required_argument, NULL, 'm'},
        {"json", no_argument, NULL, 'j'},             {"dot", required_argument, NULL, 'd'},
        {"timeline", required_argument, NULL, 'T'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    plan_opts o = {0};
    ot_error err = {0};
    ot_status st = OT_OK;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'L': o.loss = optarg; break;
        case 'b':
            if (!strcmp(optarg, "auto")) o.batch_auto = true;
            else st = ot_args_int("--batch-size", optarg, 1, INT32_MAX, &o.batch, &err);
            break;
        case 'r': o.remat = optarg; break;
        case 'm': st = ot_args_size("--memory-budget", optarg, &o.budget, &err); break;
        case 'j': o.json = true; break;
        case 'd': o.dot = optarg; break;
        case 'T': o.timeline = optarg; break;
        case 'h': usage(stdout); return 0;
        default: st = ot_fail(&err, OT_E_USAGE, "unknown or incomplete option '%s'", argv[optind - 1]); break;
        }
        if (st) break;
    }
    if (!st) st = ot_args_one_model(argc, argv, optind, &o.model, &err);
    if (st) {
        fprintf(stderr, "onnxtrain plan: %s\nRun 'onnxtrain plan --help' for the options.\n", err.msg);
        return st;
    }
    st = run_plan(&o, &err);
    if (st) fprintf(stderr, "onnxtrain plan: %s\n", err.msg);
    return st;
}
