#!/usr/bin/env python3
"""Where `classifyd eval` spends its CPU, by stage and thread: perf's
cpu-clock samples of one run, each function put in the stage it belongs
to, as a share of the run's CPU and as microseconds per message.

    scripts/profile_stages.py FILE [EVAL FLAGS...]      (e.g. target/ab/sa_raw.jsonl)

Environment: CLASSIFYD_BIN (target/release/classifyd), FREQ (sampling
Hz, 4000). Needs `perf` (linux-perf); cpu-clock is a software event, so
it works in VMs without hardware counters. The reader thread is
"eval-reader" (parse, render, tokenize, hash, count: no model); the
model's thread is the main one. A function not in STAGES counts as
"other" and the ten largest are listed, so the table says what it missed.
"""
import json, os, re, subprocess, sys, tempfile
from collections import defaultdict

# (stage, regex over the symbol), first match wins.
STAGES = [
    ("json parse", r"serde_json|message::parse|RawValue"),
    ("MIME render", r"mail_parser|email::render|html_to_text|base64|quoted_printable|charsets|Utf8Chunks|from_utf8"),
    ("header features, tokenize", r"email::Tokens|email::header|tokenize|email_end|unicode"),
    ("hash, count n-grams", r"count_into|extract_into|ShortHash|xxh3|hash_buckets|count_buckets"),
    ("byte LR grams", r"HeadGrams|head::"),
    ("finish (IDF, personal, prefetch)", r"finalize|finish|DocFreq|idf|personal"),
    ("score", r"::scores|Model::predict|Fusion::inputs|logf|expf|sigmoid|softmax|margins|predict_features"),
    ("learn", r"adagrad|Fusion::learn|ByteLr::learn|learn_features|::learn\b|step|arow|hinge|perceptron"),
    ("metrics, cache, review", r"eval::|Progressive|FeedbackCache|cache::|review|Ledger|lz4"),
    ("page faults, zeroing", r"clear_page|page_fault|folio|huge_pmd|get_page_from_freelist|do_anonymous_page"),
    ("memory copies", r"memmove|memcpy|memset"),
    ("allocator, TLB", r"_mi_|mi_|tlb|smp_call_function|native_write_msr|flush"),
]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    stream, flags = sys.argv[1], sys.argv[2:]
    bin_ = os.environ.get("CLASSIFYD_BIN", "target/release/classifyd")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        cmd = ["perf", "record", "-q", "-e", "cpu-clock", "-F", os.environ.get("FREQ", "4000"), "-o", data,
               bin_, "eval", "--json", "--input", stream, *flags]
        run = subprocess.run(cmd, capture_output=True, text=True, check=True)
        result = json.loads(run.stdout)
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm,symbol", "--stdio",
                                 "-g", "none"], capture_output=True, text=True, check=True).stdout
    shares = defaultdict(float)
    others = defaultdict(float)
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*?)\s*$", line)
        if not m:
            continue
        share, comm, sym = float(m.group(1)), m.group(2), m.group(3)
        thread = "reader" if comm.startswith("eval-reader") else "model"
        stage = next((name for name, rx in STAGES if re.search(rx, sym)), "other")
        shares[(stage, thread)] += share
        if stage == "other":
            others[(thread, sym)] += share
    cpu, n = result["cpu_seconds"], result["examples"] or 1
    print(f"{stream}: {n} messages, {result['seconds']:.2f} s wall, {cpu:.2f} s CPU "
          f"({cpu / n * 1e6:.0f} us of CPU a message)\n")
    print("| stage | thread | share of CPU | us a message |")
    print("|---|---|---:|---:|")
    order = [name for name, _ in STAGES] + ["other"]
    for thread in ("reader", "model"):
        for stage in order:
            s = shares.get((stage, thread), 0.0)
            if s >= 0.05:
                print(f"| {stage} | {thread} | {s:.1f} % | {s / 100 * cpu / n * 1e6:.1f} |")
        total = sum(v for (_, t), v in shares.items() if t == thread)
        print(f"| **all** | {thread} | {total:.1f} % | {total / 100 * cpu / n * 1e6:.1f} |")
    print("\nLargest functions counted as other:")
    for (thread, sym), s in sorted(others.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {s:5.2f} %  {thread}  {sym[:100]}")


if __name__ == "__main__":
    main()
