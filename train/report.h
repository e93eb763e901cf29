/* report.h — the JSON report of a training run (`onnxtrain train --report FILE.json`):
 * the configuration, the loss / learning-rate / gradient-norm history, step times,
 * validation results per epoch, and the memory plan (bytes by category, predicted and
 * measured peak). Written to a temporary name and renamed. */
#ifndef OT_REPORT_H
#define OT_REPORT_H

#include <stdio.h>

#include "plan/planner.h"
#include "train/train.h"

typedef struct ot_report_info {
    const char *model;      /* path */
    const char *output;     /* tuned model path, may be NULL */
    const char *loss;       /* "cross-entropy" ... */
    const char *remat;      /* policy text */
    int n_params;           /* trained tensors */
    int64_t n_param_elems;  /* trained scalars */
    int n_threads;
    uint64_t seed;
} ot_report_info;

/* Writes the report as one JSON object to f. */
void ot_report_write_json(FILE *f, const ot_report_info *info, const ot_optim_config *opt,
                          const ot_train_result *r, const ot_plan *plan);
/* Same, to path through ot_atomic_open (temporary file, fsync, rename). */
ot_status ot_report_write(const char *path, const ot_report_info *info, const ot_optim_config *opt,
                          const ot_train_result *r, const ot_plan *plan, ot_error *err);
/* A file-system-safe file stem for a tensor name (malloc'd): characters other than
 * ASCII letters, digits, '.', '-' and '_' become '_', a leading '.' becomes '_', and
 * a clash with one of used[0..n_used) (compared case-insensitively, for
 * case-insensitive file systems) gets a suffix _1, _2, ... NULL on out of memory. */
char *ot_safe_file_stem(const char *name, const char *const *used, int n_used);

#endif
