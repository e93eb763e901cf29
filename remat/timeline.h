/* timeline.h — the SVG picture of memory in use along the schedule (`plan --timeline`,
 * `bench --timeline` with the measured marks), and the trade-off picture (`bench --svg`). */
#ifndef OT_REMAT_TIMELINE_H
#define OT_REMAT_TIMELINE_H

#include "ir.h"
#include "plan/planner.h"

/* Draws plans[i]->timeline (bytes in use per schedule step) for n plans on one set of
 * axes, labelled labels[i], with each peak and backward start marked. Writes path
 * through a temporary file and a rename. */
ot_status ot_remat_timeline_svg(const char *path, const ot_plan *const *plans, const char *const *labels, int n,
                                const char *title, ot_error *err);

/* One curve of that picture: a plan's timeline, and optionally what a run measured. */
typedef struct ot_timeline_curve {
    const char *label;
    const size_t *timeline; /* bytes in use per schedule step (n_steps entries) */
    int n_steps, peak_step, backward_step;
    size_t peak_bytes; /* the planned arena */
    bool measured;     /* the two below were measured */
    size_t measured_peak; /* the arena's high-water mark over the run */
    int measured_step;    /* the step that first reached it, -1: unknown */
} ot_timeline_curve;

/* Draws the curves as ot_remat_timeline_svg draws plans; a measured curve also gets a
 * hollow diamond at (measured_step, measured_peak), with the value in its
 * data-measured-bytes attribute, and a legend line of its own saying whether it equals
 * the plan. title NULL: a default naming whether every measured peak equals its plan. */
ot_status ot_timeline_curves_svg(const char *path, const ot_timeline_curve *curves, int n, const char *title,
                                 ot_error *err);

/* One measured configuration for the trade-off picture (`bench --svg`). */
typedef struct ot_timeline_point {
    const char *label;          /* "sqrt", "auto @ 64.00 MiB" */
    double seconds, q1, q3;     /* median step time and its interquartile range */
    double planned, measured;   /* peak bytes: the planner's, the arena's high-water mark */
} ot_timeline_point;

/* Draws planned (hollow) and measured (filled) peak against the median step time of
 * each point, with the IQR as a horizontal bar, labelled; `model`'s file name (no
 * folder) in the title, and a note when the machine was busy. Atomic, as above. */
ot_status ot_timeline_tradeoff_svg(const char *path, const char *model, const ot_timeline_point *pts, int n, bool busy,
                                   ot_error *err);

#endif
