"""test_onnxtrain.py — the Python package against `onnxtrain train` and its own contract.

The tinygpt sample trained through a torch DataLoader and through numpy batches gives
bitwise the CLI's losses and tuned model; eval, params, plan, verify, checkpoints; bad
input raises with the argument named and the arrays untouched.
Needs the package importable (pip install ., or PYTHONPATH=python with ONNXTRAIN_LIBRARY
and ONNXTRAIN_HEADER naming a build's library and header) and the CLI (ONNXTRAIN_CLI,
default build/onnxtrain).
"""
import json
import os
import subprocess

import numpy as np
import pytest

import onnxtrain

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("ONNXTRAIN_CLI", os.path.join(ROOT, "build", "onnxtrain"))
MODEL = os.path.join(ROOT, "samples", "tinygpt.onnx")
TOK = os.path.join(ROOT, "samples", "data", "tinygpt_tokens.npy")
LAB = os.path.join(ROOT, "samples", "data", "tinygpt_labels.npy")
OPTS = dict(optimizer="adam", lr=0.003, seed=1)


@pytest.fixture(scope="module")
def data():
    return np.load(TOK), np.load(LAB)


def cli_train(tmp_path, steps, batch, accum=1, extra=()):
    """Losses (as the report prints them) and the tuned model's bytes of the CLI run."""
    out, rep = tmp_path / "cli.onnx", tmp_path / "cli.json"
    subprocess.run([CLI, "train", MODEL, "--input", TOK, "--labels", LAB, "--optimizer", "adam", "--lr", "0.003",
                    "--seed", "1", "--batch-size", str(batch), "--accum", str(accum), "--no-shuffle", "--steps",
                    str(steps), "--quiet", "--report", str(rep), "-o", str(out)] + list(extra), check=True)
    return ["%.9g" % x for x in json.loads(rep.read_text())["loss"]], out.read_bytes()


def test_dataloader_bitwise_cli(tmp_path, data):
    torch = pytest.importorskip("torch")
    tok, lab = data
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(tok), torch.from_numpy(lab)),
                                         batch_size=16, shuffle=False, drop_last=True)
    with onnxtrain.Trainer(MODEL, **OPTS) as t:
        losses = []
        for i, (x, y) in enumerate(loader):
            if i == 4:
                break
            losses.append("%.9g" % t.step({"tokens": x}, y))
        t.save(tmp_path / "py.onnx")
    want, model = cli_train(tmp_path, 4, 16)
    assert losses == want
    assert (tmp_path / "py.onnx").read_bytes() == model


def test_numpy_accum_bitwise_cli(tmp_path, data):
    tok, lab = data
    tok0, lab0 = tok.copy(), lab.copy()
    with onnxtrain.Trainer(MODEL, accum=2, **OPTS) as t:
        src = onnxtrain.batches({"tokens": tok, "labels": lab}, batch_size=16)
        losses = ["%.9g" % x for x in t.fit(src[:3])]
        assert t.step_count == 3
        t.save(tmp_path / "py.onnx")
    want, model = cli_train(tmp_path, 3, 8, accum=2)
    assert losses == want
    assert (tmp_path / "py.onnx").read_bytes() == model
    assert np.array_equal(tok, tok0) and np.array_equal(lab, lab0)  # never written


def test_chunked_loss_bitwise_cli(tmp_path, data):
    tok, lab = data
    with onnxtrain.Trainer(MODEL, chunked_loss="on", chunked_loss_rows=8, **OPTS) as t:
        src = onnxtrain.batches({"tokens": tok, "labels": lab}, batch_size=16)
        losses = ["%.9g" % x for x in t.fit(src[:2])]
        t.save(tmp_path / "py.onnx")
    want, model = cli_train(tmp_path, 2, 16, extra=["--chunked-loss", "on", "--chunked-loss-rows", "8"])
    assert losses == want
    assert (tmp_path / "py.onnx").read_bytes() == model
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        onnxtrain.Trainer(MODEL, chunked_loss="sometimes")
    assert e.value.code == 2 and "options.chunked_loss 'sometimes'" in e.value.message


def test_fused_attention_bitwise_cli(tmp_path, data):
    tok, lab = data
    with onnxtrain.Trainer(MODEL, fused_attention="on", **OPTS) as t:
        src = onnxtrain.batches({"tokens": tok, "labels": lab}, batch_size=16)
        losses = ["%.9g" % x for x in t.fit(src[:2])]
        t.save(tmp_path / "py.onnx")
    want, model = cli_train(tmp_path, 2, 16, extra=["--fused-attention", "on"])
    assert losses == want
    assert (tmp_path / "py.onnx").read_bytes() == model
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        onnxtrain.Trainer(MODEL, fused_attention="sometimes")
    assert e.value.code == 2 and "options.fused_attention 'sometimes'" in e.value.message


def test_fuse_update_bitwise(tmp_path, data):
    """fuse_update=True: the tuned model's bytes and the losses of the unfused run, a lower
    planned peak, and the gradients at the peak below the unfused ones."""
    tok, lab = data
    out, peaks, grads = {}, {}, {}
    for fuse in (False, True):
        with onnxtrain.Trainer(MODEL, remat="all", fuse_update=fuse, **OPTS) as t:
            src = onnxtrain.batches({"tokens": tok, "labels": lab}, batch_size=16)
            losses = ["%.9g" % x for x in t.fit(src[:3])]
            p = t.plan()
            peaks[fuse], grads[fuse] = p["peak_bytes"], p["at_peak"]["gradients"]
            t.save(tmp_path / ("f%d.onnx" % fuse))
            out[fuse] = (losses, (tmp_path / ("f%d.onnx" % fuse)).read_bytes())
    assert out[True] == out[False]
    assert peaks[True] < peaks[False] and grads[True] < grads[False]
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        with onnxtrain.Trainer(MODEL, fuse_update=True, clip_grad_norm=1.0, **OPTS) as t:
            t.step({"tokens": tok[:16]}, lab[:16])
    assert e.value.code == 2 and "--fuse-update with --clip-grad-norm" in e.value.message


def test_loss_scale_bitwise_cli(tmp_path, data):
    """fp16 loss scaling through the library: the CLI's bits, and its skipped steps and
    final scale (loss_scale_state) those of the CLI's report."""
    tok, lab = data
    ls = dict(precision="fp16", loss_scale_init=131072, loss_scale_growth_interval=2)
    with onnxtrain.Trainer(MODEL, **ls, **OPTS) as t:
        src = onnxtrain.batches({"tokens": tok, "labels": lab}, batch_size=8)
        losses = ["%.9g" % x for x in t.fit(src[:8])]
        state = t.loss_scale_state()
        t.save(tmp_path / "py.onnx")
    want, model = cli_train(tmp_path, 8, 8, extra=["--precision", "fp16", "--loss-scale-init", "131072",
                                                    "--loss-scale-growth-interval", "2"])
    assert losses == want
    assert (tmp_path / "py.onnx").read_bytes() == model
    rep = json.loads((tmp_path / "cli.json").read_text())["loss_scale"]
    assert state == (rep["final_scale"], rep["skipped_steps"]) and state[1] >= 1
    with onnxtrain.Trainer(MODEL, precision="bf16", **OPTS) as t:
        t.step({"tokens": tok[:8]}, lab[:8])
        assert t.loss_scale_state() == (0.0, 0)
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        onnxtrain.Trainer(MODEL, loss_scale="sometimes")
    assert e.value.code == 2 and "options.loss_scale 'sometimes'" in e.value.message


def test_tf32_cpu_bitwise(tmp_path, data):
    """tf32=True is --tf32: accepted, and ignored by the CPU (no TF32 there), so the losses
    and the tuned model are bitwise those without it."""
    tok, lab = data
    out = {}
    for tf32 in (False, True):
        with onnxtrain.Trainer(MODEL, tf32=tf32, **OPTS) as t:
            src = onnxtrain.batches({"tokens": tok, "labels": lab}, batch_size=8)
            losses = ["%.9g" % x for x in t.fit(src[:2])]
            t.save(tmp_path / ("t%d.onnx" % tf32))
            out[tf32] = (losses, (tmp_path / ("t%d.onnx" % tf32)).read_bytes())
    assert out[True] == out[False]


def test_eval_params_plan(data):
    tok, lab = data
    with onnxtrain.Trainer(MODEL, remat="sqrt", **OPTS) as t:
        assert t.verify(tok[:16], lab[:16])
        names = t.param_names()
        assert names[0] == "tok.weight"
        w = t.get_param("tok.weight")
        assert w.shape == (64, 32) and w.dtype == np.float32
        t.set_param("tok.weight", w * 0.5)
        assert np.array_equal(t.get_param("tok.weight"), w * 0.5)
        t.prepare(tok[:16], lab[:16])
        p = t.plan()
        assert p["batch_size"] == 16 and p["peak_bytes"] > 0 and p["peak_without_remat"] >= p["peak_bytes"]
        assert p["at_peak"]["params"] >= 4 * sum(t.get_param(n).size for n in names if "ln" not in n) // 2
        l0, acc = t.eval({"tokens": tok, "labels": lab})
        assert np.isfinite(l0) and 0 <= acc <= 1
        assert t.eval({"tokens": tok, "labels": lab}) == (l0, acc)  # eval changes nothing
        with pytest.raises(onnxtrain.OnnxtrainError) as e:
            t.verify(tok[:16], lab[:16])  # after the build: refused
        assert e.value.code == 2


def test_checkpoint_resume(tmp_path, data):
    tok, lab = data
    src = onnxtrain.batches({"tokens": tok, "labels": lab}, batch_size=16)
    with onnxtrain.Trainer(MODEL, **OPTS) as t:
        t.fit(src[:2])
        t.save_checkpoint(tmp_path / "ck.otc")
        want = t.fit(src[2:4])
        w = t.get_param("head.weight") if "head.weight" in t.param_names() else t.get_param("tok.weight")
    with onnxtrain.Trainer(MODEL, **OPTS) as t:
        t.load_checkpoint(tmp_path / "ck.otc")
        assert t.fit(src[2:4]) == want
        assert t.step_count == 4
        w2 = t.get_param("head.weight") if "head.weight" in t.param_names() else t.get_param("tok.weight")
        assert np.array_equal(w, w2)


def test_errors(tmp_path, data):
    tok, lab = data
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        onnxtrain.Trainer(str(tmp_path / "missing.onnx"))
    assert e.value.code == 3 and "missing.onnx" in e.value.message
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        onnxtrain.Trainer(MODEL, loss="hinge")
    assert e.value.code == 2 and "options.loss" in e.value.message
    with pytest.raises(TypeError, match="model"):
        onnxtrain.Trainer(42)
    t = onnxtrain.Trainer(MODEL, **OPTS)
    with pytest.raises(TypeError, match=r"inputs\['tokens'\]: a list"):
        t.step({"tokens": [[1] * 16] * 16}, lab[:16])
    with pytest.raises(TypeError, match="labels"):
        t.step({"tokens": tok[:16]}, "labels")
    with pytest.raises(TypeError, match="dtype"):
        t.step({"tokens": tok[:16].astype(np.uint16)}, lab[:16])
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        t.step({"tokens": tok[:16].astype(np.float32)}, lab[:16])
    assert e.value.code == 8 and "tokens" in e.value.message
    bad = lab[:16].copy()
    bad[0, 0] = 1000
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        t.step({"tokens": tok[:16]}, bad)
    assert e.value.code == 8 and "labels" in e.value.message
    assert bad[0, 0] == 1000
    t.step({"tokens": tok[:16]}, lab[:16])
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        t.step({"tokens": tok[:8]}, lab[:8])
    assert e.value.code == 8 and "[16,16]" in e.value.message
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        t.get_param("nope")
    assert e.value.code == 2 and "'nope'" in e.value.message
    with pytest.raises(ValueError, match="shape"):
        t.set_param("tok.weight", np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="batch"):
        t.fit([42])
    t.close()
    with pytest.raises(onnxtrain.OnnxtrainError) as e:
        t.step({"tokens": tok[:16]}, lab[:16])
    assert e.value.code == 2
    with pytest.raises(ValueError, match="batch_size"):
        onnxtrain.batches({"tokens": tok})


def test_hf_gpt2_dataloader_bitwise_cli(tmp_path):
    """The acceptance loop: a HuggingFace GPT-2 export (the zoo's, with its Dropout) over a
    torch DataLoader for two epochs, AdamW and remat, bitwise the CLI's losses and model."""
    torch = pytest.importorskip("torch")
    venv = os.environ.get("ONNXTRAIN_ZOO_VENV", "/work/venvs/hf")
    py = os.environ.get("ONNXTRAIN_ZOO_PYTHON") or os.path.join(venv, "bin", "python")
    if not os.path.exists(py) or subprocess.run([py, "-c", "import transformers"], capture_output=True).returncode:
        pytest.skip("no interpreter with transformers to export the zoo's gpt2 (.ci/install_zoo.sh)")
    subprocess.run([py, os.path.join(ROOT, "samples", "zoo", "export_zoo.py"), "--out", str(tmp_path / "zoo"),
                    "--only", "gpt2"], check=True, capture_output=True)
    model = str(tmp_path / "zoo" / "gpt2" / "gpt2.onnx")
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 64, size=(64, 8)).astype(np.int64)
    lab = rng.integers(0, 64, size=(64, 8)).astype(np.int64)
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "lab.npy", lab)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(ids), torch.from_numpy(lab)),
                                         batch_size=8, shuffle=False, drop_last=True)
    with onnxtrain.Trainer(model, optimizer="adamw", lr=0.01, seed=3, remat="sqrt") as t:
        losses = ["%.9g" % x for x in t.fit(loader, epochs=2)]
        t.save(tmp_path / "py.onnx")
    subprocess.run([CLI, "train", model, "--input", str(tmp_path / "ids.npy"), "--labels", str(tmp_path / "lab.npy"),
                    "--optimizer", "adamw", "--lr", "0.01", "--seed", "3", "--remat", "sqrt", "--batch-size", "8",
                    "--no-shuffle", "--steps", "16", "--quiet", "--report", str(tmp_path / "cli.json"), "-o",
                    str(tmp_path / "cli.onnx")], check=True)
    assert losses == ["%.9g" % x for x in json.loads((tmp_path / "cli.json").read_text())["loss"]]
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_lora_save_adapters_and_lora_load(tmp_path, data):
    """save_adapters writes PEFT's folder; lora_load= starts a new Trainer from it (its
    adapters read back equal)."""
    tok, lab = data
    with onnxtrain.Trainer(MODEL, lora=2, optimizer="adam", lr=0.01, seed=1) as t:
        t.step({"tokens": tok[:8]}, lab[:8])
        t.save_adapters(str(tmp_path / "adapters") + "/")
        names = [n for n in t.param_names() if "lora" in n.lower()]
        saved = {n: t.get_param(n) for n in names}
    assert (tmp_path / "adapters" / "adapter_model.safetensors").exists()
    assert (tmp_path / "adapters" / "adapter_config.json").exists()
    assert names
    with onnxtrain.Trainer(MODEL, lora_load=tmp_path / "adapters", optimizer="adam", lr=0.01) as t:
        t.prepare({"tokens": tok[:8]}, lab[:8])
        for n in names:
            np.testing.assert_array_equal(t.get_param(n), saved[n])
    with pytest.raises(onnxtrain.OnnxtrainError, match="lora_load"):
        onnxtrain.Trainer(MODEL, lora_load=tmp_path / "missing")
