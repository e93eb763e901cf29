#!/usr/bin/python3
"""check_kv_cache.py — a decoder exported for inference with a KV cache (issue 26 item 3):
HF GPT-2 (tiny config, use_cache=True) exported by torch.onnx.export (TorchScript,
PyTorch 1.13, transformers 4.39) as HF/optimum export decoder_with_past.onnx, and the
same weights without a cache (tests/fixtures/kv_cache, 200 KB each, made by
export_kv_decoder.py there with /work/venvs/hf's python):
  - the bare form `--remat auto decoder_with_past.onnx` works: an empty past, a mask of
    ones, positions 0..T-1, and bitwise equal to --remat none;
  - `train` with token ids and labels only works, says the defaults in one line, and
    the tuned model keeps every input and output and still runs with a cache in ONNX's
    reference evaluator (logits of a sequence = logits of its tail after its prefix's
    cache);
  - `verify` is bitwise with an empty past and with a given past (sqrt, auto);
  - gradients with an empty past equal the no-cache export's of the same weights;
  - present.* outputs are kept, never recomputed, under every remat policy;
  - missing inputs that have no default are listed at once (exit 2); a partial cache
    is refused naming the input;
  - torch 2.15's dynamo export at opset 23 (decoder_with_past_op23.onnx, made by
    export_dynamo_decoder.py with /work/venvs/ops3's python): the same forms, and eval
    against PyTorch's logits with an empty and a given past.

    check_kv_cache.py ONNXTRAIN_BINARY SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "kv_cache")  # export_kv_decoder.py there remakes them
failures = []


def check(ok, what):
    print("%s  %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def grads(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy")}


def main():
    binary, tmp = sys.argv[1], sys.argv[2]
    os.makedirs(tmp, exist_ok=True)
    dec, nocache = os.path.join(FIX, "decoder_with_past.onnx"), os.path.join(FIX, "decoder.onnx")
    P = lambda n: os.path.join(tmp, n)
    rng = np.random.default_rng(0)
    N, T, PL = 6, 5, 3
    np.save(P("ids.npy"), rng.integers(0, 50, (N, T)).astype(np.int64))
    np.save(P("labels.npy"), rng.integers(0, 50, (N, T)).astype(np.int64))
    pasts = []
    for i in range(2):
        for kv in ("key", "value"):
            np.save(P("past%d%s.npy" % (i, kv)), rng.standard_normal((N, 2, PL, 16)).astype(np.float32))
            pasts += ["--input", "past_key_values.%d.%s=%s" % (i, kv, P("past%d%s.npy" % (i, kv)))]
    data = ["--input", "input_ids=" + P("ids.npy"), "--labels", P("labels.npy")]

    # the bare form
    r = run(binary, "--remat", "auto", dec)
    check(r.returncode == 0 and "bitwise equal" in r.stdout and "an empty past" in r.stdout
          and "a mask of ones" in r.stdout and "positions 0..7" in r.stdout,
          "bare form --remat auto: empty past, mask of ones, positions 0..T-1, bitwise (rc %d) %s"
          % (r.returncode, r.stderr[-300:]))

    # train with token ids and labels only
    tuned = P("tuned.onnx")
    r = run(binary, "train", dec, *data, "--epochs", "2", "-o", tuned)
    notes = [l for l in (r.stdout + r.stderr).splitlines() if "KV-cache inputs without data" in l]
    check(r.returncode == 0 and os.path.exists(tuned), "train with token ids and labels only (rc %d) %s"
          % (r.returncode, r.stderr[-300:]))
    check(len(notes) == 1 and "empty past" in notes[0] and "attention_mask of ones" in notes[0]
          and "position_ids 0..4" in notes[0], "the defaults said in one line: %s" % notes)
    if os.path.exists(tuned):
        a, b = onnx.load(dec).graph, onnx.load(tuned).graph
        check([i.name for i in a.input] == [i.name for i in b.input] and
              [o.name for o in a.output] == [o.name for o in b.output], "the tuned model keeps every input and output")
        ref_check(tuned)

    # prefix tuning: the cache given as data, the mask and positions defaulted over it
    r = run(binary, "train", dec, *data, *pasts, "--epochs", "1", "-o", P("prefix.onnx"))
    check(r.returncode == 0 and "position_ids %d..%d" % (PL, PL + T - 1) in r.stderr + r.stdout
          and "empty past" not in r.stderr + r.stdout,
          "train with a given past: positions %d..%d, a mask over past + sequence (rc %d) %s"
          % (PL, PL + T - 1, r.returncode, r.stderr[-300:]))
    # validation data and eval take the same defaults
    r = run(binary, "train", dec, *data, "--val-input", "input_ids=" + P("ids.npy"), "--val-labels", P("labels.npy"),
            "--epochs", "1", "-o", P("val.onnx"))
    check(r.returncode == 0 and "val loss" in r.stdout + r.stderr, "train with validation data of token ids only (rc %d) %s"
          % (r.returncode, r.stderr[-300:]))
    r = run(binary, "eval", tuned if os.path.exists(tuned) else dec, *data)
    check(r.returncode == 0 and "loss" in r.stdout, "eval with token ids and labels only (rc %d) %s"
          % (r.returncode, r.stderr[-300:]))
    # the derived symbol is never bound on its own
    r = run(binary, "train", dec, *data, "--bind", "total_sequence_length=7", "-o", P("x.onnx"))
    check(r.returncode == 2 and "never bound on its own" in r.stderr,
          "--bind of the derived total_sequence_length is refused (rc %d) %s" % (r.returncode, r.stderr.strip()))

    # verify, bitwise with an empty and with a given past
    for policy in ("sqrt", "auto"):
        r = run(binary, "verify", dec, *data, "--remat", policy)
        check(r.returncode == 0 and "bitwise equal" in r.stdout, "verify --remat %s, empty past (rc %d) %s"
              % (policy, r.returncode, r.stderr[-300:]))
        r = run(binary, "verify", dec, *data, *pasts, "--remat", policy)
        check(r.returncode == 0 and "bitwise equal" in r.stdout, "verify --remat %s, a given past of %d (rc %d) %s"
              % (policy, PL, r.returncode, r.stderr[-300:]))

    # gradients: an empty past against the no-cache export of the same weights
    r1 = run(binary, "grad", dec, *data, "--dump-grads", P("g_past"))
    r2 = run(binary, "grad", nocache, *data, "--dump-grads", P("g_nocache"))
    check(r1.returncode == 0 and r2.returncode == 0, "grad runs on both exports")
    if r1.returncode == 0 and r2.returncode == 0:
        g1, g2 = grads(P("g_past")), grads(P("g_nocache"))
        check(sorted(g1) == sorted(g2) and len(g1) > 0, "the same params get gradients (%d)" % len(g1))
        for k in sorted(set(g1) & set(g2)):
            if k.endswith("wpe.weight"):
                # position_ids is an input here, an arange folded into the graph in the
                # no-cache export: the scatter-add of the same positions sums in
                # another order
                ok = np.allclose(g1[k], g2[k], rtol=1e-5, atol=1e-7)
            else:
                ok = np.array_equal(g1[k], g2[k])
            check(ok, "gradient of %s equal to the no-cache export's%s" % (k, "" if not k.endswith("wpe.weight")
                                                                          else " (within float32 rounding)"))

    # present.* are graph outputs: kept, never recomputed
    for policy in ("sqrt", "all"):
        r = run(binary, "plan", dec, *data, "--remat", policy, "--json")
        ok = r.returncode == 0
        if ok:
            j = json.loads(r.stdout)
            rec = [v for p in j["plans"] for s in p.get("segments", []) for v in s.get("recomputed", [])]
            ok = not any(v.startswith("present.") for v in rec)
        check(ok, "--remat %s recomputes no present.* output" % policy)

    # a partial cache, and inputs without a default listed at once
    r = run(binary, "train", dec, *data, pasts[0], pasts[1], "--epochs", "1", "-o", P("x.onnx"))
    check(r.returncode == 2 and "past_key_values.0.value" in r.stderr, "a partial cache is refused (rc %d) %s"
          % (r.returncode, r.stderr.strip()))
    three = P("three.onnx")
    x = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in ("a", "b", "c")]
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], list(np.eye(4, dtype=np.float32).ravel()))
    nodes = [helper.make_node("Add", ["a", "b"], ["ab"]), helper.make_node("Add", ["ab", "c"], ["abc"]),
             helper.make_node("MatMul", ["abc", "w"], ["y"])]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    onnx.save(helper.make_model(helper.make_graph(nodes, "three", x, [y], [w]),
                                opset_imports=[helper.make_opsetid("", 17)]), three)
    np.save(P("a.npy"), np.zeros((4, 4), np.float32))
    r = run(binary, "grad", three, "--input", "a=" + P("a.npy"), "--labels", P("a.npy"), "--loss", "mse")
    check(r.returncode == 2 and "no data for 2 inputs: 'b', 'c'" in r.stderr,
          "inputs without data listed at once (rc %d) %s" % (r.returncode, r.stderr.strip()))
    check_by_symbol(binary, P)
    check_dynamo_op23(binary, P)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


def check_by_symbol(binary, P):
    """A cache input named neither past_key_values.* nor past.*, known by its
    past-length symbol; its output's total length derived from past + sequence."""
    m = P("by_symbol.onnx")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])
    c = helper.make_tensor_value_info("cache_k", TensorProto.FLOAT, ["batch", "past_seq_len", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])
    k = helper.make_tensor_value_info("new_k", TensorProto.FLOAT, ["batch", "total_len", 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], list(np.arange(16, dtype=np.float32) / 16))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Concat", ["cache_k", "y"], ["new_k"], axis=1)]
    onnx.save(helper.make_model(helper.make_graph(nodes, "by_symbol", [x, c], [y, k], [w]),
                                opset_imports=[helper.make_opsetid("", 17)]), m)
    r = run(binary, "--loss", "mse", m)
    check(r.returncode == 0 and "default: an empty past" in r.stdout and "bitwise equal" in r.stdout,
          "a cache input known by its past-length symbol: the bare form (rc %d) %s" % (r.returncode, r.stderr[-300:]))


def check_dynamo_op23(binary, P):
    """torch 2.15's dynamo export at opset 23 (export_dynamo_decoder.py: Attention,
    RotaryEmbedding, RMSNormalization; attention_mask's total_sequence_length a free
    symbol the graph does not derive): the bare form, train with ids and labels only,
    verify bitwise with an empty and a given past, and eval against PyTorch's logits
    both ways."""
    dec = os.path.join(FIX, "decoder_with_past_op23.onnx")
    ref = np.load(os.path.join(FIX, "decoder_with_past_op23.npz"))
    for k in ("input_ids", "attention_mask", "position_ids", "past_key", "past_value"):
        np.save(P("op23_%s.npy" % k), ref[k])
    ids = ["--input", "input_ids=" + P("op23_input_ids.npy")]
    past = ["--input", "attention_mask=" + P("op23_attention_mask.npy"), "--input",
            "position_ids=" + P("op23_position_ids.npy"), "--input",
            "past_key_values.0.key=" + P("op23_past_key.npy"), "--input",
            "past_key_values.0.value=" + P("op23_past_value.npy")]
    labels = ["--labels", P("op23_input_ids.npy")]
    r = run(binary, "--remat", "auto", dec)
    check(r.returncode == 0 and "bitwise equal" in r.stdout and "an empty past" in r.stdout,
          "op23 dynamo: bare form --remat auto (rc %d) %s" % (r.returncode, r.stderr[-300:]))
    r = run(binary, "train", dec, *ids, *labels, "--steps", "2", "-o", P("op23_tuned.onnx"))
    check(r.returncode == 0 and "attention_mask of ones over past + sequence" in r.stderr + r.stdout,
          "op23 dynamo: train with token ids and labels only (rc %d) %s" % (r.returncode, r.stderr[-300:]))
    for what, extra in (("an empty past", []), ("a given past", past)):
        for pol in ("sqrt", "auto"):
            r = run(binary, "verify", dec, *ids, *extra, *labels, "--remat", pol)
            check(r.returncode == 0, "op23 dynamo: verify --remat %s with %s (rc %d) %s"
                  % (pol, what, r.returncode, r.stderr[-300:]))
        out = P("op23_eval_" + what.split()[1])
        r = run(binary, "eval", dec, *ids, *extra, "--dump-outputs", out)
        want = ref["logits_no_past" if not extra else "logits_past"]
        got = np.load(os.path.join(out, "logits.npy")) if r.returncode == 0 else np.zeros(0)
        err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
        check(err <= 1e-5, "op23 dynamo: eval with %s matches PyTorch's logits (max |diff| %.1e, rc %d) %s"
              % (what, err, r.returncode, r.stderr[-200:]))


REF_PYTHONS = [sys.executable, "/work/venvs/hf/bin/python", "/work/venvs/ops3/bin/python", "python3"]


def ref_check(path):
    """Runs check_runs_with_cache in the first interpreter whose onnx has the reference
    evaluator (onnx >= 1.13; Debian's is 1.12): says so and skips that check without one."""
    for py in REF_PYTHONS:
        try:
            r = subprocess.run([py, "-c", "import onnx.reference"], capture_output=True)
        except OSError:
            continue
        if r.returncode == 0:
            r = subprocess.run([py, os.path.abspath(__file__), "--ref", path], capture_output=True, text=True)
            print(r.stdout, end="")
            check(r.returncode == 0, "the tuned model in onnx.reference (%s) %s" % (py, r.stderr[-500:]))
            return
    print("skip  the tuned model in onnx.reference: no interpreter here has onnx >= 1.13")


def check_runs_with_cache(path):
    """The tuned model in ONNX's reference evaluator: the logits of a whole sequence
    (empty past) equal those of its tail run after its prefix's present.* outputs."""
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(1)
    sess = ReferenceEvaluator(path)
    names = [o.name for o in onnx.load(path).graph.output]
    B, T, K = 2, 6, 4
    ids = rng.integers(0, 50, (B, T)).astype(np.int64)

    def feed(ids, past, p):
        ids = np.ascontiguousarray(ids)  # onnx.reference's Gather fails on a strided view
        t = ids.shape[1]
        f = {"input_ids": ids, "attention_mask": np.ones((B, p + t), np.int64),
             "position_ids": np.tile(np.arange(p, p + t), (B, 1)).astype(np.int64)}
        for i in range(2):
            for j, kv in enumerate(("key", "value")):
                f["past_key_values.%d.%s" % (i, kv)] = past[2 * i + j]
        return dict(zip(names, sess.run(None, f)))

    empty = [np.zeros((B, 2, 0, 16), np.float32)] * 4
    full = feed(ids, empty, 0)
    pre = feed(ids[:, :K], empty, 0)
    tail = feed(ids[:, K:], [pre["present.%d.%s" % (i, kv)] for i in range(2) for kv in ("key", "value")], K)
    check(full["present.0.key"].shape == (B, 2, T, 16) and tail["present.1.value"].shape == (B, 2, T, 16),
          "present.* grow by the sequence: %s" % (tail["present.1.value"].shape,))
    check(np.allclose(full["logits"][:, K:], tail["logits"], atol=1e-5),
          "the tuned model runs with a cache: the tail's logits after the prefix's cache equal the whole "
          "sequence's (max diff %.2e)" % np.abs(full["logits"][:, K:] - tail["logits"]).max())


if __name__ == "__main__":
    if sys.argv[1] == "--ref":
        check_runs_with_cache(sys.argv[2])
        sys.exit(1 if failures else 0)
    sys.exit(main())
