/* dump.c — human-readable text and Graphviz DOT dumps of an IR graph, for
 * `onnxtrain info --dump` and for debugging passes (recompute clones are marked). */
#include "ir.h"

static void dump_value_ref(const ot_graph *g, int v, FILE *f) {
    if (v < 0) {
        fputs("_", f);
        return;
    }
    char sb[160];
    fprintf(f, "%%%s:%s%s", g->values[v].name, ot_dtype_name(g->values[v].dtype),
            ot_shape_str(g, &g->values[v].shape, sb, sizeof sb));
}

static void dump_attr(const ot_attr *a, FILE *f) {
    fprintf(f, "%s=", a->name);
    switch (a->type) {
    case OT_ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
    case OT_ATTR_FLOAT: fprintf(f, "%g", a->f); break;
    case OT_ATTR_STRING: fprintf(f, "\"%s\"", a->s ? a->s : ""); break;
    case OT_ATTR_INTS:
        fputc('[', f);
        for (int i = 0; i < a->n; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)a->ints[i]);
        fputc(']', f);
        break;
    case OT_ATTR_FLOATS:
        fputc('[', f);
        for (int i = 0; i < a->n; i++) fprintf(f, "%s%g", i ? "," : "", a->floats[i]);
        fputc(']', f);
        break;
    case OT_ATTR_TENSOR: fprintf(f, "<tensor %s>", a->t ? ot_dtype_name(a->t->dtype) : "?"); break;
    default: fputs("<...>", f);
    }
}

void ot_graph_dump_text(const ot_graph *g, FILE *f) {
    fprintf(f, "graph %s (opset %lld)\n", g->name, (long long)g->opset);
    for (int i = 0; i < g->n_inputs; i++) {
        fputs("  input  ", f);
        dump_value_ref(g, g->inputs[i], f);
        fputc('\n', f);
    }
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == OT_VK_PARAM || g->values[v].kind == OT_VK_STATE) {
            fprintf(f, "  %-6s ", ot_value_kind_name(g->values[v].kind));
            dump_value_ref(g, v, f);
            fputc('\n', f);
        }
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed) continue;
        fprintf(f, "  [%d %s] ", id, ot_phase_name(n->phase));
        for (int o = 0; o < n->n_outputs; o++) {
            if (o) fputs(", ", f);
            dump_value_ref(g, n->outputs[o], f);
        }
        fprintf(f, " = %s(", n->op_type);
        for (int i = 0; i < n->n_inputs; i++) {
            if (i) fputs(", ", f);
            dump_value_ref(g, n->inputs[i], f);
        }
        fputc(')', f);
        for (int a = 0; a < n->n_attrs; a++) {
            fputs(a ? ", " : " {", f);
            dump_attr(&n->attrs[a], f);
            if (a == n->n_attrs - 1) fputc('}', f);
        }
        if (n->orig_node >= 0) fprintf(f, " (recomputes %d)", n->orig_node);
        if (n->name[0]) fprintf(f, "  # %s", n->name);
        fputc('\n', f);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        fputs("  output ", f);
        dump_value_ref(g, g->outputs[i], f);
        fputc('\n', f);
    }
}

/* Escapes a string for a DOT double-quoted label. */
static void dot_str(const char *s, FILE *f) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
}

void ot_graph_dump_dot(const ot_graph *g, FILE *f) {
    static const char *phase_color[] = {"lightblue", "khaki", "lightpink", "orange", "palegreen"};
    fputs("digraph onnxtrain {\n  rankdir=TB;\n  node [fontname=\"Helvetica\",fontsize=10];\n", f);
    for (int v = 0; v < g->n_values; v++) {
        const ot_value *val = &g->values[v];
        if (val->producer >= 0 || val->n_consumers == 0) continue;
        fprintf(f, "  v%d [shape=ellipse,label=\"", v);
        dot_str(val->name, f);
        fprintf(f, "\\n%s\"];\n", ot_value_kind_name(val->kind));
    }
    for (int id = 0; id < g->n_nodes; id++) {
        const ot_node *n = &g->nodes[id];
        if (n->removed) continue;
        fprintf(f, "  n%d [shape=box,style=\"filled%s\",fillcolor=%s,label=\"", id,
                n->phase == OT_PHASE_RECOMPUTE ? ",dashed" : "", phase_color[n->phase]);
        dot_str(n->op_type, f);
        fputs("\\n", f);
        dot_str(n->name, f);
        fputs("\"];\n", f);
        for (int i = 0; i < n->n_inputs; i++) {
            int v = n->inputs[i];
            if (v < 0) continue;
            const ot_value *val = &g->values[v];
            if (val->producer >= 0)
                fprintf(f, "  n%d -> n%d;\n", val->producer, id);
            else
                fprintf(f, "  v%d -> n%d;\n", v, id);
        }
    }
    fputs("}\n", f);
}
