/* einsum.h — Einsum's equation, parsed once for the shape rule, the gradient rule and
 * both backends (ops batch 4, issue 26). The equation is ONNX's (numpy's): terms of
 * letters a-z / A-Z separated by commas, one per operand, an optional "->" and the
 * output term; spaces ignored; "..." stands for the operand's dims not named by a
 * letter, aligned to the right across operands and broadcast as numpy broadcasts. In
 * the implicit form (no "->") the output is the ellipsis dims followed by the letters
 * that appear once, in alphabetical order (upper case first, as numpy sorts).
 *
 * The parse turns every term into dense label ids (one per distinct letter, one per
 * ellipsis dim), given the operands' ranks: ellipsis dim j of m (m the most dims any
 * "..." stands for) is one label, shared by every operand whose "..." reaches it. */
#ifndef OT_EINSUM_H
#define OT_EINSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

#define OT_EIN_MAX_IN 6      /* operands (Einsum's arity in ir/ops.def) */
#define OT_EIN_MAX_LABELS 24 /* distinct labels in one equation */

typedef struct ot_einsum {
    int n_in;
    int rank[OT_EIN_MAX_IN];
    int8_t label[OT_EIN_MAX_IN][OT_MAX_RANK]; /* operand k, axis d -> label id */
    int out_rank;
    int8_t out_label[OT_MAX_RANK];
    int n_labels;
    bool ellipsis[OT_EIN_MAX_LABELS]; /* the label is an ellipsis dim (broadcasts) */
    char letter[OT_EIN_MAX_LABELS];   /* its letter ('.' for an ellipsis dim) */
} ot_einsum;

/* Parses eq for n_in operands of the given ranks. false with a message in msg (what
 * is wrong, naming the term) for a malformed equation, a term whose letters do not
 * match its operand's rank, an output letter no operand has, a letter twice in the
 * output, or more labels, operands or dims than the limits above. */
bool ot_einsum_parse(const char *eq, int n_in, const int *ranks, ot_einsum *e, char *msg, size_t msg_size);

#endif
