/* backend_select.c — one entry point that opens a backend from its name, for the
 * CLI and the training loop: "cpu" or "cuda[:N]"; and the loader of the CUDA backend
 * module (see backend_select.h for where it is looked for). The module is opened only
 * when CUDA is asked for, so CPU runs never map the CUDA libraries (about 215 MiB of
 * resident memory from their load-time relocations alone). Without OT_HAVE_CUDA (no
 * CUDA Toolkit at build time) "cuda" fails with a message saying so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend_select.h"

#ifdef OT_HAVE_CUDA
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include "kernels/cuda/cuda_module.h"
#endif

#define NOT_BUILT                                                                                                      \
    "onnxtrain was built without CUDA (the CUDA Toolkit and cuDNN were not found when it was configured); use "        \
    "--device cpu or rebuild on a machine with the toolkit"

#ifdef OT_HAVE_CUDA

/* What to do when the module is found but will not load: nearly always a CUDA
 * library it links (libcudart, libcublas, libcublasLt, libcudnn) that the loader
 * cannot find, which dlerror() names first. */
#define HINT_LIBS                                                                                                      \
    "the CUDA runtime, cuBLAS and cuDNN libraries must be installed and findable (add their folder to "                \
    "LD_LIBRARY_PATH); or use --device cpu"
#define HINT_REBUILD                                                                                                   \
    "rebuild it from the same source tree as this executable (cmake --build BUILD --target onnxtrain_cuda), or "       \
    "point " OT_CUDA_MODULE_ENV " at the matching " OT_CUDA_MODULE_FILE

/* The folder of the running executable without the trailing slash ("" for /);
 * false when /proc/self/exe cannot be read (then only the other places are tried). */
static bool exe_dir(char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) return false;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) return false;
    *slash = '\0';
    return true;
}

/* Checks an opened module: the entry point, then the ABI number, then the layout
 * fingerprint. A module that fails stays mapped: unloading one whose constructors
 * registered CUDA kernels is not worth the risk for a process that is about to report
 * an error anyway. */
static const ot_cuda_module *module_check(void *h, const char *where, ot_error *err) {
    dlerror();
    void *sym = dlsym(h, OT_CUDA_MODULE_ENTRY);
    if (!sym) {
        ot_fail(err, OT_E_DEVICE, "%s is not a CUDA backend module of this onnxtrain (no symbol %s); %s", where,
                OT_CUDA_MODULE_ENTRY, HINT_REBUILD);
        return NULL;
    }
    ot_cuda_module_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, as POSIX allows */
    const ot_cuda_module *m = entry();
    if (!m || m->abi != OT_CUDA_MODULE_ABI) {
        ot_fail(err, OT_E_DEVICE, "%s has module interface %u, this executable needs %u; %s", where,
                m ? (unsigned)m->abi : 0u, (unsigned)OT_CUDA_MODULE_ABI, HINT_REBUILD);
        return NULL;
    }
    uint32_t mine = ot_cuda_module_layout(), theirs = m->layout ? m->layout() : 0;
    if (theirs != mine) {
        ot_fail(err, OT_E_DEVICE,
                "%s was built from a different onnxtrain source (data layout %08x, this executable's %08x); %s", where,
                (unsigned)theirs, (unsigned)mine, HINT_REBUILD);
        return NULL;
    }
    return m;
}

/* dlopen's own message, or a placeholder (it can be NULL after a failed call only in
 * theory). */
static const char *dl_reason(void) {
    const char *e = dlerror();
    return e ? e : "unknown dlopen error";
}

const ot_cuda_module *ot_cuda_module_load(ot_error *err) {
    /* dlopen of a file already loaded returns the same handle (reference counted), so
     * searching again on every call needs no cache, and no global state */
    const char *env = getenv(OT_CUDA_MODULE_ENV);
    if (env && *env) {
        void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            ot_fail(err, OT_E_DEVICE, "cannot load the CUDA backend module %s (from %s): %s; fix or unset %s", env,
                    OT_CUDA_MODULE_ENV, dl_reason(), OT_CUDA_MODULE_ENV);
            return NULL;
        }
        return module_check(h, env, err);
    }
    char dir[PATH_MAX], path[PATH_MAX + 64], looked[2 * PATH_MAX + 64] = "";
    if (exe_dir(dir, sizeof dir)) {
        const char *sub[] = {"", "/.."};
        for (int i = 0; i < 2; i++) {
            snprintf(path, sizeof path, "%s%s/%s", dir, sub[i], OT_CUDA_MODULE_FILE);
            if (access(path, F_OK) != 0) continue;
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                ot_fail(err, OT_E_DEVICE, "cannot load the CUDA backend module %s: %s; %s", path, dl_reason(),
                        HINT_LIBS);
                return NULL;
            }
            return module_check(h, path, err);
        }
        snprintf(looked, sizeof looked, "%s, %s/.. and ", *dir ? dir : "/", dir);
    }
    void *h = dlopen(OT_CUDA_MODULE_FILE, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dl_reason();
        /* glibc names the file it could not open first: the module itself, or one of
         * the libraries the module needs */
        if (strncmp(e, OT_CUDA_MODULE_FILE ":", strlen(OT_CUDA_MODULE_FILE) + 1) == 0)
            ot_fail(err, OT_E_DEVICE,
                    "the CUDA backend module %s was not found (looked in %sthe dynamic loader's path); keep it next "
                    "to the onnxtrain executable (cmake --build BUILD --target onnxtrain_cuda puts it there) or set "
                    "%s=/path/to/%s",
                    OT_CUDA_MODULE_FILE, looked, OT_CUDA_MODULE_ENV, OT_CUDA_MODULE_FILE);
        else
            ot_fail(err, OT_E_DEVICE, "cannot load the CUDA backend module %s: %s; %s", OT_CUDA_MODULE_FILE, e,
                    HINT_LIBS);
        return NULL;
    }
    return module_check(h, OT_CUDA_MODULE_FILE " (from the dynamic loader's path)", err);
}

bool ot_cuda_available(char *reason, size_t reason_len) {
    ot_error e = {0};
    const ot_cuda_module *m = ot_cuda_module_load(&e);
    if (!m) {
        if (reason && reason_len) snprintf(reason, reason_len, "%s", e.msg);
        return false;
    }
    return m->available(reason, reason_len);
}

ot_status ot_backend_cuda_mem_info(ot_backend *be, size_t *free_bytes, size_t *total_bytes, ot_error *err) {
    /* a CPU backend never loads the module just to be told it is not a CUDA one */
    if (!be || !be->name || strncmp(be->name, "cuda", 4) != 0)
        return ot_fail(err, OT_E_USAGE, "ot_backend_cuda_mem_info: not a CUDA backend");
    const ot_cuda_module *m = ot_cuda_module_load(err);
    if (!m) return err ? err->code : OT_E_DEVICE;
    return m->mem_info(be, free_bytes, total_bytes, err);
}

#else /* !OT_HAVE_CUDA */

const ot_cuda_module *ot_cuda_module_load(ot_error *err) {
    ot_fail(err, OT_E_DEVICE, NOT_BUILT);
    return NULL;
}

bool ot_cuda_available(char *reason, size_t reason_len) {
    if (reason && reason_len) snprintf(reason, reason_len, "%s", NOT_BUILT);
    return false;
}

ot_status ot_backend_cuda_mem_info(ot_backend *be, size_t *free_bytes, size_t *total_bytes, ot_error *err) {
    (void)be;
    (void)free_bytes;
    (void)total_bytes;
    return ot_fail(err, OT_E_DEVICE, NOT_BUILT);
}

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
        const ot_cuda_module *m = ot_cuda_module_load(err);
        if (!m) {
            if (err) ot_error_prefix(err, "device '%s': ", spec);
            return NULL;
        }
        return m->backend_new((int)dev, err);
#else
        ot_fail(err, OT_E_DEVICE, "device '%s': " NOT_BUILT, spec);
        return NULL;
#endif
    }
    ot_fail(err, OT_E_USAGE, "device '%s': unknown; use cpu, cuda or cuda:N", spec);
    return NULL;
}
