#!/usr/bin/env python3
"""The table of ../shared/tools/rank_check.py for docs/: how the daemon's
published margins rank and whether one label corrects a message's copy,
on any stream, raw (an index.tsv of e-mail files) or text (a JSON-lines
stream), one row each.

    scripts/rank_table.py [--bin PATH] SOURCE...

rank_check.py runs `classifyd run` in the deployment protocol (each
message unlabeled, then its label from one of ten honest reporters, then
an exact copy under a new id). --bin times another build (e.g. an older
commit's, for a before/after table in one session); by default this
checkout's release build.

Example (docs/accuracy.md):

    scripts/rank_table.py ../shared/data/spamassassin/raw/index.tsv \
        ../shared/data/csdmc2010/raw/index.tsv \
        ../shared/data/spamassassin/stream.jsonl ../shared/data/sms_spam_collection/stream.jsonl
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, "..", "shared", "tools", "rank_check.py")
LINE = re.compile(
    r"^(?P<name>[^:]+): (?P<n>\d+) messages, (?P<errors>\d+) errors \(accuracy (?P<acc>[\d.]+)\); "
    r"1-ROCA (?P<roca>[\d.]+) % .*? from (?P<source>margins|rounded scores); "
    r"spam missed at 0.1 % ham FP (?P<miss>[\d.]+) %.*?; "
    r"10 costliest mistakes outrank (?P<costly>\d+) messages \((?P<share>\d+) % of all misranking\); "
    r"sticky (?P<sticky>\d+) of"
)


def row(src, binary):
    """rank_check.py's figures for `src`, run from a scratch checkout
    whose target/release/classifyd is `binary` (rank_check.py runs that
    path), so any build can be measured."""
    work = tempfile.mkdtemp(prefix="rank-table-")
    try:
        os.makedirs(os.path.join(work, "target", "release"))
        os.symlink(os.path.abspath(binary), os.path.join(work, "target", "release", "classifyd"))
        # rank_check.py builds with cargo first: an empty manifest-less
        # directory fails that build, so it runs with a shim cargo on PATH.
        shim = os.path.join(work, "bin")
        os.makedirs(shim)
        with open(os.path.join(shim, "cargo"), "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(os.path.join(shim, "cargo"), 0o755)
        env = dict(os.environ, PATH=shim + os.pathsep + os.environ["PATH"])
        out = subprocess.run([sys.executable, CHECK, os.path.abspath(src), "100", "1000000"],
                             cwd=work, env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    last = (out.stdout.strip().splitlines() or [""])[-1]
    m = LINE.match(last)
    if not m:
        sys.exit("rank_check.py on %s said: %s %s" % (src, last, out.stderr[-300:]))
    return m.groupdict()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "classifyd"))
    ap.add_argument("sources", nargs="+")
    a = ap.parse_args()
    if not os.environ.get("RANK_TABLE_NO_BUILD") and a.bin == ap.get_default("bin"):
        subprocess.run(["cargo", "build", "--release", "-q", "--bin", "classifyd"], cwd=ROOT, check=True)
    print("| stream | messages | errors | accuracy | 1-ROCA % | from | spam missed at 0.1 % ham FP | "
          "10 costliest outrank | share | sticky |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for src in a.sources:
        r = row(src, a.bin)
        print("| {name} | {n} | {errors} | {acc} | {roca} | {source} | {miss} % | {costly} | {share} % | "
              "{sticky} of {errors} |".format(**r))


main()
