/* backend_select.c — one entry point that opens a backend from its name, for the
 * CLI and the training loop: "cpu" or "cuda[:N]". Without OT_HAVE_CUDA (no CUDA
 * Toolkit at build time) "cuda" fails with a message saying so. */
#include <stdlib.h>
#include <string.h>

#include "kernels/backend_select.h"
#ifdef OT_HAVE_CUDA
#include "kernels/cuda/backend_cuda.h"
#endif

ot_backend *ot_backend_new_by_name(const char *spec, int threads, ot_error *err) {
    if (!spec || !*spec || strcmp(spec, "cpu") == 0) return ot_backend_cpu_new(threads, err);
    if (strncmp(spec, "cuda", 4) == 0 && (spec[4] == '\0' || spec[4] == ':')) {
        long dev = 0;
        if (spec[4] == ':') {
            char *end = NULL;
            dev = strtol(spec + 5, &end, 10);
            if (spec[5] == '\0' || *end != '\0' || dev < 0 || dev > 1024) {
                ot_fail(err, OT_E_USAGE, "device '%s': expected cuda:N with N a GPU index (0, 1, ...)", spec);
                return NULL;
            }
        }
#ifdef OT_HAVE_CUDA
        return ot_backend_cuda_new((int)dev, err);
#else
        ot_fail(err, OT_E_DEVICE,
                "device '%s': onnxtrain was built without CUDA (the CUDA Toolkit and cuDNN were not found when it "
                "was configured); use --device cpu or rebuild on a machine with the toolkit",
                spec);
        return NULL;
#endif
    }
    ot_fail(err, OT_E_USAGE, "device '%s': unknown; use cpu, cuda or cuda:N", spec);
    return NULL;
}
