#!/usr/bin/env python3
"""Test of tools/braze-plot on test/tools/plot_sample.json (a Google Benchmark JSON with
repetitions, an aggregates-only run, failed runs, CUDA/OpenCL runs and peers).

Usage: braze_plot_test.py [TOOL [SAMPLE]]  (default: the repository's tools/braze-plot and
test/tools/plot_sample.json). Runs the tool as `python3 TOOL ...` with this interpreter.
Exit status: 0 passed; 1 failed; 77 skipped (the checks that need no matplotlib passed, but
matplotlib is missing, so no PNG could be drawn).
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "tools", "braze-plot")
SAMPLE = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "plot_sample.json")
failures = []


def check(ok, what, detail=""):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)
        if detail:
            print("      " + detail.replace("\n", "\n      "))


def run(*args):
    proc = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def parse_table(text):
    """--print's output -> ([roof lines], {subplot: {bar label: ms}})."""
    roofs, groups, current = [], {}, None
    for line in text.splitlines():
        bar = re.match(r"^  (.+?)\s+([0-9.]+) ms", line)
        if bar and current is not None:
            groups[current][bar.group(1)] = float(bar.group(2))
        elif line.startswith("memory roof") or " memory roof " in line:
            roofs.append(line)
        elif line and not line.startswith(" "):
            current = line
            groups[current] = {}
    return roofs, groups


def test_table():
    rc, out, err = run(SAMPLE, "--print")
    check(rc == 0, "--print alone exits 0 (needs no matplotlib)", f"rc={rc}\n{err}")
    roofs, groups = parse_table(out)
    expected = ["ReferenceChain8 1Mi", "Chain8", "Softmax rows=4096", "Softmax rows=16384",
                "LayerNorm rows=4096", "MatMulBiasRelu", "MlpTrainStep batch=128",
                "SoftmaxTrainStep batch=128", "Chain8 (OpenCL smoke test, POCL on the CPU)"]
    check(list(groups) == expected, "one subplot per workload and size, BM_Copy none",
          f"got {list(groups)}")
    check(len(roofs) == 1 and "29.3 GB/s" in roofs[0] and "4.58 ms" in roofs[0],
          "BM_Copy is the memory roof line", f"got {roofs}")
    chain = groups.get("Chain8", {})
    check(chain.get("Braze fused") == 4.25 and chain.get("Braze unfused") == 21.2,
          "unfused:0/1 -> Braze fused/unfused, the median of repetitions (not the mean)",
          f"got {chain}")
    check(list(chain) == ["Braze fused", "Braze unfused", "Braze symbolic",
                          "hand loop (threads)", "hand loop (OpenMP)", "Eigen"],
          "_symbolic, _handloop, _omp, _eigen bars, in order", f"got {list(chain)}")
    softmax = groups.get("Softmax rows=4096", {})
    check(softmax == {"Braze fused": 1.6, "Braze unfused": 5.55, "Braze symbolic": 1.71,
                      "hand loop (threads)": 10.4, "oneDNN": 1.35},
          "variant:0/1/2 -> Braze fused/unfused/symbolic; the failed Eigen run left out",
          f"got {softmax}")
    check("Braze symbolic" not in groups.get("Softmax rows=16384", {}),
          "a variant missing at one size is missing from that subplot only")
    check(groups.get("LayerNorm rows=4096", {}).get("Braze fused") == 1.02,
          "unfused:N before rows:N parses the same")
    check(groups.get("MlpTrainStep batch=128", {}).get("OpenBLAS") == 13.9,
          "an aggregates-only run gives its median", f"got {groups.get('MlpTrainStep batch=128')}")
    check(groups.get("SoftmaxTrainStep batch=128", {}).get("hand-fused") == 0.152,
          "time_unit us is converted to ms", f"got {groups.get('SoftmaxTrainStep batch=128')}")
    check(re.search(r"oneDNN\s+9\.8000 ms\s+0\.80x", out) is not None,
          "peers carry their ratio to Braze fused")
    check(not any("cuda" in key.lower() for key in groups),
          "CUDA runs that all failed make no subplot")
    check("BM_Softmax_eigen/rows:4096" in err and "Eigen was not found" in err
          and err.count("BM_Chain8_cuda/variant:") == 2,
          "failed runs are named on stderr with their error message", err)

    rc, out, _ = run(SAMPLE, "--print", "--filter", "^BM_Softmax/")
    _, groups = parse_table(out)
    check(rc == 0 and list(groups) == ["Softmax rows=4096", "Softmax rows=16384"],
          "--filter keeps the matching benchmarks", f"rc={rc} {list(groups)}")


def test_bad_input(tmp):
    missing = os.path.join(tmp, "no_such_results.json")
    rc, out, err = run(missing, "-o", os.path.join(tmp, "x.png"))
    check(rc == 2 and missing in err, "a missing file: exit 2, the message names the file",
          f"rc={rc} stderr={err!r}")
    check(not os.path.exists(os.path.join(tmp, "x.png")), "... and no PNG is written")

    cut = os.path.join(tmp, "cut.json")
    with open(cut, "w") as f:
        f.write(open(SAMPLE).read()[:3000])  # a run killed while writing
    rc, _, err = run(cut, "-o", os.path.join(tmp, "x.png"))
    check(rc == 2 and "is not JSON" in err and cut in err, "a truncated file: exit 2",
          f"rc={rc} {err!r}")

    other = os.path.join(tmp, "other.json")
    with open(other, "w") as f:
        json.dump({"context": {}, "results": []}, f)
    rc, _, err = run(other, "-o", os.path.join(tmp, "x.png"))
    check(rc == 2 and "not a Google Benchmark JSON" in err, "JSON without benchmarks: exit 2",
          f"rc={rc} {err!r}")

    odd = os.path.join(tmp, "odd_run_name.json")
    with open(odd, "w") as f:
        json.dump({"benchmarks": [{"name": "BM_X", "run_name": 5, "real_time": 1}]}, f)
    rc, _, err = run(odd, "--print")
    check(rc == 2 and "run_name is not a string" in err and "Traceback" not in err,
          "a run_name that is no string: exit 2, no traceback", f"rc={rc} {err!r}")

    deep = os.path.join(tmp, "deep.json")
    with open(deep, "w") as f:
        f.write("[" * 100000)
    rc, _, err = run(deep, "--print")
    check(rc == 2 and "nested too deeply" in err and "Traceback" not in err,
          "JSON nested past Python's parser: exit 2, no traceback", f"rc={rc} {err!r}")

    rc, _, err = run(SAMPLE, "-o", os.path.join(tmp, "x.png"), "--filter", "NoSuchBenchmark")
    check(rc == 2 and "no benchmarks matched" in err, "a filter matching nothing: exit 2",
          f"rc={rc} {err!r}")

    rc, _, err = run(SAMPLE)
    check(rc == 2 and "-o" in err, "neither -o nor --print: exit 2 with usage", f"rc={rc}")

    rc, out, _ = run("--help")
    check(rc == 0 and "unfused:0" in out and "Exit status" in out, "--help explains names",
          f"rc={rc}")


def test_several_files(tmp):
    """A CUDA run and bench/peers_cuda.py's JSON drawn as one run."""
    braze = {"context": {"host_name": "gpu"}, "benchmarks": [
        {"name": "BM_Chain8_cuda/variant:0/real_time", "real_time": 0.5, "time_unit": "ms"},
        {"name": "BM_Chain8_cuda/variant:1/real_time", "real_time": 6.0, "time_unit": "ms"},
        {"name": "BM_Copy_cuda/real_time", "real_time": 0.2, "time_unit": "ms",
         "GB/s": 2.8e12}]}  # bytes/s, as cuda_bench.cc wrote it before 2026-11-26 15:00
    torch = {"context": {}, "benchmarks": [
        {"name": "BM_Chain8_torch_compile_cuda", "real_time": 0.25, "time_unit": "ms"},
        {"name": "BM_Chain8_torch_eager_cuda", "real_time": 5.0, "time_unit": "ms"},
        {"name": "BM_Copy_torch_cuda", "real_time": 0.19, "time_unit": "ms"}]}
    paths = []
    for name, doc in (("braze.json", braze), ("torch.json", torch)):
        paths.append(os.path.join(tmp, name))
        with open(paths[-1], "w") as f:
            json.dump(doc, f)
    rc, out, err = run(*paths, "--print")
    roofs, groups = parse_table(out)
    chain = groups.get("Chain8 (CUDA)", {})
    check(rc == 0 and chain == {"Braze fused": 0.5, "Braze unfused": 6.0, "PyTorch eager": 5.0,
                                "torch.compile": 0.25},
          "two files make one subplot per workload, PyTorch's bars labelled",
          f"rc={rc} {groups} {err}")
    check(list(chain)[:2] == ["Braze fused", "Braze unfused"], "Braze's bars first",
          f"{list(chain)}")
    check(len(roofs) == 1 and "2800.0 GB/s" in roofs[0] and "PyTorch's copy: 0.19 ms" in roofs[0],
          "both copies in the roof line, bytes/s read as GB/s", f"{roofs}")
    rc, out, err = run(*paths, "--print", "--filter", "variant")
    _, groups = parse_table(out)
    check(rc == 0 and list(groups.get("Chain8 (CUDA)", {})) == ["Braze fused", "Braze unfused"],
          "a filter that matches one file only", f"rc={rc} {groups} {err}")
    rc, out, err = run(*paths, "--print", "--filter", "Copy")
    _, groups = parse_table(out)
    check(rc == 0 and groups.get("Copy (CUDA)") == {"memcpy": 0.2, "memcpy (PyTorch)": 0.19},
          "only the roofs asked for: one subplot, each copy labelled", f"rc={rc} {groups} {err}")
    rc, _, err = run(*paths, "--print", "--filter", "NoSuchWorkload")
    check(rc == 2 and "2 files: no benchmarks matched" in err, "nothing matched in any file",
          f"rc={rc} {err}")


def test_png(tmp):
    """Returns False when matplotlib is missing."""
    png = os.path.join(tmp, "x.png")
    rc, out, err = run(SAMPLE, "-o", png)
    if rc == 3:
        print(f"SKIP  PNG checks: {err.strip()}")
        return False
    check(rc == 0, "renders the sample: exit 0", f"rc={rc}\n{err}")
    check(f"wrote {png} (9 workloads)" in out, "says what it wrote", out)
    data = open(png, "rb").read() if os.path.exists(png) else b""
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "the output is a PNG (magic bytes)", repr(data[:8]))
    if data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        check(width >= 1200 and height >= 600 and len(data) > 20000,
              "a 3x3 grid of subplots, not an empty image",
              f"{width}x{height}, {len(data)} bytes")
    else:
        check(False, "the PNG starts with its IHDR chunk")

    rc, _, err = run(SAMPLE, "-o", os.path.join(tmp, "no_such_dir", "x.png"))
    check(rc == 1 and "cannot write" in err, "an unwritable output: exit 1", f"rc={rc} {err!r}")
    return True


def main():
    if not os.path.exists(TOOL) or not os.path.exists(SAMPLE):
        print(f"FAIL  missing {TOOL} or {SAMPLE}")
        return 1
    with tempfile.TemporaryDirectory(prefix="braze_plot_test.") as tmp:
        test_table()
        test_bad_input(tmp)
        test_several_files(tmp)
        drew = test_png(tmp)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    if not drew:
        print("skipped: matplotlib is not installed (Debian: python3-matplotlib)")
        return 77
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
