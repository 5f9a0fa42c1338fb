"""LLM test doubles for model differences (test code, never shipped). They read ONLY the prompt text they
are sent - never the test's ground truth - so what the tests check is what the prompts carry.

- RuleReaderEvaluator answers P1: it parses sentences like "Model A is worse than model B when the digits of
  0, 1, 2 are not colored in red" (or "... for the digits 5 and 6") and applies the first rule that covers
  the question's condition; for a Raw Differences list it looks up the condition's own line. Else [3].
- AggregatingExplainer answers P2 (per-digit marginals -> a digit-only text), P4 (adds colour exceptions
  where the new result lines show ties for digits the explanation covers, and digits it missed) and P5
  (exploitation: the digits the best explanation names, in colours/angles drawn from the call's seed).
"""
from __future__ import annotations

import json
import random
import re

from nemo_desktop.core.models.protocols import ModelInfo

COLOURS = ("red", "green", "blue", "yellow", "magenta", "cyan", "orange", "pink", "purple", "grey")
_RULE = re.compile(r"Model (A|B) is (better|worse) than model (A|B) (?:when|for) the digits (?:of )?"
                   r"([0-9, and]+?)(?: are)?(?: (not )?colou?red in ([a-z, ]+?))?(?:[.;]|$| regardless)", re.I)
_LINE = re.compile(r"digit=(\d), color=(\w+), angle=(-?\d+): accuracy difference \(A - B\) = ([+-]?\d+(?:\.\d)?)%")


def parse_rules(text: str) -> list[dict]:
    rules = []
    for m in _RULE.finditer(text):
        subject, verb = m.group(1).upper(), m.group(2).lower()
        winner = subject if verb == "better" else ("B" if subject == "A" else "A")
        digits = {int(d) for d in re.findall(r"\d", m.group(4))}
        colours = [c for c in COLOURS if m.group(6) and re.search(rf"\b{c}\b", m.group(6))]
        rules.append({"winner": winner, "digits": digits, "negated": bool(m.group(5)), "colours": colours})
    return rules


def render_rules(rules: list[dict]) -> str:
    out = []
    for r in rules:
        loser = "A" if r["winner"] == "B" else "B"
        digits = sorted(r["digits"])
        listed = ", ".join(map(str, digits[:-1])) + (", and " if len(digits) > 2 else " and ") + str(digits[-1]) \
            if len(digits) > 1 else str(digits[0])
        if r["colours"]:
            cols = ", ".join(c for c in COLOURS if c in r["colours"])
            out.append(f"Model {loser} is worse than model {r['winner']} when the digits of {listed} are "
                       f"{'not ' if r['negated'] else ''}colored in {cols}.")
        else:
            out.append(f"Model {loser} is worse than model {r['winner']} for the digits {listed}.")
    return " ".join(out)


def _answer(explanation: str, digit: int, colour: str, angle: int) -> str:
    line = re.search(rf"digit={digit}, color={colour}, angle={angle}: accuracy difference \(A - B\) = "
                     rf"([+-]?\d+(?:\.\d)?)%", explanation)
    if line:
        v = float(line.group(1))
        return "[1] Model A" if v > 0 else "[2] Model B" if v < 0 else "[3] Cannot be determined"
    for r in parse_rules(explanation):
        if digit not in r["digits"]:
            continue
        if r["colours"] and ((colour in r["colours"]) == r["negated"]):
            continue
        return "[1] Model A" if r["winner"] == "A" else "[2] Model B"
    return "[3] Cannot be determined"


class RuleReaderEvaluator:
    info = ModelInfo("test-double:rule-reader", "test-double", "1")

    def __init__(self):
        self.calls = 0

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None):
        self.calls += 1
        text = messages[-1].content[0]
        m = re.search(r"Now, let's start the evaluation\. Explanation: (.*)\n\nQuestion: Which model performs "
                      r"better given the condition: digit=(\d), color=(\w+), angle=(-?\d+)\?", text, re.S)
        if not m:
            return "I do not understand the question."
        return _answer(m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


def _lines(text: str) -> list[tuple[int, str, int, float]]:
    return [(int(d), c, int(a), float(v) / 100) for d, c, a, v in _LINE.findall(text)]


class AggregatingExplainer:
    info = ModelInfo("test-double:aggregating-explainer", "test-double", "1")

    def __init__(self, threshold: float = 0.25, reverse: bool = False):
        self.threshold, self.reverse = threshold, reverse
        self.calls = 0
        self.prompts: list[str] = []

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None):
        self.calls += 1
        text = messages[-1].content[0]
        self.prompts.append(text)
        if "Your role:" in text:
            return self._update(text)
        if "exploring further conditions" in text:
            return self._explore(text, seed)
        if "Evaluation results:" in text:
            return json.dumps({"explanation": self._summarize(_lines(text))})
        return "unexpected prompt"

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]

    def _summarize(self, lines) -> str:
        by_digit: dict[int, list[float]] = {}
        for d, _, _, v in lines:
            by_digit.setdefault(d, []).append(v)
        rules = []
        for winner, sign in (("B", -1), ("A", 1)):
            digits = {d for d, vs in by_digit.items() if sign * sum(vs) / len(vs) >= self.threshold}
            if digits:
                rules.append({"winner": winner, "digits": digits, "negated": False, "colours": []})
        if self.reverse:
            for r in rules:
                r["winner"] = "A" if r["winner"] == "B" else "B"
        return render_rules(rules) or "Model A and model B perform the same."

    def _update(self, text: str) -> str:
        explanation = re.search(r"^- Explanation: (.*)$", text, re.M).group(1)
        new = _lines(text.split("Experimental result under new condition:")[1])
        rules = parse_rules(explanation)
        covered = set()
        for r in rules:
            covered |= r["digits"]
            sign = 1 if r["winner"] == "A" else -1
            ties = {c for d, c, _, v in new if d in r["digits"] and sign * v < self.threshold}
            wins = {c for d, c, _, v in new if d in r["digits"] and sign * v >= self.threshold}
            if r["negated"] or not r["colours"]:
                r["negated"] = True
                r["colours"] = sorted((set(r["colours"]) | ties) - wins)
        for d, _, _, v in new:
            if d not in covered and abs(v) >= self.threshold:
                winner = "A" if v > 0 else "B"
                target = next((r for r in rules if r["winner"] == winner), None)
                if target is None:
                    rules.append({"winner": winner, "digits": {d}, "negated": False, "colours": []})
                else:
                    target["digits"].add(d)
                covered.add(d)
        rules = [r for r in rules if not (r["negated"] and set(r["colours"]) >= set(COLOURS))]
        for r in rules:
            if r["negated"] and not r["colours"]:
                r["negated"] = False
        if self.reverse:
            for r in rules:
                r["winner"] = "A" if r["winner"] == "B" else "B"
        body = render_rules(rules) or explanation
        return f'"feedback": "Added what the new results show.", "explanation": {json.dumps(body)}'

    def _explore(self, text: str, seed) -> str:
        first = re.search(r"^Explanation 1: (.*)$", text, re.M).group(1)
        digits = sorted(set().union(*[r["digits"] for r in parse_rules(first)] or [set()])) or list(range(10))
        k = int(re.search(r"Please provide (\d+) different conditions", text).group(1))
        rng = random.Random(seed)
        items = [{"strategy": "exploitation", "condition": {"digit": rng.choice(digits), "color": rng.choice(COLOURS),
                                                            "angle": rng.choice(range(-30, 31, 5))}} for _ in range(k)]
        items.append({"strategy": "exploration", "condition": {"digit": 3, "color": "chartreuse", "angle": 0}})
        return json.dumps(items)


class DiffLLM:
    """One LLM double in both roles, routed by the prompt it is sent: the evaluator prompt (P1) goes to the
    rule reader, every other prompt to the aggregating explainer. `calls` lists the prompts' first lines."""

    info = ModelInfo("test-double:model-diff-llm", "test-double", "1")

    def __init__(self):
        self.explainer, self.reader = AggregatingExplainer(), RuleReaderEvaluator()
        self.calls: list[str] = []

    def chat(self, messages, **kw):
        text = messages[-1].content[0]
        self.calls.append(text.splitlines()[0][:80])
        role = self.reader if "Now, let's start the evaluation." in text else self.explainer
        return role.chat(messages, **kw)

    def chat_batch(self, conversations, **kw):
        return [self.chat(c, **kw) for c in conversations]


def serve_openai_compatible(llm):
    """A loopback OpenAI-compatible chat-completions server answering with `llm` (a thread; returns the server,
    call `shutdown()`). Only the request's text parts reach the double."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from nemo_desktop.core.models.protocols import ChatMessage

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _reply(self, payload):
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._reply({"object": "list", "data": [{"id": "diff-double", "object": "model"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            content = req["messages"][-1]["content"]
            text = content if isinstance(content, str) else "".join(
                p.get("text", "") for p in content if p.get("type") == "text")
            reply = llm.chat([ChatMessage.user(text)], seed=req.get("seed"))
            self._reply({"id": "x", "object": "chat.completion", "model": "diff-double",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": reply}}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
