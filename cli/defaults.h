/* defaults.h — what the commands assume when the user does not say, in one place so
 * that the bare form, train, grad, plan and verify agree (docs/training.md, "Defaults"):
 * the --remat policy, the batch (and other symbolic dims) of a model whose batch is
 * symbolic, and the words for a remat plan's peak against --remat none's. */
#ifndef OT_CLI_DEFAULTS_H
#define OT_CLI_DEFAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "cli/args.h"

/* --remat when none is given, in every command. auto without --memory-budget is the
 * least peak at modest recompute and never above none's (remat/auto_modest.c), so it
 * costs nothing where remat does not help; --memory-budget alone searches that budget. */
#define OT_CLI_REMAT_DEFAULT "auto"

/* The batch of a model whose batch is symbolic, without data or --batch-size: small, so
 * that a plan or a check runs in seconds and little memory whatever the model. */
#define OT_CLI_BATCH_NO_DATA 4
/* With data and no --batch-size: train's default, min(this, samples). */
#define OT_CLI_BATCH_DATA_MAX 32
/* Other symbolic dims (a sequence length) without data or --bind: small too. */
#define OT_CLI_DIM_NO_DATA 8

/* Where a command's batch came from. */
typedef enum ot_cli_batch_from {
    OT_BATCH_GIVEN,   /* --batch-size */
    OT_BATCH_MODEL,   /* the model's fixed batch */
    OT_BATCH_DATA,    /* min(OT_CLI_BATCH_DATA_MAX, samples) */
    OT_BATCH_NO_DATA, /* OT_CLI_BATCH_NO_DATA */
} ot_cli_batch_from;

#define OT_CLI_MAX_BINDS 32

/* The batch and binds a command passes to its sessions (batch_size, bind, n_bind). */
typedef struct ot_cli_batch_pick {
    int64_t batch; /* 0: the model's fixed batch (the session takes it) */
    ot_cli_batch_from from;
    const char *binds[2 * OT_CLI_MAX_BINDS]; /* the user's --bind specs, then own[] */
    int n_binds;
    char *own[OT_CLI_MAX_BINDS]; /* malloc'd "NAME=8" for the dims no --bind names, without data */
    int n_own;
    char dims[256]; /* the names of those dims, ", "-separated; "" when none */
} ot_cli_batch_pick;

/* The pick for model graph g (as imported, unbound), the user's options ca, and
 * n_samples of data (-1: no data). Free with ot_cli_batch_pick_free. */
ot_status ot_cli_pick_batch(const ot_graph *g, const ot_common_args *ca, int64_t n_samples, ot_cli_batch_pick *p,
                            ot_error *err);
void ot_cli_batch_pick_free(ot_cli_batch_pick *p);
/* Why the batch is what it is, for the line that states it: "" for --batch-size,
 * " (the model's)", " (train's default: min(32, samples); --batch-size N for another)",
 * " (a small default: the model's batch is symbolic; --batch-size N for another)". */
const char *ot_cli_batch_note(const ot_cli_batch_pick *p);

/* Whether a --bind spec of ca names the dim. */
bool ot_cli_bound_by_user(const ot_common_args *ca, const char *dim);

/* The label of a remat policy in the lines that state a plan: the policy's text, then
 * for auto and optimal " (budget 1.50 MiB)"; for auto without one, from the session's
 * summary (rs, NULL before it is built), " (no budget: the least peak within +5% FLOPs)"
 * or " (no budget: no remat helps here, so none's plan)". */
struct ot_train_remat_summary;
void ot_cli_remat_label(const char *policy, int64_t budget, const struct ot_train_remat_summary *rs, char *buf,
                        size_t n);

/* A remat plan's peak against --remat none's, in words that are right either way:
 * "saves 866.0 KiB (40.0%)", "costs 3.6 KiB (1.7%)", or "the same peak" (auto: never
 * "costs", remat/auto_modest.c). */
void ot_cli_peak_change(int64_t peak_none, int64_t peak, char *buf, size_t n);

#endif
