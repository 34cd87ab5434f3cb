"""`tollgate demo`'s world: a config with managed, Anthropic and self-hosted models and four teams,
the mixed workload those teams send (chat, RAG over a long shared document, code questions, simple
lookups), and the tally of what came back.

Pure apart from the HTTP calls in `send`: the upstreams, server and summary are `gateway.cli.demo`'s.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

CHAT, MESSAGES = "/v1/chat/completions", "/v1/messages"
LOCAL_MODEL = "llama-3.1-8b-instruct"
ANTHROPIC_UPSTREAM = "claude-sonnet-4-20250514"
TEAMS = ("support", "search", "devtools", "analytics")


def demo_config(urls: Mapping[str, str], *, directory: Path, admin_key: str) -> dict[str, Any]:
    """The raw config (as its YAML would read): sandbox upstreams, four models, four teams."""
    gpu = {"gpu_hour_usd": "0.80", "input_tokens_per_second": 20_000, "output_tokens_per_second": 1_500}
    return {
        "database": {"url": f"sqlite+aiosqlite:///{directory / 'ledger.db'}", "auto_migrate": False},
        "ledger": {"spool_dir": str(directory / "spool"), "flush_interval_ms": 50},
        "auth": {"admin_key": admin_key},
        # Every model is priced here, so LiteLLM's table is not loaded; savings are against gpt-4o.
        "pricing": {"use_catalog": False, "baseline_model": "gpt-4o"},
        "providers": {
            "openai": {"type": "openai", "base_url": urls["openai"] + "/v1", "api_key": "sk-sandbox"},
            "anthropic": {"type": "anthropic", "base_url": urls["anthropic"], "api_key": "sk-ant-sandbox"},
            "local-vllm": {"type": "vllm", "base_url": urls["vllm"] + "/v1"},
        },
        "models": {
            "gpt-4o-mini": {
                "provider": "openai",
                "price": {
                    "input_per_mtok": "0.15",
                    "output_per_mtok": "0.60",
                    "cached_input_per_mtok": "0.075",
                },
            },
            "gpt-4o": {
                "provider": "openai",
                "tier": "frontier",
                "price": {"input_per_mtok": "2.50", "output_per_mtok": "10", "cached_input_per_mtok": "1.25"},
            },
            "claude-sonnet-4": {
                "provider": "anthropic",
                "upstream_model": ANTHROPIC_UPSTREAM,
                "tier": "frontier",
                "context_window": 200_000,
                "price": {
                    "input_per_mtok": "3",
                    "output_per_mtok": "15",
                    "cached_input_per_mtok": "0.30",
                    "cache_write_per_mtok": "3.75",
                },
                "fallbacks": ["gpt-4o"],
            },
            LOCAL_MODEL: {
                "tier": "local",
                "context_window": 32_768,
                "deployments": [
                    {"provider": "local-vllm", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": gpu}
                ],
            },
        },
        "aliases": {"fast": LOCAL_MODEL, "smart": "claude-sonnet-4"},
        # `auto`: the complexity classifier picks the cheapest tier that can do the work.
        "routing": {
            "tiers": [
                {"name": "local", "models": [LOCAL_MODEL]},
                {"name": "standard", "models": ["gpt-4o-mini"]},
                {"name": "frontier", "models": ["claude-sonnet-4", "gpt-4o"]},
            ],
            "thresholds": [0.17, 0.6],
        },
        "teams": {
            "support": {"budget_daily_usd": "25", "rpm": 6000, "default_tags": ["support-bot"]},
            "search": {"budget_monthly_usd": "500"},
            "devtools": {"budget_daily_usd": "50", "budget_mode": "soft"},
            "analytics": {"budget_daily_usd": "5", "data_policy": "local-only"},
        },
    }


@dataclass(frozen=True, slots=True)
class Call:
    """One request of the workload, as its team would send it."""

    kind: str
    team: str
    path: str
    body: dict[str, Any]
    tags: str

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


@dataclass(slots=True)
class Tally:
    """What came back, counted from the responses' own `x-tollgate-*` headers."""

    statuses: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    cache_hits: int = 0
    retried: int = 0
    failed_to_connect: int = 0

    @property
    def sent(self) -> int:
        return sum(self.statuses.values()) + self.failed_to_connect

    @property
    def ok(self) -> int:
        return self.statuses[200]

    def add(self, call: Call, response: httpx.Response) -> None:
        self.statuses[response.status_code] += 1
        self.kinds[call.kind] += 1
        self.cache_hits += response.headers.get("x-tollgate-cache") == "hit"
        self.retried += int(response.headers.get("x-tollgate-attempts", "1") or 1) > 1


class Workload:
    """The next request, drawn from a realistic mix: a quarter of simple lookups, chat in bursts of
    turns, RAG over one long handbook (so provider prompt caching has something to find), code."""

    MIX = (("chat", 30), ("rag", 25), ("code", 20), ("lookup", 25))

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._kinds = [kind for kind, _ in self.MIX]
        self._weights = [weight for _, weight in self.MIX]

    def next(self) -> Call:
        return self.make(self._rng.choices(self._kinds, self._weights)[0])

    def make(self, kind: str) -> Call:
        """A call of one kind: "chat", "rag", "code" or "lookup"."""
        return getattr(self, f"_{kind}")()  # type: ignore[no-any-return]

    def _chat(self) -> Call:
        rng = self._rng
        messages: list[dict[str, str]] = [
            {"role": "system", "content": "You are Acme Cloud's support assistant. Be brief and kind."},
            {"role": "user", "content": rng.choice(_SUPPORT_OPENERS)},
        ]
        for _ in range(rng.randint(0, 2)):
            messages.append({"role": "assistant", "content": rng.choice(_SUPPORT_REPLIES)})
            messages.append({"role": "user", "content": rng.choice(_SUPPORT_FOLLOWUPS)})
        body = {
            "model": "auto",
            "messages": messages,
            "temperature": 0.7,
            "max_tokens": 120,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        return Call("chat", "support", CHAT, body, "chat")

    def _rag(self) -> Call:
        question = self._rng.choice(_RAG_QUESTIONS)
        body = {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": _RAG_INSTRUCTIONS + HANDBOOK},
                {"role": "user", "content": question},
            ],
            "temperature": 0.2,
            "max_tokens": 200,
        }
        return Call("rag", "search", CHAT, body, "rag,handbook")

    def _code(self) -> Call:
        question, snippet = self._rng.choice(_CODE_QUESTIONS)
        content = f"{question}\n\n```python\n{snippet}```"
        body = {"model": "smart", "max_tokens": 300, "messages": [{"role": "user", "content": content}]}
        # This body is valid in both dialects: Anthropic SDK users call the Messages API on the same gateway.
        path = MESSAGES if self._rng.random() < 0.4 else CHAT
        return Call("code", "devtools", path, body, "code-review")

    def _lookup(self) -> Call:
        body = {
            "model": "auto",  # the team is local-only: the router keeps it on the self-hosted tier
            "messages": [{"role": "user", "content": self._rng.choice(_LOOKUPS)}],
            "temperature": 0,
            "max_tokens": 40,
        }
        return Call("lookup", "analytics", CHAT, body, "lookup")


async def send(client: httpx.AsyncClient, call: Call, *, key: str) -> httpx.Response:
    """Send one call as its team; a stream is read to its end, as a client would."""
    headers = {"authorization": f"Bearer {key}", "x-tollgate-tags": call.tags}
    if not call.stream:
        return await client.post(call.path, json=call.body, headers=headers)
    async with client.stream("POST", call.path, json=call.body, headers=headers) as response:
        async for _ in response.aiter_bytes():
            pass
    return response


def _handbook() -> str:
    """About 15 KB (some 3,800 tokens) of operations handbook, the same on every run."""
    sections = []
    for number, (topic, rule) in enumerate(_HANDBOOK_TOPICS, start=1):
        sections.append(
            f"## {number}. {topic}\n"
            f"{rule} This applies to every production region and to staging unless the service owner "
            f"has written an exception into the service's runbook. When in doubt, page the on-call "
            f"engineer for {topic.lower()} and record the decision in the incident channel. Reviews of "
            f"this section happen every quarter; the last review kept the rule as written and added "
            f"examples to the runbook template. Changes need approval from two platform leads.\n"
        )
    return "# Acme Cloud operations handbook\n\n" + "\n".join(sections * 3)


_RAG_INSTRUCTIONS = "Answer only from the handbook below and cite section numbers.\n\n"
_HANDBOOK_TOPICS = (
    ("Deploys", "Deploys happen Monday to Thursday, 09:00 to 16:00 local time, never on a freeze day."),
    ("Rollbacks", "Any engineer may roll back a deploy without approval if error rates double."),
    ("Incidents", "Severity 1 incidents get a commander within five minutes and updates every 30 minutes."),
    ("Backups", "Databases are backed up hourly; restores are tested every month on a scratch cluster."),
    ("Access", "Production access is granted for eight hours at a time through the access portal."),
    ("Secrets", "Secrets live in the vault; a secret found in a repository is rotated the same day."),
    ("Capacity", "Services keep 40 percent headroom at peak; the capacity review happens monthly."),
    ("Costs", "Every team owns a monthly cloud budget and reviews its spend dashboard each week."),
    ("On-call", "On-call shifts last one week; handovers happen on Tuesday at 10:00 with written notes."),
    ("Postmortems", "Postmortems are blameless, written within five working days and shared company-wide."),
)
HANDBOOK = _handbook()
_RAG_QUESTIONS = (
    "When are deploys allowed?",
    "Can I roll back a deploy without asking anyone?",
    "How often are database restores tested?",
    "How long does production access last?",
    "What happens if a secret is committed to a repository?",
    "How much headroom should a service keep at peak?",
    "When do on-call handovers happen?",
    "How quickly must a postmortem be written?",
    "Who approves changes to the handbook?",
    "How often do severity 1 incidents need updates?",
)
_SUPPORT_OPENERS = (
    "My deploy failed with a 502 from the load balancer. What should I check first?",
    "How do I rotate the API key for my project?",
    "Why was I billed twice this month?",
    "Can I move a database to another region without downtime?",
    "The dashboard says my quota is exceeded but I barely used anything.",
    "How do I add a teammate to my organisation?",
)
_SUPPORT_REPLIES = (
    "Let's look at that together. Could you share the request id from the error page?",
    "Thanks for the details. That usually means the health check is failing.",
    "I see. You can do that from the console under Settings, then Keys.",
)
_SUPPORT_FOLLOWUPS = (
    "It still fails after that.",
    "Thanks! How do I do the same from the CLI?",
    "Where do I find the request id?",
    "Is there a way to be notified next time?",
)
_CODE_QUESTIONS = (
    (
        "Why does this raise KeyError sometimes?",
        "def total(orders):\n    return sum(o['amount'] for o in orders)\n",
    ),
    (
        "Make this faster for large lists.",
        "def dedupe(items):\n    out = []\n    for i in items:\n        if i not in out:\n"
        "            out.append(i)\n    return out\n",
    ),
    (
        "Is this safe against SQL injection?",
        "def find(cur, name):\n    cur.execute(f\"SELECT * FROM users WHERE name = '{name}'\")\n",
    ),
    (
        "Write a unit test for this.",
        "def slug(title: str) -> str:\n    return '-'.join(title.lower().split())\n",
    ),
    (
        "Why does this coroutine never finish?",
        "async def main():\n    queue = asyncio.Queue()\n    await queue.get()\n",
    ),
)
_LOOKUPS = (
    "What is the capital of Australia?",
    "Convert 72 degrees Fahrenheit to Celsius.",
    "What is the ISO currency code of the Japanese yen?",
    "How many seconds are in a day?",
    "What does HTTP status 429 mean?",
    "Which port does PostgreSQL listen on by default?",
    "What is the chemical symbol for tungsten?",
    "Spell 'necessary' backwards.",
    "What timezone is Berlin in?",
    "What is 17 times 23?",
)
