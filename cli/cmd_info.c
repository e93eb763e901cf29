/* cmd_info.c — `onnxtrain info MODEL [--json] [--dump text|dot]`: what a model is
 * (path, IR version, producer, opset), its inputs and outputs with dtypes and shapes
 * (symbolic dims by name), parameter and state counts and bytes, an op histogram,
 * and every unsupported op with the nodes using it, all at once. Exit code 6 when
 * anything is unsupported, after printing everything. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "autodiff/autodiff.h"
#include "autodiff/lora.h"
#include "cli/args.h"
#include "importer/importer.h"
#include "ir/human_size.h"
#include "ir/json_write.h"
#include "kernels/kernel.h"

static void usage(FILE *f) {
    fputs("usage: onnxtrain info MODEL [--json] [--dump text|dot] [--lora RANK[:ALPHA] [--lora-target GLOB,...]]\n"
          "                      [--precision bf16|fp16]\n\n"
          "Shows a model's IR version, producer, opset, inputs and outputs (dtype and shape,\n"
          "symbolic dims by name), parameter and state sizes, an op histogram, and every\n"
          "op onnxtrain does not support with the nodes using it.\n\n"
          "  --json            print the same as one JSON object\n"
          "  --dump text|dot   print the imported graph instead (text, or Graphviz DOT)\n"
          "  --lora RANK[:ALPHA], --lora-target GLOB,...\n"
          "                    also list the weights `train --lora` would adapt (and the 2-D float\n"
          "                    weights it would not, with the reason) and the adapters' size\n"
          "  --precision P     also list where `train --precision P` (bf16, fp16) runs each node on\n"
          "                    the CPU: low, float32 list, or float32 with casts for want of a\n"
          "                    low-precision kernel\n"
          "  -h, --help        this help\n\n"
          "Exit codes: 0 ok, 2 usage, 3 I/O, 4 parse, 5 invalid model, 6 unsupported ops.\n",
          f);
}

typedef struct op_count {
    const char *op_type;
    const char *domain;
    int count;
} op_count;

static int by_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    if (x->count != y->count) return y->count - x->count;
    return strcmp(x->op_type, y->op_type);
}

static void json_shape(FILE *f, const ot_graph *g, const ot_shape *s) {
    if (s->rank < 0) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (int i = 0; i < s->rank; i++) {
        if (i) fputs(", ", f);
        if (s->dim[i] >= 0) fprintf(f, "%lld", (long long)s->dim[i]);
        else if (s->sym[i] >= 0) ot_json_string(f, g->syms[s->sym[i]]);
        else fputs("null", f);
    }
    fputc(']', f);
}

typedef struct sizes {
    int64_t n_tensors, numel, bytes;
} sizes;

static void print_values_json(FILE *f, const ot_graph *g, const int *ids, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        const ot_value *v = &g->values[ids[i]];
        fputs(i ? ", {\"name\": " : "{\"name\": ", f);
        ot_json_string(f, v->name);
        fputs(", \"dtype\": ", f);
        ot_json_string(f, ot_dtype_name(v->dtype));
        fputs(", \"shape\": ", f);
        json_shape(f, g, &v->shape);
        fputc('}', f);
    }
    fputc(']', f);
}

static void print_values_text(FILE *f, const ot_graph *g, const char *title, const int *ids, int n) {
    fprintf(f, "%s (%d):\n", title, n);
    for (int i = 0; i < n; i++) {
        const ot_value *v = &g->values[ids[i]];
        char sb[256];
        fprintf(f, "  %-24s %-9s %s\n", v->name, ot_dtype_name(v->dtype), ot_shape_str(g, &v->shape, sb, sizeof sb));
    }
}

/* What info reports of a graph: params and state by count and bytes, live nodes, ops by count. */
typedef struct model_summary {
    sizes params, state;
    op_count *hist;
    int n_hist, n_live;
    /* ot_param_rule's verdict against the graph outputs: what `train` would train. */
    const char **reason;
    int n_train, n_const;
    int64_t train_numel;
} model_summary;

/* Classifies the float initializers as train would (the loss sits on the outputs). */
static ot_status summarize_params(const ot_graph *g, model_summary *sum) {
    ot_error err = {0};
    sum->reason = calloc((size_t)g->n_values + 1, sizeof *sum->reason);
    if (!sum->reason) return OT_E_MEMORY;
    ot_status st = ot_param_rule(g, g->outputs, g->n_outputs, sum->reason, &err);
    if (st) return st;
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        if (val->kind != OT_VK_PARAM || !ot_dtype_is_float(val->dtype)) continue;
        if (sum->reason[v]) {
            sum->n_const++;
            continue;
        }
        sum->n_train++;
        sum->train_numel += ot_shape_numel(&val->shape);
    }
    return OT_OK;
}

/* The shared-layer note for v, or 0 when v is the parameter of at most one layer. */
static int shared_layers(const ot_graph *g, int v, char *what, size_t cap) {
    const ot_value *val = &g->values[v];
    if (val->kind != OT_VK_PARAM || !ot_dtype_is_float(val->dtype)) return 0;
    int n = ot_param_layer_sharing(g, v, what, cap);
    return n > 1 ? n : 0;
}

static void print_params_json(FILE *f, const ot_graph *g, const model_summary *sum) {
    fprintf(f, ",\n  \"trainable\": {\"tensors\": %d, \"count\": %lld},\n  \"kept_constant\": [", sum->n_train,
            (long long)sum->train_numel);
    for (int v = 0, k = 0; v < g->n_values; v++) {
        if (!sum->reason[v]) continue;
        fputs(k++ ? ", {\"name\": " : "{\"name\": ", f);
        ot_json_string(f, g->values[v].name);
        fputs(", \"reason\": ", f);
        ot_json_string(f, sum->reason[v]);
        fputc('}', f);
    }
    fputs("],\n  \"shared\": [", f);
    for (int v = 0, k = 0; v < g->n_values; v++) {
        char what[160];
        int n = shared_layers(g, v, what, sizeof what);
        if (!n) continue;
        fputs(k++ ? ", {\"name\": " : "{\"name\": ", f);
        ot_json_string(f, g->values[v].name);
        fprintf(f, ", \"consumers\": %d, \"of\": ", n);
        ot_json_string(f, what);
        fputc('}', f);
    }
    fputc(']', f);
}

static void print_params_text(FILE *f, const ot_graph *g, const model_summary *sum) {
    fprintf(f, "trainable:   %lld in %d tensors (docs/training.md: which initializers train)\n",
            (long long)sum->train_numel, sum->n_train);
    if (sum->n_const) {
        fprintf(f, "kept constant (%d float initializers; --train REGEX trains one anyway):\n", sum->n_const);
        for (int v = 0; v < g->n_values; v++)
            if (sum->reason[v]) fprintf(f, "  %-28s %s\n", g->values[v].name, sum->reason[v]);
    }
    for (int v = 0; v < g->n_values; v++) {
        char what[160];
        int n = shared_layers(g, v, what, sizeof what);
        if (n)
            fprintf(f, "note: '%s' is shared by %d %s: the exporter may have merged identical tensors; its "
                       "gradient is the sum\n", g->values[v].name, n, what);
    }
}

/* --lora: what train --lora would adapt (why[] from ot_lora_targets). Skipped
 * weights are listed only when they are 2-D floats: biases and norms never qualify. */
static bool lora_listed(const ot_graph *g, const char **why, int v) {
    const ot_value *val = &g->values[v];
    return !why[v] || (val->kind == OT_VK_PARAM && ot_dtype_is_float(val->dtype) && val->shape.rank == 2);
}

static void print_lora(FILE *f, const ot_graph *g, const ot_lora_options *lo, const char **why, bool json) {
    int64_t rank = lo->rank, n_ad = 0, adapter_numel = 0, base_numel = 0;
    for (int v = 0; v < g->n_values; v++)
        if (!why[v]) {
            n_ad++;
            adapter_numel += rank * (g->values[v].shape.dim[0] + g->values[v].shape.dim[1]);
            base_numel += ot_shape_numel(&g->values[v].shape);
        }
    double alpha = lo->alpha > 0 ? lo->alpha : (double)rank;
    if (json) {
        fprintf(f, ",\n  \"lora\": {\"rank\": %lld, \"alpha\": %.17g, \"scale\": %.17g, \"adapter_params\": %lld, "
                   "\"weights\": [",
                (long long)rank, alpha, ot_lora_scale(lo), (long long)adapter_numel);
        for (int v = 0, k = 0; v < g->n_values; v++) {
            if (!lora_listed(g, why, v)) continue;
            fputs(k++ ? ", {\"name\": " : "{\"name\": ", f);
            ot_json_string(f, g->values[v].name);
            fprintf(f, ", \"adapted\": %s", why[v] ? "false" : "true");
            if (why[v]) {
                fputs(", \"reason\": ", f);
                ot_json_string(f, why[v]);
            }
            fputc('}', f);
        }
        fputs("]}", f);
        return;
    }
    fprintf(f, "lora (rank %lld, alpha %g, scale %g): %lld weights adapted (%lld values) by %lld adapter values:\n",
            (long long)rank, alpha, ot_lora_scale(lo), (long long)n_ad, (long long)base_numel,
            (long long)adapter_numel);
    for (int v = 0; v < g->n_values; v++) {
        if (!lora_listed(g, why, v)) continue;
        char sb[128];
        ot_shape_str(g, &g->values[v].shape, sb, sizeof sb);
        fprintf(f, "  %-5s %s %s%s%s\n", why[v] ? "skip" : "adapt", g->values[v].name, sb, why[v] ? ": " : "",
                why[v] ? why[v] : "");
    }
}

static ot_status summarize(const ot_graph *g, model_summary *sum) {
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        sizes *s = val->kind == OT_VK_PARAM ? &sum->params : val->kind == OT_VK_STATE ? &sum->state : NULL;
        if (!s) continue;
        s->n_tensors++;
        s->bytes += (int64_t)val->nbytes;
        size_t es = ot_dtype_size(val->dtype);
        s->numel += es ? (int64_t)(val->nbytes / es) : 0;
    }
    op_count *hist = calloc((size_t)g->n_nodes + 1, sizeof *hist);
    if (!hist) return OT_E_MEMORY;
    int n_hist = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed) continue;
        sum->n_live++;
        int k = 0;
        while (k < n_hist && (strcmp(hist[k].op_type, n->op_type) || strcmp(hist[k].domain, n->domain))) k++;
        if (k == n_hist) {
            hist[n_hist].op_type = n->op_type;
            hist[n_hist].domain = n->domain;
            n_hist++;
        }
        hist[k].count++;
    }
    qsort(hist, (size_t)n_hist, sizeof *hist, by_count);
    sum->hist = hist;
    sum->n_hist = n_hist;
    return OT_OK;
}

static void print_info_json(FILE *f, const char *path, const ot_model *m, const model_summary *sum) {
    const ot_graph *g = m->graph;
    fputs("{\n  \"path\": ", f);
    ot_json_string(f, path);
    fprintf(f, ",\n  \"ir_version\": %lld,\n  \"producer\": {\"name\": ", (long long)m->ir_version);
    ot_json_string(f, m->producer_name);
    fputs(", \"version\": ", f);
    ot_json_string(f, m->producer_version);
    fprintf(f, "},\n  \"opset\": %lld,\n  \"graph\": ", (long long)m->opset);
    ot_json_string(f, g->name);
    fputs(",\n  \"inputs\": ", f);
    print_values_json(f, g, g->inputs, g->n_inputs);
    fputs(",\n  \"outputs\": ", f);
    print_values_json(f, g, g->outputs, g->n_outputs);
    fprintf(f,
            ",\n  \"parameters\": {\"tensors\": %lld, \"count\": %lld, \"bytes\": %lld},\n"
            "  \"state\": {\"tensors\": %lld, \"count\": %lld, \"bytes\": %lld},\n  \"nodes\": %d",
            (long long)sum->params.n_tensors, (long long)sum->params.numel, (long long)sum->params.bytes,
            (long long)sum->state.n_tensors, (long long)sum->state.numel, (long long)sum->state.bytes, sum->n_live);
    print_params_json(f, g, sum);
    fputs(",\n  \"ops\": [", f);
    for (int k = 0; k < sum->n_hist; k++) {
        fputs(k ? ", {\"op\": " : "{\"op\": ", f);
        ot_json_string(f, sum->hist[k].op_type);
        if (sum->hist[k].domain[0]) {
            fputs(", \"domain\": ", f);
            ot_json_string(f, sum->hist[k].domain);
        }
        fprintf(f, ", \"count\": %d}", sum->hist[k].count);
    }
    fputs("],\n  \"unsupported\": [", f);
    for (int i = 0; i < m->n_unsupported; i++) {
        const ot_unsupported_op *u = &m->unsupported[i];
        fputs(i ? ", {\"op\": " : "{\"op\": ", f);
        ot_json_string(f, u->op_type);
        fprintf(f, ", \"reason\": \"%s\", \"%s\": [",
                u->reason == OT_UNSUP_NESTED_GRAPH ? "nested graphs are not supported"
                : u->reason == OT_UNSUP_INPUT_DTYPE ? "unsupported input dtype"
                : u->reason == OT_UNSUP_INIT_DTYPE  ? "unsupported initializer dtype"
                                                    : "unsupported op",
                u->reason == OT_UNSUP_INPUT_DTYPE  ? "inputs"
                : u->reason == OT_UNSUP_INIT_DTYPE ? "initializers"
                                                   : "nodes");
        for (int k = 0; k < u->n_nodes; k++) {
            if (k) fputs(", ", f);
            ot_json_string(f, u->nodes[k]);
        }
        fputs("]}", f);
    }
    fputs("]", f); /* the caller closes the object, after the lora section */
}

static void print_info_text(FILE *f, const char *path, const ot_model *m, const model_summary *sum) {
    const ot_graph *g = m->graph;
    fprintf(f, "model:       %s\n", path);
    fprintf(f, "ir_version:  %lld\n", (long long)m->ir_version);
    fprintf(f, "producer:    %s%s%s\n", m->producer_name[0] ? m->producer_name : "(none)",
            m->producer_version[0] ? " " : "", m->producer_version);
    fprintf(f, "opset:       %lld\n", (long long)m->opset);
    fprintf(f, "graph:       %s (%d nodes)\n", g->name, sum->n_live);
    print_values_text(f, g, "inputs", g->inputs, g->n_inputs);
    print_values_text(f, g, "outputs", g->outputs, g->n_outputs);
    char pb[OT_HUMAN_SIZE_LEN], sb[OT_HUMAN_SIZE_LEN]; /* bytes in --json */
    fprintf(f, "parameters:  %lld in %lld tensors (%s)\n", (long long)sum->params.numel,
            (long long)sum->params.n_tensors, ot_human_size((double)sum->params.bytes, pb, sizeof pb));
    fprintf(f, "state:       %lld in %lld tensors (%s)\n", (long long)sum->state.numel,
            (long long)sum->state.n_tensors, ot_human_size((double)sum->state.bytes, sb, sizeof sb));
    print_params_text(f, g, sum);
    fprintf(f, "ops (%d kinds):\n", sum->n_hist);
    for (int k = 0; k < sum->n_hist; k++) {
        char name[300];
        if (sum->hist[k].domain[0]) snprintf(name, sizeof name, "%s:%s", sum->hist[k].domain, sum->hist[k].op_type);
        else snprintf(name, sizeof name, "%s", sum->hist[k].op_type);
        fprintf(f, "  %-28s %d\n", name, sum->hist[k].count);
    }
    if (m->n_unsupported) {
        fprintf(f, "unsupported (%d):\n", m->n_unsupported);
        for (int i = 0; i < m->n_unsupported; i++) {
            const ot_unsupported_op *u = &m->unsupported[i];
            fprintf(f, "  %s%s: ", u->op_type,
                    u->reason == OT_UNSUP_NESTED_GRAPH ? " (nested graphs are not supported)" : "");
            for (int k = 0; k < u->n_nodes; k++) fprintf(f, "%s'%s'", k ? ", " : "", u->nodes[k]);
            fputc('\n', f);
        }
    }
}

int ot_cmd_info(int argc, char **argv) {
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"dump", required_argument, NULL, 'd'},
        {"lora", required_argument, NULL, OT_ARG_LORA},
        {"lora-target", required_argument, NULL, OT_ARG_LORA_TARGET},
        OT_ARGS_OPT_PRECISION,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, handled = false;
    const char *dump = NULL;
    ot_common_args la; /* --lora, --lora-target: parsed as train parses them */
    ot_common_args_init(&la);
    ot_error err = {0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'd':
            if (strcmp(optarg, "text") && strcmp(optarg, "dot")) {
                fprintf(stderr, "onnxtrain: info: --dump takes 'text' or 'dot', not '%s'\n", optarg);
                return OT_E_USAGE;
            }
            dump = optarg;
            break;
        case 'h': usage(stdout); return OT_OK;
        case OT_ARG_LORA:
        case OT_ARG_LORA_TARGET:
        case OT_ARG_PRECISION:
            if (ot_args_common(&la, c, optarg, &handled, &err)) {
                fprintf(stderr, "onnxtrain: info: %s\n", err.msg);
                ot_common_args_free(&la);
                return OT_E_USAGE;
            }
            break;
        default:
            fprintf(stderr, "onnxtrain: info: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return OT_E_USAGE;
        }
    }
    if (optind != argc - 1) {
        fputs(optind >= argc ? "onnxtrain: info: no model given\n" : "onnxtrain: info: one model at a time\n", stderr);
        usage(stderr);
        return OT_E_USAGE;
    }
    const char *path = argv[optind];
    /* info reads shapes, never a weight: big float params stay on disk */
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true, .skip_param_data = true};
    ot_model *m = NULL;
    ot_status st = la.lora_target.n && !la.lora.rank
                       ? ot_fail(&err, OT_E_USAGE, "info: --lora-target needs --lora RANK")
                       : ot_model_load(path, &opt, &m, &err);
    if (st) {
        fprintf(stderr, "onnxtrain: %s\n", err.msg);
        ot_common_args_free(&la);
        return st;
    }
    const ot_graph *g = m->graph;
    ot_lora_options lo = la.lora;
    lo.targets = la.lora_target.v;
    lo.n_targets = la.lora_target.n;
    const char **why = lo.rank ? calloc((size_t)g->n_values + 1, sizeof *why) : NULL;
    if (lo.rank && (!why || (st = ot_lora_targets(g, &lo, why, &err)))) {
        fprintf(stderr, "onnxtrain: info: %s\n", why ? err.msg : "out of memory");
        free(why);
        ot_common_args_free(&la);
        ot_model_free(m);
        return why ? st : OT_E_MEMORY;
    }
    FILE *f = stdout;
    if (dump) {
        if (!strcmp(dump, "dot")) ot_graph_dump_dot(g, f);
        else ot_graph_dump_text(g, f);
        st = m->n_unsupported ? OT_E_UNSUPPORTED : OT_OK;
        if (st) {
            char *list = ot_model_unsupported_str(m);
            fprintf(stderr, "onnxtrain: %s: %s\n", path, list ? list : "unsupported ops");
            free(list);
        }
        free(why);
        ot_common_args_free(&la);
        ot_model_free(m);
        return st;
    }

    model_summary sum = {0};
    if (summarize(g, &sum) || summarize_params(g, &sum)) {
        fputs("onnxtrain: out of memory\n", stderr);
        free(sum.hist);
        free(sum.reason);
        ot_model_free(m);
        return OT_E_MEMORY;
    }
    if (json) print_info_json(f, path, m, &sum);
    else print_info_text(f, path, m, &sum);
    if (why) print_lora(f, g, &lo, why, json);
    if (la.precision != OT_PRECISION_FP32 && (st = ot_info_print_precision(f, g, la.precision, json, &err)))
        fprintf(stderr, "onnxtrain: info: %s\n", err.msg);
    if (json) fputs("\n}\n", f);
    if (m->n_unsupported) {
        char *list = ot_model_unsupported_str(m);
        fprintf(stderr, "onnxtrain: %s: %s\n", path, list ? list : "unsupported ops");
        free(list);
        st = OT_E_UNSUPPORTED;
    }
    free(sum.hist);
    free(sum.reason);
    free(why);
    ot_common_args_free(&la);
    ot_model_free(m);
    return st;
}
