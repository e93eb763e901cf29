/* onnxtrain.h — the public C API of onnxtrain, the one header an application includes.
 *
 * A session trains one ONNX model in the application's own loop: open it from a model
 * file (or bytes) and an options struct, then call onnxtrain_train_step with a batch
 * of named host buffers as often as the application likes; evaluate, read and write
 * parameters by name, read the memory plan, check a remat policy, save and resume
 * checkpoints, and write the tuned model. It is a thin layer over the same session
 * builder and step as `onnxtrain train`: a step through the API gives bitwise the
 * loss and weights the CLI gives for the same batch, options and step number.
 *
 * Errors: every function that can fail returns an onnxtrain_status, whose values are
 * the CLI's documented exit codes (0 success, 2 usage, 3 I/O, ... 70 internal), and
 * leaves a message for the calling thread in onnxtrain_last_error(). Nothing exits or
 * aborts the process. Bad arguments (NULL, a wrong dtype or shape, a buffer too small,
 * a closed session) are ONNXTRAIN_E_USAGE or ONNXTRAIN_E_DATA with a message naming
 * the argument. The library never writes to memory the caller passed in as input
 * (const pointers); outputs are written only on success.
 *
 * Thread-safety: sessions are independent; different sessions may be used from
 * different threads at the same time. One session must not be used by two threads at
 * once: a call that finds its session busy in another thread fails with
 * ONNXTRAIN_E_USAGE (it does not wait and changes nothing). onnxtrain_last_error() is
 * per thread. A step itself runs on an OpenMP thread pool (options.threads).
 *
 * Ownership: the library copies every string and buffer it needs to keep; the caller
 * may free its own after each call returns. Strings the library returns stay valid
 * until the next call on the same session (or, for onnxtrain_last_error, the next
 * failing call in the same thread). */
#ifndef ONNXTRAIN_H
#define ONNXTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ONNXTRAIN_API
#else
#define ONNXTRAIN_API __attribute__((visibility("default")))
#endif

#define ONNXTRAIN_VERSION_MAJOR 0
#define ONNXTRAIN_VERSION_MINOR 1
#define ONNXTRAIN_VERSION_PATCH 0

/* The status of a call: the CLI's exit codes (`onnxtrain --help`). */
typedef enum onnxtrain_status {
    ONNXTRAIN_OK = 0,
    ONNXTRAIN_E_USAGE = 2,       /* a bad argument or option, or a call out of order */
    ONNXTRAIN_E_IO = 3,          /* a file cannot be read or written */
    ONNXTRAIN_E_PARSE = 4,       /* not a valid ONNX model or checkpoint */
    ONNXTRAIN_E_MODEL = 5,       /* a well-formed file describing an invalid model */
    ONNXTRAIN_E_UNSUPPORTED = 6, /* an op, dtype or feature onnxtrain does not support */
    ONNXTRAIN_E_SHAPE = 7,       /* shapes that do not agree or cannot be bound */
    ONNXTRAIN_E_DATA = 8,        /* data of the wrong dtype, shape or count */
    ONNXTRAIN_E_MEMORY = 9,      /* out of memory, or a memory budget that cannot be met */
    ONNXTRAIN_E_NUMERICS = 10,   /* NaN or Inf in the loss or a gradient */
    ONNXTRAIN_E_MISMATCH = 11,   /* onnxtrain_verify: results differ */
    ONNXTRAIN_E_DEVICE = 12,     /* GPU missing or a CUDA call failed */
    ONNXTRAIN_E_INTERNAL = 70    /* a bug in onnxtrain */
} onnxtrain_status;

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum onnxtrain_dtype {
    ONNXTRAIN_FLOAT32 = 1,
    ONNXTRAIN_UINT8 = 2,
    ONNXTRAIN_INT8 = 3,
    ONNXTRAIN_INT32 = 6,
    ONNXTRAIN_INT64 = 7,
    ONNXTRAIN_BOOL = 9,
    ONNXTRAIN_FLOAT16 = 10,
    ONNXTRAIN_FLOAT64 = 11,
    ONNXTRAIN_BFLOAT16 = 16
} onnxtrain_dtype;

#define ONNXTRAIN_MAX_RANK 8

/* A host buffer the caller owns: dense, row-major (C order), samples along axis 0.
 * name: the model input it feeds (NULL or "": the model's data inputs in order).
 * nbytes must be at least the product of the shape times the element size. */
typedef struct onnxtrain_tensor {
    const char *name;
    onnxtrain_dtype dtype;
    int rank;
    const int64_t *shape;
    const void *data;
    size_t nbytes;
} onnxtrain_tensor;

/* Session options, the CLI's `train` options. Call onnxtrain_options_init first: it
 * sets struct_size and the defaults; then change what differs. struct_size lets the
 * struct grow: a library newer than the application reads only the fields the
 * application was compiled with and takes the defaults for the rest. Doubles left at
 * their init value (NaN) take the optimizer's default, as when the CLI option is left
 * out. Strings and arrays are copied by onnxtrain_session_open. */
typedef struct onnxtrain_options {
    size_t struct_size;
    /* loss: "cross-entropy" (default), "mse", "bce" (BCE-with-logits, float targets
     * shaped like the output, torch.nn.BCEWithLogitsLoss), "l1" (mean absolute error,
     * torch.nn.L1Loss), or "output" (the model's output named loss_output is already
     * the scalar loss; no labels) */
    const char *loss;
    const char *loss_output; /* model output the loss reads; NULL: the first */
    int class_axis;          /* cross-entropy: class axis of the logits; -1 (default): last */
    int has_ignore_index;    /* cross-entropy: labels equal to ignore_index do not count */
    int64_t ignore_index;
    /* optimizer: "sgd" (default), "adam", "adamw", or "adamw-hf" (AdamW in HuggingFace's
     * form, that of ONNX Runtime's artifacts: eps added to sqrt(v) before the bias
     * correction, the decay applied after the update); its settings (NaN: its default) */
    const char *optimizer;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    double clip_grad_norm;  /* 0: no clipping */
    const char *schedule;   /* "constant" (default), "warmup", "cosine" */
    int64_t warmup_steps;
    int64_t total_steps;    /* the run's optimizer steps: the cosine schedule's T */
    int64_t accum;          /* micro-batches per optimizer step (default 1) */
    /* memory: remat policy ("none" default, "sqrt", "auto", ... as --remat) and the
     * budget in bytes for auto/optimal (0: none) */
    const char *remat;
    int64_t memory_budget;
    double remat_time_limit; /* seconds for --remat optimal; 0: its default */
    /* params: POSIX extended regexes over param names, as --freeze / --train */
    const char *const *freeze;
    int n_freeze;
    const char *const *train;
    int n_train;
    /* LoRA: rank 0 (default) none; alpha 0: rank; targets as --lora-target globs */
    int64_t lora_rank;
    double lora_alpha;
    const char *const *lora_targets;
    int n_lora_targets;
    /* "NAME=SIZE" specs for symbolic dims the data does not fix, as --bind */
    const char *const *bind;
    int n_bind;
    int threads;        /* 0: OpenMP's default */
    const char *device; /* "cpu" (NULL) or "cuda[:N]" */
    uint64_t seed;      /* Dropout masks and LoRA's initial A */
    int check_numerics; /* 1 (default): a NaN/Inf loss or gradient fails the step */
    /* LoRA adapters to start from: a PEFT folder (adapter_config.json and
     * adapter_model.safetensors, as onnxtrain_save_adapters writes; --lora-load);
     * NULL (default): A drawn from seed, B zero. With lora_rank 0 the folder's r and
     * lora_alpha are taken, else they must be equal. */
    const char *lora_load;
    /* 1: the session takes its steps in two calls (onnxtrain_backward, then
     * onnxtrain_optimizer_step) whichever call builds it; 0 (default): the first call
     * decides (onnxtrain_backward: two calls; prepare, train_step, eval: whole steps). */
    int split_step;
    /* cross-entropy over a MatMul/Gemm head without the full logits, as --chunked-loss:
     * "off" (NULL, default), "on", "auto"; chunked_loss_rows rows of logits per chunk
     * (0: the default, the most that fit 16 MiB) */
    const char *chunked_loss;
    int64_t chunked_loss_rows;
    /* mixed precision, as --precision: "fp32" (NULL, default), "bf16" or "fp16"
     * (docs/training.md, "Mixed precision") */
    const char *precision;
    /* 1: each param's update runs as soon as its gradient is complete and the gradient
     * is freed there (--fuse-update, docs/training.md): the same bits, a lower peak; a
     * non-finite gradient then fails the step with earlier params updated, and the
     * session refuses further steps. Not with clip_grad_norm or accum > 1. 0 (default): off */
    int fuse_update;
    /* fp16 loss scaling, as --loss-scale (torch.amp.GradScaler): "dynamic", "off", or
     * NULL (default: dynamic with precision "fp16", off otherwise); 0 in a number takes
     * its default: init 65536, growth 2, backoff 0.5, growth_interval 2000. A step whose
     * gradients overflow is skipped (onnxtrain_loss_scale counts them). Not with
     * split_step or fuse_update. */
    const char *loss_scale;
    double loss_scale_init, loss_scale_growth, loss_scale_backoff;
    int64_t loss_scale_growth_interval;
    /* 1: on a GPU, float32 GEMMs run on TF32 tensor cores, as --tf32 (10-bit
     * significands in the products, results about 1e-3 from float32's; not bitwise a
     * run without). The CPU has no TF32 and ignores it. 0 (default): off */
    int tf32;
    /* attention without kept probabilities, as --fused-attention: "off" (NULL,
     * default), "on", "auto" (docs/training.md, "Attention without the probabilities") */
    const char *fused_attention;
} onnxtrain_options;

typedef struct onnxtrain_session onnxtrain_session;

/* The memory plan of one training step (the planner's exact arena), by category.
 * Call onnxtrain_plan_report_init first (sets struct_size). */
#define ONNXTRAIN_MEM_CATEGORIES 9
typedef struct onnxtrain_plan_report {
    size_t struct_size;
    int64_t batch_size;      /* samples per micro-batch */
    int64_t accum;           /* micro-batches per step */
    int n_params;            /* trained tensors */
    int64_t param_elements;  /* their elements */
    uint64_t peak_bytes;     /* the step's arena */
    uint64_t peak_without_remat; /* the same step without remat (= peak_bytes with none) */
    /* bytes live per category when the peak is reached, and summed over the step;
     * onnxtrain_memory_category_name(i) names category i */
    uint64_t at_peak[ONNXTRAIN_MEM_CATEGORIES];
    uint64_t total[ONNXTRAIN_MEM_CATEGORIES];
} onnxtrain_plan_report;

/* ---- version and errors ---- */

/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
ONNXTRAIN_API const char *onnxtrain_version(void);
/* The message of the calling thread's last failed call ("" if none). */
ONNXTRAIN_API const char *onnxtrain_last_error(void);
/* The status of the calling thread's last failed call (ONNXTRAIN_OK if none). */
ONNXTRAIN_API onnxtrain_status onnxtrain_last_status(void);

/* ---- sessions ---- */

ONNXTRAIN_API void onnxtrain_options_init(onnxtrain_options *o);

/* Loads the model and checks the options; the training graph itself is built for the
 * first batch (onnxtrain_prepare, or the first step or eval), whose shapes it keeps. */
ONNXTRAIN_API onnxtrain_status onnxtrain_session_open(const char *model_path, const onnxtrain_options *o,
                                                      onnxtrain_session **out);
/* The same from the model's bytes; external data is resolved against dir (NULL: a model
 * with external data is refused). The bytes are not kept. */
ONNXTRAIN_API onnxtrain_status onnxtrain_session_open_bytes(const void *bytes, size_t nbytes, const char *dir,
                                                            const onnxtrain_options *o, onnxtrain_session **out);
/* Releases everything the session holds (model, arena); later calls on it fail with
 * ONNXTRAIN_E_USAGE ("the session is closed") until onnxtrain_session_free. NULL or a
 * closed session: nothing. Called while another thread's call on s runs, it does
 * nothing (close and free are the caller's to order after every other call). */
ONNXTRAIN_API void onnxtrain_session_close(onnxtrain_session *s);
/* Closes the session and frees the handle itself. NULL: nothing. */
ONNXTRAIN_API void onnxtrain_session_free(onnxtrain_session *s);

/* ---- training ---- */

/* Builds the training graph for batches shaped like this one (inputs[0..n_inputs) and
 * labels, NULL with loss "output"), without running a step. Axis 0 holds accum x B
 * samples: the micro-batch size B is that divided by options.accum. Every later batch
 * must have the same names, dtypes and shapes. Idempotent once built with these shapes. */
ONNXTRAIN_API onnxtrain_status onnxtrain_prepare(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                                 const onnxtrain_tensor *labels);
/* One optimizer step: forward, loss, backward over accum micro-batches of B samples
 * each (micro-batch k is samples k*B .. k*B+B-1 of the buffers), gradients summed as
 * --accum sums them, then the update. *loss (may be NULL) gets the mean loss of the
 * micro-batches. The step number (learning-rate schedule, Dropout masks) counts up
 * from 0, or from a resumed checkpoint's step. On failure nothing was updated. */
ONNXTRAIN_API onnxtrain_status onnxtrain_train_step(onnxtrain_session *s, const onnxtrain_tensor *inputs,
                                                    int n_inputs, const onnxtrain_tensor *labels, double *loss);
/* The step in two calls, as ONNX Runtime's training API takes it (Module(...), then
 * Optimizer.step(), lazy_reset_grad()): onnxtrain_backward runs forward and backward
 * on one batch (exactly the samples of the first, options.accum 1) and adds the
 * gradients to the session's sums, or copies them there on the first call after
 * onnxtrain_zero_grad (and on the very first); *loss (may be NULL) gets the loss.
 * Nothing is updated but BatchNorm's running statistics. onnxtrain_optimizer_step
 * updates the params from the sums (which stay until onnxtrain_zero_grad: calling it
 * twice applies them twice, as ONNX Runtime does) at the rate onnxtrain_learning_rate
 * reports, without clipping, and counts a step. A session takes whole steps
 * (onnxtrain_train_step) or steps in two calls, whichever it was built with (the
 * first call): the other is refused with ONNXTRAIN_E_USAGE. The sums cost one float
 * per trained param (the plan's optimizer state). */
ONNXTRAIN_API onnxtrain_status onnxtrain_backward(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                                  const onnxtrain_tensor *labels, double *loss);
ONNXTRAIN_API onnxtrain_status onnxtrain_optimizer_step(onnxtrain_session *s);
ONNXTRAIN_API onnxtrain_status onnxtrain_zero_grad(onnxtrain_session *s);
/* The learning rate of the following onnxtrain_optimizer_step calls, replacing the
 * schedule's (options.lr and schedule); NaN returns to the schedule. Negative or
 * infinite: ONNXTRAIN_E_USAGE. */
ONNXTRAIN_API onnxtrain_status onnxtrain_set_learning_rate(onnxtrain_session *s, double lr);
/* The rate the next onnxtrain_optimizer_step uses: the one set, else the schedule's. */
ONNXTRAIN_API onnxtrain_status onnxtrain_learning_rate(onnxtrain_session *s, double *lr);
/* fp16 loss scaling: the scale the next step uses and the steps skipped so far for an
 * overflow (a resumed checkpoint's included); *scale 0 and *skipped 0 when the session
 * does not scale (or has not been built by a first batch yet). Either may be NULL. */
ONNXTRAIN_API onnxtrain_status onnxtrain_loss_scale(onnxtrain_session *s, double *scale, int64_t *skipped);
/* Optimizer steps done so far (resumed steps included); 0 for NULL or a closed session. */
ONNXTRAIN_API int64_t onnxtrain_step_count(const onnxtrain_session *s);
/* Loss in inference mode (BatchNorm on running statistics, Dropout off), mean over the
 * full batches of B samples in the buffers; *accuracy (may be NULL) gets the top-1
 * accuracy for cross-entropy, NaN otherwise. Nothing is updated. */
ONNXTRAIN_API onnxtrain_status onnxtrain_eval(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                              const onnxtrain_tensor *labels, double *loss, double *accuracy);

/* ---- parameters ---- */

/* Trained params and running statistics of the session's graph (the model's own before
 * it is built; with LoRA, the adapters once built); -1 on error (a closed session). */
ONNXTRAIN_API int onnxtrain_param_count(onnxtrain_session *s);
/* Name of param i (0 .. count-1), valid until the next call on s; NULL when out of range. */
ONNXTRAIN_API const char *onnxtrain_param_name(onnxtrain_session *s, int i);
/* dtype, rank and shape (ONNXTRAIN_MAX_RANK entries) of a param; any out pointer may be NULL.
 * info and read also take a frozen initializer of the model (--freeze, LoRA's base
 * weights) once the session is built; write takes trained params and statistics only. */
ONNXTRAIN_API onnxtrain_status onnxtrain_param_info(onnxtrain_session *s, const char *name, onnxtrain_dtype *dtype,
                                                    int *rank, int64_t *shape);
/* Copies a param's current value into dst (at least its size in bytes). */
ONNXTRAIN_API onnxtrain_status onnxtrain_param_read(onnxtrain_session *s, const char *name, void *dst,
                                                    size_t dst_bytes);
/* Sets a param from src, exactly its size in bytes; optimizer state is left as it is. */
ONNXTRAIN_API onnxtrain_status onnxtrain_param_write(onnxtrain_session *s, const char *name, const void *src,
                                                     size_t nbytes);

/* ---- plan, verify ---- */

ONNXTRAIN_API void onnxtrain_plan_report_init(onnxtrain_plan_report *r);
/* The memory plan of the session's step (built: after prepare or a step). */
ONNXTRAIN_API onnxtrain_status onnxtrain_plan(onnxtrain_session *s, onnxtrain_plan_report *r);
/* Name of memory category i ("params", "gradients", ...); NULL when out of range. */
ONNXTRAIN_API const char *onnxtrain_memory_category_name(int i);
/* `onnxtrain verify`: one step on this batch with remat none and one with the session's
 * policy, from the weights as loaded, compared bitwise (loss, every gradient, every
 * state update). ONNXTRAIN_OK when all are equal, ONNXTRAIN_E_MISMATCH otherwise (the
 * message counts and names them); *n_different (may be NULL) gets the count. Must be
 * called before the session is built (it needs the loaded weights): ONNXTRAIN_E_USAGE
 * afterwards. */
ONNXTRAIN_API onnxtrain_status onnxtrain_verify(onnxtrain_session *s, const onnxtrain_tensor *inputs, int n_inputs,
                                                const onnxtrain_tensor *labels, int *n_different);

/* ---- checkpoints and the tuned model ---- */

/* Writes a checkpoint (params, running statistics, optimizer state, the step) to path,
 * atomically (temporary name, fsync, rename). The session must be built. */
ONNXTRAIN_API onnxtrain_status onnxtrain_checkpoint_save(onnxtrain_session *s, const char *path);
/* Resumes from a checkpoint file written by onnxtrain_checkpoint_save (or a folder of
 * them: the newest valid one) with the same model, options and batch shape: loaded now
 * if the session is built, else when it is. The step count continues from it. */
ONNXTRAIN_API onnxtrain_status onnxtrain_checkpoint_load(onnxtrain_session *s, const char *path);
/* Writes the tuned model (the same graph, the current weights; with LoRA the adapters
 * merged), atomically; external_data non-zero writes the initializers to path.data
 * beside it (as `onnxtrain train --external-data`). */
ONNXTRAIN_API onnxtrain_status onnxtrain_save_model(onnxtrain_session *s, const char *path, int external_data);
/* Writes the LoRA adapters alone (as `train --lora-save`): path ending in ".npz" or
 * ".onnx", or in '/' (or an existing folder) for PEFT's adapter_model.safetensors and
 * adapter_config.json (docs/training.md "Adapters for PEFT"). The session must be
 * built with lora_rank > 0. */
ONNXTRAIN_API onnxtrain_status onnxtrain_save_adapters(onnxtrain_session *s, const char *path);

#ifdef __cplusplus
}
#endif

#endif
