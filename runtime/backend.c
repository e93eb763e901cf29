/* backend.c — helpers shared by every backend behind runtime/backend.h. */
#include "runtime/backend.h"

void ot_backend_free(ot_backend *be) {
    if (be && be->destroy) be->destroy(be);
}
