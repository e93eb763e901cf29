/* timeline.h — the SVG picture of memory in use along the schedule (`plan --timeline`). */
#ifndef OT_REMAT_TIMELINE_H
#define OT_REMAT_TIMELINE_H

#include "ir.h"
#include "plan/planner.h"

/* Draws plans[i]->timeline (bytes in use per schedule step) for n plans on one set of
 * axes, labelled labels[i], with each peak and backward start marked. Writes path
 * through a temporary file and a rename. */
ot_status ot_remat_timeline_svg(const char *path, const ot_plan *const *plans, const char *const *labels, int n,
                                const char *title, ot_error *err);

#endif
