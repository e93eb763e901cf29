"""test_training.py — onnxtrain.training, the drop-in for ONNX Runtime's on-device
training API: the tutorial's loop (generate_artifacts, CheckpointState, Module,
Optimizer, LinearLRScheduler, 20 steps, eval, export_model_for_inferencing, a checkpoint
round trip) on samples/mlp and samples/tinygpt; ONNX Runtime's semantics (gradients
summed until lazy_reset_grad, the learning rate, the scheduler); bad input raising with
the argument named. bench/ort_drop_in.py runs the same loop against ONNX Runtime itself.
"""
import os

import numpy as np
import pytest

import onnxtrain
from onnxtrain.training import artifacts
from onnxtrain.training.api import CheckpointState, LinearLRScheduler, Module, Optimizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "samples", "mlp.onnx")
GPT = os.path.join(ROOT, "samples", "tinygpt_nodrop.onnx")
DATA = os.path.join(ROOT, "samples", "data")


def mlp_data():
    return np.load(os.path.join(DATA, "mlp_x.npy")), np.load(os.path.join(DATA, "mlp_labels.npy"))


def make(tmp_path, model=MLP, loss=artifacts.LossType.CrossEntropyLoss, optimizer=artifacts.OptimType.AdamW, **kw):
    art = tmp_path / "artifacts"
    artifacts.generate_artifacts(model, loss=loss, optimizer=optimizer, artifact_directory=art, **kw)
    state = CheckpointState.load_checkpoint(art / "checkpoint")
    module = Module(art / "training_model.onnx", state, art / "eval_model.onnx")
    return art, state, module, Optimizer(art / "optimizer_model.onnx", module)


def tutorial_loop(tmp_path, model, params, x, y, batch, frozen, output):
    """ONNX Runtime's tutorial loop, word for word but for the import."""
    art = tmp_path / "artifacts"
    requires_grad = [p for p in params if p not in frozen]
    artifacts.generate_artifacts(model, requires_grad=requires_grad, frozen_params=frozen,
                                 loss=artifacts.LossType.CrossEntropyLoss, optimizer=artifacts.OptimType.AdamW,
                                 artifact_directory=art)
    state = CheckpointState.load_checkpoint(art / "checkpoint")
    module = Module(art / "training_model.onnx", state, art / "eval_model.onnx")
    optimizer = Optimizer(art / "optimizer_model.onnx", module)
    scheduler = LinearLRScheduler(optimizer, 5, 20, 0.003)
    losses = []
    for step in range(20):
        module.train()
        loss = module(x[step * batch:(step + 1) * batch], y[step * batch:(step + 1) * batch])
        optimizer.step()
        scheduler.step()
        module.lazy_reset_grad()
        losses.append(float(loss))
    module.eval()
    eval_loss = float(module(x[-batch:], y[-batch:]))
    module.export_model_for_inferencing(tmp_path / "inference.onnx", [output])
    CheckpointState.save_checkpoint(state, tmp_path / "ckpt", include_optimizer_state=True)
    back = CheckpointState.load_checkpoint(tmp_path / "ckpt")
    for name in requires_grad:
        assert np.array_equal(back.parameters[name].data, state.parameters[name].data), name
    for name in frozen:  # frozen params stay as the model has them
        assert not state.parameters[name].requires_grad
    return losses, eval_loss, state


def test_tutorial_loop_mlp(tmp_path):
    x, y = mlp_data()
    params = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
    losses, eval_loss, state = tutorial_loop(tmp_path, MLP, params, x, y, 16, [], "logits")
    assert all(np.isfinite(losses)) and np.isfinite(eval_loss)
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    assert (tmp_path / "inference.onnx").exists()
    # the exported model holds the trained weights: onnxtrain eval on it gives the eval loss
    with onnxtrain.Trainer(tmp_path / "inference.onnx") as t:
        assert np.isclose(t.eval(x[-16:], y[-16:])[0], eval_loss, rtol=1e-6)
    assert np.array_equal(t_param(tmp_path / "inference.onnx", "fc1.bias"), state.parameters["fc1.bias"].data)


def t_param(model, name):
    with onnxtrain.Trainer(model) as t:
        return t.get_param(name)


def test_tutorial_loop_tinygpt(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    # classes on axis 1, as ONNX Runtime's CrossEntropyLoss (ONNX's SoftmaxCrossEntropyLoss) takes them
    m = onnx.load(GPT)
    out = m.graph.output[0].name
    m.graph.node.append(helper.make_node("Transpose", [out], ["logits_bvt"], perm=[0, 2, 1]))
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("logits_bvt", onnx.TensorProto.FLOAT, ["b", "v", "t"]))
    path = str(tmp_path / "gpt.onnx")
    onnx.save(m, path)
    x, y = np.load(os.path.join(DATA, "tinygpt_tokens.npy")), np.load(os.path.join(DATA, "tinygpt_labels.npy"))
    params = [i.name for i in m.graph.initializer]
    losses, eval_loss, _ = tutorial_loop(tmp_path, m, params, x, y, 8, ["pos.weight"], "logits_bvt")
    assert all(np.isfinite(losses)) and np.isfinite(eval_loss)
    assert losses[-1] < losses[0]


def test_model_proto_and_path_give_the_same_run(tmp_path):
    onnx = pytest.importorskip("onnx")
    x, y = mlp_data()
    res = []
    for k, model in enumerate((MLP, onnx.load(MLP))):
        d = tmp_path / str(k)
        d.mkdir()
        _, _, module, opt = make(d, model)
        res.append([float(module(x[:16], y[:16])) for _ in range(1)] + [opt.step() or float(module(x[:16], y[:16]))])
    assert res[0] == res[1]


def test_gradients_sum_until_lazy_reset(tmp_path):
    """Two calls then a step = one step on the summed gradients: with SGD, the update of
    two identical calls is twice that of one."""
    x, y = mlp_data()
    deltas = []
    for calls in (1, 2):
        d = tmp_path / str(calls)
        d.mkdir()
        _, state, module, opt = make(d, optimizer=artifacts.OptimType.SGD)
        opt.set_learning_rate(0.5)
        before = state.parameters["fc3.bias"].data
        for _ in range(calls):
            module(x[:16], y[:16])
        opt.step()
        deltas.append(state.parameters["fc3.bias"].data - before)
    np.testing.assert_allclose(deltas[1], 2 * deltas[0], rtol=1e-5, atol=1e-7)
    assert np.abs(deltas[0]).max() > 0


def test_lazy_reset_grad_starts_a_new_sum(tmp_path):
    x, y = mlp_data()
    _, state, module, opt = make(tmp_path, optimizer=artifacts.OptimType.SGD)
    opt.set_learning_rate(0.0)
    module(x[:16], y[:16])
    opt.step()  # lr 0: nothing moves, the sum stays
    module.lazy_reset_grad()
    opt.set_learning_rate(0.5)
    before = state.parameters["fc3.bias"].data
    module(x[16:32], y[16:32])
    opt.step()
    one = state.parameters["fc3.bias"].data - before
    # the same batch on a fresh module: the same update, so the first call's gradients were dropped
    d = tmp_path / "fresh"
    d.mkdir()
    _, state2, module2, opt2 = make(d, optimizer=artifacts.OptimType.SGD)
    opt2.set_learning_rate(0.5)
    before2 = state2.parameters["fc3.bias"].data
    module2(x[16:32], y[16:32])
    opt2.step()
    np.testing.assert_array_equal(one, state2.parameters["fc3.bias"].data - before2)


def test_sgd_matches_numpy(tmp_path):
    """One SGD step moves the head's bias by -lr * mean(softmax(logits) - onehot)."""
    x, y = mlp_data()
    _, state, module, opt = make(tmp_path, optimizer=artifacts.OptimType.SGD)
    assert opt.get_learning_rate() == pytest.approx(0.001)  # ONNX Runtime's initial rate
    opt.set_learning_rate(0.25)
    W = {n: p.data.astype(np.float64) for n, p in state.parameters}
    h = np.maximum(x[:16] @ W["fc1.weight"].T + W["fc1.bias"], 0)
    h = np.maximum(h @ W["fc2.weight"].T + W["fc2.bias"], 0)
    z = h @ W["fc3.weight"].T + W["fc3.bias"]
    sm = np.exp(z - z.max(1, keepdims=True))
    sm /= sm.sum(1, keepdims=True)
    g = (sm - np.eye(10)[y[:16]]).mean(0)
    module(x[:16], y[:16])
    opt.step()
    np.testing.assert_allclose(state.parameters["fc3.bias"].data, W["fc3.bias"] - 0.25 * g, rtol=1e-5, atol=1e-6)


def test_adamw_hf_one_step_matches_numpy(tmp_path):
    """onnxtrain's "adamw-hf" (ONNX Runtime's AdamW): p - lr*sqrt(bc2)/bc1 * m/(sqrt(v)+eps)."""
    x, y = mlp_data()
    lr, eps, b1, b2, wd = 0.01, 1e-6, 0.9, 0.999, 0.1
    # the gradient of fc3.bias: one SGD step at lr 1 moves the bias by -g
    with onnxtrain.Trainer(MLP, optimizer="sgd", lr=1.0, split_step=True) as t:
        p0 = t.get_param("fc3.bias")
        t.backward(x[:16], y[:16])
        t.optimizer_step()
        g = p0 - t.get_param("fc3.bias")
    with onnxtrain.Trainer(MLP, optimizer="adamw-hf", lr=lr, eps=eps, weight_decay=wd, split_step=True) as t:
        t.backward(x[:16], y[:16])
        t.optimizer_step()
        got = t.get_param("fc3.bias")
    m, v = (1 - b1) * g, (1 - b2) * g * g
    step = lr * np.sqrt(1 - b2) / (1 - b1)
    want = (p0 - step * m / (np.sqrt(v) + eps)) * (1 - lr * wd)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-9)


def test_scheduler_follows_onnxruntime_1_19_2(tmp_path):
    """Rates measured with onnxruntime-training 1.19.2 (bench/ort_drop_in.py's venv):
    LinearLRScheduler(opt, 10, 4, 1.0) and (opt, 4, 6, 1.0) over 8 steps."""
    x, y = mlp_data()
    want = {(10, 4): [0.0, 0.25, 0.5, 0.75, 1.0, 0.8333, 0.6667, 0.5, 0.3333],
            (4, 6): [0.0, 0.1667, 0.3333, 0.5, 0.6667, 0.8333, 0.0, 0.0, 0.0]}
    for k, ((w, t), rates) in enumerate(want.items()):
        d = tmp_path / str(k)
        d.mkdir()
        _, _, module, opt = make(d, optimizer=artifacts.OptimType.SGD)
        sch = LinearLRScheduler(opt, w, t, 1.0)
        got = [round(opt.get_learning_rate(), 4)]
        for _ in range(8):
            module(x[:16], y[:16])
            opt.step()
            sch.step()
            module.lazy_reset_grad()
            got.append(round(opt.get_learning_rate(), 4))
        assert got == rates


def test_losses_mse_bce_l1(tmp_path):
    """The four LossTypes: float targets for MSE, BCE-with-logits and L1."""
    x, _ = mlp_data()
    rng = np.random.default_rng(0)
    t01 = (rng.random((16, 10)) > 0.5).astype(np.float32)
    for loss in (artifacts.LossType.MSELoss, artifacts.LossType.BCEWithLogitsLoss, artifacts.LossType.L1Loss):
        d = tmp_path / loss.name
        d.mkdir()
        _, _, module, opt = make(d, loss=loss)
        first = float(module(x[:16], t01))
        opt.step()
        module.lazy_reset_grad()
        assert np.isfinite(first) and float(module(x[:16], t01)) != first
    # BCE at the initial weights, against the formula
    with onnxtrain.Trainer(MLP, loss="output") as t:
        W = {n: t.get_param(n) for n in t.param_names()}
    h = np.maximum(x[:16] @ W["fc1.weight"].T + W["fc1.bias"], 0)
    h = np.maximum(h @ W["fc2.weight"].T + W["fc2.bias"], 0)
    z = (h @ W["fc3.weight"].T + W["fc3.bias"]).astype(np.float64)
    bce = np.mean(np.maximum(z, 0) - z * t01 + np.log1p(np.exp(-np.abs(z))))
    d = tmp_path / "bce2"
    d.mkdir()
    _, _, module, _ = make(d, loss=artifacts.LossType.BCEWithLogitsLoss)
    assert float(module(x[:16], t01)) == pytest.approx(bce, rel=1e-5)


# ---- bad input ----

def test_bad_loss_and_options(tmp_path):
    with pytest.raises(ValueError, match="loss="):
        artifacts.generate_artifacts(MLP, loss="mse", artifact_directory=tmp_path)
    with pytest.raises(ValueError, match="loss="):
        artifacts.generate_artifacts(MLP, loss=None, artifact_directory=tmp_path)
    with pytest.raises(ValueError, match="optimizer="):
        artifacts.generate_artifacts(MLP, loss=artifacts.LossType.MSELoss, optimizer="adam",
                                     artifact_directory=tmp_path)
    with pytest.raises(ValueError, match="ort_format"):
        artifacts.generate_artifacts(MLP, loss=artifacts.LossType.MSELoss, ort_format=True,
                                     artifact_directory=tmp_path)
    with pytest.raises(ValueError, match="requires_grad: nope"):
        artifacts.generate_artifacts(MLP, requires_grad=["nope"], loss=artifacts.LossType.MSELoss,
                                     artifact_directory=tmp_path)
    with pytest.raises(ValueError, match="frozen and train"):
        artifacts.generate_artifacts(MLP, requires_grad=["fc1.bias"], frozen_params=["fc1.bias"],
                                     loss=artifacts.LossType.MSELoss, artifact_directory=tmp_path)
    with pytest.raises(TypeError, match="model"):
        artifacts.generate_artifacts(42, loss=artifacts.LossType.MSELoss, artifact_directory=tmp_path)


def test_bad_batches_name_the_argument(tmp_path):
    x, y = mlp_data()
    _, state, module, opt = make(tmp_path)
    with pytest.raises(TypeError, match=r"inputs\[0\].*dtype"):
        module(x[:16].astype(np.complex64), y[:16])
    with pytest.raises(TypeError, match="labels"):
        module(x[:16], "labels")
    with pytest.raises(TypeError, match="labels last"):
        module(x[:16])
    module(x[:16], y[:16])
    with pytest.raises(onnxtrain.OnnxtrainError) as e:  # a shape the session was not built for
        module(x[:16, :32], y[:16])
    assert "x" in str(e.value) or "input" in str(e.value)
    with pytest.raises(onnxtrain.OnnxtrainError, match="labels"):  # float labels for cross-entropy
        module(x[:16], y[:16].astype(np.float32))
    with pytest.raises(ValueError, match=r"parameters\['fc1.bias'\].data: shape"):
        state.parameters["fc1.bias"].data = np.zeros(3, np.float32)
    with pytest.raises(KeyError, match="nope"):
        state.parameters["nope"]
    with pytest.raises(ValueError, match="learning_rate"):
        opt.set_learning_rate(float("inf"))
    with pytest.raises(TypeError, match="properties"):
        state.properties["epoch"] = [1]
    with pytest.raises(ValueError, match="checkpoint_uri"):
        CheckpointState.load_checkpoint(os.path.join(ROOT, "samples", "mlp", "meta.json"))
    with pytest.raises(ValueError, match="graph_output_names"):
        pytest.importorskip("onnx")
        module.export_model_for_inferencing(tmp_path / "inf.onnx", ["no_such_output"])


def test_parameters_properties_and_contiguous(tmp_path):
    x, y = mlp_data()
    _, state, module, opt = make(tmp_path)
    assert "fc1.weight" in state.parameters and len(state.parameters) == 6
    state.properties["epoch"] = 3
    state.properties["note"] = "x"
    n = module.get_parameters_size()
    assert n == 64 * 128 + 128 + 128 * 128 + 128 + 10 * 128 + 10
    flat = module.get_contiguous_parameters()
    assert flat.shape == (n,)
    module.copy_buffer_to_parameters(np.zeros(n, np.float32))
    assert not state.parameters["fc2.weight"].data.any()
    module.copy_buffer_to_parameters(flat)
    np.testing.assert_array_equal(module.get_contiguous_parameters(), flat)
    state.parameters["fc3.bias"].data = np.full(10, 0.5, np.float32)
    assert (state.parameters["fc3.bias"].data == 0.5).all()
    module(x[:16], y[:16])
    opt.step()
    CheckpointState.save_checkpoint(state, tmp_path / "c")
    back = CheckpointState.load_checkpoint(tmp_path / "c")
    assert back.properties == {"epoch": 3, "note": "x"}
    np.testing.assert_array_equal(back.parameters["fc3.bias"].data, state.parameters["fc3.bias"].data)


def test_resume_with_optimizer_state_continues_bitwise(tmp_path):
    """Save after 3 steps with the optimizer state, load into a new Module, 2 more steps:
    the losses of an uninterrupted 5-step run."""
    x, y = mlp_data()

    def steps(module, opt, k0, k1):
        out = []
        for k in range(k0, k1):
            out.append(float(module(x[16 * k:16 * k + 16], y[16 * k:16 * k + 16])))
            opt.step()
            module.lazy_reset_grad()
        return out

    d = tmp_path / "a"
    d.mkdir()
    _, _, module, opt = make(d)
    straight = steps(module, opt, 0, 5)
    d = tmp_path / "b"
    d.mkdir()
    art, state, module, opt = make(d)
    first = steps(module, opt, 0, 3)
    CheckpointState.save_checkpoint(state, d / "ck", include_optimizer_state=True)
    state2 = CheckpointState.load_checkpoint(d / "ck")
    module2 = Module(art / "training_model.onnx", state2, art / "eval_model.onnx")
    opt2 = Optimizer(art / "optimizer_model.onnx", module2)
    assert first + steps(module2, opt2, 3, 5) == straight
