/* backend_select.h — open a backend by name ("cpu", "cuda", "cuda:N"), so the CLI
 * and the training loop need not know which backends were built. */
#ifndef OT_BACKEND_SELECT_H
#define OT_BACKEND_SELECT_H

#include "runtime/backend.h"

/* threads: kernel threads for the CPU backend (0 = OpenMP's default; ignored by
 * CUDA). NULL on failure: OT_E_USAGE for a malformed name, OT_E_DEVICE when CUDA was
 * not built in or the GPU cannot be opened. */
ot_backend *ot_backend_new_by_name(const char *spec, int threads, ot_error *err);

#endif
