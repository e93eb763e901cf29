/* run_node_tests.c — runs ONNX's own backend node tests (the conformance suite shipped
 * in the pip `onnx` package: DATA/<test>/model.onnx + test_data_set_0/{input,output}_N.pb)
 * through onnxtrain's importer, executor and CPU kernels, and compares every output.
 *
 *   run_node_tests DATA_DIR [--filter SUBSTR] [--verbose] [--no-fork] [--known-failures FILE]
 *
 * A test is skipped when its model uses an op, attribute or dtype onnxtrain does not
 * support (the importer's list, with allow_unsupported) or when the CPU backend lacks a
 * kernel for its dtypes; every other test must pass. Floats are compared with
 * |got - want| <= 1e-5 + 1e-4 |want|, integers and bools exactly.
 *
 * Each test runs in a forked child, so a crash or hang (60 s) in one kernel is reported
 * as that test's failure instead of ending the run. --known-failures names a file of
 * test names (one per line, '#' comments) whose failures are reported but tolerated;
 * such a test that passes is reported so the list can shrink.
 *
 * Exit status: 0 all ran tests passed (or failed as known), 1 some failed, 2 usage,
 * 77 the data folder is missing (ctest's SKIP_RETURN_CODE). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "importer/importer.h"
#include "onnx.pb-c.h"
#include "exec/backend.h"
#include "exec/executor.h"
#include "kernels/kernel.h"

#define MAX_IO 64
#define TEST_TIMEOUT_S 60

typedef enum result {
    R_PASS = 0,
    R_FAIL,
    R_SKIP_OP,      /* op / attribute / input dtype the importer does not support */
    R_SKIP_DTYPE,   /* test data in a dtype onnxtrain has no tensor type for */
    R_SKIP_BACKEND, /* the CPU backend has no kernel for these dtypes */
    R_SKIP_RANDOM,  /* random outputs: our Philox draws cannot match the reference's RNG */
} result;

typedef struct outcome {
    int result;
    char reason[1000];
} outcome;

static bool is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static result set(outcome *o, result r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static result set(outcome *o, result r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->reason, sizeof o->reason, fmt, ap);
    va_end(ap);
    o->result = r;
    return r;
}

/* ---- comparison -------------------------------------------------------------- */

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static double element_as_double(const ot_tensor *t, size_t i) {
    switch (t->dtype) {
    case OT_F32: return ((const float *)t->data)[i];
    case OT_F64: return ((const double *)t->data)[i];
    case OT_F16: return half_to_float(((const uint16_t *)t->data)[i]);
    case OT_BF16: {
        uint32_t bits = (uint32_t)((const uint16_t *)t->data)[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    default: return 0;
    }
}

static bool close_enough(double got, double want) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= 1e-5 + 1e-4 * fabs(want);
}

/* Compares got with want; on mismatch writes why into o. */
static bool compare(const ot_tensor *got, const ot_tensor *want, const char *oname, outcome *o) {
    char gs[160], ws[160];
    if (got->dtype != want->dtype) {
        set(o, R_FAIL, "output '%s': dtype %s, expected %s", oname, ot_dtype_name(got->dtype),
            ot_dtype_name(want->dtype));
        return false;
    }
    if (!ot_shape_equal(&got->shape, &want->shape) || got->nbytes != want->nbytes) {
        set(o, R_FAIL, "output '%s': shape %s, expected %s", oname, ot_shape_str(NULL, &got->shape, gs, sizeof gs),
            ot_shape_str(NULL, &want->shape, ws, sizeof ws));
        return false;
    }
    size_t esz = ot_dtype_size(want->dtype), n = esz ? want->nbytes / esz : 0;
    if (!ot_dtype_is_float(want->dtype)) {
        for (size_t i = 0; i < n; i++)
            if (memcmp((const char *)got->data + i * esz, (const char *)want->data + i * esz, esz) != 0) {
                set(o, R_FAIL, "output '%s': element %zu differs (exact %s comparison)", oname, i,
                    ot_dtype_name(want->dtype));
                return false;
            }
        return true;
    }
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double g = element_as_double(got, i), w = element_as_double(want, i);
        if (close_enough(g, w)) continue;
        if (!bad++) first = i;
        if (fabs(g - w) > worst || isnan(g)) worst = isnan(g) ? INFINITY : fabs(g - w);
    }
    if (bad) {
        set(o, R_FAIL, "output '%s': %zu of %zu elements differ; first at %zu: got %.9g, expected %.9g; max abs err %.3g",
            oname, bad, n, first, element_as_double(got, first), element_as_double(want, first), worst);
        return false;
    }
    return true;
}

/* ---- one test ----------------------------------------------------------------- */

/* Loads input_N.pb / output_N.pb files; returns the count or -1 (o set). */
static int load_pbs(const char *set_dir, const char *kind, ot_tensor **t, char **names, outcome *o) {
    char path[4096];
    int n = 0;
    for (;; n++) {
        snprintf(path, sizeof path, "%s/%s_%d.pb", set_dir, kind, n);
        if (!is_file(path)) break;
        if (n == MAX_IO) return set(o, R_FAIL, "more than %d %ss", MAX_IO, kind), -1;
        ot_error err = {0};
        ot_status st = ot_tensor_load_pb(path, &t[n], &names[n], &err);
        if (st == OT_E_UNSUPPORTED) return set(o, R_SKIP_DTYPE, "%s", err.msg), -1;
        if (st != OT_OK) return set(o, R_FAIL, "%s", err.msg), -1;
    }
    return n;
}

/* Graph value for test tensor i: by name when the file names it, else by position. */
static int match_value(const ot_graph *g, const int *ids, int n_ids, const char *name, int i) {
    if (name && name[0]) {
        for (int k = 0; k < n_ids; k++)
            if (strcmp(g->values[ids[k]].name, name) == 0) return ids[k];
        return -1;
    }
    return i < n_ids ? ids[i] : -1;
}

/* ---- loading, with operands made constant ------------------------------------- */

/* Node tests feed operands that onnxtrain needs as constants (Reshape's shape, Slice's
 * starts, Reduce axes, Clip bounds, Dropout's ratio, ...) as graph inputs. When the
 * plain import is refused or leaves shapes unknown, the test is retried with every
 * graph input but the first turned into an initializer holding its test data: the
 * same function of the same data, with the first input still fed at run time so the
 * op itself runs in the executor rather than being folded at import. */
typedef struct model_src {
    Onnx__ModelProto *mp;
    char **inputs; /* names of graph inputs that are not initializers, in order */
    int n_inputs;
} model_src;

static void model_src_free(model_src *s) {
    if (s->mp) onnx__model_proto__free_unpacked(s->mp, NULL);
    free(s->inputs);
    memset(s, 0, sizeof *s);
}

static bool read_file(const char *path, uint8_t **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool ok = fseek(f, 0, SEEK_END) == 0;
    long n = ok ? ftell(f) : -1;
    ok = n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (*buf = malloc((size_t)n + 1)) != NULL;
    ok = ok && fread(*buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    *len = ok ? (size_t)n : 0;
    return ok;
}

static result model_src_load(const char *path, model_src *s, outcome *o) {
    uint8_t *buf = NULL;
    size_t len = 0;
    memset(s, 0, sizeof *s);
    if (!read_file(path, &buf, &len)) return set(o, R_FAIL, "%s: cannot read", path);
    s->mp = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    if (!s->mp || !s->mp->graph) return set(o, R_FAIL, "%s: not an ONNX model", path);
    const Onnx__GraphProto *g = s->mp->graph;
    s->inputs = calloc(g->n_input + 1, sizeof *s->inputs);
    if (!s->inputs) return set(o, R_FAIL, "out of memory");
    for (size_t i = 0; i < g->n_input; i++) {
        bool is_init = false;
        for (size_t k = 0; k < g->n_initializer; k++) is_init |= !strcmp(g->initializer[k]->name, g->input[i]->name);
        if (!is_init) s->inputs[s->n_inputs++] = g->input[i]->name;
    }
    return R_PASS;
}

/* Imports the model with graph inputs [first_const, n) replaced by initializers read
 * from set_dir/input_K.pb (first_const >= n: the model as it is). */
static ot_status import_with_constants(const model_src *s, const char *path, const char *test_dir,
                                       const char *set_dir, int first_const, ot_model **m, ot_error *err) {
    Onnx__GraphProto *g = s->mp->graph;
    Onnx__TensorProto **old_init = g->initializer, **inits = NULL, **consts = NULL;
    Onnx__ValueInfoProto **old_in = g->input, **ins = NULL;
    size_t old_n_init = g->n_initializer, old_n_in = g->n_input, n_consts = 0, len = 0;
    char **old_names = NULL;
    uint8_t *packed = NULL;
    ot_status st = OT_OK;
    ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true};
    if (first_const >= s->n_inputs) return ot_model_load(path, &opt, m, err);

    size_t n_new = (size_t)(s->n_inputs - first_const);
    inits = calloc(old_n_init + n_new, sizeof *inits);
    consts = calloc(n_new, sizeof *consts);
    old_names = calloc(n_new, sizeof *old_names);
    ins = calloc(old_n_in + 1, sizeof *ins);
    if (!inits || !consts || !old_names || !ins) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
    for (int k = first_const; k < s->n_inputs; k++) {
        char pb[4200];
        uint8_t *buf = NULL;
        snprintf(pb, sizeof pb, "%s/input_%d.pb", set_dir, k);
        if (!read_file(pb, &buf, &len)) {
            st = ot_fail(err, OT_E_IO, "%s: cannot read", pb);
            goto fail;
        }
        consts[n_consts] = onnx__tensor_proto__unpack(NULL, len, buf);
        free(buf);
        if (!consts[n_consts]) {
            st = ot_fail(err, OT_E_PARSE, "%s: not a TensorProto", pb);
            goto fail;
        }
        /* The initializer takes the graph input's name (restored before freeing). */
        old_names[n_consts] = consts[n_consts]->name;
        consts[n_consts]->name = s->inputs[k];
        n_consts++;
    }
    if (old_n_init) memcpy(inits, old_init, old_n_init * sizeof *inits);
    memcpy(inits + old_n_init, consts, n_consts * sizeof *inits);
    size_t n_ins = 0;
    for (size_t i = 0; i < old_n_in; i++) {
        bool promoted = false;
        for (int k = first_const; k < s->n_inputs; k++) promoted |= !strcmp(old_in[i]->name, s->inputs[k]);
        if (!promoted) ins[n_ins++] = old_in[i];
    }
    g->initializer = inits;
    g->n_initializer = old_n_init + n_consts;
    g->input = ins;
    g->n_input = n_ins;
    len = onnx__model_proto__get_packed_size(s->mp);
    packed = malloc(len ? len : 1);
    if (packed) onnx__model_proto__pack(s->mp, packed);
    g->initializer = old_init;
    g->n_initializer = old_n_init;
    g->input = old_in;
    g->n_input = old_n_in;
    if (!packed) {
        st = ot_fail(err, OT_E_MEMORY, "out of memory");
        goto fail;
    }
    st = ot_model_load_buffer(packed, len, path, test_dir, &opt, m, err);
fail:
    for (size_t i = 0; i < n_consts; i++) {
        consts[i]->name = old_names[i];
        onnx__tensor_proto__free_unpacked(consts[i], NULL);
    }
    free(packed);
    free(inits);
    free(consts);
    free(old_names);
    free(ins);
    return st;
}

/* ---- one test ----------------------------------------------------------------- */

/* Imports (plain, or with constant operands when first_const < inputs), binds symbolic
 * input dims to the data and runs the graph; compares the outputs. */
static result try_run(const model_src *src, const char *test_dir, int first_const, ot_tensor **in, char **in_names,
                      int n_in, ot_tensor **want, char **want_names, int n_out, outcome *o) {
    char path[4096], set_dir[4096];
    int feed_ids[MAX_IO];
    ot_model *m = NULL;
    ot_backend *be = NULL;
    ot_executor *ex = NULL;
    ot_error err = {0};
    ot_status st;
    set(o, R_PASS, "ok");
    snprintf(path, sizeof path, "%s/model.onnx", test_dir);
    snprintf(set_dir, sizeof set_dir, "%s/test_data_set_0", test_dir);

    st = import_with_constants(src, path, test_dir, set_dir, first_const, &m, &err);
    if (st != OT_OK) {
        set(o, st == OT_E_UNSUPPORTED ? R_SKIP_OP : R_FAIL, "import: %s", err.msg);
        goto done;
    }
    if (m->n_unsupported > 0) {
        char *s = ot_model_unsupported_str(m);
        set(o, R_SKIP_OP, "%s", s ? s : "unsupported ops");
        free(s);
        goto done;
    }
    ot_graph *g = m->graph;
    for (int k = 0; k < g->n_nodes; k++) {
        const ot_node *n = &g->nodes[k];
        if (n->removed || !ot_op_has(n->op, OT_T_RANDOM)) continue;
        bool inert = n->op == OT_OP_DROPOUT &&
                     (ot_node_attr_int(n, "training_mode", 0) == 0 || ot_node_attr_float(n, "ratio", 0.5f) == 0.0f);
        if (!inert) {
            set(o, R_SKIP_RANDOM, "node '%s' (%s) draws random numbers; the expected output used another RNG", n->name,
                n->op_type);
            goto done;
        }
    }
    for (int i = 0; i < n_in; i++) {
        feed_ids[i] = -1;
        if (i >= first_const) continue; /* an initializer now */
        for (int k = 0; k < g->n_inputs; k++)
            if (!strcmp(g->values[g->inputs[k]].name, in_names[i])) feed_ids[i] = g->inputs[k];
        if (feed_ids[i] < 0) {
            set(o, R_FAIL, "input_%d.pb ('%s') matches no graph input", i, in_names[i]);
            goto done;
        }
        ot_value *v = &g->values[feed_ids[i]];
        if (v->dtype != in[i]->dtype) {
            set(o, R_FAIL, "input '%s': graph says %s, data is %s", v->name, ot_dtype_name(v->dtype),
                ot_dtype_name(in[i]->dtype));
            goto done;
        }
        for (int d = 0; d < v->shape.rank && d < in[i]->shape.rank; d++) {
            int s = v->shape.sym[d];
            if (v->shape.dim[d] < 0 && s >= 0 && g->sym_values[s] < 0 &&
                ot_graph_bind_dim(g, g->syms[s], in[i]->shape.dim[d], &err) != OT_OK) {
                set(o, R_FAIL, "binding '%s' of input '%s': %s", g->syms[s], v->name, err.msg);
                goto done;
            }
        }
    }
    if (ot_graph_require_static(g, &err) != OT_OK) {
        set(o, R_FAIL, "shapes not static: %s", err.msg);
        goto done;
    }
    if (!(be = ot_backend_cpu_new(1, &err))) {
        set(o, R_FAIL, "CPU backend: %s", err.msg);
        goto done;
    }
    if ((st = ot_executor_new(g, be, NULL, &ex, &err)) != OT_OK) {
        set(o, st == OT_E_UNSUPPORTED ? R_SKIP_BACKEND : R_FAIL, "executor: %s", err.msg);
        goto done;
    }
    for (int i = 0; i < n_in; i++)
        if (feed_ids[i] >= 0 && (st = ot_executor_set_input(ex, feed_ids[i], in[i], &err)) != OT_OK) {
            set(o, R_FAIL, "input: %s", err.msg);
            goto done;
        }
    if ((st = ot_executor_run(ex, &err)) != OT_OK) {
        set(o, R_FAIL, "run: %s", err.msg);
        goto done;
    }
    if (n_out != g->n_outputs) {
        set(o, R_FAIL, "test data has %d outputs, the graph %d", n_out, g->n_outputs);
        goto done;
    }
    for (int i = 0; i < n_out; i++) {
        int id = match_value(g, g->outputs, g->n_outputs, want_names[i], i);
        ot_tensor *got = NULL;
        if (id < 0) {
            set(o, R_FAIL, "output_%d.pb ('%s') matches no graph output", i, want_names[i]);
            goto done;
        }
        if ((st = ot_executor_get(ex, id, &got, &err)) != OT_OK) {
            set(o, R_FAIL, "reading output '%s': %s", g->values[id].name, err.msg);
            goto done;
        }
        bool ok = compare(got, want[i], g->values[id].name, o);
        ot_tensor_free(got);
        if (!ok) goto done;
    }
done:
    ot_executor_free(ex);
    ot_backend_free(be);
    ot_model_free(m);
    return (result)o->result;
}

static result run_test(const char *test_dir, outcome *o) {
    char path[4096], set_dir[4096];
    ot_tensor *in[MAX_IO] = {0}, *want[MAX_IO] = {0};
    char *in_names[MAX_IO] = {0}, *want_names[MAX_IO] = {0};
    model_src src;
    int n_in = 0, n_out = 0;
    snprintf(path, sizeof path, "%s/model.onnx", test_dir);
    snprintf(set_dir, sizeof set_dir, "%s/test_data_set_0", test_dir);
    if (model_src_load(path, &src, o) != R_PASS) goto done;
    if ((n_in = load_pbs(set_dir, "input", in, in_names, o)) < 0 ||
        (n_out = load_pbs(set_dir, "output", want, want_names, o)) < 0) {
        /* Report an unsupported op before unsupported test data: it says more. */
        ot_model *m = NULL;
        ot_error err = {0};
        ot_import_options opt = {.fold_eval = ot_cpu_fold_eval, .allow_unsupported = true};
        ot_status st = ot_model_load(path, &opt, &m, &err);
        if (st == OT_E_UNSUPPORTED) {
            set(o, R_SKIP_OP, "%s", err.msg);
        } else if (st == OT_OK && m->n_unsupported > 0) {
            char *s = ot_model_unsupported_str(m);
            set(o, R_SKIP_OP, "%s", s ? s : "unsupported ops");
            free(s);
        }
        ot_model_free(m);
        goto done;
    }
    if (n_in != src.n_inputs) {
        set(o, R_FAIL, "test data has %d inputs, the graph %d", n_in, src.n_inputs);
        goto done;
    }
    /* Test data names its tensors after the graph inputs; fill in unnamed ones. */
    for (int i = 0; i < n_in; i++)
        if (!in_names[i][0]) {
            free(in_names[i]);
            if (!(in_names[i] = ot_strdup(src.inputs[i]))) {
                set(o, R_FAIL, "out of memory");
                goto done;
            }
        }
    result r = try_run(&src, test_dir, n_in, in, in_names, n_in, want, want_names, n_out, o);
    if ((r == R_SKIP_OP || r == R_FAIL) && n_in > 1) {
        /* Retry with constant operands; its outcome counts once it gets past import. */
        outcome retry;
        memset(&retry, 0, sizeof retry);
        if (try_run(&src, test_dir, 1, in, in_names, n_in, want, want_names, n_out, &retry) != R_SKIP_OP) {
            *o = retry;
            if (o->result != R_PASS) {
                size_t len = strlen(o->reason);
                snprintf(o->reason + len, sizeof o->reason - len, " [inputs 1..%d made constant]", n_in - 1);
            }
        }
    }
done:
    model_src_free(&src);
    for (int i = 0; i < MAX_IO; i++) {
        ot_tensor_free(in[i]);
        ot_tensor_free(want[i]);
        free(in_names[i]);
        free(want_names[i]);
    }
    return (result)o->result;
}

/* Runs one test in a child process; a crash or timeout becomes a failure. */
static void run_isolated(const char *test_dir, bool fork_each, outcome *o) {
    if (!fork_each) {
        run_test(test_dir, o);
        return;
    }
    int fds[2];
    if (pipe(fds) != 0) {
        set(o, R_FAIL, "pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        set(o, R_FAIL, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        alarm(TEST_TIMEOUT_S);
        outcome c;
        memset(&c, 0, sizeof c);
        run_test(test_dir, &c);
        ssize_t w = write(fds[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < sizeof *o) {
        ssize_t r = read(fds[0], (char *)o + got, sizeof *o - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got == sizeof *o) return;
    if (WIFSIGNALED(status))
        set(o, R_FAIL, "crashed: %s%s", strsignal(WTERMSIG(status)),
            WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
    else
        set(o, R_FAIL, "child exited with status %d without a result", WEXITSTATUS(status));
}

/* ---- driver ------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct name_list {
    char **items;
    int n;
} name_list;

static bool list_has(const name_list *l, const char *s) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->items[i], s) == 0) return true;
    return false;
}

static int read_known_failures(const char *path, name_list *l) {
    FILE *f = fopen(path, "r");
    char line[512];
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        char *s = line, *e;
        while (*s == ' ' || *s == '\t') s++;
        if ((e = strchr(s, '#'))) *e = '\0';
        e = s + strlen(s);
        while (e > s && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = '\0';
        if (!*s) continue;
        char **grown = realloc(l->items, (size_t)(l->n + 1) * sizeof *grown);
        if (!grown) break;
        l->items = grown;
        l->items[l->n++] = ot_strdup(s);
    }
    fclose(f);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: run_node_tests DATA_DIR [--filter SUBSTR] [--verbose] [--no-fork] [--known-failures FILE]\n"
               "  DATA_DIR: onnx/backend/test/data/node of the pip onnx package\n");
}

int main(int argc, char **argv) {
    const char *data = NULL, *filter = NULL, *known_path = NULL;
    bool verbose = false, fork_each = true;
    name_list known = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--known-failures") && i + 1 < argc) known_path = argv[++i];
        else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) verbose = true;
        else if (!strcmp(argv[i], "--no-fork")) fork_each = false;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout), 0;
        else if (argv[i][0] == '-' && argv[i][1]) return usage(stderr), 2;
        else if (!data) data = argv[i];
        else return usage(stderr), 2;
    }
    if (!data || !data[0] || !is_dir(data)) {
        printf("SKIP: ONNX backend node test data not found (%s). Install it with "
               "`python3 -m pip install onnx==1.17.0` (.ci/run does) and re-run cmake.\n",
               data && data[0] ? data : "no folder given");
        return 77;
    }
    if (known_path && read_known_failures(known_path, &known) != 0) {
        fprintf(stderr, "run_node_tests: cannot read %s: %s\n", known_path, strerror(errno));
        return 2;
    }

    DIR *d = opendir(data);
    if (!d) {
        fprintf(stderr, "run_node_tests: cannot open %s: %s\n", data, strerror(errno));
        return 2;
    }
    char **names = NULL;
    int n_names = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (filter && !strstr(e->d_name, filter))) continue;
        snprintf(path, sizeof path, "%s/%s/model.onnx", data, e->d_name);
        if (!is_file(path)) continue;
        char **grown = realloc(names, (size_t)(n_names + 1) * sizeof *grown);
        if (!grown) break;
        names = grown;
        names[n_names++] = ot_strdup(e->d_name);
    }
    closedir(d);
    if (n_names) qsort(names, (size_t)n_names, sizeof *names, cmp_str);

    int ran = 0, passed = 0, failed = 0, known_failed = 0, skip_op = 0, skip_dtype = 0, skip_backend = 0,
        skip_random = 0;
    for (int i = 0; i < n_names; i++) {
        outcome o;
        memset(&o, 0, sizeof o);
        snprintf(path, sizeof path, "%s/%s", data, names[i]);
        run_isolated(path, fork_each, &o);
        bool is_known = list_has(&known, names[i]);
        switch (o.result) {
        case R_PASS:
            ran++, passed++;
            if (is_known) printf("UNEXPECTED PASS %s (remove it from %s)\n", names[i], known_path);
            else if (verbose) printf("PASS %s\n", names[i]);
            break;
        case R_FAIL:
            ran++;
            if (is_known) {
                known_failed++;
                if (verbose) printf("KNOWN FAIL %s: %s\n", names[i], o.reason);
            } else {
                failed++;
                printf("FAIL %s: %s\n", names[i], o.reason);
            }
            break;
        default:
            if (o.result == R_SKIP_OP) skip_op++;
            else if (o.result == R_SKIP_DTYPE) skip_dtype++;
            else if (o.result == R_SKIP_RANDOM) skip_random++;
            else skip_backend++;
            if (verbose) printf("SKIP %s: %s\n", names[i], o.reason);
            break;
        }
        free(names[i]);
    }
    free(names);
    for (int i = 0; i < known.n; i++) free(known.items[i]);
    free(known.items);
    printf("ran %d, passed %d, failed %d, skipped %d (unsupported)\n", ran, passed, failed + known_failed,
           skip_op + skip_dtype + skip_backend + skip_random);
    printf("  skipped: %d unsupported op/attribute/input dtype, %d unsupported test-data dtype, "
           "%d no CPU kernel for the dtypes, %d random outputs\n",
           skip_op, skip_dtype, skip_backend, skip_random);
    if (known_failed) printf("  failed: %d listed in %s (tolerated), %d not listed\n", known_failed, known_path, failed);
    return failed ? 1 : 0;
}
