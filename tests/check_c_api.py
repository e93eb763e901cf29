#!/usr/bin/env python3
"""check_c_api.py — the public C API as an application sees it (issue 29 part 1).

Installs the build into a temporary prefix (`cmake --install`), checks that the
header compiles as C (gcc -std=c99 -pedantic) and C++ (g++ -std=c++11 -Wall -Werror),
that libonnxtrain.so has a SONAME and exports only onnxtrain_* symbols, builds
samples/c_api/train_tinygpt.c against the *installed* library through pkg-config and
through find_package(onnxtrain) (shared and static), runs each, and checks that their
losses and tuned model are bitwise those of `onnxtrain train` with the same settings.

usage: check_c_api.py ONNXTRAIN BUILD_DIR SOURCE_DIR TMP_DIR [EXTRA_FLAGS]
EXTRA_FLAGS (one string) is added to every compile and link of the sample: the
sanitizer build's -fsanitize flags, without which an instrumented library will not load.
"""
import json
import os
import shutil
import subprocess
import sys

STEPS = 4


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit("FAILED (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout))
    return r.stdout


def losses_of(out):
    return [line.split()[3] for line in out.splitlines() if line.startswith("step ")]


def main():
    onnxtrain, build, src, tmp = (os.path.abspath(a) for a in sys.argv[1:5])
    extra = sys.argv[5].split() if len(sys.argv) > 5 else []
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    prefix = os.path.join(tmp, "prefix")
    run(["cmake", "--install", build, "--prefix", prefix])
    libdir = next(os.path.join(prefix, d) for d in ("lib", "lib64") if os.path.isdir(os.path.join(prefix, d)))
    so = os.path.join(libdir, "libonnxtrain.so")
    for f in ("include/onnxtrain.h",):
        assert os.path.isfile(os.path.join(prefix, f)), f
    for f in ("libonnxtrain.a", "pkgconfig/onnxtrain.pc", "cmake/onnxtrain/onnxtrainConfig.cmake"):
        assert os.path.isfile(os.path.join(libdir, f)), f

    # SONAME, and no internal symbol exported
    dyn = run(["objdump", "-p", so])
    assert "SONAME               libonnxtrain.so.0" in dyn, dyn
    syms = [l.split()[-1].split("@")[0] for l in run(["nm", "-D", "--defined-only", so]).splitlines() if l.strip()]
    bad = [s for s in syms if not s.startswith("onnxtrain_") and s != "ONNXTRAIN_0"]
    assert not bad, "exported beyond the API: %s" % bad[:10]
    assert "onnxtrain_train_step" in syms

    # the header alone, as C and as C++
    inc = os.path.join(prefix, "include")
    hc = os.path.join(tmp, "h.c")
    with open(hc, "w") as f:
        f.write("#include <onnxtrain.h>\nint main(void) { onnxtrain_options o; onnxtrain_options_init(&o); return 0; }\n")
    run(["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-fsyntax-only", "-I", inc, hc])
    run(["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", "c++", "-I", inc, hc])

    sample = os.path.join(src, "samples", "c_api", "train_tinygpt.c")
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "onnxtrain"], env=env).split()
    exe_pc = os.path.join(tmp, "train_tinygpt_pc")
    run(["cc", "-std=c11", "-Wall", "-Werror", sample, "-o", exe_pc] + flags + extra)
    cm = os.path.join(tmp, "cmake_build")
    run(["cmake", "-S", os.path.join(src, "samples", "c_api"), "-B", cm, "-DCMAKE_PREFIX_PATH=" + prefix,
         "-DONNXTRAIN_SAMPLE_STATIC=ON", "-DCMAKE_C_FLAGS=" + " ".join(extra),
         "-DCMAKE_EXE_LINKER_FLAGS=" + " ".join(extra)])
    run(["cmake", "--build", cm])
    libs = run(["ldd", exe_pc])
    assert os.path.realpath(so) in [os.path.realpath(l.split()[2]) for l in libs.splitlines()
                                    if "libonnxtrain.so" in l and "=>" in l], libs

    model = os.path.join(src, "samples", "tinygpt.onnx")
    tok = os.path.join(src, "samples", "data", "tinygpt_tokens.npy")
    lab = os.path.join(src, "samples", "data", "tinygpt_labels.npy")
    cli_out, report = os.path.join(tmp, "cli.onnx"), os.path.join(tmp, "cli.json")
    run([onnxtrain, "train", model, "--input", tok, "--labels", lab, "--optimizer", "adam", "--lr", "0.003",
         "--batch-size", "16", "--seed", "1", "--no-shuffle", "--steps", str(STEPS), "--quiet", "--report", report,
         "-o", cli_out])
    with open(report) as f:
        cli_losses = ["%.9g" % x for x in json.load(f)["loss"]]
    with open(cli_out, "rb") as f:
        cli_bytes = f.read()
    for name, exe in (("pkg-config", exe_pc), ("find_package", os.path.join(cm, "train_tinygpt")),
                      ("find_package static", os.path.join(cm, "train_tinygpt_static"))):
        out_model = os.path.join(tmp, "api_%s.onnx" % name.replace(" ", "_"))
        out = run([exe, model, tok, lab, out_model, str(STEPS)])
        got = losses_of(out)
        assert got == cli_losses, "%s: losses %s, the CLI's %s" % (name, got, cli_losses)
        with open(out_model, "rb") as f:
            assert f.read() == cli_bytes, "%s: the tuned model differs from the CLI's" % name
        print("%s: %d steps, losses and tuned model bitwise the CLI's" % (name, STEPS))
    # a bad argument is an exit status and a message, not a crash
    r = subprocess.run([exe_pc, os.path.join(tmp, "missing.onnx"), tok, lab, os.path.join(tmp, "x.onnx")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 3 and "missing.onnx" in r.stderr, (r.returncode, r.stderr)
    print("ok")


if __name__ == "__main__":
    main()
