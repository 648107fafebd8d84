#!/usr/bin/env python3
"""Crash soak: kill -9 the daemon at random points over a whole stream and
check that it ends with the uninterrupted run's model, nothing lost or
learned twice.

    scripts/soak.py [--kills 100] [--input FILE] [--transport jsonl|kafka|both] [--seed S]

JSON lines: `classifyd run --input FILE` is started, killed with SIGKILL
after a random 20-400 ms, restarted (it resumes from its checkpoint), and so
on for --kills kills; then run to the end. Kafka: the stream (its labeled
lines) is loaded into a one-partition topic, and `classifyd run --brokers`
is killed and restarted the same way (a random 0.5-6 s each, so some kills
land before the group has assigned the partition), then left to drain. Each
ends compared with an uninterrupted JSON-lines run over the same lines:
the same model digest (`classifyd inspect --json`: labels, weights,
averaging and optimizer state, version), the same learned count and
position. Checkpoints every 50 updates, so most kills lose uncheckpointed
work that the restart must learn again exactly once.

Labels carry reporters (issue 28): each labeled line names one of ten
honest reporters, and one line in twenty comes from a flooder with its
label flipped, so the reporters' trust and the labels held for the
flooder are part of what must resume exactly (the comparison covers them
too: `inspect`'s label counts and least trusted reporters).
--no-reporters soaks the stream as it is.

Labels taken back (issue 48): unless --no-corrections, the stream also
carries what users do with labels: three labels in ten come late as
feedback lines (one in ten of those delivered twice), some labeled lines
are delivered twice, half the flooder's labels are corrected 100 lines
later by the trusted "reviewer", and one labeled message in fifty is
forgotten 150 lines later (`"forget": true`, from the reviewer or
anonymously). All of it goes through one partition on Kafka, in order.

Lessons (issue 63): with --lessons N, once the stream is learned, N mail
lessons are taught over spamc (`-L spam|ham|forget`, `-C report|revoke`)
and rspamc (`learn_spam`, `learn_ham`), one after another, while the
daemon (with its spamd and rspamd controller endpoints) is killed and
restarted --kills times; a lesson whose answer a kill cut off is sent
again to the next daemon, as a client retries. It must end with the model
of an uninterrupted daemon taught the same lessons: every acknowledged
lesson learned exactly once (a lesson learned but unanswered, sent again,
is "already learned": labels are facts). On Kafka the learner takes the
lessons (its lessons log is its own disk).

Faults (issue 70): with --faults, the lessons soak also mixes in, at
random while teaching, a full disk for a moment (the running daemon's
file size limit set to its lessons log's size plus a few bytes, then
lifted: the append fails part-way) and, on Kafka, a broker pause (SIGSTOP
of the test broker for 2-6 s, then SIGCONT). A lesson refused under a
fault must fail in its client (spamc exits 74, rspamc non-zero; spamc -C
runs with -x) and be sent again; one that exits 0 must be learned: the
final model is compared as above, and no lesson refused under a fault may
have been applied (a refused lesson applied shows as a repeated label
when it is sent again: only the answers a kill cut off may).

To narrow a difference down: SOAK_KINDS=0,1 (only those kinds of lesson,
by their place in lessons_of's list), SOAK_TERM=1 (SIGTERM instead of
SIGKILL: a restart's state, not a crash's), SOAK_LOG=FILE (the daemons'
logs), SOAK_ANSWERS=FILE (each acknowledged lesson's answer, the
reference's first, and where the kills fell), SOAK_DEBUG=1 (what a lesson
not acknowledged said).

Kafka needs KAFKA_BOOTSTRAP, or starts the test broker (scripts/broker.sh).
tests/jsonl_daemon.rs and tests/kafka.rs run the short version (3 and 4
kills) in the test suite. Exits 1 on any difference.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# CLASSIFYD_BIN: another build (a copy, so that a rebuild during a soak does not change it).
BIN = os.environ.get("CLASSIFYD_BIN", os.path.join(ROOT, "target", "release", "classifyd"))
FLAGS = ["--bits", "18", "--checkpoint-every-updates", "50", "--checkpoint-interval-secs", "3600",
         "--trusted-reporter", "reviewer"]


def inspect(ckdir):
    out = subprocess.run([BIN, "inspect", "--checkpoint-dir", ckdir, "--json"], check=True, capture_output=True, text=True)
    i = json.loads(out.stdout)
    return {
        "digest": i["model_digest"],
        "version": i["version"],
        "examples": i["progressive"]["examples"],
        "positions": {k: v for k, v in i["positions"].items()},
        "feedback": i["feedback"],
    }


def with_reporters(src, dst, rng):
    """Copies the stream, naming a reporter on each labeled line: one of
    ten honest ones, or (one line in twenty) a flooder flipping it."""
    lines = [l for l in src]
    labels = sorted({json.loads(l).get("label") for l in lines if '"label"' in l} - {None})
    for line in lines:
        v = json.loads(line) if line.strip() else None
        if not isinstance(v, dict) or not isinstance(v.get("label"), str):
            dst.write(line)
            continue
        if rng.random() < 0.05 and len(labels) > 1:
            v["label"] = rng.choice([l for l in labels if l != v["label"]])
            v["reporter"] = "flooder"
        else:
            v["reporter"] = f"r-{rng.randrange(10)}"
        dst.write(json.dumps(v) + "\n")


def with_corrections(src, dst, rng):
    """Copies a stream whose labeled lines carry ids (and reporters, from
    with_reporters), adding what users do with labels: late feedback,
    duplicates, corrections and forgets (see the module doc)."""
    rows = [json.loads(l) for l in src if l.strip()]
    labels = sorted({r["label"] for r in rows if isinstance(r, dict) and isinstance(r.get("label"), str)})
    gold_of = {}
    pending = []  # (due line, record)
    out = []
    for i, v in enumerate(rows):
        label = v.get("label") if isinstance(v, dict) else None
        if not isinstance(label, str) or "id" not in v:
            out.append(v)
            continue
        mid = str(v["id"])
        true = gold_of.setdefault(mid, label)
        if v.get("reporter") == "flooder":
            # with_reporters flipped it: the gold is the other label
            true = None
        if rng.random() < 0.3:
            fb = {"id": mid, "label": label, "reporter": v.get("reporter", "r-0")}
            out.append({k: x for k, x in v.items() if k not in ("label", "reporter")})
            due = i + rng.randrange(1, 50)
            pending.append((due, fb))
            if rng.random() < 0.1:
                pending.append((due, fb))
        else:
            out.append(v)
            if rng.random() < 0.03:
                out.append(v)
        if true is None and rng.random() < 0.5:
            others = [l for l in labels if l != label]
            if others:
                pending.append((i + 100, {"id": mid, "label": others[0], "reporter": "reviewer"}))
        if rng.random() < 0.02:
            forget = {"id": mid, "forget": True}
            if rng.random() < 0.5:
                forget["reporter"] = "reviewer"
            pending.append((i + 150, forget))
        pending.sort(key=lambda p: p[0])
        while pending and pending[0][0] <= i:
            out.append(pending.pop(0)[1])
    out += [p[1] for p in pending]
    for v in out:
        dst.write(json.dumps(v) + "\n")


def run_to_end(args, env=None):
    subprocess.run([BIN, "run", *args, *FLAGS], check=True, stdout=subprocess.DEVNULL, env=env)


def soak_jsonl(stream, kills, rng, tmp):
    ref = os.path.join(tmp, "ref")
    run_to_end(["--input", stream, "--output", "/dev/null", "--checkpoint-dir", ref])
    want = inspect(ref)
    ck = os.path.join(tmp, "soak")
    done = 0
    finished_early = 0
    while done < kills:
        p = subprocess.Popen(
            [BIN, "run", "--input", stream, "--output", "/dev/null", "--checkpoint-dir", ck, *FLAGS],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.02, 0.4))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
            done += 1
        else:
            # The stream ended before this kill: the checkpoint covers it
            # all; start over from nothing, so the kills stay spread over it.
            finished_early += 1
            got = inspect(ck)
            if got != want:
                return report("jsonl", done, want, got)
            subprocess.run(["rm", "-rf", ck], check=True)
    run_to_end(["--input", stream, "--output", "/dev/null", "--checkpoint-dir", ck])
    got = inspect(ck)
    return report("jsonl", done, want, got, finished_early)


def lessons_jsonl(stream, lessons, kills, rng, tmp, faults=False):
    """The stream learned to its end (two directories alike), then the
    lessons soak over JSON-lines daemons that have nothing left to read."""
    ref, ck = os.path.join(tmp, "lref"), os.path.join(tmp, "lsoak")
    for d in (ref, ck):
        run_to_end(["--input", stream, "--output", "/dev/null", "--checkpoint-dir", d])

    def daemon(d, spamd, controller):
        return [BIN, "run", "--input", stream, "--output", "/dev/null", "--checkpoint-dir", d, *FLAGS,
                "--spamd-addr", spamd, "--rspamd-controller-addr", controller]
    return soak_lessons("jsonl", daemon, lessons, kills, rng, ck, ref,
                        faults=Faults(random.Random(rng.random()), ck) if faults else None)


def lessons_kafka(stream, lessons, kills, rng, tmp, brokers, faults=False, broker_pid=None):
    """The stream loaded into a topic and drained by a learner (its
    reference on JSON lines), then the lessons soak over Kafka learners."""
    topic, labeled, n = kafka_topic(brokers, tmp, stream, "kl")
    ref, ck = os.path.join(tmp, "klref"), os.path.join(tmp, "klsoak")
    run_to_end(["--input", labeled, "--output", "/dev/null", "--checkpoint-dir", ref])
    args = [BIN, "run", "--brokers", brokers, "--input-topic", topic, "--group-id", topic + "-g",
            "--feedback-topic", topic + "-fb", "--checkpoint-dir", ck, *FLAGS]
    drain(args, ck, topic, n)

    def daemon(d, spamd, controller):
        if d == ref:
            return [BIN, "run", "--input", labeled, "--output", "/dev/null", "--checkpoint-dir", d, *FLAGS,
                    "--spamd-addr", spamd, "--rspamd-controller-addr", controller]
        return [*args, "--spamd-addr", spamd, "--rspamd-controller-addr", controller]
    faults = Faults(random.Random(rng.random()), ck, broker_pid) if faults else None
    return soak_lessons("kafka", daemon, lessons, kills, rng, ck, ref, drains=True, faults=faults)


def produce(brokers, topic, stream):
    """Loads the stream's lines into `topic` (one partition, in order): its
    labeled and unlabeled messages, feedback lines and forgets alike."""
    import_lines = [l for l in open(stream) if l.strip()]
    path = os.path.join(os.path.dirname(stream), "labeled.jsonl")
    with open(path, "w") as f:
        f.writelines(import_lines)
    subprocess.run(
        [BIN, "demo-produce", "--brokers", brokers, "--input", path, "--input-topic", topic,
         "--feedback-topic", topic + "-fb", "--rate", "0", "--holdback-every", "0"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return path, len(import_lines)


def kafka_topic(brokers, tmp, stream, name):
    """A new one-partition topic (and its feedback topic) holding the
    stream's lines: (topic, the lines as loaded, how many)."""
    topic = "soak-" + uuid.uuid4().hex[:8]
    # One partition: the daemon reads the lines in the file's order.
    # (A daemon run for a few seconds creates it, with --topic-partitions 1.)
    subprocess.run(["timeout", "4", BIN, "run", "--brokers", brokers, "--input-topic", topic,
                    "--feedback-topic", topic + "-fb", "--group-id", topic + "-create", "--topic-partitions", "1",
                    "--checkpoint-dir", os.path.join(tmp, name + "create")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    labeled, n = produce(brokers, topic, stream)
    return topic, labeled, n


def drain(args, ck, topic, n):
    """Runs `args` (a daemon on `topic`, checkpointing every second) until
    its checkpoint has read the `n` lines of the topic, then stops it."""
    p = subprocess.Popen([a if a != "3600" else "1" for a in args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if inspect(ck)["positions"].get(f"{topic}/0") == n:
                break
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    p.wait()


def soak_kafka(stream, kills, rng, tmp, brokers):
    topic, labeled, n = kafka_topic(brokers, tmp, stream, "k")
    group = topic + "-g"
    ref = os.path.join(tmp, "kref")
    run_to_end(["--input", labeled, "--output", "/dev/null", "--checkpoint-dir", ref])
    want = inspect(ref)
    ck = os.path.join(tmp, "ksoak")
    args = [BIN, "run", "--brokers", brokers, "--input-topic", topic, "--group-id", group,
            "--feedback-topic", topic + "-fb", "--checkpoint-dir", ck, *FLAGS]
    for done in range(kills):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 6.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
    # The last run checkpoints every second, so its end shows in the checkpoint.
    drain(args, ck, topic, n)
    got = inspect(ck)
    got["positions"] = {k: v for k, v in got["positions"].items() if k.startswith(topic + "/")}
    want["positions"] = {f"{topic}/0": n}
    return report("kafka", kills, want, got)


def lessons_of(n, rng):
    """`n` lessons about `n // 3` messages: (client, args, message), so
    that some messages are taught, relabeled, forgotten and taught again."""
    words = ["cash", "prize", "lunch", "meeting", "free", "tonight", "claim", "call", "mum", "offer"]
    messages = []
    for i in range(max(1, n // 3)):
        text = " ".join(rng.choice(words) for _ in range(8))
        messages.append(f"Message-ID: <soak-{i}@lessons>\nSubject: {text}\n\n{text} {i}\n".encode())
    kinds = [("spamc", ["-L", "spam"]), ("spamc", ["-L", "ham"]), ("spamc", ["-L", "forget"]),
             ("spamc", ["-C", "report"]), ("spamc", ["-C", "revoke"]),
             ("rspamc", ["learn_spam"]), ("rspamc", ["learn_ham"])]
    if os.environ.get("SOAK_KINDS"):
        kinds = [kinds[int(k)] for k in os.environ["SOAK_KINDS"].split(",")]
    return [(*rng.choice(kinds), rng.choice(messages)) for _ in range(n)]


def teach(lesson, spamd, controller):
    """Sends one lesson, as the trusted reviewer (random relabels from
    anyone else would soon be held as a flooder's); whether it was
    acknowledged (learned, or known already)."""
    client, args, raw = lesson
    if client == "spamc":
        host, port = spamd.rsplit(":", 1)
        # -x: without it spamc -C exits 0 for any failure (its "safe fallback").
        cmd = ["spamc", "-x", "-d", host, "-p", port, "-t", "10", "-u", "reviewer", *args]
    else:
        cmd = ["rspamc", "-h", controller, "-t", "10", "-u", "reviewer", *args]
    try:
        done = subprocess.run(cmd, input=raw, capture_output=True, timeout=20)
    except subprocess.TimeoutExpired:
        return False
    out = done.stdout.decode(errors="replace")
    acknowledged = any(s in out for s in ("successfully", "already", "success = true"))
    if acknowledged != (done.returncode == 0):
        raise RuntimeError(f"{client} {args} exited {done.returncode} but said {out!r}: "
                           "a refusal must be a failure to the client, an answer a success")
    if acknowledged and os.environ.get("SOAK_ANSWERS"):
        with open(os.environ["SOAK_ANSWERS"], "a") as f:
            f.write(f"{client} {' '.join(args)} {raw[12:30]!r} {'already' if 'already' in out else 'done'}\n")
    if not acknowledged and os.environ.get("SOAK_DEBUG"):
        print(f"not acknowledged: {client} {args}: {out!r}", file=sys.stderr)
    return acknowledged


def free_addr():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def serve(cmd, spamd):
    """Starts `cmd` (a daemon with its endpoints) and waits until spamd listens."""
    import socket
    err = open(os.environ["SOAK_LOG"], "a") if os.environ.get("SOAK_LOG") else subprocess.DEVNULL
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    host, port = spamd.rsplit(":", 1)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"the daemon did not listen: {cmd}")


def settled(ck, quiet=4.0, deadline=300):
    """Waits until `ck`'s checkpoint stops moving for `quiet` seconds (a
    daemon that checkpoints every second has read all there is)."""
    last, since, end = None, time.time(), time.time() + deadline
    while time.time() < end:
        try:
            now = inspect(ck)
        except subprocess.CalledProcessError:
            now = None
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return
        time.sleep(0.5)


class Faults:
    """The faults mixed into a lessons soak (--faults): a full disk for a
    moment (a file size limit on the running daemon, just past its lessons
    log), and on Kafka a broker pause. `on` says whether one is in force."""

    def __init__(self, rng, ck, broker_pid=None):
        self.rng, self.ck, self.broker_pid = rng, ck, broker_pid
        self.on, self.count = False, {"full_disk": 0, "broker_pause": 0}

    def log_bytes(self):
        return sum(os.path.getsize(os.path.join(self.ck, f)) for f in os.listdir(self.ck)
                   if f.startswith("lessons-"))

    def maybe(self, pid):
        """Now and then starts a fault on daemon `pid` (one at a time)."""
        import resource
        import threading
        if self.on or self.rng.random() > 0.08:
            return
        self.on = True
        if self.broker_pid and self.rng.random() < 0.3:
            os.kill(self.broker_pid, signal.SIGSTOP)
            self.count["broker_pause"] += 1

            def lift():
                os.kill(self.broker_pid, signal.SIGCONT)
                self.on = False
            threading.Timer(self.rng.uniform(2, 6), lift).start()
            return
        try:
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (self.log_bytes() + self.rng.randint(1, 40), hard))
        except (ProcessLookupError, OSError):
            self.on = False
            return
        self.count["full_disk"] += 1

        def lift():
            try:
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
            except (ProcessLookupError, OSError):
                pass
            self.on = False
        threading.Timer(self.rng.uniform(0.05, 0.5), lift).start()


def soak_lessons(name, daemon, lessons, kills, rng, ck, ref, drains=False, faults=None):
    """Teaches `lessons` to `daemon(ck, spamd, controller)` (a command line)
    while killing it `kills` times (and with `faults`, mixing them in),
    then to an uninterrupted one over `ref`; whether both end with the
    same model."""
    spamd, controller = free_addr(), free_addr()
    p = serve(daemon(ref, spamd, controller), spamd)
    for lesson in lessons:
        if not teach(lesson, spamd, controller):
            raise RuntimeError(f"the uninterrupted daemon refused a lesson: {lesson[:2]}")
    p.send_signal(signal.SIGTERM)
    p.wait()
    want = inspect(ref)
    import threading
    done, at, retried, refused = 0, 0, 0, 0
    while at < len(lessons):
        p = serve(daemon(ck, spamd, controller), spamd)
        # The kill lands whenever it lands: between lessons, or in the
        # middle of one (its answer then lost, and it is sent again).
        stop = p.terminate if os.environ.get("SOAK_TERM") else p.kill
        killer = threading.Timer(rng.uniform(0.02, 0.4), stop) if done < kills else None
        if killer:
            killer.start()
        while at < len(lessons) and p.poll() is None:
            if faults:
                faults.maybe(p.pid)
            if teach(lessons[at], spamd, controller):
                at += 1
            elif p.poll() is None and faults and faults.on:
                # Refused under a fault (the daemon lives): sent again.
                refused += 1
                time.sleep(0.05)
            else:
                retried += 1
        if killer:
            killer.join()
            done += 1
            if os.environ.get("SOAK_ANSWERS"):
                with open(os.environ["SOAK_ANSWERS"], "a") as f:
                    f.write(f"KILL before lesson {at}\n")
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        p.wait()
    # The last daemon may have been killed (or stopped twice: a second
    # SIGTERM exits at once): one more start learns what its checkpoint
    # lacks (from the lessons log; on Kafka from the topic, read to its
    # end: `drains`), and its stop checkpoints it.
    last = daemon(ck, spamd, controller)
    if drains:
        last = [a if a != "3600" else "1" for a in last]
    p = serve(last, spamd)
    if drains:
        settled(ck)
    p.send_signal(signal.SIGTERM)
    p.wait()
    got = inspect(ck)
    for k in ("positions",):
        got.pop(k, None)
        want.pop(k, None)
    # A lesson learned whose answer a kill cut off comes again, and is
    # counted as a repeated label, or a forget that finds nothing (known
    # already: nothing learned or forgotten twice).
    again = 0
    for counter in ("labels_repeated", "forgets_unmatched"):
        extra = got["feedback"][counter] - want["feedback"][counter]
        got["feedback"][counter] -= extra
        again += extra
    print(f"{name} lessons: {len(lessons)} acknowledged, {retried} answers lost to a kill and sent again "
          f"({again} of them had been applied: repeated, not applied twice), {done} kills while teaching")
    if faults:
        print(f"{name} faults: {faults.count['full_disk']} full disks, {faults.count['broker_pause']} broker "
              f"pauses; {refused} lessons refused under them (each a failure to its client) and sent again")
    # Only answers a kill cut off may have been applied before their
    # retry: a lesson refused under a fault never was.
    return report(f"{name} lessons", done, want, got) and 0 <= again <= retried


def report(name, kills, want, got, finished_early=0):
    same = want == got
    extra = f", {finished_early} runs ended before their kill" if finished_early else ""
    print(f"{name}: {kills} kills{extra}: {'final model identical' if same else 'DIFFERENT'} "
          f"(digest {got['digest']}, version {got['version']}, {got['examples']} examples counted once)")
    if not same:
        print(f"  want {want}\n  got  {got}")
    return same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--input", default=os.path.join(ROOT, "..", "shared", "data", "sms_spam_collection", "stream.jsonl"))
    ap.add_argument("--transport", default="both", choices=["jsonl", "kafka", "both"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-reporters", action="store_true")
    ap.add_argument("--no-corrections", action="store_true")
    ap.add_argument("--lessons", type=int, default=0, help="mail lessons to teach, with kills, after the stream")
    ap.add_argument("--faults", action="store_true",
                    help="with --lessons: mix in full disks (and on Kafka broker pauses) while teaching")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    rng = random.Random(a.seed)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        stream = os.path.join(tmp, "stream.jsonl")
        plain = os.path.join(tmp, "plain.jsonl")
        with open(a.input) as src, open(plain, "w") as dst:
            if a.no_reporters:
                dst.writelines(src)
            else:
                with_reporters(src, dst, random.Random(a.seed))
        with open(plain) as src, open(stream, "w") as dst:
            if a.no_corrections:
                dst.writelines(src)
            else:
                with_corrections(src, dst, random.Random(a.seed + 1))
        lessons = lessons_of(a.lessons, random.Random(a.seed + 2))
        if a.transport in ("jsonl", "both") and lessons:
            ok &= lessons_jsonl(stream, lessons, a.kills, rng, tmp, a.faults)
        elif a.transport in ("jsonl", "both"):
            ok &= soak_jsonl(stream, a.kills, rng, tmp)
        if a.transport in ("kafka", "both"):
            brokers = os.environ.get("KAFKA_BOOTSTRAP")
            started = False
            if not brokers:
                os.environ["CLASSIFYD_BROKER_RUN"] = os.path.join(tmp, "broker")
                out = subprocess.run([os.path.join(ROOT, "scripts", "broker.sh"), "start"], check=True,
                                     capture_output=True, text=True).stdout
                brokers = out.strip().split("=", 1)[1]
                started = True
            try:
                if lessons:
                    pid = os.environ.get("KAFKA_BROKER_PID")
                    if started:
                        with open(os.path.join(os.environ["CLASSIFYD_BROKER_RUN"], "broker.pid")) as f:
                            pid = f.read()
                    ok &= lessons_kafka(stream, lessons, a.kills, rng, tmp, brokers, a.faults,
                                        int(pid) if pid else None)
                else:
                    ok &= soak_kafka(stream, a.kills, rng, tmp, brokers)
            finally:
                if started:
                    subprocess.run([os.path.join(ROOT, "scripts", "broker.sh"), "stop"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
