/* cmd_eval.c — `onnxtrain eval MODEL --input ...`: the forward pass over .npy data in
 * batches. Everything that can be wrong with the data (missing input, dtype, shape,
 * sample counts, batch size) is checked before any batch runs; then it prints the
 * throughput and the planned peak memory, and with --dump-outputs writes every graph
 * output concatenated over the batches.
 *
 * It runs in inference mode by default, as PyTorch's model.eval(): models meant for
 * training with onnxtrain are exported in training mode (BatchNorm training_mode=1,
 * Dropout active), and so is every tuned model `train` writes, yet evaluating one
 * should not normalise by the batch or drop activations. --train-mode runs the graph
 * as exported. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "kernels/backend_select.h"
#include "cli/args.h"
#include "importer/importer.h"
#include "exec/executor.h"
#include "train/npy.h"
#include "kernels/kernel.h"

static void usage(FILE *f) {
    fputs("usage: onnxtrain eval MODEL --input FILE.npy | --input NAME=FILE.npy ... [options]\n\n"
          "Runs the model's forward pass over .npy data (samples along axis 0) in batches,\n"
          "in inference mode unless --train-mode is given, and prints the throughput and\n"
          "the planned peak memory.\n\n"
          "  --input FILE | NAME=FILE  data of a graph input (repeat for several inputs;\n"
          "                            unnamed files go to the inputs in model order)\n"
          "  --batch-size N            samples per batch; binds the symbolic dim of axis 0\n"
          "                            of the first input (default: min(32, samples)). With\n"
          "                            a fixed batch dim, N must equal it and the sample\n"
          "                            count must be a multiple of it. Otherwise a last\n"
          "                            partial batch runs on a second plan of that size.\n"
          "  --bind SYM=V[,SYM=V...]   bind other symbolic dims (dims of axis >= 1 that\n"
          "                            are symbolic are otherwise taken from the data)\n"
          "  --threads N               kernel threads (default: OpenMP's default)\n"
          "  --device DEV              cpu (default) or cuda[:N] (when built with CUDA)\n"
          "  --train-mode              run BatchNormalization and Dropout as the model says\n"
          "                            (a model exported with TrainingMode.TRAINING: batch\n"
          "                            statistics, Dropout masks drawn with --seed). Default:\n"
          "                            inference mode, as PyTorch's model.eval(): BatchNorm\n"
          "                            normalises with its running statistics, Dropout is the\n"
          "                            identity, whatever training_mode the model sets\n"
          "  --seed N                  Philox seed for Dropout with --train-mode (default 0)\n"
          "  --no-dropout              with --train-mode: Dropout in inference mode (identity)\n"
          "  --dump-outputs DIR        write each graph output as DIR/<name>.npy, the\n"
          "                            batches concatenated along axis 0\n"
          "  --json                    print the result as one JSON object\n"
          "  -h, --help                this help\n\n"
          "A model exported in PyTorch's default eval mode gives the same outputs either way.\n"
          "With --train-mode, BatchNormalization in training mode normalises with batch\n"
          "statistics, so its outputs depend on the batch size and on the other samples.\n"
          "Exit codes: 0 ok, 2 usage, 3 I/O, 4 parse, 5 invalid model, 6 unsupported,\n"
          "7 shape, 8 data, 9 memory, 70 internal.\n",
          f);
}

typedef struct eval_opts {
    const char *model;
    ot_common_args args; /* inputs, batch_size (0: default), bind, n_threads, device, seed */
    bool train_mode;     /* run BatchNorm / Dropout with the model's training_mode */
    bool no_dropout;
    const char *dump_dir;
    bool json;
} eval_opts;

/* One graph input and its data. */
typedef struct eval_input {
    int value;          /* value id in the graph */
    const char *name;
    const char *path;
    ot_tensor *data;
} eval_input;

/* One graph output gathered over the batches. */
typedef struct eval_output {
    int value;
    char *file;
    unsigned char *buf;
    size_t nbytes, cap;
    int64_t rows;       /* along axis 0 */
    ot_tensor last;     /* dtype/shape of the last batch (data unused) */
    bool concat;        /* axis 0 is the batch axis */
} eval_output;

static const char *safe_char_name(char *dst, size_t n, const char *src) {
    size_t k = 0;
    for (const char *p = src && *src ? src : "output"; *p && k + 1 < n; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '-' || c == '_';
        dst[k++] = ok ? c : '_';
    }
    dst[k] = 0;
    if (dst[0] == '.') dst[0] = '_'; /* no hidden files, no "..". */
    return dst;
}

/* Sets training_mode on BatchNorm and Dropout nodes: 0 on both in inference mode;
 * with --train-mode the model's own, except Dropout with --no-dropout. */
static ot_status set_modes(const eval_opts *o, ot_graph *g, ot_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        ot_node *n = &g->nodes[i];
        if (n->removed || (n->op != OT_OP_DROPOUT && n->op != OT_OP_BATCH_NORM)) continue;
        bool off = !o->train_mode || (n->op == OT_OP_DROPOUT && o->no_dropout);
        if (off && ot_node_set_attr_int(n, "training_mode", 0)) return ot_fail(err, OT_E_MEMORY, "out of memory");
    }
    return OT_OK;
}

/* Loads the model, applies the binds, the batch binding and the BatchNorm/Dropout mode. */
static ot_status load_bound(const eval_opts *o, const char *batch_sym, int64_t batch, ot_model **out,
                            ot_error *err) {
    /* The partial batch's model reads the main executor's weights in place
     * (make_executor's `share`): its own large params are not even read from disk. */
    ot_import_options io = {.fold_eval = ot_cpu_fold_eval, .skip_param_data = true};
    ot_model *m = NULL;
    ot_status st = ot_model_load(o->model, &io, &m, err);
    if (st) return st;
    ot_graph *g = m->graph;
    for (int i = 0; i < o->args.bind.n && !st; i++) st = ot_graph_bind_dims_from_string(g, o->args.bind.v[i], err);
    if (!st && batch_sym) st = ot_graph_bind_dim(g, batch_sym, batch, err);
    if (!st) st = set_modes(o, g, err);
    if (st) {
        ot_model_free(m);
        return st;
    }
    *out = m;
    return OT_OK;
}

/* With `share` (the executor of the full batches, on the same backend), every param
 * and state value of m is bound to share's copy of the value of the same name, so the
 * last partial batch holds no second copy of the weights. */
static ot_status make_executor(const eval_opts *o, ot_model *m, ot_backend *be, ot_executor *share, ot_executor **ex,
                               ot_error *err) {
    ot_graph *g = m->graph;
    ot_status st = ot_graph_require_static(g, err);
    if (st) return st;
    /* Nothing reads the model's weights after this (eval writes no model): the
     * executor's arena keeps the only copy. */
    ot_exec_options eo = {.n_threads = o->args.n_threads, .seed = o->args.seed, .release_host_data = true};
    ot_exec_binding *bind = NULL;
    if (share) {
        const ot_graph *sg = ot_executor_graph(share);
        bind = calloc((size_t)g->n_values + 1, sizeof *bind);
        if (!bind) return ot_fail(err, OT_E_MEMORY, "out of memory");
        for (int v = 0; v < g->n_values; v++) {
            const ot_value *val = &g->values[v];
            if (val->kind != OT_VK_PARAM && val->kind != OT_VK_STATE) continue;
            int sv = val->name ? ot_graph_find_value(sg, val->name) : -1;
            void *p = sv >= 0 ? ot_executor_value_ptr(share, sv) : NULL;
            if (!p || sg->values[sv].dtype != val->dtype || sg->values[sv].nbytes != val->nbytes) {
                free(bind);
                return ot_fail(err, OT_E_INTERNAL, "eval: %s '%s' of the partial batch's plan has no twin in the main plan",
                               ot_value_kind_name(val->kind), val->name ? val->name : "?");
            }
            bind[eo.n_bind++] = (ot_exec_binding){.value_id = v, .data = p, .nbytes = val->nbytes};
        }
        eo.bind = bind;
    }
    st = ot_executor_new(g, be, &eo, ex, err);
    free(bind);
    return st;
}

static ot_status append_output(eval_output *out, const ot_tensor *t, ot_error *err) {
    if (out->nbytes + t->nbytes > out->cap) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap < out->nbytes + t->nbytes) cap *= 2;
        unsigned char *nb = realloc(out->buf, cap);
        if (!nb) return ot_fail(err, OT_E_MEMORY, "out of memory gathering outputs");
        out->buf = nb;
        out->cap = cap;
    }
    if (!out->concat) out->nbytes = 0; /* not batched: keep the last value only */
    memcpy(out->buf + out->nbytes, t->data, t->nbytes);
    out->nbytes += t->nbytes;
    out->rows += t->shape.rank > 0 ? t->shape.dim[0] : 1;
    out->last = *t;
    out->last.data = NULL;
    return OT_OK;
}

/* Runs rows [start, start+n) through ex and appends the outputs. */
static ot_status run_batch(ot_executor *ex, eval_input *in, int n_in, int64_t start, int64_t n, eval_output *outs,
                           int n_out, bool gather, ot_error *err) {
    ot_status st;
    for (int k = 0; k < n_in; k++) {
        ot_tensor view = *in[k].data;
        size_t row = in[k].data->nbytes / (size_t)in[k].data->shape.dim[0];
        view.shape.dim[0] = n;
        view.data = (unsigned char *)in[k].data->data + (size_t)start * row;
        view.nbytes = (size_t)n * row;
        if ((st = ot_executor_set_input(ex, in[k].value, &view, err))) return st;
    }
    if ((st = ot_executor_run(ex, err))) return st;
    for (int k = 0; k < n_out && gather; k++) {
        ot_tensor *t = NULL;
        if ((st = ot_executor_get(ex, outs[k].value, &t, err))) return st;
        st = append_output(&outs[k], t, err);
        ot_tensor_free(t);
        if (st) return st;
    }
    return OT_OK;
}

static ot_status write_outputs(const eval_opts *o, const ot_graph *g, eval_output *outs, int n_out, ot_error *err) {
    if (mkdir(o->dump_dir, 0777) != 0 && errno != EEXIST)
        return ot_fail(err, OT_E_IO, "--dump-outputs: cannot create '%s': %s", o->dump_dir, strerror(errno));
    for (int k = 0; k < n_out; k++) {
        char safe[200];
        safe_char_name(safe, sizeof safe, g->values[outs[k].value].name);
        /* Unique names: two outputs may differ only in characters made safe. */
        char base[220];
        snprintf(base, sizeof base, "%s", safe);
        for (int dup = 1;; dup++) {
            bool clash = false;
            for (int j = 0; j < k; j++)
                if (outs[j].file && !strcmp(strrchr(outs[j].file, '/') + 1, base)) clash = true;
            if (!clash) break;
            snprintf(base, sizeof base, "%s_%d", safe, dup);
        }
        size_t len = strlen(o->dump_dir) + strlen(base) + 8;
        outs[k].file = malloc(len);
        if (!outs[k].file) return ot_fail(err, OT_E_MEMORY, "out of memory");
        snprintf(outs[k].file, len, "%s/%s.npy", o->dump_dir, base);
        ot_tensor t = outs[k].last;
        if (outs[k].concat) t.shape.dim[0] = outs[k].rows;
        t.data = outs[k].buf;
        t.nbytes = outs[k].nbytes;
        ot_status st = ot_npy_write(outs[k].file, &t, err);
        if (st) return st;
    }
    return OT_OK;
}

static void human(size_t b, char *buf, size_t n) {
    if (b >= (size_t)1 << 20) snprintf(buf, n, "%.2f MiB", (double)b / (double)((size_t)1 << 20));
    else snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
}

static ot_status run_eval(const eval_opts *o, ot_error *err) {
    ot_status st = OT_OK;
    ot_model *m = NULL, *m_rest = NULL;
    ot_backend *be = NULL;
    ot_executor *ex = NULL, *ex_rest = NULL;
    eval_input *in = NULL;
    eval_output *outs = NULL;
    int n_in = 0, n_out = 0;
    char *batch_sym = NULL;
    bool *is_batch_sym = NULL; /* per symbol of g: bound to the batch size */

    ot_import_options io = {.fold_eval = ot_cpu_fold_eval};
    if ((st = ot_model_load(o->model, &io, &m, err))) goto fail;
    ot_graph *g = m->graph;
    n_in = g->n_inputs;
    if (n_in == 0) {
        st = ot_fail(err, OT_E_MODEL, "%s: the model has no data inputs", o->model);
        goto fail;
    }
    in = calloc((size_t)n_in, sizeof *in);
    if (!in) goto oom;
    for (int k = 0; k < n_in; k++) {
        in[k].value = g->inputs[k];
        in[k].name = g->values[g->inputs[k]].name;
    }
    /* Match the --input files to the graph inputs: by name, then the rest in order. */
    for (int i = 0; i < o->args.inputs.n; i++) {
        const ot_input_spec *s = &o->args.inputs.v[i];
        if (!s->name) continue;
        int k = 0;
        while (k < n_in && strcmp(in[k].name, s->name)) k++;
        if (k == n_in) {
            char list[400] = "";
            for (int j = 0; j < n_in; j++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", j ? ", " : "", in[j].name);
            st = ot_fail(err, OT_E_USAGE, "--input %s=%s: the model has no input '%s' (its inputs: %s)", s->name, s->path,
                         s->name, list);
            goto fail;
        }
        if (in[k].path) {
            st = ot_fail(err, OT_E_USAGE, "--input: input '%s' given twice", s->name);
            goto fail;
        }
        in[k].path = s->path;
    }
    for (int i = 0, k = 0; i < o->args.inputs.n; i++) {
        if (o->args.inputs.v[i].name) continue;
        while (k < n_in && in[k].path) k++;
        if (k == n_in) {
            st = ot_fail(err, OT_E_USAGE, "--input %s: the model has only %d input%s", o->args.inputs.v[i].path, n_in,
                         n_in == 1 ? "" : "s");
            goto fail;
        }
        in[k].path = o->args.inputs.v[i].path;
    }
    for (int k = 0; k < n_in; k++)
        if (!in[k].path) {
            st = ot_fail(err, OT_E_USAGE, "no data for input '%s': give --input %s=FILE.npy", in[k].name, in[k].name);
            goto fail;
        }

    /* Read and check the data before any work. */
    for (int i = 0; i < o->args.bind.n; i++)
        if ((st = ot_graph_bind_dims_from_string(g, o->args.bind.v[i], err))) goto fail;
    int64_t count = -1;
    for (int k = 0; k < n_in; k++) {
        if ((st = ot_npy_read(in[k].path, &in[k].data, err))) goto fail;
        const ot_value *v = &g->values[in[k].value];
        const ot_tensor *t = in[k].data;
        char want[160], got[160];
        ot_shape_str(g, &v->shape, want, sizeof want);
        ot_shape_str(NULL, &t->shape, got, sizeof got);
        if (t->dtype != v->dtype) {
            st = ot_fail(err, OT_E_DATA, "input '%s' (%s): expected %s %s, got %s %s", in[k].name, in[k].path,
                         ot_dtype_name(v->dtype), want, ot_dtype_name(t->dtype), got);
            goto fail;
        }
        if (t->shape.rank < 1 || (v->shape.rank >= 0 && t->shape.rank != v->shape.rank)) {
            st = ot_fail(err, OT_E_DATA, "input '%s' (%s): expected %s (samples along axis 0), got %s", in[k].name,
                         in[k].path, want, got);
            goto fail;
        }
        if (count >= 0 && t->shape.dim[0] != count) {
            st = ot_fail(err, OT_E_DATA, "sample counts differ: input '%s' (%s) has %lld samples, input '%s' (%s) has %lld",
                         in[0].name, in[0].path, (long long)count, in[k].name, in[k].path, (long long)t->shape.dim[0]);
            goto fail;
        }
        count = t->shape.dim[0];
        for (int d = 1; d < t->shape.rank; d++) {
            if (v->shape.dim[d] >= 0 && v->shape.dim[d] != t->shape.dim[d]) {
                st = ot_fail(err, OT_E_DATA, "input '%s' (%s): expected %s per batch, got %s (axis %d differs)", in[k].name,
                             in[k].path, want, got, d);
                goto fail;
            }
        }
    }
    if (count == 0) {
        st = ot_fail(err, OT_E_DATA, "input '%s' (%s) holds no samples", in[0].name, in[0].path);
        goto fail;
    }
    /* Symbolic dims past axis 0 come from the data (every input must agree). */
    for (int k = 0; k < n_in; k++) {
        const ot_value *v = &g->values[in[k].value];
        for (int d = 1; d < v->shape.rank; d++) {
            int sym = v->shape.sym[d];
            if (v->shape.dim[d] >= 0 || sym < 0 || g->sym_values[sym] >= 0) continue;
            char spec[300];
            snprintf(spec, sizeof spec, "%s=%lld", g->syms[sym], (long long)in[k].data->shape.dim[d]);
            if ((st = ot_graph_bind_dims_from_string(g, spec, err))) goto fail;
        }
    }

    /* The batch: axis 0 of the first input. */
    const ot_value *v0 = &g->values[in[0].value];
    int64_t bs;
    if (v0->shape.rank >= 1 && v0->shape.dim[0] < 0 && v0->shape.sym[0] >= 0) {
        batch_sym = strdup(g->syms[v0->shape.sym[0]]);
        if (!batch_sym) goto oom;
        bs = o->args.batch_size ? o->args.batch_size : (count < 32 ? count : 32);
        if (bs > count) bs = count;
        if ((st = ot_graph_bind_dim(g, batch_sym, bs, err))) goto fail;
        is_batch_sym = calloc((size_t)g->n_syms + 1, sizeof(bool));
        if (!is_batch_sym) goto oom;
        is_batch_sym[v0->shape.sym[0]] = true;
        /* Other inputs may name their batch dim differently ("batch_1"). */
        for (int k = 1; k < n_in; k++) {
            const ot_value *v = &g->values[in[k].value];
            int sym = v->shape.rank >= 1 && v->shape.dim[0] < 0 ? v->shape.sym[0] : -1;
            if (sym < 0 || g->sym_values[sym] >= 0) continue;
            if ((st = ot_graph_bind_dim(g, g->syms[sym], bs, err))) goto fail;
            is_batch_sym[sym] = true;
        }
    } else if (v0->shape.rank >= 1 && v0->shape.dim[0] >= 0) {
        bs = v0->shape.dim[0];
        if (o->args.batch_size && o->args.batch_size != bs) {
            st = ot_fail(err, OT_E_USAGE, "--batch-size %lld: input '%s' has a fixed batch of %lld",
                         (long long)o->args.batch_size, in[0].name, (long long)bs);
            goto fail;
        }
        if (bs == 0 || count % bs) {
            st = ot_fail(err, OT_E_DATA, "input '%s' (%s): the model has a fixed batch of %lld, the data has %lld samples (not a multiple)",
                         in[0].name, in[0].path, (long long)bs, (long long)count);
            goto fail;
        }
    } else {
        st = ot_fail(err, OT_E_SHAPE, "input '%s': the batch dim (axis 0) is unknown; bind it with --bind", in[0].name);
        goto fail;
    }
    for (int k = 0; k < n_in; k++) {
        const ot_value *v = &g->values[in[k].value];
        if (v->shape.dim[0] != bs) {
            char want[160];
            ot_shape_str(g, &v->shape, want, sizeof want);
            st = ot_fail(err, OT_E_DATA, "input '%s': its axis 0 is not the batch dim of '%s' (shape %s with batch %lld)",
                         in[k].name, in[0].name, want, (long long)bs);
            goto fail;
        }
    }
    be = ot_backend_new_by_name(o->args.device ? o->args.device : "cpu", o->args.n_threads, err);
    if (!be) {
        st = err->code;
        goto fail;
    }
    if ((st = set_modes(o, g, err))) goto fail;
    if ((st = make_executor(o, m, be, NULL, &ex, err))) goto fail;
    int64_t n_full = count / bs, rest = count % bs;
    if (rest) {
        /* A symbol binds once: the last partial batch gets its own model and plan. */
        if ((st = load_bound(o, batch_sym, rest, &m_rest, err))) goto fail;
        /* The other batch symbols get the remainder; dims taken from the data keep
         * the main model's values. */
        for (int s = 0; s < g->n_syms; s++) {
            if (g->sym_values[s] < 0) continue;
            int s2 = ot_graph_find_sym(m_rest->graph, g->syms[s]);
            int64_t val = is_batch_sym && is_batch_sym[s] ? rest : g->sym_values[s];
            if (s2 >= 0 && m_rest->graph->sym_values[s2] < 0 &&
                (st = ot_graph_bind_dim(m_rest->graph, g->syms[s], val, err)))
                goto fail;
        }
        if ((st = make_executor(o, m_rest, be, ex, &ex_rest, err))) goto fail;
    }

    n_out = g->n_outputs;
    outs = calloc((size_t)n_out + 1, sizeof *outs);
    if (!outs) goto oom;
    for (int k = 0; k < n_out; k++) {
        const ot_value *ov = &g->values[g->outputs[k]];
        outs[k].value = g->outputs[k];
        outs[k].concat = ov->shape.rank >= 1 && ov->shape.dim[0] == bs;
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool gather = o->dump_dir != NULL;
    for (int64_t b = 0; b < n_full; b++)
        if ((st = run_batch(ex, in, n_in, b * bs, bs, outs, n_out, gather, err))) goto fail;
    if (rest) {
        /* Output value ids are the same in the second load of the same model. */
        if ((st = run_batch(ex_rest, in, n_in, n_full * bs, rest, outs, n_out, gather, err))) goto fail;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (gather && (st = write_outputs(o, g, outs, n_out, err))) goto fail;

    const ot_plan *p = ot_executor_plan(ex);
    size_t hw = ot_executor_high_water(ex);
    double rate = sec > 0 ? (double)count / sec : 0;
    if (o->json) {
        printf("{\"model\": \"%s\", \"mode\": \"%s\", \"samples\": %lld, \"batch_size\": %lld, \"batches\": %lld, \"last_batch\": %lld, "
               "\"seconds\": %.6f, \"samples_per_sec\": %.2f, \"peak_bytes\": %zu, \"high_water_bytes\": %zu, \"memory\": ",
               o->model, o->train_mode ? "train" : "inference", (long long)count, (long long)bs, (long long)(n_full + (rest ? 1 : 0)), (long long)(rest ? rest : bs),
               sec, rate, ot_plan_peak_bytes(p), hw);
        ot_plan_write_json(p, stdout);
        printf(", \"outputs\": [");
        for (int k = 0; k < n_out && gather; k++) printf("%s\"%s\"", k ? ", " : "", outs[k].file);
        printf("]}\n");
    } else {
        char pk[32], mw[32];
        human(ot_plan_peak_bytes(p), pk, sizeof pk);
        human(hw, mw, sizeof mw);
        printf("%s: %lld samples in %lld batch%s of %lld", o->model, (long long)count, (long long)(n_full + (rest ? 1 : 0)),
               n_full + (rest ? 1 : 0) == 1 ? "" : "es", (long long)bs);
        if (rest) printf(" (last: %lld)", (long long)rest);
        printf(", %.2f ms, %.1f samples/s, %s mode\n", sec * 1e3, rate, o->train_mode ? "train" : "inference");
        printf("planned peak %s (%zu bytes), measured high-water %s\n", pk, ot_plan_peak_bytes(p), mw);
        for (int k = 0; k < n_out && gather; k++) printf("wrote %s\n", outs[k].file);
    }
    goto fail;
oom:
    st = ot_fail(err, OT_E_MEMORY, "out of memory");
fail:
    ot_executor_free(ex);
    ot_executor_free(ex_rest);
    ot_backend_free(be);
    for (int k = 0; in && k < n_in; k++) ot_tensor_free(in[k].data);
    free(in);
    for (int k = 0; outs && k < n_out; k++) {
        free(outs[k].buf);
        free(outs[k].file);
    }
    free(outs);
    free(batch_sym);
    free(is_batch_sym);
    ot_model_free(m_rest);
    ot_model_free(m);
    return st;
}

int ot_cmd_eval(int argc, char **argv) {
    static const struct option longopts[] = {
        OT_ARGS_OPT_INPUT, OT_ARGS_OPT_BATCH, OT_ARGS_OPT_BIND, OT_ARGS_OPT_THREADS, OT_ARGS_OPT_DEVICE,
        OT_ARGS_OPT_SEED,  {"no-dropout", no_argument, NULL, 'D'}, {"train-mode", no_argument, NULL, 'T'},
        {"dump-outputs", required_argument, NULL, 'o'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    eval_opts o = {0};
    ot_common_args_init(&o.args);
    ot_error err = {0};
    ot_status st = OT_OK;
    int c;
    bool common;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if ((st = ot_args_common(&o.args, c, optarg, &common, &err))) break;
        if (common) continue;
        switch (c) {
        case 'D': o.no_dropout = true; break;
        case 'T': o.train_mode = true; break;
        case 'o': o.dump_dir = optarg; break;
        case 'j': o.json = true; break;
        case 'h':
            usage(stdout);
            ot_common_args_free(&o.args);
            return 0;
        default:
            st = ot_fail(&err, OT_E_USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
            break;
        }
        if (st) break;
    }
    if (!st) st = ot_args_one_model(argc, argv, optind, &o.model, &err);
    if (!st && o.args.inputs.n == 0) st = ot_fail(&err, OT_E_USAGE, "missing --input FILE.npy");
    if (!st) {
        st = run_eval(&o, &err);
    } else {
        fprintf(stderr, "onnxtrain eval: %s\nRun 'onnxtrain eval --help' for the options.\n", err.msg);
        ot_common_args_free(&o.args);
        return st;
    }
    if (st) fprintf(stderr, "onnxtrain eval: %s\n", err.msg);
    ot_common_args_free(&o.args);
    return st;
}
