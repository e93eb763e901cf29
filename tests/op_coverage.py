#!/usr/bin/env python3
"""op_coverage.py — docs/ops.md, the op coverage page, from the sources of truth.

Every ai.onnx op of ONNX's own schema list (onnx.defs.get_all_schemas()) gets a row
with onnxtrain's forward, gradient and CUDA status and whether ONNX Runtime training
has a gradient builder for it. onnxtrain's columns come from the op table and the CUDA
table themselves (ir/ops.def, kernels/cuda/cuda_ops.def: tests/test_op_table.c keeps
every other op-indexed table in step with these two, so they are the whole truth:
OT_T_DIFF means "has a gradient rule", a KERNEL row a CUDA kernel, CPU_ONLY the CPU
kernel run on host copies); ORT's list is data stored with where it came from
(tests/fixtures/op_coverage/ort_gradient_ops.txt), and so are the reasons given for
the ops ORT differentiates and onnxtrain does not (.../reasons.txt).

    python3 tests/op_coverage.py --write     regenerate docs/ops.md (one command)
    python3 tests/op_coverage.py --check     exit 1, naming the ops, when the page and
                                             the tables disagree (ctest check_op_coverage)

--check compares onnxtrain's columns row by row with the tables whatever onnx is
installed, and the whole page text too when the installed onnx is the one the page
was made with; without onnx it checks the rows only. Exit codes: 0 agree, 1 disagree,
2 usage or unreadable input.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS_DEF = os.path.join(ROOT, "ir", "ops.def")
CUDA_DEF = os.path.join(ROOT, "kernels", "cuda", "cuda_ops.def")
SEQUENCE_C = os.path.join(ROOT, "importer", "sequence.c")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "op_coverage")
ORT_LIST = os.path.join(FIXTURES, "ort_gradient_ops.txt")
REASONS = os.path.join(FIXTURES, "reasons.txt")
PAGE = os.path.join(ROOT, "docs", "ops.md")

OP_ROW = re.compile(r'^OT_OP\(\s*(\w+)\s*,\s*"(\w+)"\s*,[^,]+,[^,]+,[^,]+,[^,]+,\s*(.*)\)\s*$')
CUDA_ROW = re.compile(r"^OT_CUDA_OP\(\s*(\w+)\s*,\s*(\w+)\s*,")


def read_ops_def():
    """{onnx name: {enum, diff, internal}} for every row of ir/ops.def."""
    ops = {}
    with open(OPS_DEF) as f:
        for line in f:
            m = OP_ROW.match(line.strip())
            if not m:
                continue
            traits = m.group(3)
            ops[m.group(2)] = {
                "enum": m.group(1),
                "diff": "OT_T_DIFF" in traits,
                "internal": "OT_T_INTERNAL" in traits,
            }
    if not ops:
        raise SystemExit(f"op_coverage: no OT_OP rows in {OPS_DEF}")
    return ops


def read_cuda_def():
    """{enum: KERNEL | CPU_ONLY} from kernels/cuda/cuda_ops.def."""
    rows = {}
    with open(CUDA_DEF) as f:
        for line in f:
            m = CUDA_ROW.match(line.strip())
            if m:
                rows[m.group(1)] = m.group(2)
    return rows


def read_lowered():
    """ai.onnx ops the importer rewrites into table ops (importer/sequence.c)."""
    with open(SEQUENCE_C) as f:
        return set(re.findall(r'strcmp\(op_type,\s*"(\w+)"\)', f.read()))


def read_ort():
    """(ai.onnx ops ORT differentiates, [(contrib op, for-op or None)])."""
    onnx_ops, contrib = set(), []
    with open(ORT_LIST) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if parts[0] not in ("registry", "builder") or len(parts) > 4:
                raise SystemExit(f"op_coverage: {ORT_LIST}:{n}: cannot read '{line}'")
            name, domain, target = parts[1], "ai.onnx", None
            for p in parts[2:]:
                if p.startswith("for="):
                    target = p[4:]
                else:
                    domain = p
            if domain == "ai.onnx":
                onnx_ops.add(name)
            else:
                contrib.append((name, target))
                if target:
                    onnx_ops.add(target)
    return onnx_ops, contrib


def read_reasons():
    reasons = {}
    if os.path.exists(REASONS):
        with open(REASONS) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    op, _, why = line.partition(" ")
                    reasons[op] = why.strip()
    return reasons


def onnx_schemas():
    """(onnx version, {name: (since_version, deprecated)}) or (None, None) without onnx."""
    try:
        import onnx
        import onnx.defs
    except ImportError:
        return None, None
    schemas = {}
    for s in onnx.defs.get_all_schemas():
        if s.domain in ("", "ai.onnx"):
            schemas[s.name] = (s.since_version, bool(s.deprecated))
    return onnx.__version__, schemas


def status(op, ops, cuda, lowered):
    """The three onnxtrain cells of an ai.onnx op."""
    row = ops.get(op)
    if row is None or row["internal"]:
        if op in lowered:
            return ("lowered", "-", "-")
        return ("-", "-", "-")
    grad = "yes" if row["diff"] else "-"
    kind = cuda.get(row["enum"])
    cu = {"KERNEL": "yes", "CPU_ONLY": "host"}.get(kind, "MISSING")
    return ("yes", grad, cu)


def render(onnx_version, schemas):
    ops, cuda, lowered = read_ops_def(), read_cuda_def(), read_lowered()
    ort, contrib = read_ort()
    reasons = read_reasons()
    public = {n for n, r in ops.items() if not r["internal"]}
    names = sorted(set(schemas) | public | lowered, key=str.lower)
    lines = []
    add = lines.append
    add("# ONNX op coverage")
    add("")
    add("<!-- Generated by tests/op_coverage.py from ir/ops.def, kernels/cuda/cuda_ops.def and")
    add(f"     ONNX {onnx_version}'s schema list; do not edit: run `python3 tests/op_coverage.py --write`.")
    add("     ctest check_op_coverage fails when this page and the tables disagree. -->")
    add("")
    add(f"Every ai.onnx op of ONNX {onnx_version}'s schema list (`onnx.defs.get_all_schemas()`), and")
    add("every op onnxtrain knows that this list lacks, with what onnxtrain does with it:")
    add("")
    add("- **version**: the opset of the op's latest version in that list.")
    add("- **forward**: `yes` the importer maps it to a row of `ir/ops.def` (shape rule, CPU")
    add("  kernel, cost); `lowered` the importer rewrites it into such ops; `-` refused at import.")
    add("- **gradient**: `yes` it has a gradient rule (`autodiff/grad_table.c`); a few rules")
    add("  stop the gradient on purpose (Sign, Floor, Ceil, Round: zero almost everywhere, as")
    add("  PyTorch); `-` nothing flows back through it (integer, boolean and shape ops, or no")
    add("  rule).")
    add("- **CUDA**: `yes` a CUDA kernel; `host` the CPU kernel run on host copies (shape-only")
    add("  ops, folded at import).")
    add("- **ORT training**: ONNX Runtime training has a gradient builder for it (list and")
    add("  source: `tests/fixtures/op_coverage/ort_gradient_ops.txt`).")
    add("")
    n_fwd = sum(1 for n in names if status(n, ops, cuda, lowered)[0] != "-")
    n_grad = sum(1 for n in names if status(n, ops, cuda, lowered)[1] == "yes")
    n_cuda = sum(1 for n in names if status(n, ops, cuda, lowered)[2] == "yes")
    add(f"{len(names)} ops: onnxtrain imports {n_fwd}, differentiates {n_grad}, runs {n_cuda} "
        "with a CUDA kernel.")
    add("")
    add("| op | version | forward | gradient | CUDA | ORT training |")
    add("|---|---|---|---|---|---|")
    for n in names:
        f, g, c = status(n, ops, cuda, lowered)
        if n in schemas:
            since, dep = schemas[n]
            since_s = f"{since}" + (" (deprecated)" if dep else "")
        else:
            since_s = f"not in ONNX {onnx_version}"
        add(f"| {n} | {since_s} | {f} | {g} | {c} | {'yes' if n in ort else '-'} |")
    add("")
    add("## Differentiated by ONNX Runtime training, not by onnxtrain")
    add("")
    missing = sorted(o for o in ort if status(o, ops, cuda, lowered)[1] != "yes")
    if missing:
        add("| op | why |")
        add("|---|---|")
        for o in missing:
            add(f"| {o} | {reasons.get(o, 'not built yet')} |")
    else:
        add("None.")
    add("")
    add("ORT's own (com.microsoft) ops with gradient builders are not ai.onnx ops, so no")
    add("exporter onnxtrain reads writes them: " + ", ".join(
        f"{c}" + (f" (ORT's training form of {t})" if t else "") for c, t in sorted(contrib)) + ".")
    add("")
    return "\n".join(lines)


ROW = re.compile(r"^\| (\w+) \| [^|]* \| (\S+) \| (\S+) \| (\S+) \| (\S+) \|$")


def check_rows(page):
    """Problems between the page's rows and the tables, whatever onnx is installed."""
    ops, cuda, lowered = read_ops_def(), read_cuda_def(), read_lowered()
    ort, _ = read_ort()
    seen, problems = {}, []
    for line in page.splitlines():
        m = ROW.match(line)
        if m and m.group(1) != "op":
            seen[m.group(1)] = m.groups()[1:]
    for name, row in ops.items():
        if not row["internal"] and name not in seen:
            problems.append(f"{name}: in ir/ops.def, no row on the page")
    for name, cells in seen.items():
        want = status(name, ops, cuda, lowered) + ("yes" if name in ort else "-",)
        if tuple(cells) != want:
            problems.append(f"{name}: page says forward/gradient/CUDA/ORT {'/'.join(cells)}, "
                            f"the tables say {'/'.join(want)}")
    if any(status(n, ops, cuda, lowered)[2] == "MISSING" for n in seen):
        problems.append("an op without a CUDA row (tests/test_op_table.c names it)")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate docs/ops.md")
    mode.add_argument("--check", action="store_true", help="fail when docs/ops.md is stale")
    ap.add_argument("--page", default=PAGE, help="the page (default docs/ops.md)")
    args = ap.parse_args()
    version, schemas = onnx_schemas()
    if args.write:
        if schemas is None:
            print("op_coverage: --write needs the onnx package (pip install onnx)", file=sys.stderr)
            return 2
        text = render(version, schemas)
        tmp = args.page + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.page)
        print(f"op_coverage: wrote {args.page} (ONNX {version})")
        return 0
    try:
        with open(args.page) as f:
            page = f.read()
    except OSError as e:
        print(f"op_coverage: cannot read {args.page}: {e.strerror}", file=sys.stderr)
        return 2
    problems = check_rows(page)
    m = re.search(r"ONNX (\S+)'s schema list", page)
    if schemas is not None and m and m.group(1) == version and render(version, schemas) != page:
        problems.append("the page's text differs from what the tables give (counts, rows, reasons)")
    if problems:
        print(f"op_coverage: {args.page} disagrees with the tables:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        print("regenerate it: python3 tests/op_coverage.py --write", file=sys.stderr)
        return 1
    full = "rows and text" if schemas is not None and m and m.group(1) == version else "rows only"
    print(f"op_coverage: {args.page} agrees with the tables ({full})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
