/* cmd_plan.c — `onnxtrain plan MODEL [--remat POLICY] ...`: runs nothing. Builds the
 * training graph `train` would run (the same session builder, optimizer included,
 * plan-only), plans it with --remat none and with the chosen policy, and prints
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
#include "cli/defaults.h"
#include "ir/atomic_file.h"
#include "ir/human_size.h"
#include "ir/json_write.h"
#include "kernels/kernel.h"
#include "remat/remat.h"
#include "remat/timeline.h"
#include "train/outputs.h"
#include "train/dist.h"
#include "train/train.h"
#include "train/train_memory.h"

static void usage(FILE *f) {
    fputs("usage: onnxtrain plan MODEL [options]\n\n"
          "Plans one training step (forward, loss, backward and the optimizer's update, the\n"
          "graph `train` runs) without running it: the exact peak memory with --remat none\n"
          "and with POLICY, bytes by category, recompute cost, and which activations are kept\n"
          "or recomputed, segment by segment. The figures are `train`'s for the same model,\n"
          "batch, policy and optimizer, to the byte.\n\n"
          "data (optional: without it the batch is --batch-size, else the model's, else 4, and other\n"
          "symbolic dims --bind, else 8):\n"
          OT_ARGS_HELP_DATA
          "  --val-input, --val-labels validation data as for train: its forward-only plan is\n"
          "                            made too, and --memory-budget must hold both\n"
          "  --batch-size N|auto       batch to plan for (default: the model's, else the data's\n"
          "                            min(32, samples), else 4; auto: the largest that fits\n"
          "                            --memory-budget)\n"
          OT_ARGS_HELP_BIND
          OT_ARGS_HELP_LOSS
          OT_ARGS_HELP_CHUNKED
          OT_ARGS_HELP_PARAMS
          OT_ARGS_HELP_LORA OT_ARGS_HELP_PRECISION
          "optimizer (its state and update are planned with the step):\n"
          OT_ARGS_HELP_OPTIM
          "plan:\n"
          "  --remat POLICY            none, all, sqrt, every:K, selective, manual:NAME,..., auto\n"
          "                            or optimal (least recompute for the budget, as a MIP)\n"
          "                            (default auto: the cheapest plan within --memory-budget; without\n"
          "                            one the least peak within +5% FLOPs, never above none's)\n"
          "  --memory-budget SIZE      e.g. 512M, 2G: the peak auto or optimal must fit; every plan's\n"
          "                            blocks are placed aiming at it, as train places them\n"
          "  --remat-time-limit SEC    for --remat optimal: the MIP solver's limit (default 60); then\n"
          "                            the best plan found and its gap. Needs CBC or GLPK at build time\n"
          "  --device DEV              cpu (default) or cuda[:N]: whose workspace sizes count\n"
          OT_ARGS_HELP_TF32
          "  --ranks N                 plan one rank of `mpirun -np N onnxtrain train`: --batch-size\n"
          "                            is the global batch, each rank's step is planned at B/N\n"
          "                            (--memory-budget and auto then hold per rank)\n"
          "  --threads N, --seed N,    as for train (they change no figure)\n"
          "  --wait-policy P\n"
          "  --json                    print the plans as JSON (sizes in bytes, every value name)\n"
          "  -v, --verbose             list every kept and recomputed value of a segment (the\n"
          "                            terminal shows the first few and a count of the rest)\n"
          "  --dot FILE                write the training graph (recompute nodes dashed, orange)\n"
          "  --timeline FILE.svg       draw bytes in use along the schedule for both plans\n",
          f);
    if (!ot_remat_optimal_available())
        fputs("\nthis build has no MIP solver (COIN-OR CBC, Debian coinor-libcbc-dev, or GLPK, libglpk-dev): --remat optimal is unavailable\n", f);
}

typedef struct plan_opts {
    const char *model, *dot, *timeline;
    ot_common_args args; /* data, loss, params, batch, bind, remat, budget, optimizer */
    ot_input_specs val_inputs;
    const char *val_labels;
    const char *lora_text; /* --lora's text, for the saving line */
    bool batch_auto, json;
    bool verbose; /* -v: every value name of the segment lines */
    int64_t ranks; /* --ranks: plan a rank of a data-parallel run (0, 1: one process) */
    ot_dist *dist; /* its rank count (ot_dist_for_plan) */
    ot_cli_batch_pick pick; /* the batch and binds when the user gives none (cli/defaults.h) */
} plan_opts;

/* One planned step: the session and what plan prints of it. */
typedef struct planned {
    ot_train_session *s;
    const ot_plan *p;
    const ot_remat_analysis *an;
    const bool *keep;
} planned;

/* Names shown per kept or recomputed list on the terminal; the rest are counted
 * ("... (+N more)"). -v and --json list them all. */
#define PLAN_FOLD_NAMES 4

/* Prints the saved values of segment k that are kept (want true) or recomputed: all of
 * them in JSON, at most `limit` on the terminal (< 0: all). */
static void print_values(const planned *pl, int k, bool want, bool json, int limit) {
    const ot_remat_analysis *a = pl->an;
    const ot_graph *g = ot_train_graph(pl->s);
    int shown = 0, more = 0;
    for (int v = 0; v < a->n_values; v++) {
        if (!a->saved[v] || a->segment[v] != k || pl->keep[v] != want) continue;
        if (json) {
            if (shown) printf(", ");
            ot_json_string(stdout, g->values[v].name);
        } else if (limit < 0 || shown < limit) {
            printf(" %s", g->values[v].name);
        } else {
            more++;
            continue;
        }
        shown++;
    }
    if (more) printf(" ... (+%d more)", more);
}

/* Kept and recomputed saved values, by segment. */
static void print_segments(const planned *pl, bool json, int limit) {
    const ot_remat_analysis *a = pl->an;
    if (!a) return;
    int n_seg = a->n_art + 1;
    if (json) printf(", \"segments\": [");
    bool first_seg = true;
    for (int k = 0; k < n_seg; k++) {
        int n_kept = 0, n_rec = 0;
        for (int v = 0; v < a->n_values; v++) {
            if (!a->saved[v] || a->segment[v] != k) continue;
            if (pl->keep[v]) n_kept++;
            else n_rec++;
        }
        if (!n_kept && !n_rec) continue;
        if (json) {
            printf("%s{\"segment\": %d, \"kept\": [", first_seg ? "" : ", ", k);
            print_values(pl, k, true, true, -1);
            printf("], \"recomputed\": [");
            print_values(pl, k, false, true, -1);
            printf("]}");
        } else {
            printf("  segment %d:", k);
            if (n_kept) {
                printf(" kept");
                print_values(pl, k, true, false, limit);
            }
            if (n_rec) {
                printf("%s recomputed", n_kept ? ";" : "");
                print_values(pl, k, false, false, limit);
            }
            putchar('\n');
        }
        first_seg = false;
    }
    if (json) printf("]");
}

static double step_flops(const planned *pl) { return pl->an ? pl->an->step_flops : 0.0; }

/* --precision: the kept activations and the transient values at the peak by stored
 * dtype, as a line or a JSON member; nothing for a float32 session. */
static void print_by_dtype(const planned *pl, bool json) {
    const ot_autocast_result *ac = ot_train_autocast(pl->s);
    if (ac->low != OT_BF16 && ac->low != OT_F16) return;
    const ot_graph *g = ot_train_graph(pl->s);
    static const ot_mem_category cats[2] = {OT_MEM_KEPT, OT_MEM_TRANSIENT};
    printf(json ? "\"bytes_by_dtype\": {" : "  by precision:");
    for (int k = 0; k < 2; k++) {
        size_t by[OT_PLAN_DTYPES];
        ot_plan_bytes_by_dtype(pl->p, g, cats[k], true, by);
        printf(json ? "%s\"%s\": {" : "%s %s", k ? (json ? ", " : ";") : "", ot_mem_category_name(cats[k]));
        int n = 0;
        for (int d = 0; d < OT_PLAN_DTYPES; d++) {
            if (!by[d] && d != (int)OT_F32 && d != (int)ac->low) continue;
            char b[32];
            if (json) printf("%s\"%s\": %zu", n++ ? ", " : "", d ? ot_dtype_name((ot_dtype)d) : "other", by[d]);
            else printf("%s %s %s", n++ ? "," : "", d ? ot_dtype_name((ot_dtype)d) : "other",
                        ot_human_size((double)by[d], b, sizeof b));
        }
        if (json) printf("}");
    }
    printf(json ? "}, " : " (live at the peak)\n");
}

/* segments: the kept and recomputed values by segment, each list folded to `limit`
 * names on the terminal (< 0: all). */
static void print_plan(const char *label, const planned *pl, bool json, bool segments, int limit) {
    const ot_train_remat_summary *rs = ot_train_remat_info(pl->s);
    const ot_plan *p = pl->p;
    ot_train_memory_summary ms;
    ot_train_memory_info(pl->s, &ms);
    double extra = rs->extra_flops, step = step_flops(pl);
    int64_t kept = rs->applied ? rs->kept : rs->kept_none;
    const ot_remat_optimal_stats *os = ot_train_remat_optimal(pl->s);
    if (json) {
        printf("{\"policy\": ");
        ot_json_string(stdout, label);
        printf(", \"peak_bytes\": %zu, \"extra_flops\": %.0f, \"step_flops\": %.0f, \"recompute_share\": %.6f, "
               "\"recompute_nodes\": %d, \"kept_activation_bytes\": %lld, \"choose_seconds\": %.6f, ",
               ot_plan_peak_bytes(p), extra, step, step > 0 ? extra / step : 0.0, rs->n_clones, (long long)kept,
               ot_train_remat_choose_seconds(pl->s));
        if (ms.val_peak) printf("\"validation_peak_bytes\": %lld, ", (long long)ms.val_peak);
        if (os)
            printf("\"optimal\": {\"proven\": %s, \"gap\": %.6g, \"bound_flops\": %.0f, \"rounds\": %d, "
                   "\"model_peak_bytes\": %lld, \"planner_peak_bytes\": %lld, \"model_budget_bytes\": %lld, "
                   "\"binaries\": %d, \"columns\": %d, \"rows\": %d, \"seconds\": %.6f, \"heuristic\": %s, "
                   "\"auto_extra_flops\": %.0f}, ",
                   os->proven ? "true" : "false", os->gap, os->bound, os->rounds, (long long)os->model_peak,
                   (long long)os->planner_peak, (long long)os->model_budget, os->n_binaries, os->n_columns,
                   os->n_rows, os->seconds, os->heuristic ? "true" : "false", os->auto_cost);
        print_by_dtype(pl, true);
        printf("\"plan\": ");
        ot_plan_write_json(p, stdout);
        if (segments) print_segments(pl, true, -1);
        printf("}");
        return;
    }
    char pk[32], kb[32];
    ot_human_size((double)ot_plan_peak_bytes(p), pk, sizeof pk);
    ot_human_size((double)kept, kb, sizeof kb);
    printf("--remat %s: peak %s\n", label, pk);
    if (ms.val_peak) {
        char vb[32];
        ot_human_size((double)ms.val_peak, vb, sizeof vb);
        printf("  validation plan (forward only, inference mode): %s more\n", vb);
    }
    printf("  at the peak:");
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        char b[32];
        ot_human_size((double)ot_plan_bytes_at_peak(p, (ot_mem_category)c), b, sizeof b);
        printf("%s %s %s", c ? "," : "", ot_mem_category_name((ot_mem_category)c), b);
    }
    printf("\n");
    print_by_dtype(pl, false);
    char xf[OT_HUMAN_SIZE_LEN], sf[OT_HUMAN_SIZE_LEN];
    printf("  activations held for the backward pass: %s; recompute: %d nodes, %s extra FLOPs "
           "(%.1f%% of the step's %s)\n",
           kb, rs->n_clones, ot_human_count(extra, xf, sizeof xf), step > 0 ? 100.0 * extra / step : 0.0,
           ot_human_count(step, sf, sizeof sf));
    if (os && os->heuristic)
        printf("  optimal: auto's plan, %s: no solution of the programme that the planner accepted was "
               "cheaper (%d round%s, %.2f s; %d binaries)\n",
               os->proven ? "proven optimal" : "not proven", os->rounds, os->rounds == 1 ? "" : "s",
               os->seconds, os->n_binaries);
    else if (os) {
        char mp[OT_HUMAN_SIZE_LEN], pp[OT_HUMAN_SIZE_LEN], dp[OT_HUMAN_SIZE_LEN];
        printf("  optimal: %s (gap %.4g%%, %d round%s, %.2f s; %d binaries); solver's model peak %s, planner's %s "
               "(%s%s)\n",
               os->proven ? "proven" : "not proven", 100.0 * os->gap, os->rounds, os->rounds == 1 ? "" : "s",
               os->seconds, os->n_binaries, ot_human_size((double)os->model_peak, mp, sizeof mp),
               ot_human_size((double)os->planner_peak, pp, sizeof pp), os->planner_peak >= os->model_peak ? "+" : "",
               ot_human_size((double)(os->planner_peak - os->model_peak), dp, sizeof dp));
    }
    if (segments) print_segments(pl, false, limit);
}

/* Writes and syncs the graph under a temporary name; *out is committed by the caller. */
static ot_status write_dot(const char *path, const ot_graph *g, ot_atomic_file **out, ot_error *err) {
    ot_atomic_file *af;
    ot_status st = ot_atomic_open(path, &af, err);
    if (!st) {
        ot_graph_dump_dot(g, ot_atomic_stream(af));
        st = ot_atomic_finish(af, err); /* frees af on failure */
    }
    if (st && err) ot_error_prefix(err, "--dot ");
    *out = st ? NULL : af;
    return st;
}

/* --dot and --timeline against the model, its external data and the data files. */
static ot_status check_files(const plan_opts *o, const ot_model *m, ot_error *err) {
    ot_run_files f = {0};
    ot_status st = ot_run_files_model(&f, m, err);
    if (!st) st = ot_args_add_input_files(&f, &o->args.inputs, "--input", o->args.labels, "--labels", err);
    if (!st) st = ot_args_add_input_files(&f, &o->val_inputs, "--val-input", o->val_labels, "--val-labels", err);
    if (!st) st = ot_run_files_output(&f, "--dot", o->dot, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_output(&f, "--timeline", o->timeline, OT_OUTPUT_FILE, err);
    if (!st) st = ot_run_files_check(&f, err);
    ot_run_files_free(&f);
    return st;
}

/* A plan-only training session over the imported model under `policy`. */
static ot_status plan_one(const plan_opts *o, ot_model *m, ot_dataset *data, ot_dataset *val, const char *policy,
                          int64_t batch, planned *out, ot_error *err) {
    ot_train_options to;
    ot_train_options_default(&to);
    ot_common_args_to_train(&o->args, &to);
    to.plan_only = true; /* nothing here runs: the weights were never loaded */
    to.remat = policy;
    to.batch_size = batch;
    to.bind = o->pick.binds; /* the user's, and without data the small defaults (cli/defaults.h) */
    to.n_bind = o->pick.n_binds;
    /* a budget is what auto searches within; a fixed policy is planned as it is */
    to.memory_budget = !strcmp(policy, "auto") || !strcmp(policy, "optimal") ? o->args.memory_budget : 0;
    to.plan_target = o->args.memory_budget; /* but placed as `train` places it under the budget */
    to.validation = val->n_arrays > 0; /* planned with the step, inside the budget, as train does */
    ot_status st = ot_dist_train_options(o->dist, &to, false, err); /* --ranks: the per-rank step */
    if (st) return st;
    st = ot_train_session_new(m, &to, data->n_arrays ? data : NULL, true, &out->s, err);
    if (!st && val->n_arrays) st = ot_train_check_data(out->s, val, "validation data", err);
    if (st) return st;
    out->p = ot_train_plan(out->s);
    out->an = ot_train_remat_analysis(out->s, &out->keep);
    return OT_OK;
}

/* --lora: the plain step with LoRA (p0) against the same step without it (base). */
static void print_lora_saving(const plan_opts *o, const planned *p0, const planned *base) {
    char a[32], b[32], s[64], w[32], wb[32];
    const ot_plan *p = p0->p, *q = base->p;
    double trained = (double)(p->slab_bytes[OT_MEM_PARAMS] + p->slab_bytes[OT_MEM_GRADIENTS] + p->slab_bytes[OT_MEM_OPT_STATE]);
    double trained_b = (double)(q->slab_bytes[OT_MEM_PARAMS] + q->slab_bytes[OT_MEM_GRADIENTS] + q->slab_bytes[OT_MEM_OPT_STATE]);
    ot_human_size((double)ot_plan_peak_bytes(p), a, sizeof a);
    ot_human_size((double)ot_plan_peak_bytes(q), b, sizeof b);
    ot_cli_peak_change((int64_t)ot_plan_peak_bytes(q), (int64_t)ot_plan_peak_bytes(p), s, sizeof s);
    ot_human_size(trained, w, sizeof w);
    ot_human_size(trained_b, wb, sizeof wb);
    printf("--lora %s: peak %s with --remat none instead of %s without LoRA: %s; trained params, their "
           "gradients and optimizer state %s instead of %s\n",
           o->lora_text, a, b, s, w, wb);
}

/* --fused-attention: the attention blocks fused and the float32 probabilities they
 * no longer keep, or why none was. */
static void print_fused_attention(const planned *p1, bool json) {
    const ot_fused_attn_result *r = ot_train_fused_attention(p1->s);
    if (json) {
        printf(", \"fused_attention\": {\"fused\": %d, \"with_dropout\": %d, \"left_alone\": %d, "
               "\"prob_bytes\": %zu, \"what\": ",
               r->n_fused, r->n_dropout, r->n_skipped, r->prob_bytes);
        ot_json_string(stdout, r->n_fused || !r->n_skipped ? r->why : r->first_skip);
        printf("}");
        return;
    }
    char pb[32];
    ot_human_size((double)r->prob_bytes, pb, sizeof pb);
    printf("--fused-attention: %s", r->why);
    if (r->n_fused) printf("; %s of float32 probabilities no longer kept", pb);
    if (r->n_skipped) printf("; %d Softmax left alone (first: %s)", r->n_skipped, r->first_skip);
    printf("\n");
}

/* --chunked-loss: what the fused head and loss (p1) saved against the same policy
 * without them (plain), category by category at each plan's peak. */
static void print_chunked_saving(const planned *p1, const planned *plain, bool json) {
    const ot_linear_ce_result *r = ot_train_chunked_loss(p1->s);
    const ot_plan *p = p1->p, *q = plain ? plain->p : NULL;
    if (json) {
        printf(", \"chunked_loss\": {\"applied\": %s, \"what\": ", r->applied ? "true" : "false");
        ot_json_string(stdout, r->why);
        if (r->applied)
            printf(", \"rows\": %lld, \"classes\": %lld, \"chunk_rows\": %lld, \"logits_bytes\": %zu",
                   (long long)r->rows, (long long)r->vocab, (long long)r->chunk_rows, r->logits_bytes);
        if (r->applied && q) {
            printf(", \"peak_bytes_without\": %zu, \"at_peak_without\": {", ot_plan_peak_bytes(q));
            for (int c = 0; c < OT_MEM_COUNT; c++)
                printf("%s\"%s\": %zu", c ? ", " : "", ot_mem_category_name((ot_mem_category)c),
                       ot_plan_bytes_at_peak(q, (ot_mem_category)c));
            printf("}");
        }
        printf("}");
        return;
    }
    if (!r->applied) {
        printf("--chunked-loss: not applied: %s\n", r->why);
        return;
    }
    char a[32], b[32], lb[32], change[64];
    ot_human_size((double)ot_plan_peak_bytes(p), a, sizeof a);
    ot_human_size((double)ot_plan_peak_bytes(q), b, sizeof b);
    ot_human_size((double)r->logits_bytes, lb, sizeof lb);
    ot_cli_peak_change((int64_t)ot_plan_peak_bytes(q), (int64_t)ot_plan_peak_bytes(p), change, sizeof change);
    printf("--chunked-loss: %s; the %s of logits and their gradient never exist\n", r->why, lb);
    printf("  peak %s instead of %s without it: %s\n  at the peak, without -> with:", a, b, change);
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        char x[32], y[32];
        ot_human_size((double)ot_plan_bytes_at_peak(q, (ot_mem_category)c), x, sizeof x);
        ot_human_size((double)ot_plan_bytes_at_peak(p, (ot_mem_category)c), y, sizeof y);
        printf("%s %s %s -> %s", c ? "," : "", ot_mem_category_name((ot_mem_category)c), x, y);
    }
    printf("\n");
}

/* --fuse-update: the policy's plan (p1, fused) against the same plan unfused (q), and
 * what the fused update saved per category at each one's peak (issue 28, item 4). */
static void print_fuse_saving(const planned *p1, const planned *q, const char *label, bool json) {
    const ot_plan *a = p1->p, *b = q->p;
    if (json) {
        printf(", \"without_fuse_update\": {\"peak_bytes\": %zu, \"gradients_at_peak\": %zu, \"saved_bytes\": %lld, "
               "\"gradients_saved_bytes\": %lld}",
               ot_plan_peak_bytes(b), ot_plan_bytes_at_peak(b, OT_MEM_GRADIENTS),
               (long long)ot_plan_peak_bytes(b) - (long long)ot_plan_peak_bytes(a),
               (long long)ot_plan_bytes_at_peak(b, OT_MEM_GRADIENTS) - (long long)ot_plan_bytes_at_peak(a, OT_MEM_GRADIENTS));
        return;
    }
    char change[64], ga[32], gb[32], gs[32];
    ot_cli_peak_change((int64_t)ot_plan_peak_bytes(b), (int64_t)ot_plan_peak_bytes(a), change, sizeof change);
    size_t g1 = ot_plan_bytes_at_peak(a, OT_MEM_GRADIENTS), g0 = ot_plan_bytes_at_peak(b, OT_MEM_GRADIENTS);
    ot_human_size((double)g1, ga, sizeof ga);
    ot_human_size((double)g0, gb, sizeof gb);
    ot_human_size((double)g0 - (double)g1, gs, sizeof gs);
    printf("--fuse-update against the update after the backward pass (--remat %s): %s; at the peak gradients: "
           "saved %s (%s instead of %s); unfused:", label, change, gs, ga, gb);
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        char x[32];
        ot_human_size((double)ot_plan_bytes_at_peak(b, (ot_mem_category)c), x, sizeof x);
        printf("%s %s %s", c ? "," : "", ot_mem_category_name((ot_mem_category)c), x);
    }
    putchar('\n');
}

static void print_plans(const plan_opts *o, const planned *p0, const planned *p1, const char *label, int64_t batch,
                        const planned *nolora, const planned *plain, const planned *nofuse) {
    const ot_remat_analysis *an = p1->an ? p1->an : p0->an;
    int n_fwd = an ? an->n_fwd : 0, n_art = an ? an->n_art : 0, n_nodes = ot_train_graph(p0->s)->n_nodes;
    if (o->json) {
        printf("{\"model\": ");
        ot_json_string(stdout, o->model);
        static const char *from[] = {"given", "model", "data", "default"};
        printf(", \"batch\": %lld, \"batch_from\": \"%s\", \"optimizer\": \"%s\", ", (long long)batch,
               o->batch_auto ? "auto" : from[o->pick.from], ot_optim_kind_name(ot_args_optim_kind(&o->args)));
        if (o->ranks > 1) printf("\"ranks\": %lld, \"batch_per\": \"rank\", ", (long long)o->ranks);
        printf("\"nodes\": %d, \"forward_nodes\": %d, \"articulation_points\": %d, \"plans\": [", n_nodes, n_fwd,
               n_art);
        print_plan("none", p0, true, false, -1);
        printf(", ");
        print_plan(label, p1, true, true, -1);
        printf("]");
        if (nolora) {
            printf(", \"without_lora\": ");
            print_plan("none", nolora, true, false, -1);
        }
        if (o->args.chunked_loss != OT_CHUNKED_LOSS_OFF) print_chunked_saving(p1, plain, true);
        if (o->args.fused_attention != OT_FUSED_ATTN_OFF) print_fused_attention(p1, true);
        if (nofuse) print_fuse_saving(p1, nofuse, label, true);
        printf("}\n");
        return;
    }
    char per_rank[96] = "";
    if (o->ranks > 1)
        snprintf(per_rank, sizeof per_rank, " per rank (global batch %lld over %lld ranks)", (long long)(batch * o->ranks),
                 (long long)o->ranks);
    printf("%s: batch %lld%s%s, training graph %d nodes (%d forward), %d articulation points\n", o->model,
           (long long)batch, o->batch_auto ? " (auto)" : ot_cli_batch_note(&o->pick), per_rank, n_nodes, n_fwd, n_art);
    if (*o->pick.dims)
        printf("%s = %d (a small default without data; --bind NAME=SIZE for another)\n", o->pick.dims,
               OT_CLI_DIM_NO_DATA);
    printf("optimizer %s: its state and update are planned with the step (--optimizer for another)\n",
           ot_optim_kind_name(ot_args_optim_kind(&o->args)));
    print_plan("none", p0, false, false, -1);
    print_plan(label, p1, false, true, o->verbose ? -1 : PLAN_FOLD_NAMES);
    const ot_train_remat_summary *rs = ot_train_remat_info(p1->s);
    double step = step_flops(p1);
    char change[64];
    ot_cli_peak_change((int64_t)ot_plan_peak_bytes(p0->p), (int64_t)ot_plan_peak_bytes(p1->p), change, sizeof change);
    if (rs->no_gain)
        printf("no remat helps here: no plan within +%.0f%% FLOPs peaks below --remat none's, so auto's plan is "
               "none's (--memory-budget SIZE searches further)\n", 100.0 * OT_REMAT_AUTO_MODEST);
    else
        printf("%s for %.1f%% more FLOPs\n", change, step > 0 ? 100.0 * rs->extra_flops / step : 0.0);
    if (nolora) print_lora_saving(o, p0, nolora);
    if (o->args.chunked_loss != OT_CHUNKED_LOSS_OFF) print_chunked_saving(p1, plain, false);
    if (o->args.fused_attention != OT_FUSED_ATTN_OFF) print_fused_attention(p1, false);
    if (nofuse) print_fuse_saving(p1, nofuse, label, false);
}

static ot_status run_plan(plan_opts *o, ot_error *err) {
    ot_status st = OT_OK;
    ot_model *m = NULL;
    ot_dataset data = {0}, val = {0};
    planned p0 = {0}, p1 = {0}, p2 = {0}, p3 = {0}, p4 = {0};
    char nofit[sizeof(ot_error){0}.msg] = ""; /* --fuse-update: why the policy has no unfused plan within the budget */
    ot_atomic_file *dot = NULL;
    const ot_common_args *a = &o->args;
    const char *policy = a->remat ? a->remat : OT_CLI_REMAT_DEFAULT;
    /* one import for every plan below (and every --batch-size auto probe): each plan
     * binds its own copy of the graph. Nothing runs, so the weights are not read. */
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
    if ((st = ot_model_load(o->model, &io, &m, err))) goto fail;
    if ((st = check_files(o, m, err))) goto fail;
    if ((st = ot_args_load_dataset(&a->inputs, a->labels, &data, err))) goto fail;
    if ((st = ot_cli_pick_batch(m->graph, a, data.n_arrays ? data.n_samples : -1, &o->pick, err))) goto fail;
    int64_t batch = o->pick.batch;
    if (o->pick.from == OT_BATCH_NO_DATA && o->ranks > 1) batch *= o->ranks; /* the small default per rank */
    if (o->batch_auto) {
        if (!a->memory_budget) {
            st = ot_fail(err, OT_E_USAGE, "--batch-size auto needs --memory-budget SIZE");
            goto fail;
        }
        ot_train_options to;
        ot_train_options_default(&to);
        ot_common_args_to_train(a, &to);
        to.remat = policy;
        to.bind = o->pick.binds;
        to.n_bind = o->pick.n_binds;
        int64_t max = data.n_arrays ? data.n_samples : 1 << 20;
        /* --ranks: the largest per-rank batch; the plans below take the global one */
        int64_t n = o->ranks > 1 ? o->ranks : 1;
        if ((st = ot_dist_train_options(o->dist, &to, true, err))) goto fail;
        if ((st = ot_train_find_batch(m, &to, true, a->memory_budget, max / n > 0 ? max / n : 1, &batch, err)))
            goto fail;
        batch *= n;
    }
    if (o->val_inputs.n && (st = ot_args_load_dataset(&o->val_inputs, o->val_labels, &val, err))) goto fail;
    if ((st = plan_one(o, m, &data, &val, "none", batch, &p0, err))) goto fail;
    ot_train_print_constants_note(p0.s, stderr);
    if ((st = plan_one(o, m, &data, &val, policy, batch, &p1, err))) goto fail;
    char label[256];
    ot_cli_remat_label(policy, a->memory_budget, ot_train_remat_info(p1.s), label, sizeof label);
    batch = ot_train_batch_size(p1.s); /* per rank (printed so); the plans below take the global one */
    int64_t global = batch * (o->ranks > 1 ? o->ranks : 1);
    if (a->lora.rank) { /* the same step without LoRA, for the saving */
        plan_opts base = *o;
        base.args.lora.rank = 0;
        base.args.lora_target.n = 0;
        if ((st = plan_one(&base, m, &data, &val, "none", global, &p2, err))) goto fail;
    }
    if (ot_train_chunked_loss(p1.s)->applied) { /* the same policy without --chunked-loss, for the saving */
        plan_opts plain = *o;
        plain.args.chunked_loss = OT_CHUNKED_LOSS_OFF;
        if ((st = plan_one(&plain, m, &data, &val, policy, global, &p3, err))) goto fail;
    }
    if (a->fuse_update) { /* the same policy unfused, for what fusing saved */
        plan_opts base = *o;
        base.args.fuse_update = false;
        ot_error e3 = {0};
        if ((st = plan_one(&base, m, &data, &val, policy, global, &p4, &e3)) == OT_E_MEMORY) {
            /* the budget fits the fused step only: that is the saving, said as such */
            snprintf(nofit, sizeof nofit, "%s", e3.msg);
            ot_train_session_free(p4.s);
            p4.s = NULL;
            st = OT_OK;
        } else if (st) {
            if (err) *err = e3;
            goto fail;
        }
    }
    print_plans(o, &p0, &p1, label, batch, a->lora.rank ? &p2 : NULL, p3.s ? &p3 : NULL, p4.s ? &p4 : NULL);
    if (*nofit && o->json) fprintf(stderr, "onnxtrain plan: without --fuse-update: %s\n", nofit);
    else if (*nofit) printf("--fuse-update: without it the budget holds no plan (%s)\n", nofit);
    /* --dot is written and synced first and renamed only after the timeline was
     * written, so a failed timeline leaves neither */
    if (o->dot && (st = write_dot(o->dot, ot_train_graph(p1.s), &dot, err))) goto fail;
    if (o->timeline) {
        const ot_plan *plans[2] = {p0.p, p1.p};
        char l1[300];
        snprintf(l1, sizeof l1, "--remat %s", label);
        const char *labels[2] = {"--remat none", l1};
        char title[512];
        const char *base = strrchr(o->model, '/'); /* the file name: a title holds no folder of this machine */
        snprintf(title, sizeof title, "%s, batch %lld: bytes in use along the schedule", base ? base + 1 : o->model,
                 (long long)batch);
        if ((st = ot_remat_timeline_svg(o->timeline, plans, labels, 2, title, err))) goto fail;
    }
    if (dot) {
        ot_atomic_file *d = dot;
        dot = NULL;
        if ((st = ot_atomic_commit(d, err)) && err) ot_error_prefix(err, "--dot ");
    }
fail:
    ot_atomic_abort(dot);
    ot_train_session_free(p0.s);
    ot_train_session_free(p1.s);
    ot_train_session_free(p2.s);
    ot_train_session_free(p3.s);
    ot_train_session_free(p4.s);
    ot_dataset_free(&data);
    ot_dataset_free(&val);
    ot_cli_batch_pick_free(&o->pick);
    ot_model_free(m);
    return st;
}

enum { O_JSON = OT_ARG_OWN, O_DOT, O_TIMELINE, O_VAL_INPUT, O_VAL_LABELS, O_RANKS };

/* plan's own options (ot_args_own_fn): --batch-size auto is plan's; --lora is noted,
 * then read by ot_args_common. */
static ot_status plan_option(void *cmd, int code, const char *arg, bool *taken, ot_error *err) {
    plan_opts *o = cmd;
    *taken = true;
    switch (code) {
    case O_JSON: o->json = true; return OT_OK;
    case 'v': o->verbose = true; return OT_OK;
    case O_DOT: o->dot = arg; return OT_OK;
    case O_TIMELINE: o->timeline = arg; return OT_OK;
    case O_VAL_INPUT: return ot_args_add_input(&o->val_inputs, "--val-input", arg, err);
    case O_VAL_LABELS: o->val_labels = arg; return OT_OK;
    case O_RANKS: return ot_args_int("--ranks", arg, 1, 1 << 24, &o->ranks, err);
    case OT_ARG_BATCH:
        if (!strcmp(arg, "auto")) {
            o->batch_auto = true;
            return OT_OK;
        }
        break;
    case OT_ARG_LORA: o->lora_text = arg; break;
    default: break;
    }
    *taken = false;
    return OT_OK;
}

int ot_cmd_plan(int argc, char **argv) {
    static const struct option longopts[] = {
        OT_ARGS_OPTS_SESSION,
        {"json", no_argument, NULL, O_JSON},
        {"verbose", no_argument, NULL, 'v'},
        {"dot", required_argument, NULL, O_DOT},
        {"timeline", required_argument, NULL, O_TIMELINE},
        {"val-input", required_argument, NULL, O_VAL_INPUT},
        {"val-labels", required_argument, NULL, O_VAL_LABELS},
        {"ranks", required_argument, NULL, O_RANKS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    plan_opts o = {0};
    ot_common_args_init(&o.args);
    ot_error err = {0};
    bool help;
    ot_status st = ot_args_parse(argc, argv, "hv", longopts, &o.args, plan_option, &o, &help, &err);
    if (!st && !help) st = ot_args_one_model(argc, argv, optind, &o.model, &err);
    if (!st && help) {
        usage(stdout);
        ot_common_args_free(&o.args);
        ot_input_specs_free(&o.val_inputs);
        return 0;
    }
    if (st) {
        fprintf(stderr, "onnxtrain plan: %s\nRun 'onnxtrain plan --help' for the options.\n", err.msg);
        ot_common_args_free(&o.args);
        ot_input_specs_free(&o.val_inputs);
        return st;
    }
    ot_args_notes(&o.args, "plan", stderr);
    if (o.ranks > 1) st = ot_dist_for_plan((int)o.ranks, &o.dist, &err);
    if (!st) st = run_plan(&o, &err);
    if (st) fprintf(stderr, "onnxtrain plan: %s\n", err.msg);
    ot_dist_finalize(o.dist);
    ot_common_args_free(&o.args);
    ot_input_specs_free(&o.val_inputs);
    return st;
}
