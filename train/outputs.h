/* outputs.h — the files one command run reads and writes, checked together before any
 * work, and outputs staged so that they appear only when the whole run succeeded.
 *
 * Every command that writes (train -o / --report / --checkpoint-dir, eval
 * --dump-outputs, grad --dump-grads, plan --dot / --timeline) lists its inputs (the
 * model, its external data files, every data file, a checkpoint to resume) and its
 * outputs, then calls ot_run_files_check once: an output that names an input (the same
 * file by (st_dev, st_ino) when both exist, through symlinks and hard links; the same
 * resolved path otherwise), two outputs that name one file, an empty name, a folder
 * where a file is wanted (or the reverse) are OT_E_USAGE naming both options; a
 * destination whose folder is missing or not writable is OT_E_IO. Nothing is created.
 *
 *     ot_staged_output rep, mod;                      // train: both written, then both renamed
 *     ot_staged_open(report, &rep, err); ot_report_write(ot_staged_path(&rep), ...);
 *     ot_staged_open(out, &mod, err);    ot_model_save(m, ot_staged_path(&mod), err);
 *     ot_staged_commit(&mod, err); ot_staged_commit(&rep, err);   // or ot_staged_abort
 */
#ifndef OT_TRAIN_OUTPUTS_H
#define OT_TRAIN_OUTPUTS_H

#include "importer/importer.h"

typedef enum ot_output_kind {
    OT_OUTPUT_FILE,   /* one file (a model, a report, an SVG) */
    OT_OUTPUT_FOLDER, /* a folder created if missing (checkpoints) */
    /* a folder filled with NAME.npy files named after the model's values, and an
     * index.json (--dump-outputs, --dump-grads): an input lying directly in it under
     * such a name could be replaced, so that is refused too */
    OT_OUTPUT_FOLDER_OF_FILES,
} ot_output_kind;

typedef struct ot_run_path {
    char *opt;  /* how messages name it: "-o", "--input", "the model", ... (copied) */
    char *path; /* copied */
    ot_output_kind kind;
} ot_run_path;

typedef struct ot_run_files {
    ot_run_path *in, *out;
    int n_in, n_out, cap_in, cap_out;
} ot_run_files;

/* Adds an input the run reads (path NULL: nothing to add). OT_E_MEMORY only. */
ot_status ot_run_files_input(ot_run_files *f, const char *opt, const char *path, ot_error *err);
/* Adds the model file and every external data file it read (importer/importer.h). */
ot_status ot_run_files_model(ot_run_files *f, const ot_model *m, ot_error *err);
/* Adds an output (path NULL: not written this run). */
ot_status ot_run_files_output(ot_run_files *f, const char *opt, const char *path, ot_output_kind kind,
                              ot_error *err);
/* The checks above, outputs in the order added; the first failure is returned. */
ot_status ot_run_files_check(const ot_run_files *f, ot_error *err);
void ot_run_files_free(ot_run_files *f);

/* One output written to a temporary name in its folder (DEST.tmp-XXXXXX, created
 * with O_EXCL, so nothing planted there is followed) and renamed over DEST by
 * ot_staged_commit. A destination that exists and is not a regular file (/dev/null, a
 * FIFO) is written in place: there is nothing to rename over. */
typedef struct ot_staged_output {
    const char *dest; /* not copied */
    char *stage;      /* the temporary name, malloc'd; NULL: written in place */
    bool renamed;     /* set by ot_staged_commit once dest holds the new contents */
} ot_staged_output;

/* Reserves the temporary name. OT_E_IO naming dest and the reason. */
ot_status ot_staged_open(const char *dest, ot_staged_output *so, ot_error *err);
/* Where the writer writes: the temporary name, or dest itself. */
const char *ot_staged_path(const ot_staged_output *so);
/* Renames the temporary file over dest and syncs the folder. A failed rename removes
 * the temporary file and leaves dest as it was; a failed folder sync comes after the
 * rename (renamed is then true). OT_E_IO naming dest. Frees the name. */
ot_status ot_staged_commit(ot_staged_output *so, ot_error *err);
/* Removes the temporary file (dest untouched); safe on a zeroed or committed one. */
void ot_staged_abort(ot_staged_output *so);

#endif
