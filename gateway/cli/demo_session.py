"""`tollgate demo`: sandbox upstreams, a gateway in front of them, a minute of mixed traffic from four
teams, then the spend it ran up and where to look at it; the gateway keeps serving until Ctrl-C.

Everything lives in a temporary directory (config, SQLite ledger, spool) and goes with it. The
gateway runs in this process on this event loop; the emulators are child processes, as for
`tollgate serve`'s embedded default.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import secrets
import signal
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn
import yaml

from gateway.accounting.database import run_migrations
from gateway.accounting.spend import SpendQuery, query_spend, totals
from gateway.cli.demo_world import ANTHROPIC_UPSTREAM, TEAMS, Tally, Workload, demo_config, send
from gateway.cli.ledger import render_table
from gateway.cli.sandbox_launcher import SandboxFleet, free_port
from gateway.config.loader import build_config
from gateway.config.schema import Config
from gateway.routes.spend import present

if TYPE_CHECKING:
    from gateway.runtime import Runtime

DIALECTS = ["openai", "anthropic", "vllm"]


def run(args: argparse.Namespace) -> int:
    # SIGTERM must unwind like Ctrl-C, or the emulator processes would outlive the demo.
    signal.signal(signal.SIGTERM, _terminate)
    port = args.port or free_port()
    try:
        with tempfile.TemporaryDirectory(prefix="tollgate-demo-") as tmp:
            print("Starting the sandbox upstreams (OpenAI, Anthropic, vLLM)…", flush=True)
            with SandboxFleet(DIALECTS, profile="instant" if args.instant else None) as fleet:
                admin_key = f"tg-demo-admin-{secrets.token_urlsafe(18)}"
                raw = demo_config(fleet.urls, directory=Path(tmp), admin_key=admin_key)
                raw["server"] = {"host": args.host, "port": port}
                path = Path(tmp) / "tollgate.yaml"
                path.write_text(yaml.safe_dump(raw, sort_keys=False))
                config = build_config(raw, source=str(path), environ={})
                run_migrations(config.database.url)
                return asyncio.run(_demo(args, config, admin_key=admin_key, port=port, upstreams=fleet.urls))
    except KeyboardInterrupt:
        print("\nTollgate demo stopped.")
        return 0


def _terminate(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


async def _demo(
    args: argparse.Namespace, config: Config, *, admin_key: str, port: int, upstreams: dict[str, str]
) -> int:
    from gateway.app import create_app

    # No environment: a TOLLGATE_DATABASE_URL meant for production must not receive demo rows.
    app = create_app(config, environ={})
    server = uvicorn.Server(
        uvicorn.Config(app, host=args.host, port=port, log_level="warning", timeout_graceful_shutdown=5)
    )
    serving = asyncio.create_task(server.serve())
    base_url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{port}"
    while not server.started:
        if serving.done():
            serving.result()
            return 1
        await asyncio.sleep(0.02)
    print(f"Gateway on {base_url}; {args.concurrency} clients for {args.duration:g}s…", flush=True)
    runtime: Runtime = app.state.runtime
    started = datetime.now(UTC)
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as client:
        keys = await _team_keys(client, admin_key)
        chaos = asyncio.create_task(_chaos(client, upstreams))
        try:
            tally = await _replay(client, keys, server, args)
        finally:
            chaos.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await chaos
    await runtime.ledger.flush()
    print(await _summary(runtime, tally, since=started, duration=args.duration))
    print(_where(base_url, admin_key, keys))
    if args.exit:
        server.should_exit = True
    else:
        print("\nServing until Ctrl-C.", flush=True)
    await serving
    if not args.exit:
        print("\nTollgate demo stopped.")
    return 0


async def _team_keys(client: httpx.AsyncClient, admin_key: str) -> dict[str, str]:
    """One virtual key per team, created through the admin API as an operator would."""
    keys = {}
    for team in TEAMS:
        response = await client.post(
            "/admin/keys",
            json={"team": team, "name": f"demo-{team}"},
            headers={"authorization": f"Bearer {admin_key}"},
        )
        response.raise_for_status()
        keys[team] = str(response.json()["key"])
    return keys


async def _replay(
    client: httpx.AsyncClient, keys: dict[str, str], server: uvicorn.Server, args: argparse.Namespace
) -> Tally:
    tally = Tally()
    deadline = time.monotonic() + args.duration

    async def user(index: int) -> None:
        rng = random.Random(args.seed * 1000 + index)
        workload = Workload(rng)
        # Client i starts with the i-th kind of work, so even a short run has every team in it.
        call = workload.make(Workload.MIX[index % len(Workload.MIX)][0])
        while time.monotonic() < deadline and not server.should_exit:
            try:
                tally.add(call, await send(client, call, key=keys[call.team]))
            except httpx.HTTPError:
                tally.failed_to_connect += 1
            # People pause between requests; an instant upstream would otherwise flood the ledger.
            await asyncio.sleep(rng.expovariate(1 / 0.25))
            call = workload.next()

    await asyncio.gather(*(user(i) for i in range(args.concurrency)))
    return tally


async def _chaos(client: httpx.AsyncClient, upstreams: dict[str, str]) -> None:
    """Upstreams misbehave now and then, as real ones do: a 503 from OpenAI every few seconds (the
    gateway retries it), and now and then Anthropic overloaded long enough that code questions fall
    back to gpt-4o. Faults go through the emulators' own control API."""
    openai_fault = {"kind": "status", "status": 503, "count": 1, "model": "gpt-4o-mini"}
    anthropic_fault = {"kind": "status", "status": 529, "count": 6, "model": ANTHROPIC_UPSTREAM}
    for tick in itertools.count(1):
        await asyncio.sleep(4.0)
        with contextlib.suppress(httpx.HTTPError):
            await client.post(upstreams["openai"] + "/_sandbox/faults", json=openai_fault)
            if tick % 3 == 0:
                await client.post(upstreams["anthropic"] + "/_sandbox/faults", json=anthropic_fault)


async def _summary(runtime: Runtime, tally: Tally, *, since: datetime, duration: float) -> str:
    until = datetime.now(UTC) + timedelta(minutes=1)
    lines = [
        "",
        f"Tollgate demo: {tally.sent} requests in {duration:g}s from {len(TEAMS)} teams — "
        f"{tally.ok} answered, {tally.sent - tally.ok} refused or failed; "
        f"{tally.cache_hits} from the response cache, {tally.retried} needed more than one attempt.",
        "Mix: " + ", ".join(f"{kind} {count}" for kind, count in sorted(tally.kinds.items())),
    ]
    everything = await query_spend(
        runtime.engine, SpendQuery(group_by=(), since=since - timedelta(minutes=1), until=until)
    )
    overall = present(totals(everything))
    lines.append(
        f"Spent ${overall['cost_usd']}; the same traffic on gpt-4o alone, uncached, would have cost "
        f"${overall['baseline_cost_usd']} (saved ${overall['savings_usd']}, "
        f"of which provider prompt caching ${overall['cache_saving_usd']})."
    )
    for group in ("team", "model"):
        query = SpendQuery(group_by=(group,), since=since - timedelta(minutes=1), until=until)
        rows = [present(row) for row in await query_spend(runtime.engine, query)]
        lines += ["", f"Spend by {group}", render_table((group,), rows)]
    return "\n".join(lines)


def _where(base_url: str, admin_key: str, keys: dict[str, str]) -> str:
    team_keys = "\n".join(f"  {team:<10} {key}" for team, key in keys.items())
    return (
        f"\nDashboard:  {base_url}/dashboard   (sign in with the admin key, or a team key)\n"
        f"Admin key:  {admin_key}\n"
        f"Team keys:\n{team_keys}\n"
        f"Metrics:    {base_url}/metrics\n"
        f"Spend API:  curl -H 'Authorization: Bearer {admin_key}' '{base_url}/v1/spend?group_by=team,model'\n"
        f"Try it:     curl {base_url}/v1/chat/completions -H 'Authorization: Bearer {keys[TEAMS[0]]}' "
        "-H 'content-type: application/json' "
        '-d \'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}\''
    )
