"""api.py — onnxtrain.training.api: CheckpointState, Module, Optimizer and
LinearLRScheduler with onnxruntime.training.api's signatures and semantics, over one
onnxtrain session (onnxtrain.Trainer with split_step: the C API's onnxtrain_backward,
onnxtrain_optimizer_step, onnxtrain_zero_grad and the learning rate it is given).

As in ONNX Runtime: calling a Module in training mode runs forward and backward and adds
the gradients to what earlier calls left until lazy_reset_grad(); Optimizer.step()
updates from that sum at the optimizer's learning rate (0.001 until set); eval mode
returns the loss in inference mode; labels are the last argument of a call.
"""
import json
import os
import tempfile
import zipfile

import numpy as np

from .. import OnnxtrainError, Trainer
from .artifacts import FORMAT, SETTINGS_SUFFIX

__all__ = ["CheckpointState", "Module", "Optimizer", "LinearLRScheduler"]

_SAVED = FORMAT + ": saved checkpoint"


def _ere_exact(name):
    """An onnxtrain name pattern (ir/name_pattern.h, re: a POSIX ERE) matching name alone."""
    return "re:^" + "".join("\\" + c if c in ".[]()*+?{}|^$\\" else c for c in name) + "$"


def _f32(x):
    """ONNX Runtime keeps the learning rate as a float32: so does this layer."""
    return float(np.float32(x))


class Parameter:
    """One param of a CheckpointState: .name, .data (a numpy copy; assign an array of
    its shape to set it), .requires_grad. .grad is None: onnxtrain keeps gradients in
    its arena and sums them there."""

    def __init__(self, state, name):
        self._state, self._name = state, name

    @property
    def name(self):
        return self._name

    @property
    def data(self):
        return self._state._get(self._name)

    @data.setter
    def data(self, value):
        self._state._set(self._name, value)

    @property
    def grad(self):
        return None

    @property
    def requires_grad(self):
        return self._state._requires_grad(self._name)

    def __repr__(self):
        return "Parameter(name=%s, requires_grad=%s)" % (self._name, self.requires_grad)


class Parameters:
    """The params of a CheckpointState by name, as ONNX Runtime's (iterating yields
    (name, Parameter) pairs)."""

    def __init__(self, state):
        self._state = state

    def __getitem__(self, name):
        if name not in self:
            raise KeyError("parameters[%r]: no such parameter (there are %d: %s)"
                           % (name, len(self), ", ".join(self._state._names()[:10])))
        return Parameter(self._state, name)

    def __setitem__(self, name, value):
        self[name].data = value

    def __contains__(self, name):
        return name in self._state._names()

    def __iter__(self):
        for n in self._state._names():
            yield n, Parameter(self._state, n)

    def __len__(self):
        return len(self._state._names())

    def __repr__(self):
        return repr(self._state._names())


class Properties(dict):
    """User properties saved with the checkpoint: int, float or str values."""

    def __setitem__(self, name, value):
        if not isinstance(name, str):
            raise TypeError("properties: the name is a %s, not a str" % type(name).__name__)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError("properties[%r]: a %s; ONNX Runtime's properties are int, float or str"
                            % (name, type(value).__name__))
        super().__setitem__(name, value)


class CheckpointState:
    """The params, the optimizer state and the properties of a training run."""

    def __init__(self, model, values, props, optimizer_state=None, settings=None):
        self._model = model                # the model file the params belong to
        self._values = values              # {name: array}, or None: the model's own
        self._props = Properties(props)
        self._optimizer_state = optimizer_state  # bytes of an onnxtrain checkpoint file, or None
        self._settings = settings
        self._module = None                # once a Module uses this state, its session holds the values
        self._all = None

    # ---- ONNX Runtime's interface ----
    @classmethod
    def load_checkpoint(cls, checkpoint_uri):
        """A checkpoint written by generate_artifacts or save_checkpoint."""
        path = os.fspath(checkpoint_uri)
        if not os.path.isfile(path):
            raise FileNotFoundError("checkpoint_uri: %s is not a file" % path)
        if zipfile.is_zipfile(path):
            return cls._load_saved(path)
        try:
            with open(path, "rb") as f:
                meta = json.loads(f.read().decode())
            if not str(meta.get("format", "")).startswith(FORMAT):
                raise ValueError
        except (ValueError, UnicodeDecodeError, AttributeError):
            raise ValueError("checkpoint_uri: %s is not a checkpoint of onnxtrain.training (generate_artifacts or "
                             "save_checkpoint writes one; ONNX Runtime's own checkpoints are not read)" % path) from None
        model = os.path.join(os.path.dirname(os.path.abspath(path)), meta["model"])
        return cls(model, None, meta.get("properties", {}), None, _settings_of(model))

    @classmethod
    def _load_saved(cls, path):
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["__meta__"]).decode())
            values = {n: z["p/" + n] for n in meta["params"]}
            opt = bytes(z["__optimizer__"]) if "__optimizer__" in z.files else None
        model = meta["model"]
        if not os.path.isabs(model):
            model = os.path.join(os.path.dirname(os.path.abspath(path)), model)
        return cls(model, values, meta["properties"], opt, _settings_of(model))

    @classmethod
    def save_checkpoint(cls, state, checkpoint_uri, include_optimizer_state=False):
        """Writes the params and properties (and, with include_optimizer_state, the
        optimizer's moments and step) to one file, atomically."""
        if not isinstance(state, CheckpointState):
            raise TypeError("state: a CheckpointState, not a %s" % type(state).__name__)
        path = os.fspath(checkpoint_uri)
        arrays = {"p/" + n: state._get(n) for n in state._names()}
        opt = None
        if include_optimizer_state:
            opt = state._optimizer_bytes()
        meta = {"format": _SAVED, "version": 1, "model": os.path.abspath(state._model), "params": state._names(),
                "properties": dict(state._props)}
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        if opt is not None:
            arrays["__optimizer__"] = np.frombuffer(opt, dtype=np.uint8)
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".ckpt", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    @property
    def parameters(self):
        return Parameters(self)

    @property
    def properties(self):
        return self._props

    # ---- what Parameter and Module use ----
    def _names(self):
        if self._all is None:
            if self._values is not None:
                self._all = list(self._values)
            else:
                with Trainer(self._model, loss="output") as t:
                    self._all = t.param_names()
        return self._all

    def _requires_grad(self, name):
        s = self._settings or {}
        if s.get("requires_grad"):
            return name in s["requires_grad"]
        return name not in (s.get("frozen_params") or [])

    def _trainer(self):
        return self._module._t if self._module is not None else None

    def _get(self, name):
        if name not in self._names():
            raise KeyError("parameters[%r]: no such parameter" % name)
        t = self._trainer()
        if t is not None:
            return t.get_param(name)
        if self._values is None:
            with Trainer(self._model, loss="output") as t:
                self._values = {n: t.get_param(n) for n in self._names()}
        return self._values[name].copy()

    def _set(self, name, value):
        cur = self._get(name)
        a = np.asarray(value)
        if a.shape != cur.shape:
            raise ValueError("parameters[%r].data: shape %s, the parameter is %s" % (name, a.shape, cur.shape))
        if a.dtype != cur.dtype:
            raise TypeError("parameters[%r].data: dtype %s, the parameter is %s" % (name, a.dtype, cur.dtype))
        t = self._trainer()
        if t is not None:
            t.set_param(name, a)
        else:
            self._values[name] = np.array(a, copy=True)

    def _optimizer_bytes(self):
        t = self._trainer()
        if t is None or t.step_count == 0:
            return self._optimizer_state
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "optimizer.ckpt")
            t.save_checkpoint(p)
            with open(p, "rb") as f:
                return f.read()


def _settings_of(model):
    path = model + SETTINGS_SUFFIX
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


class Module:
    """The model being trained: Module(train_model_uri, state, eval_model_uri=None,
    device="cpu"). Call it with the model's inputs and the labels last: the loss in
    training mode (forward and backward, gradients summed until lazy_reset_grad), the
    loss in inference mode after eval()."""

    def __init__(self, train_model_uri, state, eval_model_uri=None, device="cpu", session_options=None):
        if not isinstance(state, CheckpointState):
            raise TypeError("state: a CheckpointState, not a %s" % type(state).__name__)
        if session_options is not None:
            raise ValueError("session_options: ONNX Runtime's SessionOptions have no onnxtrain equivalent; leave it "
                             "None")
        if not isinstance(device, str) or not (device == "cpu" or device.startswith("cuda")):
            raise ValueError("device=%r: 'cpu' or 'cuda[:N]'" % (device,))
        path = os.fspath(train_model_uri)
        settings = _settings_of(path)
        if settings is None:
            raise ValueError("train_model_uri: %s has no %s beside it: make the artifacts with "
                             "onnxtrain.training.artifacts.generate_artifacts" % (path, os.path.basename(path) +
                                                                                  SETTINGS_SUFFIX))
        if eval_model_uri is not None and not os.path.isfile(os.fspath(eval_model_uri)):
            raise FileNotFoundError("eval_model_uri: %s is not a file" % os.fspath(eval_model_uri))
        if state._module is not None:
            raise ValueError("state: this CheckpointState already belongs to a Module")
        self._settings, self._t_path = settings, path
        opt = settings.get("optimizer") or {"optimizer": "sgd"}  # no optimizer file: gradients only
        kw = {k: opt[k] for k in ("lr", "momentum", "weight_decay", "beta1", "beta2", "eps") if k in opt}
        self._t = Trainer(path, loss=settings["loss"], class_axis=1 if settings["loss"] == "cross-entropy" else -1,
                          optimizer=opt["optimizer"], train=[_ere_exact(n) for n in settings["requires_grad"] or []],
                          freeze=[_ere_exact(n) for n in settings["frozen_params"]], device=device, split_step=True,
                          **kw)
        self._tmp = None
        if state._values is not None:  # a saved checkpoint: its params replace the model's
            names = set(self._t.param_names())
            for n, v in state._values.items():
                if n in names:
                    self._t.set_param(n, v)
        if state._optimizer_state is not None:  # resumed when the session is built
            fd, self._tmp = tempfile.mkstemp(prefix="onnxtrain_resume")
            with os.fdopen(fd, "wb") as f:
                f.write(state._optimizer_state)
            self._t.load_checkpoint(self._tmp)
        state._module = self
        self._state = state
        self.training = True

    def __del__(self):
        if getattr(self, "_tmp", None) and os.path.exists(self._tmp):
            os.unlink(self._tmp)

    def __call__(self, *user_inputs):
        if len(user_inputs) < 2:
            raise TypeError("Module(*inputs): give the model's inputs and the labels last (%d argument%s given)"
                            % (len(user_inputs), "" if len(user_inputs) == 1 else "s"))
        inputs, labels = list(user_inputs[:-1]), user_inputs[-1]
        loss = self._t.backward(inputs, labels) if self.training else self._t.eval(inputs, labels)[0]
        return np.array(loss, dtype=np.float32)

    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def lazy_reset_grad(self):
        """The next training call starts the gradient sums from zero."""
        self._t.zero_grad()

    def _trainable(self, trainable_only):
        names = self._state._names()
        return [n for n in names if self._state._requires_grad(n)] if trainable_only else names

    def get_parameters_size(self, trainable_only=True):
        return int(sum(self._state._get(n).size for n in self._trainable(trainable_only)))

    def get_contiguous_parameters(self, trainable_only=False):
        """The params flattened into one float32 numpy array (ONNX Runtime: an OrtValue)."""
        return np.concatenate([self._state._get(n).astype(np.float32).ravel() for n in self._trainable(trainable_only)])

    def copy_buffer_to_parameters(self, buffer, trainable_only=True):
        buf = np.asarray(buffer).ravel()
        if buf.size != self.get_parameters_size(trainable_only):
            raise ValueError("buffer: %d elements, the parameters have %d" % (buf.size,
                                                                            self.get_parameters_size(trainable_only)))
        at = 0
        for n in self._trainable(trainable_only):
            cur = self._state._get(n)
            self._state._set(n, buf[at:at + cur.size].reshape(cur.shape).astype(cur.dtype))
            at += cur.size

    def export_model_for_inferencing(self, inference_model_uri, graph_output_names):
        """Writes the model with the trained weights, its outputs graph_output_names (the
        model's outputs or values inside it; pruning to others than the model's outputs
        needs the onnx package)."""
        if isinstance(graph_output_names, str) or not all(isinstance(n, str) for n in graph_output_names):
            raise TypeError("graph_output_names: a list of output names")
        path = os.fspath(inference_model_uri)
        self._t.save(path)
        _set_outputs(path, list(graph_output_names))

    def input_names(self):
        """The model's inputs and the labels (needs the onnx package)."""
        import onnx
        m = onnx.load(self._t_path, load_external_data=False)
        init = {i.name for i in m.graph.initializer}
        return [i.name for i in m.graph.input if i.name not in init] + ["labels"]

    def output_names(self):
        return ["loss"]


def _set_outputs(path, names):
    try:
        import onnx
    except ImportError:
        onnx = None
    if onnx is None:
        return _check_outputs_without_onnx(path, names)
    m = onnx.load(path, load_external_data=False)
    have = [o.name for o in m.graph.output]
    if names == have:
        return None
    produced = {o for n in m.graph.node for o in n.output} | {i.name for i in m.graph.input}
    missing = [n for n in names if n not in produced and n not in have]
    if missing:
        os.unlink(path)
        raise ValueError("graph_output_names: %s %s no value of the model (its outputs: %s)"
                         % (", ".join(missing), "is" if len(missing) == 1 else "are", ", ".join(have)))
    by_name = {o.name: o for o in m.graph.output}
    outs = [by_name.get(n) or onnx.helper.make_empty_tensor_value_info(n) for n in names]
    del m.graph.output[:]
    m.graph.output.extend(outs)
    onnx.save(m, path)
    return None


def _check_outputs_without_onnx(path, names):
    with Trainer(path, loss="output"):
        pass
    raise ValueError("graph_output_names: choosing outputs other than the model's needs the onnx package "
                     "(pip install onnx); %s was written with the model's own outputs" % path)


class Optimizer:
    """Optimizer(optimizer_uri, module): step() updates the module's params from its
    summed gradients; the learning rate starts at the artifacts' (0.001)."""

    def __init__(self, optimizer_uri, module):
        if not isinstance(module, Module):
            raise TypeError("module: a Module, not a %s" % type(module).__name__)
        path = os.fspath(optimizer_uri)
        try:
            with open(path, "rb") as f:
                meta = json.loads(f.read().decode())
            if not str(meta.get("format", "")).startswith(FORMAT):
                raise ValueError
        except (ValueError, UnicodeDecodeError, AttributeError):
            raise ValueError("optimizer_uri: %s is not an optimizer file of onnxtrain.training.artifacts"
                             % path) from None
        mine = module._settings.get("optimizer") or {}
        if meta.get("type") != mine.get("type"):
            raise ValueError("optimizer_uri: %s is %s, but the module's artifacts were made with %s"
                             % (path, meta.get("type"), mine.get("type")))
        self._module = module
        self.set_learning_rate(meta.get("lr", 0.001))

    def step(self):
        self._module._t.optimizer_step()

    def set_learning_rate(self, learning_rate):
        lr = float(learning_rate)
        if not np.isfinite(lr) or lr < 0:
            raise ValueError("learning_rate=%r: must be finite and >= 0" % (learning_rate,))
        self._module._t.learning_rate = _f32(lr)

    def get_learning_rate(self):
        return _f32(self._module._t.learning_rate)


class LinearLRScheduler:
    """LinearLRScheduler(optimizer, warmup_step_count, total_step_count, initial_lr):
    sets the optimizer's rate from its step count now and at every step().

    The rate is what onnxruntime-training 1.19.2's Python API gives, measured against it
    (bench/ort_drop_in.py): that release passes the two counts to its C++ scheduler
    swapped, so the rate rises linearly over total_step_count steps and then falls to 0
    at warmup_step_count (0 at once when that is not larger)."""

    def __init__(self, optimizer, warmup_step_count, total_step_count, initial_lr):
        if not isinstance(optimizer, Optimizer):
            raise TypeError("optimizer: an Optimizer, not a %s" % type(optimizer).__name__)
        for what, v in (("warmup_step_count", warmup_step_count), ("total_step_count", total_step_count)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError("%s=%r: a count >= 0" % (what, v))
        self._opt = optimizer
        self._rise, self._end = int(total_step_count), int(warmup_step_count)
        self._lr0 = _f32(initial_lr)
        self.step()

    def _factor(self, k):
        if k < self._rise:
            return k / max(1, self._rise)
        return max(0.0, (self._end - k) / max(1, self._end - self._rise))

    def step(self):
        k = self._opt._module._t.step_count
        self._opt.set_learning_rate(self._lr0 * self._factor(k))
