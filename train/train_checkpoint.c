/* train_checkpoint.c — checkpoints of a training session (see checkpoint.h): the
 * model fingerprint, the run's settings, and copying params, running statistics and
 * optimizer state between the executor's arena and a checkpoint. The step, the data
 * position and the RNG need nothing else: batches and Dropout masks are pure
 * functions of (seed, micro-batch index) (data.h, DESIGN.md "Determinism"). */
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"
#include "train/train_internal.h"

static uint64_t hash_str(uint64_t h, const char *s) {
    s = s ? s : "";
    return ot_fnv1a64(h, s, strlen(s) + 1); /* with the terminator: "ab","c" != "a","bc" */
}

static uint64_t hash_i64(uint64_t h, int64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    return ot_fnv1a64(h, b, 8);
}

static uint64_t hash_value(uint64_t h, const ot_graph *g, int v) {
    const ot_value *val = &g->values[v];
    h = hash_str(h, val->name);
    h = hash_i64(h, val->dtype);
    h = hash_i64(h, val->shape.rank);
    for (int k = 0; k < val->shape.rank; k++)
        h = hash_i64(h, val->shape.dim[k]);
    return h;
}

uint64_t ot_train_fingerprint(const ot_train_session *s) {
    const ot_graph *g = s->g;
    uint64_t h = OT_FNV_OFFSET;
    /* the model's own nodes only: loss, backward, remat and optimizer nodes follow
     * from the settings, and remat may differ between the two runs */
    for (int i = 0; i < g->n_nodes; i++) {
        const ot_node *n = &g->nodes[i];
        if (n->src_index < 0 || n->removed) continue;
        h = hash_str(h, n->op_type ? n->op_type : ot_op_name(n->op));
        h = hash_str(h, n->name);
        for (int k = 0; k < n->n_inputs; k++)
            h = hash_str(h, n->inputs[k] >= 0 ? vname(g, n->inputs[k]) : "");
        for (int k = 0; k < n->n_outputs; k++)
            h = hash_str(h, n->outputs[k] >= 0 ? vname(g, n->outputs[k]) : "");
    }
    for (int i = 0; i < s->n_model_inputs; i++)
        h = hash_str(h, vname(g, g->inputs[i]));
    /* every initializer of the file, trained or frozen: --freeze is a setting, checked
     * (with its own message) when the tensors are matched */
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].init_index >= 0) h = hash_value(h, g, v);
    /* --precision changes the step's numbers: a run resumes in the precision it was
     * written in (fp32 adds nothing, so older checkpoints keep their fingerprint) */
    if (s->o.precision != OT_PRECISION_FP32) h = hash_str(h, ot_precision_name(s->o.precision));
    if (s->ls_state >= 0) h = hash_str(h, "loss-scale"); /* its state is a tensor: the counts would differ */
    return ot_train_lora_fingerprint(s, h);
}

void ot_train_ckpt_settings(const ot_train_session *s, const ot_dataset *data, ot_ckpt_settings *out) {
    memset(out, 0, sizeof *out);
    out->batch_size = s->B;
    out->accum = s->o.accum;
    out->n_samples = data->n_samples;
    out->seed = s->o.seed;
    out->no_shuffle = s->o.no_shuffle;
    out->keep_partial = ot_train_partial_batch(s, data->n_samples, NULL) > 0;
    out->loss_kind = (int)s->o.loss.kind;
    out->optim = s->o.optim;
    snprintf(out->remat, sizeof out->remat, "%s", s->o.remat ? s->o.remat : "none");
    out->memory_budget = s->o.memory_budget;
}

/* The values a checkpoint holds, in a fixed order. */
static int n_saved(const ot_train_session *s) {
    return s->ad.n_params + s->ad.n_state + s->og.n_state + (s->ls_state >= 0); /* the loss scaler last */
}

static int saved_value(const ot_train_session *s, int i, ot_ckpt_kind *kind) {
    if (i < s->ad.n_params) return *kind = OT_CKPT_PARAM, s->ad.params[i];
    i -= s->ad.n_params;
    if (i < s->ad.n_state) return *kind = OT_CKPT_STATE, s->ad.state_values[i];
    i -= s->ad.n_state;
    return *kind = OT_CKPT_OPT_STATE, i < s->og.n_state ? s->og.state[i] : s->ls_state;
}

/* Tensor i's bytes where they lie: on the CPU the arena itself. NULL: copy_out. */
static const void *ckpt_host_ptr(void *user, int i) {
    ot_train_session *s = user;
    ot_ckpt_kind kind;
    int v = saved_value(s, i, &kind);
    /* the arena first: a host copy kept (keep_host_weights) holds the weights as loaded */
    const void *p = ot_executor_value_ptr(s->ex, v);
    if (p) return s->be->host_memory ? p : NULL;
    return s->g->values[v].data;
}

static ot_status ckpt_read(void *user, int i, uint64_t offset, void *dst, size_t n, ot_error *err) {
    ot_train_session *s = user;
    ot_ckpt_kind kind;
    int v = saved_value(s, i, &kind);
    const char *p = ot_executor_value_ptr(s->ex, v);
    if (!p || offset + n > ot_executor_plan(s->ex)->values[v].nbytes)
        return ot_fail(err, OT_E_INTERNAL, "checkpoint: '%s' is not held by the training executor", vname(s->g, v));
    return s->be->copy_out(s->be, dst, p + offset, n, err);
}

ot_status ot_train_checkpoint_capture(ot_train_session *s, const ot_dataset *data, int64_t steps_done,
                                      ot_checkpoint *out, ot_error *err) {
    ot_status st = OT_OK;
    ot_checkpoint c = {0};
    c.fingerprint = ot_train_fingerprint(s);
    c.step = steps_done;
    c.micro_batches = steps_done * s->o.accum;
    int64_t per_epoch = ot_train_batches_per_epoch(s, data->n_samples);
    c.epoch = per_epoch > 0 ? c.micro_batches / per_epoch : 0;
    c.epoch_batch = per_epoch > 0 ? c.micro_batches % per_epoch : 0;
    ot_train_ckpt_settings(s, data, &c.set);
    /* The tensors stay in the arena: the writer reads them from there (twice: the
     * checksum, then the file), so a checkpoint adds no copy of the weights. */
    c.source = (ot_ckpt_source){.host_ptr = ckpt_host_ptr, .read = ckpt_read, .user = s};
    for (int i = 0; i < n_saved(s); i++) {
        ot_ckpt_kind kind;
        int v = saved_value(s, i, &kind);
        const ot_value *val = &s->g->values[v];
        size_t nbytes = ot_executor_plan(s->ex)->values[v].nbytes;
        if ((st = ot_checkpoint_add_ref(&c, vname(s->g, v), kind, val->dtype, &val->shape, nbytes, err))) goto fail;
    }
    *out = c;
    return OT_OK;
fail:
    ot_checkpoint_free(&c);
    return st;
}

static const char *kind_name(ot_ckpt_kind k) {
    return k == OT_CKPT_PARAM ? "param" : k == OT_CKPT_STATE ? "running statistic" : "optimizer state";
}

ot_status ot_train_checkpoint_restore(ot_train_session *s, const ot_dataset *data, const ot_checkpoint *c,
                                      const char *path, ot_error *err) {
    /* decoding validated the fields already; a checkpoint built in memory gets the same checks */
    ot_status st = ot_checkpoint_validate(c, path, err);
    if (st) return st;
    uint64_t fp = ot_train_fingerprint(s);
    if (c->fingerprint != fp)
        return ot_fail(err, OT_E_MODEL,
                       "%s: the checkpoint belongs to another model (fingerprint %016llx, this model %016llx: its "
                       "nodes, inputs or params differ, or the --lora, --precision or --loss-scale settings); resume with "
                       "the model, --lora, --precision and --loss-scale it was written for",
                       path, (unsigned long long)c->fingerprint, (unsigned long long)fp);
    ot_ckpt_settings run;
    ot_train_ckpt_settings(s, data, &run);
    if ((st = ot_checkpoint_check_settings(&run, &c->set, path, err))) return st;
    if (c->n_tensors != n_saved(s))
        return ot_fail(err, OT_E_DATA,
                       "%s: the checkpoint holds %d tensors, this run trains %d params with %d running statistics and "
                       "%d optimizer-state tensors (different --freeze/--train?)",
                       path, c->n_tensors, s->ad.n_params, s->ad.n_state, s->og.n_state);
    for (int i = 0; i < n_saved(s); i++) {
        ot_ckpt_kind kind;
        int v = saved_value(s, i, &kind);
        const ot_value *val = &s->g->values[v];
        const ot_ckpt_tensor *t = ot_checkpoint_find_tensor(c, vname(s->g, v));
        if (!t)
            return ot_fail(err, OT_E_DATA, "%s: no %s '%s' in the checkpoint (different --freeze/--train?)", path,
                           kind_name(kind), vname(s->g, v));
        if (t->kind != kind || t->dtype != val->dtype || !ot_shape_equal(&t->shape, &val->shape)) {
            char want[128], got[128];
            ot_shape_str(NULL, &val->shape, want, sizeof want);
            ot_shape_str(NULL, &t->shape, got, sizeof got);
            return ot_fail(err, OT_E_MODEL, "%s: '%s' is a %s %s %s in the checkpoint, a %s %s %s in this run", path,
                           t->name, kind_name(t->kind), ot_dtype_name(t->dtype), got, kind_name(kind),
                           ot_dtype_name(val->dtype), want);
        }
        if ((st = ot_executor_write(s->ex, v, t->data, t->nbytes, err))) return ot_error_prefix(err, "%s: ", path);
    }
    return ot_train_scale_restored(s, path, err); /* the loss scaler's state, from its tensor */
}
