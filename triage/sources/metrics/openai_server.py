"""A simulated vLLM server that speaks the OpenAI API: real requests go through a real-time engine model of
the scenario (continuous batching, chunked prefill, paged KV cache with recompute preemption, speculative
decoding), so a load-test tool pointed at it measures the scenario's symptom; /metrics is vLLM's.

The engine takes its *engine* parameters from tree/scenarios.yaml (max_num_seqs, KV blocks, step costs,
prefix cache, speculative decoding); the *traffic* is whatever the client sends. Every request generates
exactly ``max_tokens`` tokens (as vLLM does with ``ignore_eos``); a request without ``max_tokens`` draws its
length from the scenario's output distribution and finishes with "stop". A token is one word, so a
whitespace/punctuation word-level tokenizer on the client counts exactly what the server counts.
"""

from __future__ import annotations

import http.server
import json
import math
import queue
import re
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from triage import safe_load
from triage.errors import TriageError
from triage.sources.metrics.simulator import (
    CONTENT_TYPE,
    ITL_BUCKETS,
    LATENCY_BUCKETS,
    MODEL_NAME,
    REASONS,
    TTFT_BUCKETS,
    _families,
    _Hist,
    build_1_2_5_buckets,
    get_scenario,
    prefix_cache_hit,
)

TOKEN_RE = re.compile(r"\w+|[^\w\s]+")  # = the `tokenizers` Whitespace pre-tokenizer
WORDS = ("the", "model", "writes", "one", "word", "per", "token", "and", "every", "step", "of", "decode",
         "emits", "a", "few", "more", "until", "it", "reaches", "max", "tokens")
MAX_BODY = 16 * 1024 * 1024
DONE = object()  # end-of-stream marker in a request's event queue
STOP, LENGTH, ABORT = 0, 1, 2


def count_tokens(text: str) -> int:
    """Prompt tokens as the server counts them: words and punctuation runs (no chat template)."""
    return len(TOKEN_RE.findall(text))


def token_text(i: int) -> str:
    """The i-th generated token's text: a word, with a leading space after the first."""
    word = WORDS[i % len(WORDS)]
    return word if i == 0 else " " + word


@dataclass(eq=False)
class Request:
    prompt: int
    max_out: int
    reason: int                      # finished_reason if it runs to the end (LENGTH with max_tokens, else STOP)
    arrival: float
    events: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    sched: float = math.nan
    first_tok: float = math.nan
    last_tok: float = math.nan
    generated: int = 0
    prefill_left: int = 0
    blocks: int = 0
    cancelled: bool = False


class Engine:
    """Real-time model of one vLLM V1 engine: a thread runs steps whose duration comes from the scenario's
    step-time model, sleeps for it, then emits each running request's tokens into its event queue."""

    def __init__(self, scenario: str, seed: int = 0) -> None:
        self.scenario = get_scenario(scenario)
        self.p = self.scenario.params
        self.rng = np.random.default_rng(seed)
        self.cond = threading.Condition()
        self._stop = threading.Event()
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        # the exposition shared with the simulator reads these: this engine prefills its own prompts (no PD)
        self.transferring: list[Any] = []
        self.pd_decode = False
        self.used_blocks = 0
        self._created = time.time()
        self.counters = dict.fromkeys(("preemptions", "prefix_queries", "prefix_hits", "prompt_tokens",
                                       "generation_tokens", "spec_drafts", "spec_draft_tokens",
                                       "spec_accepted_tokens"), 0.0)
        self.success = np.zeros(len(REASONS))
        tokens = build_1_2_5_buckets(self.p.max_model_len)
        lat = LATENCY_BUCKETS
        bounds = {"ttft": TTFT_BUCKETS, "itl": ITL_BUCKETS, "tpot": ITL_BUCKETS, "e2e": lat, "queue": lat,
                  "inference": lat, "prefill": lat, "decode": lat, "prompt_len": tokens, "output_len": tokens}
        self.hists = {k: _Hist(v) for k, v in bounds.items()}
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)
        self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        self._thread.start()

    # ---- API for the HTTP side -----------------------------------------------------------------------
    def submit(self, prompt: int, max_tokens: int | None) -> Request:
        """Queue a request; its events queue receives (token count, time) per step, then DONE."""
        if max_tokens is None:
            draw = self.rng.lognormal(math.log(self.p.output_median), self.p.output_sigma)
            out, reason = int(max(1, min(round(draw), self.p.max_tokens, self.p.max_model_len - prompt))), STOP
        else:
            out, reason = max_tokens, LENGTH
        req = Request(prompt=prompt, max_out=out, reason=reason, arrival=time.time())
        with self.cond:
            self.waiting.append(req)
            self.cond.notify_all()
        return req

    def cancel(self, req: Request) -> None:
        """The client went away: the request is aborted at the next step boundary."""
        with self.cond:
            req.cancelled = True
            self.cond.notify_all()

    def render(self) -> str:
        with self.cond:
            return generate_latest(self._registry).decode("utf-8")

    def collect(self) -> Any:  # prometheus_client collector protocol
        return _families(self, True, None)  # type: ignore[arg-type]  # same state attributes as Simulator

    def close(self) -> None:
        self._stop.set()
        with self.cond:
            self.cond.notify_all()
        self._thread.join(timeout=5)
        with self.cond:
            for req in [*self.running, *self.waiting]:
                req.events.put(DONE)
            self.running.clear()
            self.waiting.clear()

    # ---- engine loop ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            with self.cond:
                self._drop_cancelled()
                while not (self.running or self.waiting) and not self._stop.is_set():
                    self.cond.wait()
                    self._drop_cancelled()
                if self._stop.is_set():
                    return
                self._admit(time.time())
                plan = self._plan()
            self._stop.wait(plan[0])  # the GPU is busy for the step's duration
            with self.cond:
                self._apply(plan, time.time())

    def _drop_cancelled(self) -> None:
        gone = [r for r in (*self.running, *self.waiting) if r.cancelled]
        for req in gone:
            if req in self.running:
                self.running.remove(req)
                self.used_blocks -= req.blocks
            else:
                self.waiting.remove(req)
            self.success[ABORT] += 1
            req.events.put(DONE)

    def _admit(self, now: float) -> None:
        """FCFS while a batch slot and enough free KV blocks (above the reserve) exist."""
        p = self.p
        limit = p.num_gpu_blocks * (1.0 - p.admit_reserve)
        while self.waiting and len(self.running) < p.max_num_seqs:
            req = self.waiting[0]
            tokens = req.prompt + req.generated
            need = -(-(tokens + 1) // p.block_size)
            if self.running and self.used_blocks + need > limit:
                break
            self.waiting.popleft()
            if math.isnan(req.sched):
                req.sched = now
            req.prefill_left = tokens - self._cached(tokens)
            req.blocks = need
            self.used_blocks += need
            self.running.append(req)

    def _cached(self, tokens: int) -> int:
        return prefix_cache_hit(self.p, self.rng, self.counters, tokens)

    def _plan(self) -> tuple[float, list[Request], list[tuple[Request, int]]]:
        """This step's duration, its decoding requests and its prefill chunks (chunked prefill, FCFS)."""
        p = self.p
        decoding = [r for r in self.running if r.prefill_left == 0]
        budget = max(p.max_num_batched_tokens - len(decoding), 1)
        chunks: list[tuple[Request, int]] = []
        for req in self.running:
            if req.prefill_left > 0 and budget > 0:
                take = min(req.prefill_left, budget)
                chunks.append((req, take))
                budget -= take
        ctx = sum(r.prompt + r.generated for r in decoding)
        base = p.step_base_s + p.step_per_seq_s * len(decoding) + p.step_per_kv_token_s * ctx
        if p.spec_tokens and decoding:
            base *= 1.0 + p.spec_overhead
        step = (base + p.prefill_per_token_s * sum(n for _, n in chunks)) * math.exp(
            self.rng.normal(0.0, p.step_jitter))
        return step, decoding, chunks

    def _apply(self, plan: tuple[float, list[Request], list[tuple[Request, int]]], now: float) -> None:
        step, decoding, chunks = plan
        emitted: list[tuple[Request, int]] = []
        for req, n in chunks:
            if req in self.running and req.prefill_left > 0:
                req.prefill_left -= n
                if req.prefill_left == 0:
                    emitted.append((req, 1))  # prefill done: the step also samples one token
        for req in decoding:
            if req in self.running:
                n = 1
                if self.p.spec_tokens:
                    accepted = int(self.rng.binomial(self.p.spec_tokens, self.p.spec_acceptance))
                    self.counters["spec_drafts"] += 1
                    self.counters["spec_draft_tokens"] += self.p.spec_tokens
                    self.counters["spec_accepted_tokens"] += accepted
                    n += accepted
                emitted.append((req, n))
        finished: list[Request] = []
        for req, n in emitted:
            n = min(n, req.max_out - req.generated)
            if n <= 0:
                continue
            if math.isnan(req.first_tok):
                req.first_tok = now
                self.hists["ttft"].observe(now - req.arrival)
                self.counters["prompt_tokens"] += req.prompt
            else:
                self.hists["itl"].observe(now - req.last_tok)  # one gap per engine step, as vLLM V1 observes
            req.last_tok = now
            req.generated += n
            self.counters["generation_tokens"] += n
            req.events.put((n, now))
            if req.generated >= req.max_out:
                finished.append(req)
        for req in finished:
            self._finish(req, now)
        self._grow_kv()
        self._admit(now)

    def _finish(self, req: Request, now: float) -> None:
        h = self.hists
        h["e2e"].observe(now - req.arrival)
        h["queue"].observe(req.sched - req.arrival)
        h["prefill"].observe(req.first_tok - req.sched)
        h["decode"].observe(now - req.first_tok)
        h["inference"].observe(now - req.sched)
        h["tpot"].observe((now - req.first_tok) / (req.generated - 1) if req.generated > 1 else 0.0)
        h["prompt_len"].observe(req.prompt)
        h["output_len"].observe(req.generated)
        self.success[req.reason] += 1
        self.used_blocks -= req.blocks
        self.running.remove(req)
        req.events.put(DONE)

    def _grow_kv(self) -> None:
        """A decoding request takes a new block every block_size tokens; when none is free, the newest
        running request is preempted (blocks freed, recomputed when re-admitted) — vLLM V1 behaviour."""
        p = self.p
        for req in self.running:
            if req.prefill_left == 0:
                need = -(-(req.prompt + req.generated + 1) // p.block_size)
                if need > req.blocks:
                    self.used_blocks += need - req.blocks
                    req.blocks = need
        while self.used_blocks > p.num_gpu_blocks and len(self.running) > 1:
            victim = self.running.pop()
            self.used_blocks -= victim.blocks
            victim.blocks = 0
            victim.prefill_left = 0
            self.waiting.appendleft(victim)
            self.counters["preemptions"] += 1


# ---- OpenAI protocol --------------------------------------------------------------------------------------
class BadRequest(Exception):
    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


def _prompt_text(body: dict[str, Any], chat: bool) -> str:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages' must be a non-empty list")
        parts: list[str] = []
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(c.get("text", "")) for c in content if isinstance(c, dict))
        return "\n".join(parts)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return " ".join("x" for _ in prompt)  # token ids: one token each
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt[0]
    if not isinstance(prompt, str):
        raise BadRequest("'prompt' must be a string (one prompt per request)")
    return prompt


def _max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest("'max_tokens' must be a positive integer")
    return value


def parse_request(body: dict[str, Any], chat: bool, max_model_len: int) -> tuple[int, int | None, bool, bool]:
    """(prompt tokens, max_tokens or None, stream, include_usage) of an OpenAI request body."""
    model = body.get("model")
    if model is not None and model != MODEL_NAME:
        raise BadRequest(f"The model `{model}` does not exist.", 404)
    prompt = count_tokens(_prompt_text(body, chat))
    max_tokens = _max_tokens(body)
    if prompt + (max_tokens or 1) > max_model_len:
        raise BadRequest(f"This model's maximum context length is {max_model_len} tokens. However, you requested "
                         f"{prompt + (max_tokens or 1)} tokens ({prompt} in the messages, {max_tokens or 1} in "
                         f"the completion). Please reduce the length of the messages or completion.")
    n = body.get("n", 1)
    if n != 1:
        raise BadRequest("only n=1 is simulated")
    stream = bool(body.get("stream", False))
    opts = body.get("stream_options")
    include_usage = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
    return prompt, max_tokens, stream, include_usage


def _chunk(kind: str, rid: str, created: int, choices: list[dict[str, Any]],
           usage: dict[str, int] | None = None, metrics: dict[str, Any] | None = None) -> bytes:
    obj: dict[str, Any] = {"id": rid, "object": kind, "created": created, "model": MODEL_NAME, "choices": choices}
    if usage is not None:
        obj["usage"] = usage
    if metrics is not None:
        obj["metrics"] = metrics
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def request_metrics_block(req: Request) -> dict[str, float | None]:
    """vLLM's ``--enable-per-request-metrics`` block (entrypoints/generate/base/serving.py): engine-side times."""
    n = req.generated
    out: dict[str, float | None] = {
        "time_to_first_token_ms": (req.first_tok - req.sched) * 1000,  # scheduled → first token: no queue
        "generation_time_ms": (req.last_tok - req.first_tok) * 1000,
        "queue_time_ms": (req.sched - req.arrival) * 1000,
        "mean_itl_ms": (req.last_tok - req.first_tok) / (n - 1) * 1000 if n > 1 else None,
        "tokens_per_second": None,
    }
    inference = req.last_tok - req.sched
    if inference > 0:
        out["tokens_per_second"] = n / inference
    return out


def _usage(req: Request) -> dict[str, int]:
    return {"prompt_tokens": req.prompt, "total_tokens": req.prompt + req.generated,
            "completion_tokens": req.generated}


def _finish_reason(req: Request) -> str:
    return REASONS[req.reason]


def _handler(engine: Engine, with_metrics: bool) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            path = self.path.split("?")[0]
            if path == "/metrics":
                self._send(200, engine.render().encode("utf-8"), CONTENT_TYPE)
            elif path in ("/health", "/ping"):
                self._send(200, b"", "text/plain; charset=utf-8")
            elif path == "/v1/models":
                card = {"id": MODEL_NAME, "object": "model", "created": int(engine._created), "owned_by": "vllm",
                        "root": MODEL_NAME, "parent": None, "max_model_len": engine.p.max_model_len}
                self._json(200, {"object": "list", "data": [card]})
            else:
                self._error(404, f"no route for GET {path}")

        def do_POST(self) -> None:  # noqa: N802 (http.server API)
            path = self.path.split("?")[0]
            chat = path == "/v1/chat/completions"
            if not chat and path != "/v1/completions":
                self._error(404, f"no route for POST {path}")
                return
            try:
                body = self._body()
                prompt, max_tokens, stream, include_usage = parse_request(body, chat, engine.p.max_model_len)
            except BadRequest as exc:
                self._error(exc.code, str(exc))
                return
            req = engine.submit(prompt, max_tokens)
            try:
                if stream:
                    self._stream(req, chat, include_usage)
                else:
                    self._whole(req, chat)
            except (BrokenPipeError, ConnectionResetError):
                engine.cancel(req)
                self.close_connection = True

        # ---- responses ----
        def _stream(self, req: Request, chat: bool, include_usage: bool) -> None:
            kind = "chat.completion.chunk" if chat else "text_completion"
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
            created = int(time.time())
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            while True:
                event = req.events.get()
                if event is DONE:
                    break
                n, _ = event
                out = bytearray()
                if chat and sent == 0:
                    out += _chunk(kind, rid, created, [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                       "logprobs": None, "finish_reason": None}])
                for i in range(sent, sent + n):
                    last = i == req.max_out - 1
                    reason = _finish_reason(req) if last else None
                    choice: dict[str, Any] = ({"index": 0, "delta": {"content": token_text(i)}, "logprobs": None,
                                               "finish_reason": reason} if chat else
                                              {"index": 0, "text": token_text(i), "logprobs": None,
                                               "finish_reason": reason, "stop_reason": None})
                    out += _chunk(kind, rid, created, [choice])
                sent += n
                self._write_chunk(bytes(out))
            if req.cancelled or sent < req.max_out:
                self._write_chunk(b"")
                return
            metrics = request_metrics_block(req) if with_metrics else None
            tail = _chunk(kind, rid, created, [], _usage(req), metrics) if include_usage else b""
            self._write_chunk(tail + b"data: [DONE]\n\n")
            self._write_chunk(b"")

        def _whole(self, req: Request, chat: bool) -> None:
            while req.events.get() is not DONE:
                pass
            if req.generated < req.max_out:
                self._error(503, "the server is shutting down")
                return
            text = "".join(token_text(i) for i in range(req.generated))
            choice: dict[str, Any]
            obj: dict[str, Any]
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                          "finish_reason": _finish_reason(req)}
                obj = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion"}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": _finish_reason(req),
                          "stop_reason": None}
                obj = {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion"}
            obj.update({"created": int(time.time()), "model": MODEL_NAME, "choices": [choice], "usage": _usage(req)})
            if with_metrics:
                obj["metrics"] = request_metrics_block(req)
            self._json(200, obj)

        # ---- plumbing ----
        def _body(self) -> dict[str, Any]:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                raise BadRequest("bad Content-Length") from None
            if length <= 0 or length > MAX_BODY:
                raise BadRequest("a JSON body is required (at most 16 MiB)")
            try:
                body = safe_load.load_json(self.rfile.read(length), max_chars=MAX_BODY)
            except TriageError as exc:
                raise BadRequest(f"body is not JSON: {exc.reason}") from None
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object")
            return body

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _json(self, code: int, obj: dict[str, Any]) -> None:
            self._send(code, json.dumps(obj).encode("utf-8"), "application/json")

        def _error(self, code: int, message: str) -> None:
            kind = {400: "BadRequestError", 404: "NotFoundError"}.get(code, "InternalServerError")
            self._json(code, {"object": "error", "message": message, "type": kind, "param": None, "code": code})

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server API)
            return

    return Handler


class OpenAIServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # load tools open many connections at once
    engine: Engine | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing an idle keep-alive connection is normal for load tools; anything else is printed."""
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, TimeoutError)):
            super().handle_error(request, client_address)

    def server_close(self) -> None:
        if self.engine is not None:
            self.engine.close()
        super().server_close()


def serve_openai(scenario: str, port: int, host: str = "127.0.0.1", seed: int = 0,
                 per_request_metrics: bool = False) -> OpenAIServer:
    """An OpenAI-compatible server (plus /metrics, /health) whose engine runs the scenario in real time; with
    ``per_request_metrics`` each response carries vLLM's engine-side ``metrics`` block (as vLLM's
    ``--enable-per-request-metrics``: on the final usage chunk when streaming).
    The caller runs ``serve_forever()`` (or does so in a thread), then ``shutdown()`` and ``server_close()``."""
    engine = Engine(scenario, seed=seed)
    try:
        server = OpenAIServer((host, port), _handler(engine, per_request_metrics))
    except (OSError, OverflowError) as exc:
        engine.close()
        raise TriageError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}",
                          key="--port") from exc
    server.engine = engine
    return server
