#!/usr/bin/env python3
"""peft_check.py — PEFT loads the adapters `onnxtrain train --lora-save DIR/` writes.

Exports the zoo's GPT-2 (TorchScript; samples/zoo/export_zoo.py), trains LoRA adapters on it
with onnxtrain (--lora-save DIR/ and -o the merged model), loads DIR onto the same PyTorch
module with `PeftModel.from_pretrained`, merges (`merge_and_unload`) and checks that
  - the merged PyTorch weights equal the merged ONNX model's initializers (|diff| <= 1e-6), and
  - the merged PyTorch model's logits match `onnxtrain eval --dump-outputs` on the merged
    ONNX model within 1e-5 (issue 29's acceptance), as do the unmerged PeftModel's.
The module PEFT loads onto is the exported one: the zoo exports a wrapper (`Logits`) holding
the HF model as `.model`, so the initializer names, and so PEFT's module paths, start with
"model." (docs/training.md "Adapters for PEFT").

Usage: peft_check.py ONNXTRAIN WORKDIR. Exit 0 ok, 1 mismatch, 77 skipped (no peft).
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, work = sys.argv[1], sys.argv[2]
    try:
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        # ctest runs /usr/bin/python3: go on in the zoo's interpreter when it has peft
        venv = os.environ.get("ONNXTRAIN_ZOO_VENV", "/work/venvs/hf")
        for py in (os.environ.get("ONNXTRAIN_ZOO_PYTHON"), os.path.join(venv, "bin", "python")):
            if py and os.path.exists(py) and os.path.abspath(py) != os.path.abspath(sys.executable) and \
                    subprocess.run([py, "-c", "import peft, transformers, torchvision"], capture_output=True).returncode == 0:
                return subprocess.run([py, os.path.abspath(__file__), exe, work]).returncode
        print("check_peft SKIPPED: no interpreter imports peft, transformers and torchvision (.ci/install_zoo.sh "
              "installs peft 0.10.0 into /work/venvs/hf; or set ONNXTRAIN_ZOO_PYTHON)")
        return 77
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
    from peft import PeftModel
    sys.path.insert(0, HERE)
    import export_zoo
    import zoo_models

    torch.set_num_threads(1)
    shutil.rmtree(work, ignore_errors=True)
    export_zoo.export_one("gpt2", work)
    d = os.path.join(work, "gpt2")
    model_path = os.path.join(d, "gpt2_nodrop.onnx")
    ids, labels = os.path.join(d, "data", "input_ids.npy"), os.path.join(d, "data", "labels.npy")
    adir, merged_path, dump = os.path.join(work, "adapters") + "/", os.path.join(work, "merged.onnx"), os.path.join(work, "dump")
    subprocess.run([exe, "train", model_path, "--input", ids, "--labels", labels, "--lora", "4:8", "--steps", "5",
                    "--optimizer", "adam", "--lr", "0.05", "--seed", "3", "--lora-save", adir, "-o", merged_path],
                   check=True)
    subprocess.run([exe, "eval", merged_path, "--input", ids, "--dump-outputs", dump], check=True, stdout=subprocess.DEVNULL)
    cfg = json.load(open(os.path.join(adir, "adapter_config.json")))

    # The exported module with the ONNX model's (base) weights.
    wrap = export_zoo.build(zoo_models.ZOO["gpt2"], 0.0)
    export_zoo.set_dropout_zero(wrap)
    wrap.eval()
    base = {i.name: numpy_helper.to_array(i) for i in onnx.load(model_path).graph.initializer}
    sd = wrap.state_dict()
    with torch.no_grad():
        for name, t in sd.items():
            if name in base:
                t.copy_(torch.from_numpy(base[name].copy()))
    missing = [m + ".weight" for m in cfg["target_modules"] if m + ".weight" not in base or m + ".weight" not in sd]
    if missing:
        print("FAIL: adapted weights not in both the ONNX model and the module:", missing)
        return 1

    pm = PeftModel.from_pretrained(wrap, adir)
    pm.eval()
    x = torch.from_numpy(np.load(ids))
    with torch.no_grad():
        peft_logits = pm(x).numpy()
        merged = pm.merge_and_unload()
        merged_logits = merged(x).numpy()
    ours = np.load(os.path.join(dump, "logits.npy"))
    merged_init = {i.name: numpy_helper.to_array(i) for i in onnx.load(merged_path).graph.initializer}
    msd = merged.state_dict()
    wdiff = max(float(np.abs(msd[m + ".weight"].numpy() - merged_init[m + ".weight"]).max()) for m in cfg["target_modules"])
    moved = max(float(np.abs(merged_init[m + ".weight"] - base[m + ".weight"]).max()) for m in cfg["target_modules"])
    d_merged = float(np.abs(merged_logits - ours).max())
    d_peft = float(np.abs(peft_logits - ours).max())
    print(f"peft {peft.__version__}: {len(cfg['target_modules'])} modules, r {cfg['r']}, alpha {cfg['lora_alpha']}, "
          f"fan_in_fan_out {cfg['fan_in_fan_out']}; adapters moved the weights by up to {moved:.3g}")
    print(f"merged weights |PEFT - onnxtrain| <= {wdiff:.3g}; logits |merged PEFT - onnxtrain eval| <= {d_merged:.3g}, "
          f"|PeftModel - onnxtrain eval| <= {d_peft:.3g}")
    ok = moved > 1e-4 and wdiff <= 1e-6 and d_merged <= 1e-5 and d_peft <= 1e-5
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
