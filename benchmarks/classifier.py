"""What the complexity classifier costs per request: `score()` on realistic bodies, p50 and p99.

`python -m benchmarks.classifier [N]` prints the figures; `measure()` returns them for the report.
Runs in-process on one thread with the garbage collector paused while timing (as `timeit` does),
so the figures are the scorer's own cost, not the interpreter's housekeeping.

Where the optional second stage is installed (`tollgate[embed]`), it is timed too, over fewer calls
(`SECOND_STAGE_CALLS`): MiniLM on one CPU thread costs milliseconds, not microseconds.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from benchmarks.payloads import large_prompt_text
from benchmarks.stats import percentile
from gateway.routing.classifier import ComplexityClassifier
from gateway.routing.second_stage import SecondStageUnavailable, load_classifier

SECOND_STAGE_CALLS = 200
SEMANTIC_CALLS = 5000

_CODE_BLOCK = (
    "This handler double-charges when the retry and the webhook race. Fix it and explain why.\n```python\n"
    + "async def on_payment(event):\n    order = await orders.get(event.order_id)\n"
    "    if order.status != 'paid':\n        await charge(order)\n        order.status = 'paid'\n"
    "        await orders.save(order)\n" * 12 + "```"
)

_QUESTION = (
    "A 45-year-old man has had intermittent chest pain on exertion for three months. Which of the "
    "following is the most appropriate next step in diagnosis?\nA. Coronary angiography\n"
    "B. Exercise stress test\nC. CT of the chest\nD. Reassurance"
)
_TOOL = {
    "type": "function",
    "function": {
        "name": "search_orders",
        "description": "Find a customer's orders",
        "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
    },
}

_FRENCH = (
    "Bonjour, on a un souci avec la facturation : depuis la mise à jour de lundi, les factures des "
    "clients en Belgique sortent avec une TVA de 20 % au lieu de 21 %. Peux-tu m'expliquer d'où ça "
    "peut venir dans ce code, puis proposer un correctif et les cas limites à tester ? Il faut que "
    "le correctif soit rétrocompatible avec les factures déjà émises."
)
_CHINESE = (  # Chinese commas, not ASCII ones (RUF001)
    "我们的订单服务在高峰期偶尔会重复扣款。支付回调和超时重试可能同时到达，两个请求都读到订单状态为"  # noqa: RUF001
    "未支付，然后都去调用扣款接口。请分析一下原因，设计一个幂等的方案，并说明在数据库和消息队列"  # noqa: RUF001
    "两层分别要注意哪些边界情况。要求不能引入分布式锁。"
)


def bodies() -> dict[str, dict[str, Any]]:
    """The bodies timed: a chat turn, an exam question, a 2k- and a 50k-token prompt, an agent turn,
    and requests in French and in Chinese (read with the other languages' cue lists too)."""
    system = {"role": "system", "content": "You are a terse assistant."}
    document = large_prompt_text(8_000, seed=11)  # ~2k tokens
    return {
        "short chat": {
            "messages": [system, {"role": "user", "content": "Summarise the benefits of an LLM gateway."}]
        },
        "exam question": {"messages": [system, {"role": "user", "content": _QUESTION}]},
        "2k-token prompt": {
            "messages": [
                system,
                {"role": "user", "content": document + "\n\nList the three main points, step by step."},
            ]
        },
        "50k-token prompt": {
            "messages": [system, {"role": "user", "content": large_prompt_text() + "\n\nSummarise."}]
        },
        "French request": {"messages": [system, {"role": "user", "content": _FRENCH}]},
        "Chinese request": {"messages": [system, {"role": "user", "content": _CHINESE}]},
        "agent turn with tools": {
            "messages": [
                {"role": "system", "content": "You help support staff. Always cite order ids. " * 8},
                {"role": "user", "content": "Where is my last order? It must arrive before Friday."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search_orders"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": '{"orders": [{"id": "A-17"}]}'},
                {"role": "user", "content": "And can you change the delivery address to 12 Rue Oberkampf?"},
            ],
            "tools": [_TOOL] * 4,
            "response_format": {"type": "json_object"},
            "max_tokens": 2048,
        },
    }


def semantic_bodies() -> dict[str, dict[str, Any]]:
    """Realistic bodies for the semantic router: a short ask, a 5-turn chat, a 20 KB RAG prompt,
    a 100 KB document, a pasted code block."""
    system = {"role": "system", "content": "You are a helpful assistant for Acme's support team."}
    chat = [system]
    for k in range(5):
        chat.append(
            {"role": "user", "content": f"Question {k}: how do I rotate the API key for project {k}?"}
        )
        chat.append({"role": "assistant", "content": "You open settings, then keys, then rotate. " * 20})
    chat.append({"role": "user", "content": "And can I keep the old key alive for a day?"})
    rag = large_prompt_text(20_000, seed=5)
    document = large_prompt_text(100_000, seed=7)
    return {
        "short ask": {"messages": [system, {"role": "user", "content": "What is the capital of Peru?"}]},
        "5-turn chat": {"messages": chat},
        "20 KB RAG prompt": {
            "messages": [
                system,
                {"role": "user", "content": f"Context:\n{rag}\n\nQuestion: what changed in Q3?"},
            ]
        },
        "100 KB document": {"messages": [{"role": "user", "content": f"Summarise this:\n{document}"}]},
        "code block": {"messages": [system, {"role": "user", "content": _CODE_BLOCK}]},
    }


def measure_semantic(
    n: int = SEMANTIC_CALLS, classifier: ComplexityClassifier | None = None
) -> dict[str, Any]:
    """`SemanticRouter.match()` (route + difficulty, shipped defaults) beside the 1.8 `assess()`,
    per body, p50/p99 µs, tokenisation included."""
    from gateway.routing.semantic import SemanticRouter, load_default_routes

    router = SemanticRouter([route.spec() for route in load_default_routes()])
    classifier = classifier or ComplexityClassifier.load()
    out: dict[str, Any] = {"n": n, "bodies": {}}
    for name, body in semantic_bodies().items():
        out["bodies"][name] = {
            "semantic": _time(partial(router.match, body), n),
            "1.8": _time(partial(classifier.assess, body), n),
        }
    return out


def measure(n: int = 20000, classifier: ComplexityClassifier | None = None) -> dict[str, Any]:
    """p50 / p99 / mean microseconds of `score()` per body (and of `assess()`, which the router
    calls for the score and its reasons), over `n` calls each after a warm-up."""
    classifier = classifier or ComplexityClassifier.load()
    results: dict[str, Any] = {"n": n, "model_version": classifier.version, "bodies": {}}
    for name, body in bodies().items():
        results["bodies"][name] = _time(partial(classifier.score, body), n)
    short = bodies()["short chat"]
    results["bodies"]["short chat, assess()"] = _time(partial(classifier.assess, short), n)
    results["semantic"] = measure_semantic(min(n, SEMANTIC_CALLS), classifier)
    results["second_stage"] = measure_second_stage(min(n, SECOND_STAGE_CALLS))
    return results


def measure_second_stage(n: int = SECOND_STAGE_CALLS) -> dict[str, Any] | str:
    """`assess()` with the MiniLM second stage (one request at a time, one torch thread, as a
    gateway worker would run it), or why it was not timed."""
    try:
        import torch

        torch.set_num_threads(1)
        classifier = load_classifier(second_stage=True)
    except (ImportError, SecondStageUnavailable) as exc:
        return f"not timed: {exc}"
    return {
        "model_version": classifier.version,
        "bodies": {name: _time(partial(classifier.assess, body), n) for name, body in bodies().items()},
        "n": n,
    }


def _time(call: Callable[[], object], n: int) -> dict[str, float]:
    for _ in range(min(n, 1000)):
        call()
    samples = []
    clock = time.perf_counter_ns
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(n):
            start = clock()
            call()
            samples.append(clock() - start)
    finally:
        if enabled:
            gc.enable()
    samples.sort()
    return {
        "p50_us": percentile(samples, 0.50) / 1000,
        "p99_us": percentile(samples, 0.99) / 1000,
        "mean_us": sum(samples) / len(samples) / 1000,
    }


def render(results: dict[str, Any]) -> str:
    lines = [
        f"complexity classifier {results['model_version']}: cost per request, "
        f"{results['n']} calls each, one thread, GC paused",
        f"  {'body':24} {'p50 µs':>8} {'p99 µs':>8} {'mean µs':>8}",
    ]
    for name, figures in results["bodies"].items():
        lines.append(
            f"  {name:24} {figures['p50_us']:8.1f} {figures['p99_us']:8.1f} {figures['mean_us']:8.1f}"
        )
    semantic = results.get("semantic")
    if semantic is not None:
        lines.append(f"semantic router match() vs 1.8 assess(): {semantic['n']} calls each, p50 / p99 µs")
        lines.append(f"  {'body':24} {'semantic':>17} {'1.8':>17}")
        for name, pair in semantic["bodies"].items():
            sem, old = pair["semantic"], pair["1.8"]
            cells = " ".join(f"{f[k]:8.1f}" for f in (sem, old) for k in ("p50_us", "p99_us"))
            lines.append(f"  {name:24} {cells}")
    second = results.get("second_stage")
    if isinstance(second, str):
        lines.append(f"second stage (MiniLM): {second}")
    elif second is not None:
        lines.append(f"second stage (MiniLM), assess(): {second['n']} calls each, one torch thread")
        for name, figures in second["bodies"].items():
            lines.append(
                f"  {name:24} {figures['p50_us']:8.1f} {figures['p99_us']:8.1f} {figures['mean_us']:8.1f}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)))
