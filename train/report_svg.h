/* report_svg.h — the training report as a picture people read: the loss of every step,
 * the validation loss after each epoch (when there was validation) and the learning
 * rate (right axis) against the step, as SVG. `train --report r.json` writes r.svg
 * beside r.json; `onnxtrain report r.json` draws one from an existing report (read
 * back here). Round ticks on both axes, the legend inside the canvas, the title the
 * model's file name without its folders. */
#ifndef OT_REPORT_SVG_H
#define OT_REPORT_SVG_H

#include <stdio.h>

#include "ir/ir.h"

typedef struct ot_report_curves {
    char *title;       /* model file name (folders dropped when drawn) */
    double *loss, *lr; /* per step (step i + 1 at [i]); NaN or null: not run (a resumed run's first steps) */
    int64_t n_steps;
    int64_t *val_step; /* after step val_step[k], the validation loss val_loss[k] */
    double *val_loss;
    int n_val;
} ot_report_curves;

/* Writes the picture to f. */
void ot_report_svg(FILE *f, const ot_report_curves *c);
/* Same, to path (temporary name, fsync, rename). */
ot_status ot_report_svg_write(const char *path, const ot_report_curves *c, ot_error *err);
/* The picture's path beside a report (malloc'd): "r.json" gives "r.svg", any other
 * name gets ".svg" appended. NULL when out of memory. */
char *ot_report_svg_path(const char *report_path);
/* Reads the curves back from a JSON report `train --report` wrote (its "model",
 * "loss", "lr" and "epochs" keys). Errors name the file and the key. */
ot_status ot_report_read_curves(const char *path, ot_report_curves *c, ot_error *err);
void ot_report_curves_free(ot_report_curves *c);

#endif
