/* planner.h — the exact memory planner: lifetimes over a schedule and byte offsets
 * in ONE arena per device. It is the project's one memory model: the executor
 * allocates exactly ot_plan_peak_bytes() and nothing else for tensors, and remat
 * uses it as its simulator.
 *
 * Layout. The arena starts with the pinned region: contiguous 64-byte-aligned slabs
 * in this order — params, gradients (of params), optimizer state, state (BatchNorm
 * running stats), constants, graph inputs/outputs. Params are ordered by value id;
 * a gradient or optimizer-state value that one optimizer node reads with a param
 * takes that param's position, so the gradient and state slabs mirror the param
 * slab and an optimizer step can be one loop over them; the rest by value id. The transient
 * region follows: every other value (but views, below) gets a block by best fit over the free blocks
 * at the step that defines it and gives it back after its last reader; each node's
 * workspace is a block alive only during that node.
 *
 * Second placement: when best fit's transient region ends above the most aligned bytes
 * of blocks live at one step (a hole below the top that no later block filled), and
 * the plan has at most OT_REFIT_MAX_BLOCKS (2,048; ot_plan_options.refit_max_blocks)
 * blocks, the same blocks with the same
 * lifetimes are placed again offline (plan/refit.h: greedy by size, then greedy by
 * breadth) and the lower placement is kept. Only offsets move: which values share a
 * block (in place, slots, aliases), the timeline and the categories do not, so the peak
 * never rises by it and results are bitwise those of best fit's placement. Both are
 * deterministic. With a target (ot_plan_options.fit_target_bytes, the budget) that the
 * lower of the three placements passes while the bytes in use do not, a third,
 * iterated greedy (plan/refit.h, ot_fit_search), aims at the target: a budget that
 * remat's searches measured a plan to fit is then met by the plan that runs.
 *
 * Pinned: values of kind param, state, optimizer state, constant (when read) and
 * input; graph outputs; and gradients of params — a value of kind GRADIENT that an
 * optimizer node reads or that is a graph output.
 *
 * Views: the output of a view op (plan/views.h: Flatten, Reshape, Squeeze,
 * Unsqueeze, Identity of the same size; a Slice that selects one contiguous run of its
 * input, at a 64-byte-aligned offset so every tensor a kernel sees stays aligned) is an
 * alias: it gets no block of its own but the bytes [offset, offset + nbytes) inside its
 * input's memory (alias_of: the value that owns that memory, never itself an alias, so
 * a chain of views points at the first base; alias_offset: where in it). The executor
 * runs no kernel for a node whose outputs are all aliases. A base's block then lives
 * until the last read of it or of any alias (its last_step says so), and takes the
 * category that lifetime gives it (a forward base whose alias the backward pass reads
 * is kept). An alias adds no bytes: it counts in no total[], at_peak[] or timeline
 * entry, and carries its base's category only as a label. A view stays a copy (its
 * own block, the kernel runs) when:
 *   - its output is pinned (a graph output or a param's gradient): that needs its own
 *     slot, in the gradient slab that mirrors the params, or surviving the run;
 *   - it is a Slice of a transient base that would outlive its base's other readers
 *     (keeping the whole base alive for a part of it could cost more than the copy);
 *   - an optimizer node reads it, or reads its base before the alias's last reader:
 *     optimizer nodes write their inputs (the param and its state) in place;
 *   - ot_plan_options.no_inplace is set, or the slice is strided, reversed, empty,
 *     misaligned or has non-constant bounds.
 * A view of a pinned value (param, state, constant, input) reads it in place: nothing
 * writes a pinned value during the step except the optimizer, checked above. A view
 * of an external value aliases the external memory (offset -1 like its base; the
 * executor adds alias_offset to the bound address).
 *
 * In place: output 0 of a node takes over its first input's block when the op has
 * OT_T_INPLACE or OT_T_VIEW, the block is transient, this node is the last reader of
 * the block (of the value and of every alias of it), both have the same byte size,
 * and no other input of the node is a different alias of that block. Kernels of such
 * ops must therefore accept out->data == in[0].data. inplace_of names the block's
 * owner (the base when input 0 is an alias). A GatherGrad with a base (input 3: a
 * tied weight's other gradient contribution, which it accumulates onto) takes over
 * that input's block by the same rules instead of input 0's.
 *
 * Gradient slots: when a param's gradient is the Sum of several contributions and
 * the first (the Sum's input 0, or a GatherGrad's base, read by nothing else, of the
 * gradient's size) is made before the others, it is written straight into the
 * gradient's pinned slot (slot_of; its offset is the slot's, it adds no bytes to any
 * category, the timeline or the peak) and the Sum (the GatherGrad) adds the rest in
 * place (Sum accepts out == in[0], GatherGrad out == base). A tied
 * embedding's head contribution, made at the loss, then waits in the slot instead
 * of in a transient block until the embedding's own contribution at the end of the
 * backward pass. Off with ot_plan_options.no_inplace.
 *
 * Receive slots: with fused updates under MPI (ot_graph.sum_ranks = N > 1) each param
 * gradient gets a second block of N - 1 gradient-sized slots into which the other
 * ranks' gradients arrive while the backward pass goes on (train/train_fuse.c): placed
 * with the gradient (which may still take over its input's block in place, a tied
 * embedding's GatherGrad its base), freed with it at its update, counted as gradients
 * (in total[], at_peak[], the timeline and the peak). No later node takes over such a
 * gradient's block in place. recv_bytes and recv_offset say where they are.
 *
 * External: values the caller lists in ot_plan_options.external live in memory
 * outside the arena (another executor's params, say: validation reads the training
 * arena's params and statistics in place). They are pinned (never reused, never taken
 * over in place), get no offset and count in no category, slab or peak; no
 * scheduled node may write one.
 *
 * Peak: the highest end offset (offset + bytes) of any block, which is what the
 * executor allocates and what it measures at run time.
 *
 * Padding: every pinned value starts on a 64-byte boundary, so the pinned region
 * (pinned_bytes) holds pinned_padding bytes more than its values, and those bytes are
 * in no timeline entry. Every transient block and workspace lies at or above
 * pinned_bytes, disjoint from the others live with it, so at any step s where one is
 * live the peak is at least timeline[s] + pinned_padding (a bound --remat optimal
 * takes off its budget: remat/optimal.c). With the second placement the peak meets
 * that bound, less the transient blocks' own alignment padding, on most plans; holes
 * that best fit alone must leave are no longer certain. */
#ifndef OT_PLANNER_H
#define OT_PLANNER_H

#include <stdio.h>

#include "ir.h"

/* What the planner asks of the device it plans for: the scratch bytes a node's
 * kernel needs, given its tensors' dtypes and shapes (data unused). plan/ sits below
 * exec/ and knows no backend; exec/backend.h makes one of these from a backend
 * (ot_backend_plan_device). NULL, or a NULL workspace_bytes: no node needs scratch. */
typedef struct ot_plan_device {
    size_t (*workspace_bytes)(void *ctx, const ot_node *node, const ot_tensor *in, const ot_tensor *out);
    void *ctx;
} ot_plan_device;

#define OT_PLAN_ALIGN 64
/* The bytes a block of x bytes takes in the arena: every block starts on an
 * OT_PLAN_ALIGN boundary (the planner's placement and remat/optimal_hole.c's bound on
 * it both use this one rule). */
static inline size_t ot_plan_aligned(size_t x) { return (x + OT_PLAN_ALIGN - 1) / OT_PLAN_ALIGN * OT_PLAN_ALIGN; }

typedef enum ot_mem_category {
    OT_MEM_PARAMS = 0,
    OT_MEM_GRADIENTS,  /* gradients of params (pinned) */
    OT_MEM_OPT_STATE,
    OT_MEM_STATE,      /* BatchNorm running statistics */
    OT_MEM_CONSTANTS,
    OT_MEM_IO,         /* graph inputs fed by data and graph outputs */
    OT_MEM_KEPT,       /* forward values alive across the forward→backward boundary */
    OT_MEM_TRANSIENT,  /* every other intermediate value */
    OT_MEM_WORKSPACE,  /* per-node kernel scratch */
    OT_MEM_COUNT
} ot_mem_category;

const char *ot_mem_category_name(ot_mem_category c);

typedef struct ot_plan_value {
    int64_t offset;   /* byte offset in the arena (an alias: its base's + alias_offset); -1 when
                         not placed, external or a view of an external value */
    size_t nbytes;    /* numel × dtype size (0 when not placed; an external value's own size) */
    int def_step;     /* schedule step that writes it; -1 for pinned values nothing writes */
    int last_step;    /* last schedule step that reads it or, for a base, any alias of it;
                         def_step when never read */
    ot_mem_category category;
    bool pinned;
    int inplace_of;   /* value whose block this one took over in place; -1 if none */
    bool external;    /* bound to memory outside the arena (ot_plan_options.external) */
    int alias_of;     /* a view: the value whose memory it shares (see Views); -1 if none */
    size_t alias_offset; /* a view: its first byte's offset within alias_of's memory */
    int slot_of;      /* a param gradient's first contribution, written into that gradient's
                         pinned slot (see Gradient slots); -1 if none */
    size_t recv_bytes;   /* a fused gradient's receive slots for its sum over ranks (see
                            Receive slots): their bytes, 0 for any other value */
    int64_t recv_offset; /* their block's offset; -1 when none */
} ot_plan_value;

typedef struct ot_plan {
    int n_values;
    ot_plan_value *values; /* indexed by value id */
    int n_steps;
    int *order;            /* the schedule (copy): node id of each step */
    int64_t *ws_offset;    /* per step: workspace offset, -1 when the node needs none */
    size_t *ws_bytes;      /* per step: workspace bytes */
    size_t *timeline;      /* per step: bytes in use (live values + workspace) while it runs */
    size_t peak_bytes;     /* arena size: max end offset of any block */
    int peak_step;         /* step at which the peak was first reached (-1: pinned only), what the
                              executor measures; after a second placement it may lie before the
                              step with the most bytes in use, and at_peak with it */
    size_t pinned_bytes;   /* end of the pinned region = start of the transient region */
    size_t pinned_padding; /* alignment padding in the pinned region: pinned_bytes less the bytes
                              of the values placed there (see Padding) */
    int backward_step;     /* first BACKWARD/RECOMPUTE step; n_steps when none */
    /* Pinned slabs: [slab_offset, slab_offset + slab_bytes) for categories up to IO. */
    size_t slab_offset[OT_MEM_COUNT], slab_bytes[OT_MEM_COUNT];
    size_t at_peak[OT_MEM_COUNT]; /* bytes live per category when the peak is reached */
    size_t total[OT_MEM_COUNT];   /* bytes per category summed over all blocks */
    size_t external_bytes;        /* bytes of the external values the schedule reads (not in the arena) */
    bool best_fit_stands; /* more blocks than a second placement takes (plan/refit.h): best fit's
                             placement is the plan's, holes and all, as it is for every plan of
                             the graph with more blocks (remat/optimal_hole.c relies on it) */
} ot_plan;

typedef struct ot_plan_options {
    bool no_inplace;     /* never reuse an input's block for an output: no in place, no view aliases */
    const int *external; /* value ids bound to memory outside the arena (see External) */
    int n_external;
    /* The most blocks a plan may have for the second placement: 0 for the default
     * (OT_REFIT_MAX_BLOCKS, 2,048), negative for no second placement at all (best fit's
     * placement stands on every plan: what a test of remat/optimal_hole.c's terms needs). */
    int refit_max_blocks;
    /* The arena bytes the caller must fit in (--memory-budget, or auto's budget for the
     * training step), 0 for none. When the second placement's peak still passes it while
     * the aligned bytes in use at the busiest step do not, the planner searches further
     * placements of the same blocks (plan/refit.h, ot_fit_search: a few dozen at most)
     * and takes the first that fits. The plan stays a function of (graph, order,
     * options): every entry point, bounded or not, gives the same plan for the same
     * target; without one, plans are as before. */
    size_t fit_target_bytes;
} ot_plan_options;

/* Plans `g` over the schedule order[0..n). dev supplies workspace sizes (NULL: none).
 * Every placed value needs a static shape (else OT_E_SHAPE naming the first one) and
 * a supported dtype. An external id out of range, or one a scheduled node writes, is
 * OT_E_USAGE naming it. */
ot_status ot_plan_build(const ot_graph *g, const int *order, int n, const ot_plan_device *dev, ot_plan **out,
                        ot_error *err);
ot_status ot_plan_build_opts(const ot_graph *g, const int *order, int n, const ot_plan_device *dev,
                             const ot_plan_options *opt, ot_plan **out, ot_error *err);
void ot_plan_free(ot_plan *p);

/* For judging orders (plan/schedule.c): ot_plan_build, but the walk stops as soon as
 * the peak must pass limit (the aligned bytes in use do, whatever the placement; past
 * OT_REFIT_MAX_BLOCKS blocks, best fit's peak does): then *out is NULL, *exceeded true
 * and the status OT_OK. Otherwise the same plan as ot_plan_build. */
ot_status ot_plan_build_bounded(const ot_graph *g, const int *order, int n, const ot_plan_device *dev, size_t limit,
                                ot_plan **out, bool *exceeded, ot_error *err);
/* What the planner reads of every node and value, copied once by a caller that plans
 * several orders of one graph (plan/schedule.c judges two), so that each run reads
 * these compact arrays instead of the nodes (648 bytes each) and values: per node id
 * whether it is live, its phase, its flags (ot_plan_node_flags) and its input and
 * output ids (in_val[in_start[id] .. in_start[id + 1]), out_val likewise); per value
 * its producer, info (its kind | OT_PLAN_V_OUTPUT for a graph output | OT_PLAN_V_DATA
 * when it holds data) and size (ot_plan_value_size), and its consumers as the value
 * lists them (cons[cons_start[v] .. cons_start[v + 1]), removed nodes included). */
typedef struct ot_plan_nodes {
    const bool *live;
    const unsigned char *phase, *flags;
    const int *in_start, *in_val, *out_start, *out_val;
    const int *vprod, *cons_start, *cons;
    const unsigned char *vinfo;
    const int64_t *vsize;
} ot_plan_nodes;
enum { OT_PLAN_V_KIND = 15, OT_PLAN_V_OUTPUT = 16, OT_PLAN_V_DATA = 32 }; /* ot_plan_nodes.vinfo bits */
unsigned char ot_plan_node_flags(const ot_node *nd);
/* A value's bytes as the planner sizes it; -1 when it cannot (the planner then says why). */
int64_t ot_plan_value_size(const ot_value *val);
/* ot_plan_build_bounded without a device, reading the nodes from `nodes` (which must
 * describe g's nodes as they are); limit SIZE_MAX plans to the end. The same plan. */
ot_status ot_plan_build_nodes(const ot_graph *g, const int *order, int n, const ot_plan_nodes *nodes, size_t limit,
                              ot_plan **out, bool *exceeded, ot_error *err);
/* The build behind every entry point above, all its inputs given: dev (NULL: no
 * workspace), opt (NULL: the defaults), nodes (NULL: read the graph's), limit
 * (SIZE_MAX: plan to the end), and
 * scr: with one, the plan and every table of the build come from it (plan/scratch.h),
 * so that planning many versions of a graph faults no page in after the first; the
 * plan is then valid until scr is reset or freed and is not freed with ot_plan_free. */
typedef struct ot_plan_scratch ot_plan_scratch;
ot_status ot_plan_build_in(const ot_graph *g, const int *order, int n, const ot_plan_device *dev,
                           const ot_plan_options *opt, const ot_plan_nodes *nodes, size_t limit, ot_plan_scratch *scr,
                           ot_plan **out, bool *exceeded, ot_error *err);
/* True when dev asks no workspace for any node of order[0..n) (always, for a NULL dev
 * or one without workspace_bytes): a plan made without dev is then byte for byte the
 * plan made with it. */
bool ot_plan_device_idle(const ot_graph *g, const int *order, int n, const ot_plan_device *dev);

size_t ot_plan_peak_bytes(const ot_plan *p);
int64_t ot_plan_offset(const ot_plan *p, int value_id); /* -1 if not placed, external or a view of one */
size_t ot_plan_value_bytes(const ot_plan *p, int value_id);
/* Bytes of the arena that hold values or workspace of category c at the peak. */
size_t ot_plan_bytes_at_peak(const ot_plan *p, ot_mem_category c);

/* Bytes of category c by stored dtype (by[] indexed by ot_dtype; anything beyond
 * the table in by[0]): at_peak, the values live at the peak step (def_step <=
 * peak_step <= last_step), else every block's size once. Views, external values and
 * gradient slots add nothing; a block taken over in place counts once. The figures of
 * `plan`'s "by precision" line: how much of the kept and transient bytes are low
 * precision. */
#define OT_PLAN_DTYPES 17
void ot_plan_bytes_by_dtype(const ot_plan *p, const ot_graph *g, ot_mem_category c, bool at_peak,
                            size_t by[OT_PLAN_DTYPES]);

/* A human summary: peak, pinned region, bytes by category at the peak and in total. */
void ot_plan_print_summary(const ot_plan *p, FILE *f);
/* The same as one JSON object (no trailing newline). */
void ot_plan_write_json(const ot_plan *p, FILE *f);

#endif
