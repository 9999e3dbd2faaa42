#!/usr/bin/env python3
"""Summarizes a ctest run: gtest cases passed, failed and SKIPPED, and ctest's own skips.

ctest reports a gtest binary as passed when some of its cases called GTEST_SKIP (the GPU
tests on a machine without one, say), so the skips are counted here from the XML that
each test binary writes (--gtest_output=xml:<build>/test-results/<test>.xml, set in
test/CMakeLists.txt), each listed with its message, and ctest's skipped entries
(SKIP_RETURN_CODE) from ctest's JUnit file.

    tools/test-summary.py BUILD_DIR [--junit FILE]
    tools/test-summary.py --results FILE.xml... [--junit FILE]

With BUILD_DIR the results files expected are those named by the registered tests'
--gtest_output options (`ctest --show-only=json-v1`); when the JUnit file (default
BUILD_DIR/test-results/ctest.xml, written by `ctest --output-junit`) exists, only the
tests it says ran are expected. Exit status: 0 when every expected results file was read
and no case failed (skips do not fail the run); 1 when a results file is missing or
unreadable (a binary that crashed before writing it), a case failed, or ctest failed a
test or did not run one for a reason other than a skip (a missing executable); 2 on bad
usage.
"""

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

XML_FLAG = "--gtest_output=xml:"


def registered_results(build_dir):
    """{ctest name: results path} for every registered test that writes gtest XML."""
    try:
        out = subprocess.run(
            ["ctest", "--test-dir", build_dir, "--show-only=json-v1"],
            check=True, capture_output=True, text=True).stdout
        tests = json.loads(out).get("tests", [])
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        sys.exit(f"test-summary: cannot list the tests of {build_dir}: {e}")
    results = {}
    for t in tests:
        for arg in t.get("command", []):
            if arg.startswith(XML_FLAG):
                results[t["name"]] = arg[len(XML_FLAG):]
    return results


def read_junit(path):
    """ctest's JUnit file: [(name, status, skip message, last output line)]."""
    root = ET.parse(path).getroot()
    entries = []
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        out = (case.findtext("system-out") or "").strip().splitlines()
        entries.append((case.get("name"), case.get("status"),
                        skipped.get("message", "") if skipped is not None else None,
                        out[-1] if out else ""))
    return entries


def read_gtest(path):
    """One gtest XML file: [(suite.case, outcome, message)], outcome run/failed/skipped."""
    root = ET.parse(path).getroot()
    if root.tag != "testsuites":
        raise ValueError(f"not gtest XML (root <{root.tag}>)")
    cases = []
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            name = f"{case.get('classname')}.{case.get('name')}"
            if case.get("status") == "notrun":  # DISABLED_ tests
                continue
            failures = case.findall("failure") + case.findall("error")
            skipped = case.find("skipped")
            if failures:
                cases.append((name, "failed", failures[0].get("message", "")))
            elif skipped is not None or case.get("result") == "skipped":
                message = skipped.get("message", "") if skipped is not None else ""
                cases.append((name, "skipped", message))
            else:
                cases.append((name, "passed", ""))
    return cases


def one_line(message):
    """A skip message without gtest's "file:line" first line, on one line."""
    lines = [l.strip() for l in message.strip().splitlines() if l.strip()]
    if len(lines) > 1 and ":" in lines[0] and lines[0].rsplit(":", 1)[1].isdigit():
        lines = lines[1:]
    text = " ".join(lines)
    return text if len(text) <= 200 else text[:197] + "..."


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?")
    parser.add_argument("--results", nargs="+", metavar="FILE", help="gtest XML files to read")
    parser.add_argument("--junit", help="ctest's JUnit file (ctest --output-junit)")
    args = parser.parse_args()
    if (args.build_dir is None) == (args.results is None):
        parser.error("give a build directory or --results files")

    problems = []
    junit = args.junit
    if junit is None and args.build_dir is not None:
        default = os.path.join(args.build_dir, "test-results", "ctest.xml")
        junit = default if os.path.exists(default) else None
    ctest_entries = None
    if junit is not None:
        try:
            ctest_entries = read_junit(junit)
        except (OSError, ET.ParseError) as e:
            problems.append(f"ctest's JUnit file {junit} is missing or unreadable: {e}")

    if args.results is not None:
        expected = {os.path.splitext(os.path.basename(p))[0]: p for p in args.results}
    else:
        expected = registered_results(args.build_dir)
        if ctest_entries is not None:
            ran = {name for name, status, _, _ in ctest_entries if status != "notrun"}
            expected = {n: p for n, p in expected.items() if n in ran}

    counts = {"passed": 0, "failed": 0, "skipped": 0}
    skipped, failed = [], []
    for test, path in sorted(expected.items()):
        try:
            cases = read_gtest(path)
        except (OSError, ET.ParseError, ValueError) as e:
            problems.append(f"{test}: results file {path} is missing or unreadable "
                            f"(did the binary crash before writing it?): {e}")
            continue
        per = {"passed": 0, "failed": 0, "skipped": 0}
        for name, outcome, message in cases:
            per[outcome] += 1
            counts[outcome] += 1
            if outcome == "skipped":
                skipped.append((test, name, one_line(message)))
            elif outcome == "failed":
                failed.append((test, name, one_line(message)))
        print(f"test-summary: {test}: {per['passed']} passed, {per['failed']} failed, "
              f"{per['skipped']} skipped")

    print(f"test-summary: gtest cases: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} SKIPPED ({len(expected)} results files)")
    if skipped:
        print(f"test-summary: SKIPPED gtest cases ({len(skipped)}):")
        for test, name, message in skipped:
            print(f"  SKIPPED {test}: {name}: {message}")
    for test, name, message in failed:
        print(f"  FAILED {test}: {name}: {message}")

    if ctest_entries is not None:
        ctest_skips = [(n, m, o) for n, s, m, o in ctest_entries
                       if s == "notrun" and m is not None and m.startswith("SKIP_")]
        not_run = [(n, m) for n, s, m, _ in ctest_entries
                   if s == "notrun" and not (m is not None and m.startswith("SKIP_"))]
        ctest_failed = [n for n, s, _, _ in ctest_entries if s == "fail"]
        print(f"test-summary: ctest entries: {len(ctest_entries)}, failed {len(ctest_failed)}, "
              f"not run {len(not_run)}, SKIPPED {len(ctest_skips)}")
        for name, message, output in ctest_skips:
            print(f"  SKIPPED ctest {name}: {message}" + (f": {output}" if output else ""))
        for name in ctest_failed:
            problems.append(f"ctest test {name} failed")
        for name, message in not_run:
            problems.append(f"ctest did not run {name}: {message}")
    elif args.build_dir is not None:
        print("test-summary: no ctest JUnit file: ctest's own skips (SKIP_RETURN_CODE) not "
              "counted (run ctest with --output-junit <build>/test-results/ctest.xml)")

    if failed:
        problems.append(f"{len(failed)} gtest case(s) failed")
    sys.stdout.flush()
    for p in problems:
        print(f"test-summary: ERROR: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
