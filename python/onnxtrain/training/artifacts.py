"""artifacts.py — onnxtrain.training.artifacts: generate_artifacts, LossType, OptimType,
with onnxruntime.training.artifacts' signature.

ONNX Runtime writes a training graph (forward, loss, gradients), an eval graph, an
optimizer graph and a checkpoint of the params. onnxtrain builds the training graph
itself when a session starts, so the folder holds, under the same names:

  {prefix}training_model.onnx, {prefix}eval_model.onnx   copies of the model as given
  {prefix}training_model.onnx.onnxtrain.json             the settings (loss, params that
                                                         train, optimizer) Module reads
  {prefix}optimizer_model.onnx                           JSON: the optimizer's settings
  {prefix}checkpoint                                     JSON: the model file and
                                                         properties; the params are the
                                                         model's own until saved

onnx is needed only for a ModelProto (a path is copied as bytes).
"""
import enum
import json
import os
import shutil

from .. import Trainer

FORMAT = "onnxtrain.training artifacts"
SETTINGS_SUFFIX = ".onnxtrain.json"


class LossType(enum.Enum):
    """The loss generate_artifacts appends (ONNX Runtime's values and names)."""
    MSELoss = 1
    CrossEntropyLoss = 2
    BCEWithLogitsLoss = 3
    L1Loss = 4


class OptimType(enum.Enum):
    """The optimizer of the artifacts (ONNX Runtime's values and names)."""
    AdamW = 1
    SGD = 2


# onnxtrain's --loss for each; cross-entropy as ONNX's SoftmaxCrossEntropyLoss, the op
# ONNX Runtime's CrossEntropyLoss block emits: classes on axis 1
_LOSSES = {LossType.MSELoss: "mse", LossType.CrossEntropyLoss: "cross-entropy",
           LossType.BCEWithLogitsLoss: "bce", LossType.L1Loss: "l1"}
# ONNX Runtime's optimizer blocks' settings: AdamW (HuggingFace's form, bias correction)
# with betas 0.9/0.999, eps 1e-6, no weight decay; SGD without momentum. Its initial
# learning rate is 0.001 for both, until Optimizer.set_learning_rate.
_OPTIMIZERS = {OptimType.AdamW: {"optimizer": "adamw-hf", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6,
                                 "weight_decay": 0.0},
               OptimType.SGD: {"optimizer": "sgd", "lr": 0.001, "momentum": 0.0, "weight_decay": 0.0}}


def _names(x, what):
    if x is None:
        return []
    if isinstance(x, str) or not all(isinstance(n, str) for n in x):
        raise TypeError("%s: a list of parameter names (str), not %r" % (what, x))
    return list(x)


def _model_bytes(model):
    if isinstance(model, (str, bytes, os.PathLike)):
        path = os.fspath(model)
        path = path.decode() if isinstance(path, bytes) else path
        if not os.path.isfile(path):
            raise FileNotFoundError("model: %s is not a file" % path)
        return path, None
    if hasattr(model, "SerializeToString") and hasattr(model, "graph"):
        return None, model.SerializeToString()
    raise TypeError("model: an onnx.ModelProto or the path of an .onnx file, not a %s" % type(model).__name__)


def _model_params(path):
    """The float initializers onnxtrain would train: read through the library, so the
    names are the ones a session uses (no onnx needed)."""
    with Trainer(path, loss="output") as t:
        return t.param_names()


def generate_artifacts(model, requires_grad=None, frozen_params=None, loss=None, optimizer=None,
                       artifact_directory=None, prefix="", ort_format=False, custom_op_library=None,
                       additional_output_names=None, nominal_checkpoint=False, loss_input_names=None):
    """Writes the artifacts api.Module, api.Optimizer and api.CheckpointState take.

    model: an onnx.ModelProto or a path. requires_grad: the params that train; None
    (onnxtrain's choice where ONNX Runtime would train nothing): every float initializer
    not in frozen_params. loss: a LossType (required: onnxtrain builds the loss itself;
    a custom onnxblock is not supported). optimizer: an OptimType or None (no optimizer
    file). artifact_directory: made if missing (default: the current folder).
    ort_format, custom_op_library, additional_output_names, nominal_checkpoint and
    loss_input_names are ONNX Runtime's options onnxtrain does not have: giving one
    raises ValueError naming it."""
    for name, val, dflt in (("ort_format", ort_format, False), ("custom_op_library", custom_op_library, None),
                            ("additional_output_names", additional_output_names, None),
                            ("nominal_checkpoint", nominal_checkpoint, False),
                            ("loss_input_names", loss_input_names, None)):
        if val not in (dflt, [], ()) and val != dflt:
            raise ValueError("%s=%r: not supported by onnxtrain.training (docs/python.md, Coming from ONNX Runtime "
                             "training)" % (name, val))
    if not isinstance(loss, LossType):
        raise ValueError("loss=%r: give one of LossType.%s (a custom onnxblock loss or no loss is not supported)"
                         % (loss, ", LossType.".join(m.name for m in LossType)))
    if optimizer is not None and not isinstance(optimizer, OptimType):
        raise ValueError("optimizer=%r: give OptimType.AdamW or OptimType.SGD (a custom onnxblock is not supported)"
                         % (optimizer,))
    if not isinstance(prefix, str):
        raise TypeError("prefix: a str, not a %s" % type(prefix).__name__)
    requires_grad, frozen = _names(requires_grad, "requires_grad"), _names(frozen_params, "frozen_params")
    both = sorted(set(requires_grad) & set(frozen))
    if both:
        raise ValueError("requires_grad and frozen_params both name %s: a parameter cannot be frozen and train"
                         % ", ".join(both))
    directory = os.fspath(artifact_directory) if artifact_directory is not None else os.getcwd()
    os.makedirs(directory, exist_ok=True)
    train_path = os.path.join(directory, prefix + "training_model.onnx")
    src, data = _model_bytes(model)
    _write(train_path, data, src)
    params = _model_params(train_path)
    for what, names in (("requires_grad", requires_grad), ("frozen_params", frozen)):
        unknown = [n for n in names if n not in params]
        if unknown:
            raise ValueError("%s: %s %s no float initializer of the model (it has: %s)"
                             % (what, ", ".join(unknown), "is" if len(unknown) == 1 else "are",
                                ", ".join(params[:20]) + (", ..." if len(params) > 20 else "")))
    if not requires_grad and not [p for p in params if p not in frozen]:
        raise ValueError("frozen_params: no parameter left to train (it names every one)")
    settings = {"format": FORMAT, "version": 1, "loss": _LOSSES[loss], "loss_type": loss.name,
                "requires_grad": requires_grad or None, "frozen_params": frozen,
                "optimizer": dict(_OPTIMIZERS[optimizer], type=optimizer.name) if optimizer else None}
    _write(train_path + SETTINGS_SUFFIX, json.dumps(settings, indent=1).encode())
    _write(os.path.join(directory, prefix + "eval_model.onnx"), data, src)
    if optimizer is not None:
        _write(os.path.join(directory, prefix + "optimizer_model.onnx"),
               json.dumps({"format": FORMAT + ": optimizer", "version": 1, **settings["optimizer"]}).encode())
    ckpt = {"format": FORMAT + ": checkpoint", "version": 1, "model": prefix + "training_model.onnx",
            "properties": {}}
    _write(os.path.join(directory, prefix + "checkpoint"), json.dumps(ckpt, indent=1).encode())


def _write(path, data, src=None):
    """Atomically: a temporary beside it, then a rename (a failure leaves the old file)."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        if src is not None:
            if os.path.abspath(src) != os.path.abspath(path):
                shutil.copyfile(src, tmp)
            else:
                return
        else:
            with open(tmp, "wb") as f:
                f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
