"""onnxtrain.training — a drop-in for ONNX Runtime's on-device training API.

    from onnxtrain.training import artifacts                    # was: onnxruntime.training
    from onnxtrain.training.api import CheckpointState, Module, Optimizer, LinearLRScheduler

artifacts.generate_artifacts writes an artifact folder with ONNX Runtime's file names,
and api's CheckpointState, Module, Optimizer and LinearLRScheduler take them, so the
training loop of ONNX Runtime's on-device tutorial runs with only the import changed.
The artifacts are onnxtrain's own format (copies of the model and a small JSON of the
settings; onnxtrain derives the training graph itself), not ONNX Runtime's: see
docs/python.md, "Coming from ONNX Runtime training", for what differs.
"""
from . import api, artifacts  # noqa: F401

__all__ = ["api", "artifacts"]
