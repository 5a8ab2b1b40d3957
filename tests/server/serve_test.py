#!/usr/bin/env python3
"""`ree-launch serve` on the CPU, loopback only (docs/serving.md; issue 26).

1. The official openai client: completions, streaming and not, greedy and sampled, text and token
   id prompts, stop strings, n > 1 (equal to a run with the prompt n times). Text, ids and every
   step's logits hash equal `ree-launch run` for the same prompt, seed and sampling, bitwise (a
   stop string ends the generation at the engine: the ids are the run's up to the token that
   completes it, finish_reason "stop" in the receipt); every receipt is served at
   /v1/receipts/{id}, carries the response's sha256 and verifies with `ree-launch verify` on 1
   and 2 stages.
1b. Continuous batching: a short request sent while a long stream decodes joins its batch,
   finishes first, and equals its single run bitwise (text, ids, logits hashes; its receipt
   verifies on the CPU); /metrics counts it as joined and stays in the Prometheus text format.
2. Load: 8 clients x 5 mixed requests (REE_SERVE_CLIENTS x REE_SERVE_PER_CLIENT; greedy and
   sampled, streaming and not, some streams cancelled): every completed answer equals its single
   run; the receipt directory holds exactly one receipt per accepted request (none lost, none
   duplicated, cancelled ones included: stopped where the client left); afterwards no request
   waits or runs and no KV block is held (cancelled ones leaked no slot); p50/p99 latency and
   tokens/s are printed.
2b. Disconnects: a stream closed after two chunks and a non-streaming client that closes stop
   their generations at the engine (receipts with finish_reason "stop" and few tokens, verified);
   the streams beside them finish equal to their runs; /metrics shows no request running and no
   KV cache block used afterwards.
3. Malformed requests: each gets a 4xx with the OpenAI error shape; the server keeps serving.
4. SIGTERM: a stream in flight finishes with its receipt, then the server exits 0.
5. Restart on the same receipt directory: the receipts already returned are still served; a
   second server on the same port is refused.
6. Chat: a copy of the built-in model with a chat template; the openai client's chat completions
   (streaming and not) equal `ree-launch run --no-special-tokens` of the rendered prompt, bitwise.
7. A full queue (--max-queue 1): the requests beyond it get 429 queue_full, the others answers.
And first: bad `serve` flags get one line naming the flag and exit 2.

usage: serve_test.py REE_LAUNCH WORKDIR [PARTS]
PARTS: a comma-separated subset of
flags,basic,logprobs,continuous,load,disconnect,malformed,drain,restart,chat,queue
(default all), e.g.
"malformed,drain" for a quick run of a sanitizer build.
"""
import concurrent.futures
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

try:
    import openai
except ImportError:  # requirements.txt pins it; a venv without it skips visibly
    print("SKIP: the openai package is not installed (pip install -r requirements.txt)")
    sys.exit(77)

for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
    os.environ.pop(name, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "*"

LAUNCH, WORK = sys.argv[1], sys.argv[2]
# The load part's size; CI keeps the default, e.g. REE_SERVE_CLIENTS=32 REE_SERVE_PER_CLIENT=16 for
# the 500 requests from 32 clients.
CLIENTS = int(os.environ.get("REE_SERVE_CLIENTS", "8"))
PER_CLIENT = int(os.environ.get("REE_SERVE_PER_CLIENT", "5"))
PARTS = (sys.argv[3] if len(sys.argv) > 3 else
         "flags,basic,logprobs,continuous,load,disconnect,malformed,drain,restart,chat,queue").split(",")
MODEL = "builtin:tiny-llama"
API_KEY = "test-key-123"
MAX_CONTEXT = 256
RECEIPTS = os.path.join(WORK, "receipts")
FAILURES = []
KEPT = []  # receipt files of the first part, fetched again after a restart


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)
    return condition


# ---- the server ---------------------------------------------------------------------------------
def start_server():
    proc = subprocess.Popen(
        [LAUNCH, "serve", "--model", MODEL, "--cpu-only", "--port", "0", "--max-batch", "8",
         "--max-context", str(MAX_CONTEXT), "--receipt-dir", RECEIPTS, "--api-key", API_KEY,
         "--max-body-bytes", "65536"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on http://127.0.0.1:" not in line:
        proc.kill()
        sys.exit("server did not start: %r %s" % (line, proc.stderr.read()))
    port = int(line.split("127.0.0.1:")[1].split()[0])
    return proc, port


def raw(port, method, path, body=None, headers=None, auth=True):
    """One HTTP exchange on a fresh connection: (status, headers, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    hdrs = dict(headers or {})
    if auth:
        hdrs["Authorization"] = "Bearer " + API_KEY
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=hdrs)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


# ---- single runs (the reference) ----------------------------------------------------------------
RUN_CACHE = {}
RUN_LOCK = threading.Lock()


def spec_key(spec):
    return json.dumps(spec, sort_keys=True)


def single_run(spec):
    return runs(spec, 1)[0]


def runs(spec, copies):
    """`ree-launch run` with the prompt `copies` times (requests 0..copies-1): one result each."""
    key = spec_key(spec) + str(copies)
    with RUN_LOCK:
        if key in RUN_CACHE:
            return RUN_CACHE[key]
    cmd = [LAUNCH, "run", "--model", spec.get("model_dir", MODEL), "--cpu-only", "--json",
           "--max-context", str(MAX_CONTEXT), "--max-new-tokens", str(spec["max_tokens"]),
           "--temperature", repr(spec.get("temperature", 0.0)),
           "--top-p", repr(spec.get("top_p", 1.0)), "--top-k", str(spec.get("top_k", 0)),
           "--seed", str(spec.get("seed", 0))]
    if spec.get("no_special_tokens"):
        cmd.append("--no-special-tokens")
    if copies > 1:
        line = {"prompt": spec["prompt"]} if isinstance(spec["prompt"], str) else {
            "prompt_ids": spec["prompt"]}
        path = os.path.join(WORK, "prompts-%s.jsonl" % hashlib.sha256(key.encode()).hexdigest())
        with open(path, "w") as f:
            f.write((json.dumps(line) + "\n") * copies)
        cmd += ["--prompt-file", path]
    elif isinstance(spec["prompt"], str):
        cmd += ["--prompt-text", spec["prompt"]]
    else:
        cmd += ["--prompt-ids", ",".join(map(str, spec["prompt"]))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit("ree-launch run failed: %s" % out.stderr)
    result = [json.loads(line) for line in out.stdout.splitlines()]
    with RUN_LOCK:
        RUN_CACHE[key] = result
    return result


def cut_at_stop(text, stops):
    """The server's rule: the stop string complete first (smallest end), earlier start on a tie."""
    best = None
    for stop in stops:
        at = text.find(stop)
        if at >= 0 and (best is None or (at + len(stop), at) < best):
            best = (at + len(stop), at)
    return (text, False) if best is None else (text[:best[1]], True)


def request_args(spec):
    args = {"model": MODEL, "prompt": spec["prompt"], "max_tokens": spec["max_tokens"],
            "temperature": spec.get("temperature", 0.0), "top_p": spec.get("top_p", 1.0),
            "seed": spec.get("seed", 0)}
    extra = {}
    if spec.get("top_k"):
        extra["top_k"] = spec["top_k"]
    if spec.get("stop"):
        args["stop"] = spec["stop"]
    return args, extra


def complete(client, spec, stream, cancel_after=None, on_chunk=None):
    """One completion through the openai client. Returns a dict with text, token_ids,
    finish_reason, receipt (id, sha256), usage, the header's receipt id, and cancelled."""
    args, extra = request_args(spec)
    if not stream:
        raw_resp = client.completions.with_raw_response.create(**args, extra_body=extra)
        c = raw_resp.parse()
        choice = c.choices[0]
        return {"text": choice.text, "token_ids": choice.model_extra["token_ids"],
                "finish_reason": choice.finish_reason, "receipt": c.model_extra["receipt"],
                "usage": c.usage.model_dump(), "header_id": raw_resp.headers.get("x-ree-receipt-id"),
                "header_sha": raw_resp.headers.get("x-ree-receipt-sha256"), "id": c.id,
                "cancelled": False}
    raw_resp = client.completions.with_raw_response.create(
        **args, stream=True, stream_options={"include_usage": True}, extra_body=extra)
    header_id = raw_resp.headers.get("x-ree-receipt-id")
    stream_obj = raw_resp.parse()
    out = {"text": "", "token_ids": [], "finish_reason": None, "receipt": None, "usage": None,
           "header_id": header_id, "header_sha": None, "id": None, "cancelled": False}
    for n, chunk in enumerate(stream_obj):
        if on_chunk is not None and n == 0:
            on_chunk()
        if cancel_after is not None and n >= cancel_after:
            stream_obj.close()
            out["cancelled"] = True
            return out
        out["id"] = chunk.id
        extra_fields = chunk.model_extra or {}
        if extra_fields.get("receipt"):
            out["receipt"] = extra_fields["receipt"]
        if chunk.usage is not None and not chunk.choices:
            out["usage"] = chunk.usage.model_dump()
        for choice in chunk.choices:
            out["text"] += choice.text
            out["token_ids"] += (choice.model_extra or {}).get("token_ids", [])
            if choice.finish_reason is not None:
                out["finish_reason"] = choice.finish_reason
    return out


def expected_answer(spec):
    ref = single_run({k: v for k, v in spec.items() if k != "stop"})
    text, stopped = cut_at_stop(ref["text"], spec.get("stop") or [])
    reason = "stop" if stopped or ref["finish_reason"] == "eos" else "length"
    return ref, text, reason


def expected_ids(spec, ref):
    """The run's ids up to the first token whose text completes a stop string (the engine stops
    there), and whether one did. The builtin model's ids 0..255 are bytes."""
    stops = spec.get("stop") or []
    for n in range(1, len(ref["output_ids"]) + 1):
        text = bytes(i for i in ref["output_ids"][:n] if i < 256).decode("utf-8", "replace")
        if cut_at_stop(text, stops)[1]:
            return ref["output_ids"][:n], n < len(ref["output_ids"])
    return ref["output_ids"], False


def check_answer(port, spec, got, label):
    ref, text, reason = expected_answer(spec)
    ids, stopped_early = expected_ids(spec, ref)
    ok = check(got["text"] == text, "%s: text %r != run's %r" % (label, got["text"], text))
    ok &= check(got["token_ids"] == ids,
                "%s: token ids %s != run's %s" % (label, got["token_ids"], ids))
    ok &= check(got["finish_reason"] == reason,
                "%s: finish_reason %s != %s" % (label, got["finish_reason"], reason))
    usage = got["usage"] or {}
    ok &= check(usage.get("completion_tokens") == len(ids) and
                usage.get("prompt_tokens") == len(ref["prompt_ids"]), "%s: usage %s" % (label, usage))
    receipt_id = got["receipt"]["id"]
    ok &= check(got["header_id"] == receipt_id == got["id"], "%s: ids differ" % label)
    status, _, body = raw(port, "GET", "/v1/receipts/" + receipt_id)
    if not check(status == 200, "%s: GET receipt -> %d" % (label, status)):
        return None
    receipt = json.loads(body)
    request = receipt["requests"][0]
    ok &= check(receipt["receipt_sha256"] == got["receipt"]["sha256"], "%s: receipt sha256" % label)
    ok &= check(request["output_ids"] == ids, "%s: receipt output ids != run's" % label)
    ok &= check(request["step_logits_sha256"] == ref["step_logits_sha256"][:len(ids)],
                "%s: receipt step logits hashes != run's" % label)
    ok &= check(request["finish_reason"] == ("stop" if stopped_early else ref["finish_reason"]),
                "%s: receipt finish_reason %s" % (label, request["finish_reason"]))
    path = os.path.join(RECEIPTS, receipt_id + ".json")
    ok &= check(os.path.isfile(path), "%s: receipt file missing" % label)
    return path


def verify(path, partitions):
    out = subprocess.run([LAUNCH, "verify", path, "--model", MODEL, "--cpu-only",
                          "--n-partitions", str(partitions)], capture_output=True, text=True,
                         timeout=60)
    return check(out.returncode == 0 and out.stdout.startswith("verified"),
                 "verify %s on %d stage(s): %s %s" % (path, partitions, out.stdout, out.stderr))


def verify_all(paths, partitions_list):
    jobs = [(p, n) for p in paths for n in partitions_list]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return sum(pool.map(lambda job: verify(*job), jobs))


# ---- 1. the openai client -----------------------------------------------------------------------
def client_for(port, key=API_KEY):
    return openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key=key, max_retries=0,
                         timeout=60)


def basic_part(port):
    client = client_for(port)
    specs = [
        {"prompt": "Hello world", "max_tokens": 16},
        {"prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0.8, "top_p": 0.9,
         "top_k": 50, "seed": 1234},
        {"prompt": [256, 72, 105, 33], "max_tokens": 10},
        {"prompt": "Sampled stream", "max_tokens": 14, "temperature": 1.3, "seed": 99},
    ]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(single_run, specs))
    paths = []
    for i, spec in enumerate(specs):
        for stream in (False, True):
            got = complete(client, spec, stream)
            path = check_answer(port, spec, got, "basic %d stream=%s" % (i, stream))
            if path:
                paths.append(path)
    # Stop strings: cut where the run's text first completes one, the generation stopped there at
    # the engine; streaming and not agree; their receipts (finish_reason "stop") verify.
    ref = single_run(specs[0])
    stop_spec = dict(specs[0], stop=[ref["text"][5:7], "never-there"])
    check(expected_ids(stop_spec, ref)[1], "stop: the stop string should end the run early")
    for stream in (False, True):
        got = complete(client, stop_spec, stream)
        path = check_answer(port, stop_spec, got, "stop stream=%s" % stream)
        if path:
            paths.append(path)
    paths += several_choices(port, client)
    models = client.models.list()
    check([m.id for m in models.data] == [MODEL], "models: %s" % models)
    try:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        check(False, "chat: expected a 400 (no chat template)")
    except openai.BadRequestError as error:
        check(error.body.get("code") == "chat_template_unavailable", "chat: %s" % error.body)
    try:
        client_for(port, key="wrong").completions.create(model=MODEL, prompt="x", max_tokens=1)
        check(False, "auth: a wrong key was accepted")
    except openai.AuthenticationError:
        pass
    status, _, body = raw(port, "GET", "/health", auth=False)
    check(status == 200 and json.loads(body)["status"] == "ok", "health: %d %s" % (status, body))
    status, _, body = raw(port, "GET", "/metrics", auth=False)
    text = body.decode()
    check(status == 200 and 'ree_http_responses_total{endpoint="completions",code="200"}' in text
          and "ree_request_latency_seconds_bucket" in text and "ree_queue_requests" in text,
          "metrics: %s" % text[:300])
    verified = verify_all(paths, [1, 2])
    KEPT.extend(paths)
    print("basic: %d answers (3 with n > 1) equal ree-launch run; %d verifications passed (1 and 2 "
          "stages)"
          % (len(paths), verified), flush=True)


def check_token_logprobs(label, token, logprob, top, greedy, n_top):
    """One token's logprobs: a log-probability, the top list sorted and of the asked size, and
    (greedy) the chosen token first in it with the same value, bit for bit."""
    check(logprob <= 0.0 and len(top) == n_top, "%s: logprob %r, %d alternatives" %
          (label, logprob, len(top)))
    values = [v for _, v in top]
    check(values == sorted(values, reverse=True), "%s: top_logprobs not sorted: %s" % (label, top))
    if greedy and top:
        check(top[0] == (token, logprob), "%s: the greedy token %r (%r) is not the first of %s"
              % (label, token, logprob, top))


def logprobs_part(port):
    """logprobs through the openai client: completions (logprobs = N) and their stream."""
    client = client_for(port)
    for spec in ({"prompt": "Hello world", "max_tokens": 12, "temperature": 0.0},
                 {"prompt": "The quick brown fox", "max_tokens": 10, "temperature": 0.9,
                  "seed": 5}):
        args = dict(model=MODEL, prompt=spec["prompt"], max_tokens=spec["max_tokens"],
                    temperature=spec["temperature"], seed=spec.get("seed", 0), logprobs=3)
        c = client.completions.create(**args)
        plain = client.completions.create(**dict(args, logprobs=None))
        lp = c.choices[0].logprobs
        ids = c.choices[0].model_extra["token_ids"]
        label = "logprobs %r" % spec["prompt"]
        check(plain.choices[0].logprobs is None and plain.choices[0].text == c.choices[0].text
              and plain.model_extra["receipt"]["sha256"] == c.model_extra["receipt"]["sha256"],
              "%s: logprobs changed the answer or its receipt" % label)
        check(len(lp.tokens) == len(ids) == len(lp.token_logprobs) == len(lp.top_logprobs)
              == len(lp.text_offset), "%s: lengths %s" % (label, lp))
        check("".join(lp.tokens) == c.choices[0].text, "%s: tokens %r do not make the text %r"
              % (label, lp.tokens, c.choices[0].text))
        offsets = [sum(len(t.encode()) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
        check(lp.text_offset == offsets, "%s: text_offset %s" % (label, lp.text_offset))
        for t, (token, value, top) in enumerate(zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)):
            check_token_logprobs("%s token %d" % (label, t), token, value,
                                 list(top.items()), spec["temperature"] == 0.0, len(top))
        # The stream's pieces concatenate to the whole answer's lists, value for value.
        pieces = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for chunk in client.completions.create(**args, stream=True):
            for choice in chunk.choices:
                if choice.logprobs is not None:
                    for key in pieces:
                        pieces[key] += getattr(choice.logprobs, key)
        check(pieces == {k: getattr(lp, k) for k in pieces},
              "%s: the stream's logprobs %s differ from %s" % (label, pieces, lp))
    print("logprobs: completions' logprobs have OpenAI's shape, agree with the text and the top "
          "lists, and the stream's pieces equal the whole answer's", flush=True)


def chat_logprobs(client, model_dir, messages):
    """Chat's logprobs (logprobs: true, top_logprobs: N), whole and streamed, and its 400s."""
    args = dict(model=model_dir, messages=messages, max_tokens=8, temperature=0, seed=0,
                logprobs=True, top_logprobs=2)
    c = client.chat.completions.create(**args)
    content = c.choices[0].logprobs.content
    ids = c.choices[0].model_extra["token_ids"]
    check(len(content) == len(ids) and "".join(e.token for e in content)
          == c.choices[0].message.content, "chat logprobs: %s" % content)
    for t, entry in enumerate(content):
        check(bytes(entry.bytes) == entry.token.encode(), "chat logprobs: bytes of %r" % entry)
        check_token_logprobs("chat token %d" % t, entry.token, entry.logprob,
                             [(a.token, a.logprob) for a in entry.top_logprobs], True, 2)
    streamed = []
    for chunk in client.chat.completions.create(**args, stream=True):
        for choice in chunk.choices:
            if choice.logprobs is not None:
                streamed += choice.logprobs.content
    check([e.model_dump() for e in streamed] == [e.model_dump() for e in content],
          "chat logprobs: the stream's %s differ from %s" % (streamed, content))
    for bad, param in [(dict(logprobs=3), "logprobs"), (dict(top_logprobs=21), "top_logprobs"),
                       (dict(logprobs=False, top_logprobs=2), "top_logprobs"),
                       (dict(top_logprobs=-1), "top_logprobs")]:
        try:
            client.chat.completions.create(**dict(args, **bad))
            check(False, "chat logprobs: %s was accepted" % bad)
        except openai.BadRequestError as error:
            check(error.body.get("param") == param, "chat logprobs %s: %s" % (bad, error.body))


def several_choices(port, client):
    """n > 1: the choices equal `ree-launch run` with the prompt n times (requests 0..n-1), and
    the receipt holds them as its n requests."""
    paths = []
    for spec, stream in [({"prompt": "Choices", "max_tokens": 9, "temperature": 0.9, "seed": 77,
                           "n": 3}, False),
                         ({"prompt": [256, 67, 104], "max_tokens": 7, "temperature": 1.2,
                           "top_k": 20, "seed": 3, "n": 2}, True),
                         ({"prompt": "Greedy pair", "max_tokens": 6, "n": 2}, False)]:
        n = spec["n"]
        refs = runs({k: v for k, v in spec.items() if k != "n"}, n)
        args, extra = request_args(spec)
        if stream:
            texts, ids, reasons, receipt = [""] * n, [[] for _ in range(n)], [None] * n, None
            for chunk in client.completions.create(**args, n=n, stream=True, extra_body=extra):
                receipt = (chunk.model_extra or {}).get("receipt") or receipt
                for c in chunk.choices:
                    texts[c.index] += c.text
                    ids[c.index] += (c.model_extra or {}).get("token_ids", [])
                    reasons[c.index] = c.finish_reason or reasons[c.index]
        else:
            c = client.completions.create(**args, n=n, extra_body=extra)
            choices = sorted(c.choices, key=lambda x: x.index)
            texts = [x.text for x in choices]
            ids = [x.model_extra["token_ids"] for x in choices]
            reasons = [x.finish_reason for x in choices]
            receipt = c.model_extra["receipt"]
        label = "n=%d stream=%s" % (n, stream)
        check(texts == [r["text"] for r in refs], "%s: texts %s" % (label, texts))
        check(ids == [r["output_ids"] for r in refs], "%s: ids %s" % (label, ids))
        check(reasons == ["stop" if r["finish_reason"] == "eos" else "length" for r in refs],
              "%s: finish reasons %s" % (label, reasons))
        status, _, body = raw(port, "GET", "/v1/receipts/" + receipt["id"])
        requests = json.loads(body)["requests"] if status == 200 else []
        check([r["step_logits_sha256"] for r in requests] == [r["step_logits_sha256"] for r in refs]
              and [r["index"] for r in requests] == list(range(n)),
              "%s: the receipt's requests are not the run's" % label)
        paths.append(os.path.join(RECEIPTS, receipt["id"] + ".json"))
    return paths


# ---- 2. load ------------------------------------------------------------------------------------
def load_specs(rng):
    specs = []
    for i in range(10):
        prompt = rng.choice(["Once upon a time", "Reproducible inference", "ab" * rng.randint(1, 20),
                             [256] + [rng.randrange(0, 256) for _ in range(rng.randint(1, 30))]])
        spec = {"prompt": prompt, "max_tokens": rng.randint(4, 24)}
        if i % 2:
            spec.update(temperature=rng.choice([0.5, 0.9, 1.5]), seed=rng.randrange(0, 2**64),
                        top_p=rng.choice([1.0, 0.95]), top_k=rng.choice([0, 40]))
        specs.append(spec)
    return specs


def load_part(port):
    rng = random.Random(26)
    specs = load_specs(rng)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(single_run, specs))
    # A cancelled stream closes after 1 to 6 chunks: while waiting, at its first tokens, mid-way.
    plan = [[(rng.choice(specs), rng.random() < 0.4,
              rng.randint(1, 6) if rng.random() < 0.15 else None)
             for _ in range(PER_CLIENT)] for _ in range(CLIENTS)]
    results, latencies, accepted = [], [], []
    lock = threading.Lock()

    def client_thread(jobs):
        client = client_for(port)
        for spec, stream, cancel in jobs:
            start = time.monotonic()
            got = complete(client, spec, stream or cancel is not None, cancel_after=cancel)
            with lock:
                latencies.append(time.monotonic() - start)
                accepted.append(got["header_id"])
                if not got["cancelled"]:
                    results.append((spec, got))

    before = {f for f in os.listdir(RECEIPTS) if f.endswith(".json")}
    start = time.monotonic()
    threads = [threading.Thread(target=client_thread, args=(jobs,)) for jobs in plan]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    paths = []
    for n, (spec, got) in enumerate(results):
        path = check_answer(port, spec, got, "load %d" % n)
        if path:
            paths.append(path)
    # Cancelled streams stop at the engine where their client left and leave their receipt (they
    # had tokens): wait for them.
    expected = set(accepted)
    check(len(expected) == len(accepted), "load: a receipt id was given twice")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        on_disk = {f[:-5] for f in os.listdir(RECEIPTS) if f.endswith(".json")}
        if expected <= on_disk:  # (the files of the first part are there too)
            break
        time.sleep(0.1)
    on_disk = {f[:-5] for f in os.listdir(RECEIPTS) if f.endswith(".json") and f not in before}
    check(expected == on_disk, "load: %d receipts lost, %d unexpected"
          % (len(expected - on_disk), len(on_disk - expected)))
    check(not any(f.endswith(".tmp") for f in os.listdir(RECEIPTS)), "load: a .tmp left behind")
    verified = verify_all(paths, [2])
    # The engine really batched: some batch carried several requests.
    metrics = dict(line.split(" ", 1) for line in raw(port, "GET", "/metrics", auth=False)[2]
                   .decode().splitlines() if line.startswith("ree_engine_batch"))
    batches, batched = int(metrics["ree_engine_batches_total"]), int(
        metrics["ree_engine_batched_requests_total"])
    check(batched > batches, "load: no engine batch held more than one request (%d in %d)"
          % (batched, batches))
    # Cancelled streams gave their slots back: nothing waits or runs, no KV block is held.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        values = metric_values(port)
        if (values.get("ree_running_requests") == 0 and values.get("ree_queue_requests") == 0 and
                values.get("ree_kv_cache_blocks_used") == 0):
            break
        time.sleep(0.05)
    check(values.get("ree_running_requests") == 0 and values.get("ree_queue_requests") == 0 and
          values.get("ree_kv_cache_blocks_used") == 0, "load: slots leaked: %s" % values)
    check(values.get("ree_engine_joined_requests_total", 0) > 0,
          "load: no request joined a running batch")
    check_prometheus(port, "load")
    lat = sorted(latencies)
    tokens = sum(len(got["token_ids"]) for _, got in results)
    print("load: %d requests from %d clients (%d completed, %d cancelled) in %.2f s; latency p50 "
          "%.3f s p99 %.3f s; %.1f tokens/s; %d receipts verified on 2 stages; %d requests in %d "
          "engine batches so far"
          % (len(accepted), CLIENTS, len(results), len(accepted) - len(results), wall,
             lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], tokens / wall,
             verified, batched, batches), flush=True)
    return expected


# ---- 1b. continuous batching ------------------------------------------------------------------
PROMETHEUS_LINE = re.compile(r'^(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+|'
                             r'[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"'
                             r'(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? [-+0-9.eEInfa]+)$')


def check_prometheus(port, label):
    text = raw(port, "GET", "/metrics", auth=False)[2].decode()
    bad = [line for line in text.splitlines() if not PROMETHEUS_LINE.match(line)]
    check(not bad, "%s: /metrics lines not in the Prometheus text format: %s" % (label, bad[:3]))


def continuous_part(port):
    """A short request sent while a long one decodes joins the running batch: it is answered
    first, with exactly what it gets alone (text, ids, logits hashes; its receipt verifies)."""
    client = client_for(port)
    long_spec = {"prompt": "Leaving early", "max_tokens": 240}  # no end-of-sequence before 240
    short_spec = {"prompt": "Short", "max_tokens": 4, "temperature": 0.9, "seed": 5}
    list(map(single_run, [long_spec, short_spec]))
    before = metric_values(port)
    done = {}

    def timed(name, spec, stream, first_chunk=None):
        got = complete(client, spec, stream, on_chunk=first_chunk)
        done[name] = (time.monotonic(), got)

    started = threading.Event()
    long_thread = threading.Thread(target=timed, args=("long", long_spec, True, started.set))
    long_thread.start()
    check(started.wait(60), "continuous: the long stream sent nothing")
    timed("short", short_spec, False)
    long_thread.join()
    check(done["long"][1]["finish_reason"] == "length", "continuous: the long request ended early")
    check(done["short"][0] < done["long"][0], "continuous: the short request did not finish first")
    paths = [check_answer(port, spec, done[name][1], "continuous %s" % name)
             for name, spec in (("long", long_spec), ("short", short_spec))]
    after = metric_values(port)
    joined = after["ree_engine_joined_requests_total"] - before["ree_engine_joined_requests_total"]
    check(joined >= 1, "continuous: no request joined a running batch (%s)" % joined)
    verified = verify_all([p for p in paths if p], [1])
    check_prometheus(port, "continuous")
    print("continuous: a %d-token request sent while a %d-token stream decoded joined it, finished "
          "first and equals its run; %d receipts verified (--cpu-only)"
          % (short_spec["max_tokens"], long_spec["max_tokens"], verified), flush=True)


# ---- 2b. disconnects ----------------------------------------------------------------------------
def metric_values(port):
    text = raw(port, "GET", "/metrics", auth=False)[2].decode()
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
            if line.startswith("ree_") and " " in line}


def open_stream(port, body):
    """A raw streaming request: the connection and its response, headers read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
                 headers={"Authorization": "Bearer " + API_KEY,
                          "Content-Type": "application/json"})
    return conn, conn.getresponse()


def stopped_receipt(label, receipt_id, max_tokens):
    """The receipt of a request whose client left: finish_reason "stop" (the engine ended it
    before max_tokens), and it verifies."""
    path = os.path.join(RECEIPTS, receipt_id + ".json")
    deadline = time.monotonic() + 20
    while not os.path.isfile(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not check(os.path.isfile(path), "%s: no receipt %s" % (label, receipt_id)):
        return 0
    request = json.load(open(path))["requests"][0]
    check(request["finish_reason"] == "stop" and len(request["output_ids"]) < max_tokens,
          "%s: the generation was not stopped early: %s after %d of %d tokens"
          % (label, request["finish_reason"], len(request["output_ids"]), max_tokens))
    return len(request["output_ids"]) if verify(path, 1) else 0


def disconnect_part(port):
    client = client_for(port)
    before = metric_values(port)
    long_body = {"model": MODEL, "prompt": "Leaving early", "max_tokens": 240, "temperature": 0}
    beside = [{"prompt": "Staying on", "max_tokens": 40},
              {"prompt": "Also staying", "max_tokens": 30, "temperature": 0.8, "seed": 11}]
    list(map(single_run, beside))
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        stays = [pool.submit(complete, client, spec, True) for spec in beside]
        # A stream closed after two chunks, in the same engine batch as the two above.
        conn, resp = open_stream(port, long_body)
        stream_id = resp.getheader("X-REE-Receipt-Id")
        lines = 0
        while lines < 2:
            if resp.fp.readline().startswith(b"data: "):
                lines += 1
        conn.sock.shutdown(2)
        conn.close()
        for n, (spec, future) in enumerate(zip(beside, stays)):
            check_answer(port, spec, future.result(), "disconnect: stream beside %d" % n)
    streamed = stopped_receipt("disconnect: stream", stream_id, long_body["max_tokens"])
    # A non-streaming client that closes while its answer is generated: its receipt is the
    # newest file (or none, had it left before the first token).
    existing = set(os.listdir(RECEIPTS))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps(dict(long_body, prompt="Gone")),
                 headers={"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"})
    time.sleep(0.05)
    conn.sock.shutdown(2)
    conn.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        values = metric_values(port)
        if (values.get("ree_running_requests") == 0 and values.get("ree_queue_requests") == 0 and
                values.get("ree_kv_cache_blocks_used") == 0):
            break
        time.sleep(0.05)
    check(values.get("ree_running_requests") == 0 and values.get("ree_kv_cache_blocks_used") == 0
          and values.get("ree_kv_cache_blocks", 0) > 0 and values.get("ree_kv_cache_usage") == 0,
          "disconnect: /metrics after the disconnects: %s" % values)
    check(values.get("ree_client_disconnects_total", 0) -
          before.get("ree_client_disconnects_total", 0) == 2,
          "disconnect: 2 disconnects expected, /metrics says %s"
          % values.get("ree_client_disconnects_total"))
    new = [f for f in set(os.listdir(RECEIPTS)) - existing if f.endswith(".json")]
    unstreamed = stopped_receipt("disconnect: non-streaming", new[0][:-5],
                                 long_body["max_tokens"]) if new else 0
    print("disconnect: a stream closed after 2 chunks stopped after %d of 240 tokens, a "
          "non-streaming client after %d; both receipts verified; the streams beside finished as "
          "their runs; no request running and no KV block used after" % (streamed, unstreamed),
          flush=True)


# ---- 3. malformed requests ----------------------------------------------------------------------
def malformed_cases():
    ok = {"model": MODEL, "prompt": "hi", "max_tokens": 2}

    def w(**fields):
        body = dict(ok)
        body.update(fields)
        return body

    post = "/v1/completions"
    return [
        ("not json", "POST", post, "{", {}),
        ("empty body", "POST", post, "", {}),
        ("array body", "POST", post, "[]", {}),
        ("repeated key", "POST", post, '{"prompt": "a", "prompt": "b", "max_tokens": 2}', {}),
        ("unknown field", "POST", post, w(frobnicate=1), {}),
        ("missing prompt", "POST", post, {"model": MODEL, "max_tokens": 2}, {}),
        ("empty prompt", "POST", post, w(prompt=""), {}),
        ("prompt number", "POST", post, w(prompt=5), {}),
        ("prompt list of strings", "POST", post, w(prompt=["a", "b"]), {}),
        ("id outside vocab", "POST", post, w(prompt=[1, 258]), {}),
        ("negative id", "POST", post, w(prompt=[-1]), {}),
        ("empty id list", "POST", post, w(prompt=[]), {}),
        ("max_tokens 0", "POST", post, w(max_tokens=0), {}),
        ("max_tokens -1", "POST", post, w(max_tokens=-1), {}),
        ("max_tokens string", "POST", post, w(max_tokens="10"), {}),
        ("max_tokens beyond context", "POST", post, w(max_tokens=MAX_CONTEXT), {}),
        ("prompt too long", "POST", post, w(prompt=[65] * (MAX_CONTEXT + 5)), {}),
        ("prompt too long, streaming", "POST", post,
         w(prompt=[65] * (MAX_CONTEXT + 5), stream=True), {}),
        ("text prompt too long, streaming", "POST", post,
         w(prompt="y" * (MAX_CONTEXT * 2), stream=True), {}),
        ("temperature NaN string", "POST", post, w(temperature="NaN"), {}),
        ("temperature NaN literal", "POST", post, '{"prompt": "a", "temperature": NaN}', {}),
        ("temperature negative", "POST", post, w(temperature=-1), {}),
        ("temperature overflow", "POST", post, '{"prompt": "a", "temperature": 1e999}', {}),
        ("top_p 0", "POST", post, w(top_p=0), {}),
        ("top_p 1.5", "POST", post, w(top_p=1.5), {}),
        ("top_k -5", "POST", post, w(top_k=-5), {}),
        ("seed -1", "POST", post, w(seed=-1), {}),
        ("seed 1.5", "POST", post, w(seed=1.5), {}),
        ("five stop strings", "POST", post, w(stop=["a", "b", "c", "d", "e"]), {}),
        ("empty stop string", "POST", post, w(stop=[""]), {}),
        ("stream not bool", "POST", post, w(stream="yes"), {}),
        ("stream_options without stream", "POST", post,
         w(stream_options={"include_usage": True}), {}),
        ("n 0", "POST", post, w(n=0), {}),
        ("n 129", "POST", post, w(n=129), {}),
        ("best_of unlike n", "POST", post, w(n=2, best_of=3), {}),
        ("logprobs 21", "POST", post, w(logprobs=21), {}),
        ("logprobs -1", "POST", post, w(logprobs=-1), {}),
        ("logprobs true (completions take a count)", "POST", post, w(logprobs=True), {}),
        ("unknown model", "POST", post, w(model="gpt-4"), {}),
        ("invalid UTF-8", "POST", post, b'{"prompt": "\xff\xfe", "max_tokens": 2}', {}),
        ("nested 1000 deep", "POST", post, "[" * 1000 + "]" * 1000, {}),
        ("body over the limit", "POST", post, w(prompt="x" * 70000), {}),
        ("no API key", "POST", post, ok, {"auth": False}),
        ("unknown receipt", "GET", "/v1/receipts/cmpl-" + "0" * 32, None, {}),
        ("bad receipt id", "GET", "/v1/receipts/..%2F..%2Fetc", None, {}),
        ("unknown path", "GET", "/v1/nothing", None, {}),
        ("chat malformed", "POST", "/v1/chat/completions", "{", {}),
    ]


def malformed_part(port):
    passed = 0
    for label, method, path, body, opts in malformed_cases():
        status, headers, data = raw(port, method, path, body, auth=opts.get("auth", True))
        try:
            error = json.loads(data)["error"]
            shaped = set(error) == {"message", "type", "param", "code"} and error["message"]
        except (ValueError, KeyError, TypeError):
            shaped = False
        if check(400 <= status < 500 and shaped, "malformed '%s': %d %r" % (label, status, data[:200])):
            passed += 1
    status, _, data = raw(port, "POST", "/v1/completions", {"model": MODEL, "prompt": "still", "max_tokens": 3,
                                                         "temperature": 0})
    check(status == 200, "after the malformed requests: %d %s" % (status, data[:200]))
    print("malformed: %d/%d requests got a 4xx JSON error; the server still answers"
          % (passed, len(malformed_cases())), flush=True)


# ---- 4. SIGTERM drain ---------------------------------------------------------------------------
def drain_part(proc, port):
    client = client_for(port)
    spec = {"prompt": "drain", "max_tokens": 120, "temperature": 0.7, "seed": 5}
    raw_resp = client.completions.with_raw_response.create(**request_args(spec)[0], stream=True)
    stream = raw_resp.parse()
    chunks = iter(stream)
    text = next(chunks).choices[0].text
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    status = None
    try:
        status, _, _ = raw(port, "POST", "/v1/completions", {"prompt": "late", "max_tokens": 1})
    except OSError:
        status = "refused"
    check(status in (503, "refused"), "drain: a new request during the drain got %s" % status)
    receipt = None
    for chunk in chunks:
        text += "".join(c.text for c in chunk.choices)
        receipt = (chunk.model_extra or {}).get("receipt") or receipt
    ref, want, _ = expected_answer(spec)
    check(text == want, "drain: the stream in flight did not finish with the run's text")
    check(receipt and os.path.isfile(os.path.join(RECEIPTS, receipt["id"] + ".json")),
          "drain: no receipt for the stream in flight")
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "hung"
    check(code == 0, "drain: exit status %s" % code)
    print("drain: SIGTERM finished the stream in flight (%d tokens, receipt kept), exit %s"
          % (len(ref["output_ids"]), code), flush=True)


# ---- 5. restart --------------------------------------------------------------------------------
def restart_part():
    proc, port = start_server()
    try:
        # A second server on the same port is refused (no SO_REUSEPORT sharing of connections).
        try:
            second = subprocess.run([LAUNCH, "serve", "--model", MODEL, "--cpu-only", "--port",
                                     str(port), "--receipt-dir", RECEIPTS], capture_output=True,
                                    text=True, timeout=15)
            check(second.returncode == 2 and "cannot listen" in second.stderr,
                  "restart: a second server on port %d: %d %s" % (port, second.returncode,
                                                                  second.stderr))
        except subprocess.TimeoutExpired:
            check(False, "restart: a second server listens on the same port %d" % port)
        for path in KEPT:
            receipt_id = os.path.basename(path)[:-5]
            status, _, body = raw(port, "GET", "/v1/receipts/" + receipt_id)
            with open(path, "rb") as f:
                check(status == 200 and body == f.read(), "restart: receipt %s not served as "
                      "stored" % receipt_id)
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=20) == 0, "restart: exit status %s" % proc.returncode)
    print("restart: the %d receipts of the first part are served byte for byte" % len(KEPT),
          flush=True)


# ---- 6. chat ------------------------------------------------------------------------------------
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def chat_model_dir():
    """The built-in model's directory with a chat template added to its tokenizer_config.json."""
    root = os.path.join(WORK, "cache", "builtin")
    source = os.path.join(root, sorted(os.listdir(root))[0])
    target = os.path.join(WORK, "chat-model")
    shutil.copytree(source, target)
    config_path = os.path.join(target, "tokenizer_config.json")
    config = json.load(open(config_path)) if os.path.exists(config_path) else {}
    config["chat_template"] = CHAT_TEMPLATE
    json.dump(config, open(config_path, "w"))
    return target


def chat_part():
    model_dir = chat_model_dir()
    proc = subprocess.Popen([LAUNCH, "serve", "--model", model_dir, "--cpu-only", "--port", "0",
                             "--max-context", str(MAX_CONTEXT), "--receipt-dir", RECEIPTS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    port = int(line.split("127.0.0.1:")[1].split()[0])
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="x", max_retries=0)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
    prompt = "".join("<|%s|>%s\n" % (m["role"], m["content"]) for m in messages) + "<|assistant|>"
    paths = []
    try:
        for spec, stream in [({"max_tokens": 12}, False), ({"max_tokens": 10, "temperature": 0.9,
                                                            "seed": 8}, True),
                             ({"max_tokens": 8, "temperature": 1.1, "seed": 4}, False)]:
            spec = dict(spec, prompt=prompt, model_dir=model_dir, no_special_tokens=True)
            ref = single_run(spec)
            args = {"model": model_dir, "messages": messages, "max_tokens": spec["max_tokens"],
                    "temperature": spec.get("temperature", 0.0), "seed": spec.get("seed", 0)}
            label = "chat stream=%s" % stream
            if stream:
                text, ids, receipt = "", [], None
                for chunk in client.chat.completions.create(**args, stream=True):
                    receipt = (chunk.model_extra or {}).get("receipt") or receipt
                    for c in chunk.choices:
                        text += c.delta.content or ""
                        ids += (c.model_extra or {}).get("token_ids", [])
            else:
                c = client.chat.completions.create(**args)
                text, ids = c.choices[0].message.content, c.choices[0].model_extra["token_ids"]
                receipt = c.model_extra["receipt"]
                check(c.object == "chat.completion", "%s: object %s" % (label, c.object))
            check(text == ref["text"] and ids == ref["output_ids"],
                  "%s: %r %s != run's %r %s" % (label, text, ids, ref["text"], ref["output_ids"]))
            status, _, body = raw(port, "GET", "/v1/receipts/" + receipt["id"])
            request = json.loads(body)["requests"][0]
            check(request["prompt_text"] == prompt and not request["add_special_tokens"]
                  and request["step_logits_sha256"] == ref["step_logits_sha256"],
                  "%s: the receipt's prompt or hashes differ from the run's" % label)
            paths.append(os.path.join(RECEIPTS, receipt["id"] + ".json"))
        chat_logprobs(client, model_dir, messages)
        # Without max_tokens a chat answer may run to the end of the context (OpenAI's default).
        c = client.chat.completions.create(model=model_dir, messages=messages, temperature=0)
        check(c.choices[0].finish_reason == "stop" or c.usage.total_tokens == MAX_CONTEXT,
              "chat without max_tokens: %s" % c.usage)
        try:
            client.chat.completions.create(model=model_dir, messages=[{"content": "no role"}])
            check(False, "chat: a message without a role was accepted")
        except openai.BadRequestError as error:
            check(error.body.get("param") == "messages", "chat: %s" % error.body)
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=20) == 0, "chat: the server's exit status %s: %s"
              % (proc.returncode, proc.stderr.read()[-2000:]))
    verified = 0
    for path in paths:
        out = subprocess.run([LAUNCH, "verify", path, "--model", model_dir, "--cpu-only",
                              "--n-partitions", "2"], capture_output=True, text=True, timeout=60)
        verified += check(out.returncode == 0, "chat verify %s: %s" % (path, out.stdout))
    print("chat: %d answers through the model's chat template equal ree-launch run of the "
          "rendered prompt; %d receipts verified on 2 stages" % (len(paths), verified), flush=True)


# ---- 7. a full queue ----------------------------------------------------------------------------
def queue_part():
    proc = subprocess.Popen([LAUNCH, "serve", "--model", MODEL, "--cpu-only", "--port", "0",
                             "--max-batch", "1", "--max-queue", "1", "--receipt-dir", RECEIPTS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline().split("127.0.0.1:")[1].split()[0])
    answers = []
    body = {"prompt": "queue", "max_tokens": 200, "temperature": 0}
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: raw(port, "POST", "/v1/completions", body, auth=False),
                                    range(8)))
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=20) == 0, "queue: exit status %s" % proc.returncode)
    codes = sorted(status for status, _, _ in answers)
    refused = [json.loads(data)["error"]["code"] for status, _, data in answers if status == 429]
    check(set(codes) == {200, 429} and set(refused) == {"queue_full"},
          "queue: statuses %s, codes %s" % (codes, refused))
    print("queue: with --max-queue 1, 8 concurrent requests got %s" % codes, flush=True)


# ---- 0. flags -----------------------------------------------------------------------------------
def flags_part():
    cases = [(["--model", MODEL, "--port", "99999"], "--port"),
             (["--port", "1"], "--model"),
             (["--model", MODEL, "--port", "1", "--port", "2"], "--port"),
             (["--model", MODEL, "--bogus"], "'bogus'"),
             (["--model", MODEL, "--max-body-bytes", "0"], "--max-body-bytes"),
             (["--model", MODEL, "--api-key", ""], "--api-key"),
             (["--model", MODEL, "--max-queue", "0"], "--max-queue"),
             (["--model", MODEL, "--receipt-dir", "/proc/none/x"], "--receipt-dir")]
    for args, named in cases:
        out = subprocess.run([LAUNCH, "serve"] + args, capture_output=True, text=True, timeout=60)
        check(out.returncode == 2 and named in out.stderr and out.stderr.count("\n") == 1
              and out.stderr.isascii(), "flags %s: %d %r" % (args, out.returncode, out.stderr))
    help_text = subprocess.run([LAUNCH, "serve", "--help"], capture_output=True, text=True).stdout
    check(all(flag in help_text for flag in ("--host", "--port", "--api-key", "--receipt-dir",
                                             "--max-body-bytes", "--http-threads",
                                             "--max-queue")),
          "serve --help lacks a flag")
    print("flags: %d bad command lines refused with one line naming the flag" % len(cases),
          flush=True)


def main():
    start = time.monotonic()
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    os.environ["REE_CACHE_DIR"] = os.path.join(WORK, "cache")
    if "flags" in PARTS:
        flags_part()
    proc, port = start_server()
    try:
        if "basic" in PARTS:
            basic_part(port)
        if "logprobs" in PARTS:
            logprobs_part(port)
        if "continuous" in PARTS:
            continuous_part(port)
        if "load" in PARTS:
            load_part(port)
        if "disconnect" in PARTS:
            disconnect_part(port)
        if "malformed" in PARTS:
            malformed_part(port)
        if "drain" in PARTS:
            drain_part(proc, port)
        if "restart" in PARTS:
            restart_part()
        if "chat" in PARTS:
            chat_part()
        if "queue" in PARTS:
            queue_part()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print("serve_test: %d failure(s) in %.1f s" % (len(FAILURES), time.monotonic() - start))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
