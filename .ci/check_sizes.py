#!/usr/bin/env python3
"""check_sizes.py — the size rule of the architecture (docs/architecture.md): no product
file over MAX_FILE lines and no function over MAX_FUNC lines, in the product folders
(ir, importer, autodiff, plan, exec, kernels, remat, train, cli; tests, benchmarks and
fuzz harnesses are not product code).

A function is a definition that opens at column 0 ("type name(...) {" on one or more
lines, clang-format's layout here) and closes with the first "}" at column 0; its
length counts from its first line to that brace. Prints the largest files and
functions (--top N, default 10) and exits 1 listing every one over the limits, or with
--report only prints.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ["ir", "importer", "autodiff", "plan", "exec", "kernels", "remat", "train", "api", "include", "cli"]
MAX_FILE, MAX_FUNC = 800, 120
SIG_START = re.compile(r"^[A-Za-z_][\w \*]*\b(\w+)\s*\(")
SOURCE = (".c", ".h", ".cu", ".cuh")


def functions(lines):
    """(name, first line, length) of each column-0 function definition."""
    out, i, n = [], 0, len(lines)
    while i < n:
        m = SIG_START.match(lines[i])
        if m and not lines[i].startswith(("typedef", "struct", "enum", "union", "#")) and ";" not in lines[i]:
            j = i
            while j < n and "{" not in lines[j] and ";" not in lines[j]:
                j += 1
            if j < n and "{" in lines[j] and ";" not in lines[j].split("{")[0]:
                k = j
                if not lines[j].rstrip().endswith("}"):
                    k = j + 1
                    while k < n and not lines[k].startswith("}"):
                        k += 1
                out.append((m.group(1), i + 1, k - i + 1))
                i = k + 1
                continue
        i += 1
    return out


def main():
    top = 10
    if "--top" in sys.argv:
        top = int(sys.argv[sys.argv.index("--top") + 1])
    files, funcs = [], []
    for d in PRODUCT:
        for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
            for f in names:
                if not f.endswith(SOURCE):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().split("\n")
                files.append((len(lines) - (lines[-1] == ""), rel))
                funcs += [(length, f"{rel}:{line} {name}") for name, line, length in functions(lines)]
    files.sort(reverse=True)
    funcs.sort(reverse=True)
    print(f"largest files (limit {MAX_FILE} lines):")
    for n, rel in files[:top]:
        print(f"  {n:5d}  {rel}")
    print(f"largest functions (limit {MAX_FUNC} lines):")
    for n, where in funcs[:top]:
        print(f"  {n:5d}  {where}")
    over = [f"file {rel}: {n} lines" for n, rel in files if n > MAX_FILE]
    over += [f"function {where}: {n} lines" for n, where in funcs if n > MAX_FUNC]
    if over:
        print(f"check_sizes: {len(over)} over the limits:")
        for o in over:
            print("  " + o)
    return 1 if over and "--report" not in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
