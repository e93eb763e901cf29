/* kv_cache.h — decoders exported for inference with a KV cache (HF / optimum's
 * decoder_with_past.onnx: past_key_values.N.key/value or past.* inputs, present.*
 * outputs, an attention_mask over past + sequence, position_ids), trained with token
 * data only, and the symbols such a graph derives from others.
 *
 *   roles      a model input is a past (by the exporters' names, or a dim whose
 *              symbol names a past length), the attention mask or the positions
 *              (by name, in a model that has a past input), or none
 *   defaults   with no data for them: an empty past (its past axis 0), a mask of
 *              ones over past + sequence, positions P..P+T-1 (0..T-1 for an empty
 *              past): HF's defaults
 *   derived    a symbol of a model input that the graph computes from the others
 *              (total_sequence_length = past + sequence: a value declaring it gets
 *              a number once the others are bound) is never bound on its own: it
 *              takes what inference gives once the others are bound
 * The tuned model keeps every input and output: nothing here changes the graph. */
#ifndef OT_KV_CACHE_H
#define OT_KV_CACHE_H

#include "ir/ir.h"
#include "train/data.h"

typedef enum { OT_KV_NONE, OT_KV_PAST, OT_KV_MASK, OT_KV_POSITIONS } ot_kv_role;

/* The role of graph input v among g's first n_model_inputs inputs. */
ot_kv_role ot_kv_role_of(const ot_graph *g, int n_model_inputs, int v);
/* The axis of a past input whose symbol is a past length (or axis 2 of a rank-4 past
 * with a symbolic axis 2, HF's [batch, heads, past, head_dim]), bound or not; -1 when
 * none (a past of fixed length). */
int ot_kv_past_axis(const ot_graph *g, int v);
/* derived[sym] (g->n_syms entries) for each symbol of the model inputs that the graph
 * derives from the others (see above). g is the import, unbound. */
ot_status ot_kv_derived_syms(const ot_graph *g, int n_model_inputs, bool *derived, ot_error *err);
/* Binds each derived symbol still unbound to the number inference gave a value that
 * declares it (after the others are bound). */
ot_status ot_kv_bind_derived(ot_graph *g, int n_model_inputs, const bool *derived, ot_error *err);
/* A mask input (role MASK) without data in d (NULL: none) whose length is a symbol of
 * its own (the dynamo exporter's total_sequence_length, which its graph does not derive
 * from past + sequence) gets that length bound to past + sequence, the length of the
 * default mask of ones: past from the (bound) past inputs, sequence from input_ids or
 * the first other integer [batch, sequence] input. Call after the others are bound. */
ot_status ot_kv_bind_mask(ot_graph *g, int n_model_inputs, const ot_dataset *d, ot_error *err);
/* The default array of cache input v (role not NONE) on the bound graph g, with
 * n_samples samples; NULL with err set when it has no default (a past whose length
 * is not 0: give the cache as data) or out of memory. how gets what it holds. */
ot_tensor *ot_kv_default(const ot_graph *g, int n_model_inputs, int v, int64_t n_samples, char *how, size_t n_how, ot_error *err);
/* Adds the default array of every cache input of the bound graph g that d has no
 * array for (d's value_ids mapped); note (if non-NULL) gets the one line that says
 * so ("" when nothing was added). */
ot_status ot_kv_add_defaults(const ot_graph *g, int n_model_inputs, ot_dataset *d, char *note, size_t n_note,
                             ot_error *err);

#endif
