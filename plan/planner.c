/* planner.c — lifetimes, the pinned slabs, best-fit placement of transient values and
 * workspaces, in-place reuse, and the exact peak (see planner.h for the contract).
 * Cost: O(nodes + values) plus, per allocation, a scan of the free list (which holds
 * only the holes between live blocks, a few dozen even on large graphs). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"

static size_t align_up(size_t x) { return (x + OT_PLAN_ALIGN - 1) / OT_PLAN_ALIGN * OT_PLAN_ALIGN; }

const char *ot_mem_category_name(ot_mem_category c) {
    static const char *names[OT_MEM_COUNT] = {"params", "gradients", "optimizer_state", "state", "constants",
                                              "inputs_outputs", "kept_activations", "transient", "workspace"};
    return (c >= 0 && c < OT_MEM_COUNT) ? names[c] : "?";
}

/* ---- best-fit allocator over the transient region -------------------------- */

typedef struct fblock {
    size_t off, size;
} fblock;

typedef struct allocator {
    fblock *b; /* free blocks sorted by offset, never adjacent (merged) */
    int n, cap;
    size_t top; /* end of the highest block ever handed out (region-relative) */
} allocator;

static int alloc_remove(allocator *a, int i) {
    memmove(&a->b[i], &a->b[i + 1], sizeof(fblock) * (size_t)(a->n - i - 1));
    a->n--;
    return 0;
}

/* Smallest free block that fits (lowest offset on ties); else grow the region,
 * extending a free block that ends at the top. */
static size_t alloc_block(allocator *a, size_t size) {
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (a->b[i].size >= size && (best < 0 || a->b[i].size < a->b[best].size)) best = i;
    if (best >= 0) {
        size_t off = a->b[best].off;
        a->b[best].off += size;
        a->b[best].size -= size;
        if (a->b[best].size == 0) alloc_remove(a, best);
        return off;
    }
    if (a->n > 0 && a->b[a->n - 1].off + a->b[a->n - 1].size == a->top) {
        size_t off = a->b[a->n - 1].off;
        alloc_remove(a, a->n - 1);
        a->top = off + size;
        return off;
    }
    size_t off = a->top;
    a->top += size;
    return off;
}

static int free_block(allocator *a, size_t off, size_t size) {
    if (size == 0) return 0;
    int lo = 0, hi = a->n; /* first block with offset > off */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (a->b[mid].off <= off) lo = mid + 1;
        else hi = mid;
    }
    int i = lo;
    bool merge_prev = i > 0 && a->b[i - 1].off + a->b[i - 1].size == off;
    bool merge_next = i < a->n && off + size == a->b[i].off;
    if (merge_prev && merge_next) {
        a->b[i - 1].size += size + a->b[i].size;
        return alloc_remove(a, i);
    }
    if (merge_prev) {
        a->b[i - 1].size += size;
        return 0;
    }
    if (merge_next) {
        a->b[i].off = off;
        a->b[i].size += size;
        return 0;
    }
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        fblock *nb = realloc(a->b, sizeof(fblock) * (size_t)cap);
        if (!nb) return -1;
        a->b = nb;
        a->cap = cap;
    }
    memmove(&a->b[i + 1], &a->b[i], sizeof(fblock) * (size_t)(a->n - i));
    a->b[i].off = off;
    a->b[i].size = size;
    a->n++;
    return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

static const char *vname(const ot_graph *g, int v) {
    const char *s = g->values[v].name;
    return s && *s ? s : "?";
}

static const char *nname(const ot_node *nd) { return nd->name && *nd->name ? nd->name : "?"; }

/* Dtype + shape descriptors (no data) of a node's inputs and outputs, for the
 * backend's workspace query. */
static void describe(const ot_graph *g, const int *ids, int n, ot_tensor *t) {
    for (int k = 0; k < n; k++) {
        memset(&t[k], 0, sizeof t[k]);
        int v = ids[k];
        if (v < 0 || v >= g->n_values) continue;
        t[k].dtype = g->values[v].dtype;
        t[k].shape = g->values[v].shape;
        int64_t ne = ot_shape_numel(&t[k].shape);
        t[k].nbytes = ne > 0 ? (size_t)ne * ot_dtype_size(t[k].dtype) : 0;
    }
}

void ot_plan_free(ot_plan *p) {
    if (!p) return;
    free(p->values);
    free(p->order);
    free(p->ws_offset);
    free(p->ws_bytes);
    free(p->timeline);
    free(p);
}

ot_status ot_plan_build(const ot_graph *g, const int *order, int n, const ot_plan_device *dev, ot_plan **out,
                        ot_error *err) {
    return ot_plan_build_opts(g, order, n, dev, NULL, out, err);
}

ot_status ot_plan_build_opts(const ot_graph *g, const int *order, int n, const ot_plan_device *dev,
                             const ot_plan_options *opt, ot_plan **out, ot_error *err) {
    ot_status st = OT_OK;
    ot_plan *p = NULL;
    int *step_of = NULL;
    bool *used = NULL, *released = NULL, *is_output = NULL, *external = NULL;
    int *opt_read = NULL, *slab_key = NULL, *slab_ids = NULL;
    ot_tensor *tin = NULL, *tout = NULL;
    allocator al = {0};
    int nv = g->n_values;
    int max_io = 1;
    *out = NULL;

    p = calloc(1, sizeof *p);
    if (!p) goto oom;
    p->n_values = nv;
    p->n_steps = n;
    p->values = calloc((size_t)nv + 1, sizeof *p->values);
    p->order = malloc(sizeof(int) * (size_t)(n + 1));
    p->ws_offset = malloc(sizeof(int64_t) * (size_t)(n + 1));
    p->ws_bytes = calloc((size_t)n + 1, sizeof(size_t));
    p->timeline = calloc((size_t)n + 1, sizeof(size_t));
    step_of = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    used = calloc((size_t)nv + 1, sizeof(bool));
    opt_read = calloc((size_t)nv + 1, sizeof(int));
    slab_key = malloc(sizeof(int) * (size_t)(nv + 1));
    slab_ids = malloc(sizeof(int) * (size_t)(nv + 1));
    released = calloc((size_t)nv + 1, sizeof(bool));
    is_output = calloc((size_t)nv + 1, sizeof(bool));
    external = calloc((size_t)nv + 1, sizeof(bool));
    if (!external || !p->values || !p->order || !p->ws_offset || !p->ws_bytes || !p->timeline || !step_of || !used ||
        !opt_read || !slab_key || !slab_ids || !released || !is_output)
        goto oom;
    if (n > 0) memcpy(p->order, order, sizeof(int) * (size_t)n);
    p->peak_step = -1;
    p->backward_step = n;

    for (int i = 0; i < g->n_nodes; i++) step_of[i] = -1;
    for (int v = 0; v < nv; v++) {
        p->values[v].offset = -1;
        p->values[v].def_step = -1;
        p->values[v].last_step = -1;
        p->values[v].inplace_of = -1;
        p->values[v].category = OT_MEM_TRANSIENT;
    }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k] >= 0 && g->outputs[k] < nv) is_output[g->outputs[k]] = true;
    for (int v = 0; v < nv; v++)
        if (g->values[v].is_graph_output) is_output[v] = true;
    for (int k = 0; opt && k < opt->n_external; k++) {
        int v = opt->external[k];
        if (v < 0 || v >= nv) {
            st = ot_fail(err, OT_E_USAGE, "planner: external value id %d is out of range (%d values)", v, nv);
            goto fail;
        }
        external[v] = true;
    }

    /* Pass 1: steps, definitions and last reads. */
    for (int s = 0; s < n; s++) {
        int id = order[s];
        if (id < 0 || id >= g->n_nodes || g->nodes[id].removed || step_of[id] >= 0) {
            st = ot_fail(err, OT_E_INTERNAL, "planner: schedule step %d names node %d, which is removed, out of range or repeated", s, id);
            goto fail;
        }
        step_of[id] = s;
        const ot_node *nd = &g->nodes[id];
        if (nd->n_inputs > max_io) max_io = nd->n_inputs;
        if (nd->n_outputs > max_io) max_io = nd->n_outputs;
        if ((nd->phase == OT_PHASE_BACKWARD || nd->phase == OT_PHASE_RECOMPUTE) && p->backward_step == n)
            p->backward_step = s;
        for (int k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k];
            if (v < 0) continue;
            if (v >= nv) {
                st = ot_fail(err, OT_E_MODEL, "planner: node '%s' writes value id %d, out of range", nname(nd), v);
                goto fail;
            }
            used[v] = true;
            p->values[v].def_step = s;
            p->values[v].last_step = s;
        }
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0) continue;
            if (v >= nv) {
                st = ot_fail(err, OT_E_MODEL, "planner: node '%s' reads value id %d, out of range", nname(nd), v);
                goto fail;
            }
            used[v] = true;
            p->values[v].last_step = s;
            if (ot_op_has(nd->op, OT_T_OPTIMIZER)) opt_read[v]++;
        }
    }

    /* Classify: pinned slabs or transient. */
    for (int v = 0; v < nv; v++) {
        const ot_value *val = &g->values[v];
        ot_plan_value *pv = &p->values[v];
        bool keep_always = val->kind == OT_VK_PARAM || val->kind == OT_VK_STATE || val->kind == OT_VK_OPT_STATE ||
                           val->kind == OT_VK_INPUT || is_output[v];
        if (!used[v] && !keep_always) continue;
        int prod = val->producer;
        bool produced = prod >= 0 && prod < g->n_nodes && step_of[prod] >= 0;
        switch (val->kind) {
        case OT_VK_PARAM: pv->category = OT_MEM_PARAMS; pv->pinned = true; break;
        case OT_VK_STATE: pv->category = OT_MEM_STATE; pv->pinned = true; break;
        case OT_VK_OPT_STATE: pv->category = OT_MEM_OPT_STATE; pv->pinned = true; break;
        case OT_VK_CONSTANT: pv->category = OT_MEM_CONSTANTS; pv->pinned = true; break;
        case OT_VK_INPUT: pv->category = OT_MEM_IO; pv->pinned = true; break;
        case OT_VK_GRADIENT:
            if (opt_read[v] || is_output[v]) { /* a param's gradient */
                pv->category = OT_MEM_GRADIENTS;
                pv->pinned = true;
            }
            break;
        case OT_VK_ACTIVATION:
            if (is_output[v]) {
                pv->category = OT_MEM_IO;
                pv->pinned = true;
            }
            break;
        }
        if (external[v]) {
            /* Pinned so that no block is reused for it or taken over in place: the
             * memory belongs to someone else, who expects it intact. */
            if (produced) {
                st = ot_fail(err, OT_E_USAGE, "planner: value '%s' is bound to external memory, but node '%s' writes it", vname(g, v), nname(&g->nodes[prod]));
                goto fail;
            }
            pv->pinned = true;
            pv->external = true;
        }
        if (!produced && !pv->pinned) {
            if (val->data) { /* a folded constant that kept its activation kind */
                pv->category = OT_MEM_CONSTANTS;
                pv->pinned = true;
            } else {
                st = ot_fail(err, OT_E_MODEL, "planner: value '%s' is read but no scheduled node writes it and it is not an input, initializer or constant", vname(g, v));
                goto fail;
            }
        }
        if (!ot_shape_is_static(&val->shape)) {
            char buf[160];
            ot_shape_str(g, &val->shape, buf, sizeof buf);
            st = ot_fail(err, OT_E_SHAPE, "planner: value '%s' has shape %s, which is not static; bind its symbolic dims (e.g. --batch-size N or --bind NAME=V)", vname(g, v), buf);
            goto fail;
        }
        size_t es = ot_dtype_size(val->dtype);
        if (es == 0) {
            st = ot_fail(err, OT_E_UNSUPPORTED, "planner: value '%s' has dtype %s, which onnxtrain cannot store", vname(g, v), ot_dtype_name(val->dtype));
            goto fail;
        }
        int64_t ne = ot_shape_numel(&val->shape);
        if (ne < 0 || (uint64_t)ne > ((uint64_t)1 << 40) / es) {
            st = ot_fail(err, OT_E_MEMORY, "planner: value '%s' is too large (%lld elements)", vname(g, v), (long long)ne);
            goto fail;
        }
        pv->nbytes = (size_t)ne * es;
        if (pv->external) {
            if (used[v]) p->external_bytes += pv->nbytes;
            continue; /* no block, no category: the arena does not hold it */
        }
        if (pv->pinned) {
            pv->def_step = produced ? step_of[prod] : -1;
        } else if (pv->def_step >= 0 && pv->last_step < pv->def_step) {
            pv->last_step = pv->def_step;
        }
        /* A transient read before it is written means the schedule is not topological. */
        if (!pv->pinned && produced && used[v]) {
            for (int c = 0; c < val->n_consumers; c++) {
                int cn = val->consumers[c];
                if (cn >= 0 && cn < g->n_nodes && step_of[cn] >= 0 && step_of[cn] < pv->def_step) {
                    st = ot_fail(err, OT_E_INTERNAL, "planner: node '%s' reads '%s' before node '%s' writes it: the schedule is not topological", nname(&g->nodes[cn]), vname(g, v), nname(&g->nodes[prod]));
                    goto fail;
                }
            }
        }
        /* Forward values the backward pass reads are the kept activations. */
        if (!pv->pinned && produced) {
            ot_phase ph = g->nodes[prod].phase;
            if ((ph == OT_PHASE_FORWARD || ph == OT_PHASE_LOSS) && pv->def_step < p->backward_step &&
                pv->last_step >= p->backward_step)
                pv->category = OT_MEM_KEPT;
        }
    }

    /* Slab order. Params by value id; a gradient or optimizer state that exactly one
     * optimizer node reads next to a param sorts by that param's position, so the
     * gradient and state slabs are laid out like the param slab (one loop, one
     * offset). Everything else follows by value id. */
    int n_params = 0;
    for (int v = 0; v < nv; v++) {
        slab_key[v] = INT_MAX;
        if (p->values[v].pinned && !p->values[v].external && p->values[v].category == OT_MEM_PARAMS)
            slab_key[v] = n_params++;
    }
    for (int s = 0; s < n; s++) {
        const ot_node *nd = &g->nodes[order[s]];
        if (!ot_op_has(nd->op, OT_T_OPTIMIZER) || nd->n_inputs < 2 || nd->inputs[0] < 0) continue;
        int par = nd->inputs[0];
        if (!p->values[par].pinned || p->values[par].external || p->values[par].category != OT_MEM_PARAMS) continue;
        for (int k = 1; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v >= 0 && opt_read[v] == 1 && v != par) slab_key[v] = slab_key[par];
        }
    }

    /* Pinned region: one slab per category, each value 64-byte aligned. */
    size_t cursor = 0;
    size_t max_end = 0;
    size_t live[OT_MEM_COUNT] = {0};
    for (int c = OT_MEM_PARAMS; c <= OT_MEM_IO; c++) {
        p->slab_offset[c] = cursor;
        int n_slab = 0;
        for (int v = 0; v < nv; v++)
            if (p->values[v].pinned && !p->values[v].external && p->values[v].category == (ot_mem_category)c)
                slab_ids[n_slab++] = v;
        if (c == OT_MEM_GRADIENTS || c == OT_MEM_OPT_STATE) {
            /* Insertion sort by (key, id): stable, and keys are mostly in order already. */
            for (int i = 1; i < n_slab; i++) {
                int v = slab_ids[i], j = i;
                while (j > 0 && slab_key[slab_ids[j - 1]] > slab_key[v]) {
                    slab_ids[j] = slab_ids[j - 1];
                    j--;
                }
                slab_ids[j] = v;
            }
        }
        for (int i = 0; i < n_slab; i++) {
            int v = slab_ids[i];
            ot_plan_value *pv = &p->values[v];
            pv->offset = (int64_t)cursor;
            if (pv->nbytes && cursor + pv->nbytes > max_end) max_end = cursor + pv->nbytes;
            cursor += align_up(pv->nbytes);
            live[c] += pv->nbytes;
            p->total[c] += pv->nbytes;
        }
        p->slab_bytes[c] = cursor - p->slab_offset[c];
    }
    p->pinned_bytes = cursor;
    memcpy(p->at_peak, live, sizeof live);
    const size_t base = cursor;
    bool inplace_ok = !(opt && opt->no_inplace);

    tin = calloc((size_t)max_io, sizeof *tin);
    tout = calloc((size_t)max_io, sizeof *tout);
    if (!tin || !tout) goto oom;

    /* Pass 2: simulate the schedule. */
    for (int s = 0; s < n; s++) {
        const ot_node *nd = &g->nodes[order[s]];
        size_t end_before = max_end;
        for (int k = 0; k < nd->n_outputs; k++) {
            int o = nd->outputs[k];
            if (o < 0) continue;
            ot_plan_value *po = &p->values[o];
            if (po->pinned) continue;
            if (po->nbytes == 0) { /* occupies nothing: any offset is safe */
                po->offset = (int64_t)base;
                continue;
            }
            int i0 = nd->n_inputs > 0 ? nd->inputs[0] : -1;
            if (k == 0 && inplace_ok && i0 >= 0 && i0 != o &&
                (ot_op_has(nd->op, OT_T_INPLACE) || ot_op_has(nd->op, OT_T_VIEW))) {
                ot_plan_value *pi = &p->values[i0];
                if (!pi->pinned && pi->offset >= 0 && !released[i0] && pi->last_step == s && pi->nbytes == po->nbytes) {
                    po->offset = pi->offset;
                    po->inplace_of = i0;
                    released[i0] = true; /* its block now belongs to o */
                    live[pi->category] -= pi->nbytes;
                    live[po->category] += po->nbytes;
                    p->total[po->category] += po->nbytes;
                    continue;
                }
            }
            size_t off = alloc_block(&al, align_up(po->nbytes));
            po->offset = (int64_t)(base + off);
            if (base + off + po->nbytes > max_end) max_end = base + off + po->nbytes;
            live[po->category] += po->nbytes;
            p->total[po->category] += po->nbytes;
        }
        size_t ws = 0;
        p->ws_offset[s] = -1;
        if (dev && dev->workspace_bytes) {
            describe(g, nd->inputs, nd->n_inputs, tin);
            describe(g, nd->outputs, nd->n_outputs, tout);
            ws = dev->workspace_bytes(dev->ctx, nd, tin, tout);
        }
        size_t ws_off = 0;
        if (ws > 0) {
            ws_off = alloc_block(&al, align_up(ws));
            p->ws_offset[s] = (int64_t)(base + ws_off);
            p->ws_bytes[s] = ws;
            if (base + ws_off + ws > max_end) max_end = base + ws_off + ws;
            live[OT_MEM_WORKSPACE] += ws;
            p->total[OT_MEM_WORKSPACE] += ws;
        }
        size_t in_use = 0;
        for (int c = 0; c < OT_MEM_COUNT; c++) in_use += live[c];
        p->timeline[s] = in_use;
        if (max_end > end_before) {
            p->peak_step = s;
            memcpy(p->at_peak, live, sizeof live);
        }
        /* Release the workspace, inputs read for the last time, outputs never read. */
        if (ws > 0) {
            if (free_block(&al, ws_off, align_up(ws))) goto oom;
            live[OT_MEM_WORKSPACE] -= ws;
        }
        for (int pass = 0; pass < 2; pass++) {
            const int *ids = pass == 0 ? nd->inputs : nd->outputs;
            int cnt = pass == 0 ? nd->n_inputs : nd->n_outputs;
            for (int k = 0; k < cnt; k++) {
                int v = ids[k];
                if (v < 0) continue;
                ot_plan_value *pv = &p->values[v];
                if (pv->pinned || released[v] || pv->last_step != s || pv->offset < 0) continue;
                released[v] = true;
                if (pv->nbytes == 0) continue;
                if (free_block(&al, (size_t)pv->offset - base, align_up(pv->nbytes))) goto oom;
                live[pv->category] -= pv->nbytes;
            }
        }
    }
    p->peak_bytes = max_end;

    *out = p;
    p = NULL;
    goto fail;
oom:
    st = ot_fail(err, OT_E_MEMORY, "planner: out of memory planning %d values over %d steps", nv, n);
fail:
    ot_plan_free(p);
    free(step_of);
    free(used);
    free(opt_read);
    free(slab_key);
    free(slab_ids);
    free(released);
    free(is_output);
    free(external);
    free(tin);
    free(tout);
    free(al.b);
    return st;
}

size_t ot_plan_peak_bytes(const ot_plan *p) { return p ? p->peak_bytes : 0; }

int64_t ot_plan_offset(const ot_plan *p, int value_id) {
    if (!p || value_id < 0 || value_id >= p->n_values) return -1;
    return p->values[value_id].offset;
}

size_t ot_plan_value_bytes(const ot_plan *p, int value_id) {
    if (!p || value_id < 0 || value_id >= p->n_values) return 0;
    return p->values[value_id].nbytes;
}

size_t ot_plan_bytes_at_peak(const ot_plan *p, ot_mem_category c) {
    return (p && c >= 0 && c < OT_MEM_COUNT) ? p->at_peak[c] : 0;
}

static void human(size_t b, char *buf, size_t n) {
    if (b >= (size_t)1 << 30) snprintf(buf, n, "%.2f GiB", (double)b / (double)((size_t)1 << 30));
    else if (b >= (size_t)1 << 20) snprintf(buf, n, "%.2f MiB", (double)b / (double)((size_t)1 << 20));
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%zu B", b);
}

void ot_plan_print_summary(const ot_plan *p, FILE *f) {
    char a[32], b[32];
    human(p->peak_bytes, a, sizeof a);
    fprintf(f, "memory plan: peak %s (%zu bytes) over %d steps", a, p->peak_bytes, p->n_steps);
    if (p->peak_step >= 0) fprintf(f, ", reached at step %d", p->peak_step);
    human(p->pinned_bytes, b, sizeof b);
    fprintf(f, "; pinned region %s", b);
    if (p->external_bytes) {
        human(p->external_bytes, b, sizeof b);
        fprintf(f, "; %s read from external memory", b);
    }
    fputc('\n', f);
    fprintf(f, "  %-18s %14s %14s\n", "category", "at peak", "total");
    for (int c = 0; c < OT_MEM_COUNT; c++) {
        human(p->at_peak[c], a, sizeof a);
        human(p->total[c], b, sizeof b);
        fprintf(f, "  %-18s %14s %14s\n", ot_mem_category_name((ot_mem_category)c), a, b);
    }
}

void ot_plan_write_json(const ot_plan *p, FILE *f) {
    fprintf(f, "{\"peak_bytes\": %zu, \"peak_step\": %d, \"steps\": %d, \"pinned_bytes\": %zu, \"at_peak\": {",
            p->peak_bytes, p->peak_step, p->n_steps, p->pinned_bytes);
    for (int c = 0; c < OT_MEM_COUNT; c++)
        fprintf(f, "%s\"%s\": %zu", c ? ", " : "", ot_mem_category_name((ot_mem_category)c), p->at_peak[c]);
    fprintf(f, "}, \"total\": {");
    for (int c = 0; c < OT_MEM_COUNT; c++)
        fprintf(f, "%s\"%s\": %zu", c ? ", " : "", ot_mem_category_name((ot_mem_category)c), p->total[c]);
    fprintf(f, "}}");
}
