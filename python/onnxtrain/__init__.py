"""onnxtrain — train ONNX models in your own Python loop.

    import numpy as np, onnxtrain
    t = onnxtrain.Trainer("samples/tinygpt.onnx", optimizer="adam", lr=0.003, seed=1)
    for batch in onnxtrain.batches({"tokens": tokens, "labels": labels}, batch_size=16):
        loss = t.step(batch)
    t.save("tuned.onnx")

A Trainer is one session of the C API (include/onnxtrain.h, docs/api.md): the same
session builder and step as `onnxtrain train`, so a step gives bitwise the loss and
weights the CLI gives for the same batch, options and step number. Arrays go to the
library without a copy when they are C-contiguous with a dtype the model takes; the GIL
is released while a step runs. Errors raise OnnxtrainError with the CLI's exit code
(.code) and the library's message.
"""
import math
import os

import numpy as np

from ._lib import ffi, lib

__all__ = ["Trainer", "OnnxtrainError", "batches", "version"]

LABELS = "labels"  # the key of a batch dict that holds the loss's labels / targets

_DTYPES = {np.dtype(np.float32): lib.ONNXTRAIN_FLOAT32, np.dtype(np.float64): lib.ONNXTRAIN_FLOAT64,
           np.dtype(np.float16): lib.ONNXTRAIN_FLOAT16, np.dtype(np.int64): lib.ONNXTRAIN_INT64,
           np.dtype(np.int32): lib.ONNXTRAIN_INT32, np.dtype(np.int8): lib.ONNXTRAIN_INT8,
           np.dtype(np.uint8): lib.ONNXTRAIN_UINT8, np.dtype(np.bool_): lib.ONNXTRAIN_BOOL}
_NUMPY = {v: k for k, v in _DTYPES.items()}


class OnnxtrainError(Exception):
    """A failed call: .code is the status (the CLI's exit code: 2 usage, 3 I/O, ... 8
    data, 9 memory, 10 numerics, 11 mismatch, 70 internal), .message the library's text."""

    def __init__(self, code, message):
        super().__init__("%s (code %d)" % (message, code))
        self.code = code
        self.message = message


def version():
    """The version of the library loaded."""
    return ffi.string(lib.onnxtrain_version()).decode()


def _check(status):
    if status != 0:
        raise OnnxtrainError(int(status), ffi.string(lib.onnxtrain_last_error()).decode(errors="replace"))


def _as_array(x, what):
    """x as a numpy array without a copy where it can be: numpy arrays, and tensors with
    .numpy() (torch on the CPU). Anything else is a TypeError naming the argument."""
    if isinstance(x, np.ndarray):
        a = x
    elif hasattr(x, "numpy") and callable(x.numpy):
        a = x.detach().numpy() if hasattr(x, "detach") else x.numpy()
    else:
        raise TypeError("%s: a %s, not an array (give a numpy array or a CPU tensor)" % (what, type(x).__name__))
    if a.dtype not in _DTYPES:
        raise TypeError("%s: dtype %s is not one onnxtrain takes (%s)" % (what, a.dtype,
                        ", ".join(sorted(str(d) for d in _DTYPES))))
    if a.ndim < 1:
        raise ValueError("%s: a 0-d array; a batch has samples along axis 0" % what)
    return np.ascontiguousarray(a)  # a copy only when the layout needs one


class _Batch:
    """The C structs of one batch; keeps the arrays and names alive for the call."""

    def __init__(self, inputs, labels):
        if isinstance(inputs, dict):
            if labels is None and LABELS in inputs:
                labels = inputs[LABELS]
            items = [(k, v) for k, v in inputs.items() if k != LABELS]
        elif isinstance(inputs, (list, tuple)):
            items = [(None, v) for v in inputs]
        else:
            items = [(None, inputs)]
        if not items:
            raise ValueError("inputs: no model input in the batch")
        self.keep = []
        self.inputs = ffi.new("onnxtrain_tensor[]", len(items))
        for i, (name, x) in enumerate(items):
            self._fill(self.inputs[i], name, _as_array(x, "inputs[%r]" % (name if name is not None else i)))
        self.n = len(items)
        self.labels = ffi.NULL
        if labels is not None:
            self.labels = ffi.new("onnxtrain_tensor *")
            self._fill(self.labels, None, _as_array(labels, "labels"))

    def _fill(self, t, name, a):
        shape = ffi.new("int64_t[]", list(a.shape))
        cname = ffi.new("char[]", name.encode()) if name else ffi.NULL
        self.keep += [a, shape, cname]
        t.name = cname
        t.dtype = _DTYPES[a.dtype]
        t.rank = a.ndim
        t.shape = shape
        t.data = ffi.from_buffer(a) if a.nbytes else ffi.NULL
        t.nbytes = a.nbytes


def _list(strings, what):
    if isinstance(strings, str):
        strings = [strings]
    arr = [ffi.new("char[]", s.encode()) for s in strings]
    return arr, ffi.new("const char *[]", arr) if arr else ffi.NULL, len(arr)


def _size(x, what):
    """Bytes from an int or a size such as "512M" / "2G" (powers of 1024)."""
    if isinstance(x, str):
        t = x.strip().upper().rstrip("B").rstrip("I")
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
        try:
            return int(float(t[:-1] if mult > 1 else t) * mult)
        except ValueError:
            raise ValueError("%s %r: expected bytes or a size such as 512M" % (what, x)) from None
    return int(x)


class Trainer:
    """A training session over an ONNX model, with the options of `onnxtrain train`.

    model: path of the .onnx file. Options (keyword only; None: the CLI's default):
      loss ("cross-entropy", "mse", "bce" (BCE-with-logits), "l1", "output"), output
      (model output the loss reads),
      class_axis, ignore_index; optimizer ("sgd", "adam", "adamw"), lr, momentum,
      nesterov, weight_decay, beta1, beta2, eps, clip_grad_norm, schedule ("constant",
      "warmup", "cosine"), warmup_steps, total_steps; accum (micro-batches per step);
      remat (policy, as --remat), memory_budget (bytes or "512M"), remat_time_limit;
      freeze, train (regexes over param names); lora (rank), lora_alpha, lora_targets,
      lora_load (a PEFT adapter folder to start from, as --lora-load); bind ("NAME=SIZE"
      specs); threads, device ("cpu", "cuda:0"), seed, check_numerics; split_step (steps
      in two calls: backward() then optimizer_step(), as onnxtrain.training uses);
      chunked_loss ("off", "on", "auto", as --chunked-loss) and chunked_loss_rows;
      precision ("fp32", "bf16", "fp16": mixed precision as --precision); fuse_update (each update as soon as its gradient is
      complete: the same bits, a lower peak; docs/training.md); loss_scale ("dynamic", "off"; default dynamic
      with precision "fp16"), loss_scale_init, loss_scale_growth, loss_scale_backoff, loss_scale_growth_interval
      (0: GradScaler's defaults; see loss_scale_state()); tf32 (on a GPU, float32 GEMMs on TF32
      tensor cores, as --tf32: results about 1e-3 from float32's; the CPU ignores it); fused_attention
      ("off", "on", "auto", as --fused-attention).

    The training graph is built for the first batch (prepare, step or eval); later
    training batches must have its shapes. Use as a context manager, or close().
    """

    def __init__(self, model, *, loss=None, output=None, class_axis=-1, ignore_index=None, optimizer=None,
                 lr=None, momentum=None, nesterov=False, weight_decay=None, beta1=None, beta2=None, eps=None,
                 clip_grad_norm=0.0, schedule=None, warmup_steps=0, total_steps=0, accum=1, remat=None,
                 memory_budget=0, remat_time_limit=0.0, freeze=(), train=(), lora=0, lora_alpha=0.0,
                 lora_targets=(), lora_load=None, bind=(), threads=0, device=None, seed=0, check_numerics=True,
                 split_step=False, chunked_loss=None, chunked_loss_rows=0, precision=None, fuse_update=False,
                 loss_scale=None, loss_scale_init=0.0, loss_scale_growth=0.0, loss_scale_backoff=0.0,
                 loss_scale_growth_interval=0, tf32=False, fused_attention=None):
        if not isinstance(model, (str, bytes)) and not hasattr(model, "__fspath__"):
            raise TypeError("model: a %s, not a path" % type(model).__name__)
        o = ffi.new("onnxtrain_options *")
        lib.onnxtrain_options_init(o)
        keep = []

        def s(x):
            if x is None:
                return ffi.NULL
            c = ffi.new("char[]", str(x).encode())
            keep.append(c)
            return c

        o.loss, o.loss_output, o.optimizer, o.schedule = s(loss), s(output), s(optimizer), s(schedule)
        o.remat, o.device, o.chunked_loss = s(remat), s(device), s(chunked_loss)
        o.precision = s(precision)
        o.fused_attention = s(fused_attention)
        o.chunked_loss_rows = int(chunked_loss_rows)
        o.lora_load = s(None if lora_load is None else str(lora_load))
        o.split_step = int(bool(split_step))
        o.class_axis = class_axis
        if ignore_index is not None:
            o.has_ignore_index, o.ignore_index = 1, int(ignore_index)
        for name, v in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay), ("beta1", beta1),
                        ("beta2", beta2), ("eps", eps)):
            setattr(o, name, math.nan if v is None else float(v))
        o.nesterov = bool(nesterov)
        o.clip_grad_norm = float(clip_grad_norm)
        o.warmup_steps, o.total_steps, o.accum = int(warmup_steps), int(total_steps), int(accum)
        o.memory_budget = _size(memory_budget, "memory_budget")
        o.remat_time_limit = float(remat_time_limit)
        o.lora_rank, o.lora_alpha = int(lora), float(lora_alpha)
        for field, val in (("freeze", freeze), ("train", train), ("bind", bind), ("lora_targets", lora_targets)):
            strs, arr, n = _list(val, field)
            keep += [strs, arr]
            setattr(o, field, arr)
            setattr(o, "n_" + field, n)
        o.threads, o.seed, o.check_numerics = int(threads), int(seed), int(bool(check_numerics))
        o.fuse_update = int(bool(fuse_update))
        o.loss_scale = s(loss_scale)
        o.loss_scale_init, o.loss_scale_growth = float(loss_scale_init), float(loss_scale_growth)
        o.loss_scale_backoff, o.loss_scale_growth_interval = float(loss_scale_backoff), int(loss_scale_growth_interval)
        o.tf32 = int(bool(tf32))
        out = ffi.new("onnxtrain_session **")
        path = model if isinstance(model, bytes) else str(model).encode()
        _check(lib.onnxtrain_session_open(path, o, out))
        self._s = out[0]

    # ---- lifetime ----
    def close(self):
        """Frees the session; later calls raise OnnxtrainError (code 2)."""
        if getattr(self, "_s", None) is not None:
            lib.onnxtrain_session_free(self._s)
            self._s = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _session(self):
        if self._s is None:
            raise OnnxtrainError(2, "the Trainer is closed")
        return self._s

    # ---- training ----
    def prepare(self, inputs, labels=None):
        """Builds the training graph for batches shaped like this one, running nothing."""
        b = _Batch(inputs, labels)
        _check(lib.onnxtrain_prepare(self._session(), b.inputs, b.n, b.labels))

    def step(self, inputs, labels=None):
        """One optimizer step (accum micro-batches of this batch); returns the mean loss.
        inputs: an array (the model's one input), a list (its inputs in order) or a dict
        {input name: array} that may also hold "labels"; arrays or CPU torch tensors."""
        b = _Batch(inputs, labels)
        loss = ffi.new("double *")
        _check(lib.onnxtrain_train_step(self._session(), b.inputs, b.n, b.labels, loss))
        return loss[0]

    def fit(self, data, epochs=1):
        """Steps over every batch of `data` (see batches()) `epochs` times; returns the losses."""
        losses = []
        for _ in range(epochs):
            for batch in data:
                losses.append(self.step(*_split(batch)))
        return losses

    # ---- the step in two calls (ONNX Runtime's Module / Optimizer, onnxtrain.training) ----
    def backward(self, inputs, labels=None):
        """Forward and backward on this batch, the gradients added to the session's sums
        (copied there on the first call after zero_grad); no update. Returns the loss."""
        b = _Batch(inputs, labels)
        loss = ffi.new("double *")
        _check(lib.onnxtrain_backward(self._session(), b.inputs, b.n, b.labels, loss))
        return loss[0]

    def optimizer_step(self):
        """The update from the summed gradients (which stay until zero_grad)."""
        _check(lib.onnxtrain_optimizer_step(self._session()))

    def zero_grad(self):
        """The next backward() starts the sums afresh."""
        _check(lib.onnxtrain_zero_grad(self._session()))

    @property
    def learning_rate(self):
        """The rate of the next optimizer_step(): the one set, else the schedule's."""
        lr = ffi.new("double *")
        _check(lib.onnxtrain_learning_rate(self._session(), lr))
        return lr[0]

    @learning_rate.setter
    def learning_rate(self, lr):
        _check(lib.onnxtrain_set_learning_rate(self._session(), math.nan if lr is None else float(lr)))

    @property
    def step_count(self):
        """Optimizer steps done (a resumed checkpoint's included)."""
        return int(lib.onnxtrain_step_count(self._session()))

    def loss_scale_state(self):
        """fp16 loss scaling: (scale of the next step, steps skipped for an overflow so
        far); (0.0, 0) when the session does not scale."""
        sc, sk = ffi.new("double *"), ffi.new("int64_t *")
        _check(lib.onnxtrain_loss_scale(self._session(), sc, sk))
        return sc[0], int(sk[0])

    def eval(self, inputs, labels=None):
        """(loss, accuracy) in inference mode over the full batches of these arrays;
        accuracy is NaN except for cross-entropy. Changes nothing."""
        b = _Batch(inputs, labels)
        loss, acc = ffi.new("double *"), ffi.new("double *")
        _check(lib.onnxtrain_eval(self._session(), b.inputs, b.n, b.labels, loss, acc))
        return loss[0], acc[0]

    # ---- params ----
    def param_names(self):
        """Trained params and running statistics (with LoRA, once built: the adapters)."""
        s = self._session()
        n = lib.onnxtrain_param_count(s)
        if n < 0:
            _check(lib.onnxtrain_last_status())
        return [ffi.string(lib.onnxtrain_param_name(s, i)).decode() for i in range(n)]

    def get_param(self, name):
        """A copy of param `name` as a numpy array."""
        s = self._session()
        dt, rank, shape = ffi.new("onnxtrain_dtype *"), ffi.new("int *"), ffi.new("int64_t[%d]" % lib.ONNXTRAIN_MAX_RANK)
        _check(lib.onnxtrain_param_info(s, name.encode(), dt, rank, shape))
        out = np.empty([shape[i] for i in range(rank[0])], dtype=_NUMPY[int(dt[0])])
        _check(lib.onnxtrain_param_read(s, name.encode(), ffi.from_buffer(out), out.nbytes))
        return out

    def set_param(self, name, value):
        """Sets param `name` (same shape; converted to its dtype)."""
        cur = self.get_param(name)
        a = np.ascontiguousarray(_as_array(value, "value").astype(cur.dtype, copy=False))
        if a.shape != cur.shape:
            raise ValueError("value: shape %s, param '%s' is %s" % (a.shape, name, cur.shape))
        _check(lib.onnxtrain_param_write(self._session(), name.encode(), ffi.from_buffer(a), a.nbytes))

    # ---- plan, verify, checkpoints, the tuned model ----
    def plan(self):
        """The step's memory plan: a dict of peak bytes, bytes per category at the peak
        and in total, batch, accum, params."""
        r = ffi.new("onnxtrain_plan_report *")
        lib.onnxtrain_plan_report_init(r)
        _check(lib.onnxtrain_plan(self._session(), r))
        names = [ffi.string(lib.onnxtrain_memory_category_name(i)).decode()
                 for i in range(lib.ONNXTRAIN_MEM_CATEGORIES)]
        return {"batch_size": r.batch_size, "accum": r.accum, "n_params": r.n_params,
                "param_elements": r.param_elements, "peak_bytes": r.peak_bytes,
                "peak_without_remat": r.peak_without_remat,
                "at_peak": {n: r.at_peak[i] for i, n in enumerate(names)},
                "total": {n: r.total[i] for i, n in enumerate(names)}}

    def verify(self, inputs, labels=None):
        """`onnxtrain verify` on this batch before any step: raises OnnxtrainError (code
        11) when the remat policy changes any bit of the loss, gradients or state."""
        b = _Batch(inputs, labels)
        n = ffi.new("int *")
        _check(lib.onnxtrain_verify(self._session(), b.inputs, b.n, b.labels, n))
        return True

    def save_checkpoint(self, path):
        _check(lib.onnxtrain_checkpoint_save(self._session(), str(path).encode()))

    def load_checkpoint(self, path):
        """Resumes from a checkpoint file (or the newest in a folder)."""
        _check(lib.onnxtrain_checkpoint_load(self._session(), str(path).encode()))

    def save(self, path, external_data=False):
        """Writes the tuned model (with LoRA, merged)."""
        _check(lib.onnxtrain_save_model(self._session(), str(path).encode(), int(bool(external_data))))

    def save_adapters(self, path):
        """Writes the LoRA adapters alone (as --lora-save): a path ending in ".npz" or
        ".onnx", or a folder ("dir/", or an existing one) for PEFT's
        adapter_model.safetensors and adapter_config.json."""
        _check(lib.onnxtrain_save_adapters(self._session(), os.fspath(path).encode()))


def _split(batch):
    """(inputs, labels) of one item of a batch source."""
    if isinstance(batch, dict):
        return batch, None
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    raise TypeError("a batch: a dict {input name: array, 'labels': array} or a pair (inputs, labels), not a %s"
                    % type(batch).__name__)


def batches(source, batch_size=None):
    """Batches for Trainer.step / fit from:
      - a dict of arrays with samples along axis 0 and batch_size: consecutive batches
        in order, the last partial one dropped (as `onnxtrain train --no-shuffle`);
      - any iterable of dicts or (inputs, labels) pairs: a torch DataLoader, a
        HuggingFace dataset's .iter(batch_size) with set_format("numpy"), a generator.
    Torch tensors pass as they are (Trainer takes CPU tensors without a copy)."""
    if isinstance(source, dict):
        if not batch_size or batch_size < 1:
            raise ValueError("batch_size: give the samples per batch for a dict of arrays")
        arrays = {k: _as_array(v, "source[%r]" % k) for k, v in source.items()}
        n = {len(a) for a in arrays.values()}
        if len(n) != 1:
            raise ValueError("source: the arrays hold different sample counts %s" % sorted(n))
        total = n.pop()
        return [{k: a[i:i + batch_size] for k, a in arrays.items()}
                for i in range(0, total - total % batch_size, batch_size)]
    if hasattr(source, "__iter__"):
        return source
    raise TypeError("source: a dict of arrays or an iterable of batches, not a %s" % type(source).__name__)
