#!/usr/bin/env python3
"""A raw mail stream through spamd's own client, in the protocol of
../shared/tools/rank_check.py: each message checked (`spamc -R`, its
margin read from the report), then learned with `spamc -L spam|ham` from
one of 10 reporters (`-u`, with --mail-personal false so that, as in
rank_check's JSON lines, the name is the reporter's and no user's), then
its exact copy checked. Prints rank_check's figures: accuracy, 1-ROCA from
the margins, spam missed at 0.1 % ham false positives, sticky mistakes.

With --compare, the same protocol also runs through JSON lines (as
rank_check.py feeds `classifyd run`: the message, its label as feedback,
its copy) and each message's verdict and margin are compared.

Usage: scripts/spamd_rank.py [INDEX_TSV] [--bin BIN] [--limit N] [--dump FILE] [--compare]
(default ../shared/data/spamassassin/raw/index.tsv). Needs spamc."""
import argparse, base64, bisect, json, os, random, re, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def messages(index):
    base = os.path.dirname(index)
    for line in open(index):
        if line.startswith("#") or not line.strip():
            continue
        _, mid, label, rel = line.rstrip("\n").split("\t")
        yield mid, label, open(os.path.join(base, rel), "rb").read()


def spamc(port, args, raw):
    r = subprocess.run(["spamc", "-d", "127.0.0.1", "-p", str(port), "-t", "60"] + args,
                       input=raw, capture_output=True)
    return r.stdout.decode("utf-8", "replace")


def check(port, raw):
    """(label, margin) from spamc -R's report."""
    out = spamc(port, ["-R"], raw)
    m = re.search(r"CLASSIFYD_(SPAM|HAM)\s+classifyd: \S* \(margin (-?[0-9.]+|inf|-inf|nan)", out)
    if not m:
        sys.exit("no verdict in spamc's answer: %r" % out[:300])
    return m.group(1).lower(), float(m.group(2))


def through_json(bin_, index, limit, tmp):
    """(verdict, margin) of each message through JSON lines, in order."""
    rng, ids, path = random.Random(1), [], os.path.join(tmp, "p.jsonl")
    with open(path, "w") as f:
        for n, (_, label, raw) in enumerate(messages(index)):
            if limit and n >= limit:
                break
            rec, k = {"email_base64": base64.b64encode(raw).decode()}, "m%d" % n
            ids.append(k)
            f.write(json.dumps(dict(rec, id=k)) + "\n")
            f.write(json.dumps({"id": k, "label": label, "reporter": "user-%d" % rng.randrange(10)}) + "\n")
            f.write(json.dumps(dict(rec, id="c" + k[1:])) + "\n")
    r = subprocess.run([bin_, "run", "--input", path, "--output", "-", "--checkpoint-dir", os.path.join(tmp, "jck")],
                       capture_output=True, text=True, check=True)
    pred = {}
    for line in r.stdout.splitlines():
        p = json.loads(line)
        m = p.get("margins") or {}
        pred[p["id"]] = (p.get("label") or "", m.get("spam", -m.get("ham", 0.0)))
    return [pred.get(k, ("", 0.0)) for k in ids]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("index", nargs="?", default=os.path.join(ROOT, "../shared/data/spamassassin/raw/index.tsv"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/classifyd"))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--dump", help="write each message's id, verdict and margin here")
    ap.add_argument("--compare", action="store_true", help="and through JSON lines, message by message")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="spamd-rank-")
    empty = os.path.join(tmp, "empty.jsonl")
    open(empty, "w").close()
    port = free_port()
    daemon = subprocess.Popen([a.bin, "run", "--input", empty, "--output", "/dev/null", "--checkpoint-dir",
                               os.path.join(tmp, "ck"), "--spamd-addr", "127.0.0.1:%d" % port,
                               "--mail-personal", "false"], stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if "PONG" in subprocess.run(["spamc", "-p", str(port), "-K"], capture_output=True, text=True).stdout:
                break
            time.sleep(0.1)
        rng = random.Random(1)
        scored, errors, sticky, started, dumped, checked = [], 0, 0, time.time(), [], []
        for n, (mid, label, raw) in enumerate(messages(a.index)):
            if a.limit and n >= a.limit:
                break
            verdict, margin = check(port, raw)
            scored.append((margin, label == "spam"))
            checked.append((verdict, margin))
            if a.dump:
                dumped.append("%s\t%s\t%.6f\n" % (mid, verdict, margin))
            spamc(port, ["-L", label, "-u", "user-%d" % rng.randrange(10)], raw)
            if verdict != label:
                errors += 1
                sticky += check(port, raw)[0] != label
        took = time.time() - started
    finally:
        daemon.terminate()
        daemon.wait()
    if a.dump:
        open(a.dump, "w").writelines(dumped)
    spam = sorted(s for s, y in scored if y)
    ham = sorted(s for s, y in scored if not y)
    pairs = sum(bisect.bisect_left(spam, s) + 0.5 * (bisect.bisect_right(spam, s) - bisect.bisect_left(spam, s))
                for s in ham)
    roca = 100.0 * pairs / (len(spam) * len(ham))
    thr = ham[min(len(ham) - 1, int(len(ham) * 0.999))]
    miss = 100.0 * sum(1 for s in spam if s <= thr) / len(spam)
    print("through spamc: %d messages, %d errors (accuracy %.5f); 1-ROCA %.4f %% from margins; "
          "spam missed at 0.1 %% ham FP %.3f %%; sticky %d of %d; %.1f s (%.1f ms a message: check, learn)"
          % (len(scored), errors, 1 - errors / len(scored), roca, miss, sticky, errors, took,
             1000 * took / len(scored)))
    if a.compare:
        other = through_json(a.bin, a.index, a.limit, tmp)
        differ = [i for i, (x, y) in enumerate(zip(checked, other)) if x[0] != y[0]]
        gap = max(abs(x[1] - y[1]) for x, y in zip(checked, other))
        print("against JSON lines: %d messages; verdicts differ on %d %s (an empty model: spamd says ham, "
              "JSON lines publish no label); largest margin difference %.2g"
              % (len(other), len(differ), differ[:5], gap))


main()
