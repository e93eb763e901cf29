/* size_limits.h — the size limits the importer enforces on what a model declares or shape
 * inference derives, so a corrupt or hostile dim is refused with a message before any
 * pass multiplies it out (int64 overflow) or allocates for it. Importer-internal. */
#ifndef OT_IMP_LIMITS_H
#define OT_IMP_LIMITS_H

#include "importer.h"

/* No value (input, activation, output) may describe more than this many bytes: 1 TiB
 * is far beyond any machine onnxtrain trains on, and keeps every byte count, and sums
 * of thousands of them, far from int64 overflow. */
#define OT_MAX_VALUE_BYTES ((uint64_t)1 << 40)

/* True when the known dims of s (symbolic ones count as 1) times dt's size (1 when
 * undefined) exceed OT_MAX_VALUE_BYTES; never overflows. */
bool ot_imp_shape_too_large(const ot_shape *s, ot_dtype dt);

/* OT_E_UNSUPPORTED naming the first value of g whose shape is too large; else OT_OK. */
ot_status ot_imp_check_value_sizes(const ot_graph *g, ot_error *err);

#endif
