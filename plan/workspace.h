/* workspace.h — the device's workspace query for one node, shared by the planner's
 * walk and ot_plan_device_idle (plan/workspace.c). Internal to plan/. */
#ifndef OT_PLAN_WORKSPACE_H
#define OT_PLAN_WORKSPACE_H

#include "plan/planner.h"

/* The bytes dev asks for node nd (0 for a NULL dev or one without workspace_bytes):
 * tin and tout (room for nd's inputs and outputs) get the tensors' descriptors, dtype
 * and shape without data, that the query reads. */
size_t ot_plan_node_workspace(const ot_plan_device *dev, const ot_graph *g, const ot_node *nd, ot_tensor *tin,
                              ot_tensor *tout);

#endif
