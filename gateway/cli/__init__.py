"""The `tollgate` command (`main`) and its subcommands, one module each: keys, ledger (spend, reprice),
local (vLLM launch), pricing, routing (route-eval), demo; plus the sandbox launcher `serve` uses for
the embedded default. Subcommands import their heavy parts only when they run."""
