// The Tables, Latency and Errors views: sortable grids with CSV export, each row a link to the
// requests behind it (the explorer, filtered to that row).

import type { DeploymentRetries, ErrorKind, ErrorsReport, Latency, LatencyReport, SpendRow, Table } from "./api";
import { colourFor } from "./colours";
import { formatCount, formatMs, formatPercent, formatUsd } from "./format";
import { type Column, Grid } from "./grid";

/** What a row links to: explorer filters (team, model, provider, key, status, error_type...). */
export type Drill = (filters: Record<string, string>) => void;

export const NOT_CONFIGURED = "not configured";

const grids: Record<string, Grid<never>> = {};
// Kept in `window.tollgate.grids` so a browser test can read a grid's rows and its CSV.
const exposed = window as unknown as { tollgate?: Record<string, unknown> };
exposed.tollgate = { ...exposed.tollgate, grids };

export function keepGrid<R>(id: string, grid: Grid<R>): Grid<R> {
  grids[id] = grid as unknown as Grid<never>;
  return grid;
}

export function gridById(id: string): Grid<never> | undefined {
  return grids[id];
}

const count = (label: string, value: (r: SpendRow) => number): Column<SpendRow> => ({
  label,
  num: true,
  value,
  text: (r) => formatCount(value(r)),
});

/** Money that needs a baseline: "not configured" without one (no baseline model, or the spend API
 * says so for the row with a null saving), never a negative "saving". */
function baselineMoney(label: string, value: (r: SpendRow) => number | null, configured: boolean): Column<SpendRow> {
  const known = (r: SpendRow) => (configured && r.savings_nano !== null && r.savings_nano !== undefined ? value(r) : null);
  return {
    label,
    num: true,
    value: known,
    text: (r) => {
      const v = known(r);
      return v === null || v === undefined ? NOT_CONFIGURED : formatUsd(v);
    },
    className: (r) => (known(r) === null ? "dim" : ""),
  };
}

function nameColumn(by: string): Column<SpendRow>[] {
  if (by === "key") {
    return [
      {
        label: "Key",
        value: (r) => r.name ?? r.key ?? null,
        text: (r) => (r.key ? `${r.prefix ?? r.key}… ${r.name ?? ""}`.trim() : "(no key)"),
        title: (r) => r.key ?? "",
      },
      { label: "Team", value: (r) => r.key_team ?? null, text: (r) => r.key_team ?? "" },
    ];
  }
  const label = by[0].toUpperCase() + by.slice(1);
  const value = (r: SpendRow) => (r as unknown as Record<string, string | null>)[by] ?? null;
  return [{ label, value, text: (r) => value(r) ?? "(none)", swatch: (r) => colourFor(by, value(r) ?? "(none)") }];
}

export function fillSpendTable(data: Table, baselineConfigured: boolean, drill: Drill): Grid<SpendRow> {
  const by = data.by;
  const columns: Column<SpendRow>[] = [
    ...nameColumn(by),
    count("Requests", (r) => r.requests),
    count("Errors", (r) => r.errors),
    { label: "Error rate", num: true, value: (r) => r.error_rate, text: (r) => formatPercent(r.error_rate) },
    count("Input tokens", (r) => r.prompt_tokens),
    count("Output tokens", (r) => r.completion_tokens),
    { label: "Spend (USD)", num: true, value: (r) => r.cost_nano, text: (r) => formatUsd(r.cost_nano) },
    baselineMoney("Baseline (USD)", (r) => r.baseline_cost_nano, baselineConfigured),
    baselineMoney("Saved (USD)", (r) => r.savings_nano, baselineConfigured),
    { label: "Saved by caching (USD)", num: true, value: (r) => r.cache_saving_nano, text: (r) => formatUsd(r.cache_saving_nano) },
  ];
  const grid = keepGrid(
    "grid-spend",
    new Grid<SpendRow>("grid-spend", columns, {
      empty: "Nothing was spent in this range.",
      filename: `tollgate-spend-by-${by}.csv`,
      onRow: (row) => {
        const value = by === "key" ? row.key : (row as unknown as Record<string, string | null>)[by];
        drill(value ? { [by]: value } : {});
      },
    }),
  );
  grid.set(data.rows, data.reason);
  return grid;
}

export function fillLatency(data: LatencyReport, id: string, drill: Drill): void {
  const by = data.by;
  const ms = (label: string, value: (g: Latency) => number | null): Column<Latency> => ({
    label,
    num: true,
    value,
    text: (g) => formatMs(value(g)),
  });
  const columns: Column<Latency>[] = [
    {
      label: by[0].toUpperCase() + by.slice(1),
      value: (g) => g.name,
      text: (g) => g.name ?? "(none)",
      swatch: (g) => colourFor(by, g.name ?? "(none)"),
    },
    { label: "Requests", num: true, value: (g) => g.requests, text: (g) => formatCount(g.requests) },
    ms("End to end p50 (ms)", (g) => g.latency_p50_ms),
    ms("End to end p95 (ms)", (g) => g.latency_p95_ms),
    { label: "Streamed", num: true, value: (g) => g.streamed, text: (g) => formatCount(g.streamed) },
    ms("TTFT p50 (ms)", (g) => g.ttft_p50_ms),
    ms("TTFT p95 (ms)", (g) => g.ttft_p95_ms),
    {
      label: "Output tokens/s (median)",
      num: true,
      value: (g) => g.tokens_per_second_p50,
      text: (g) => (g.tokens_per_second_p50 === null ? "–" : g.tokens_per_second_p50.toFixed(1)),
    },
    ms("Gateway overhead p50 (ms)", (g) => g.overhead_p50_ms),
  ];
  const grid = keepGrid(
    id,
    new Grid<Latency>(id, columns, {
      empty: "No successful requests in this range.",
      filename: `tollgate-latency-by-${by}.csv`,
      onRow: (g) => drill(g.name ? { [by]: g.name, status: "ok" } : { status: "ok" }),
    }),
  );
  grid.set(data.groups);
}

export function fillErrors(data: ErrorsReport, drill: Drill): void {
  const kinds = keepGrid(
    "grid-error-kinds",
    new Grid<ErrorKind>(
      "grid-error-kinds",
      [
        { label: "Status", num: true, value: (k) => k.status, text: (k) => String(k.status), swatch: (k) => colourFor("status", String(k.status)) },
        { label: "Error type", value: (k) => k.error_type, text: (k) => k.error_type ?? "(none)" },
        { label: "Provider", value: (k) => k.provider, text: (k) => k.provider ?? "(none)" },
        { label: "Model", value: (k) => k.model, text: (k) => k.model ?? "(none)" },
        { label: "Errors", num: true, value: (k) => k.errors, text: (k) => formatCount(k.errors) },
        { label: "Last seen (UTC)", value: (k) => k.last_at, text: (k) => (k.last_at ?? "").slice(0, 19).replace("T", " ") },
      ],
      {
        empty: "No errors in this range.",
        filename: "tollgate-error-kinds.csv",
        onRow: (k) => {
          const filters: Record<string, string> = { status: String(k.status) };
          if (k.error_type) filters.error_type = k.error_type;
          if (k.provider) filters.provider = k.provider;
          if (k.model) filters.model = k.model;
          drill(filters);
        },
      },
    ),
  );
  kinds.set(data.kinds);
  const n = (label: string, value: (d: DeploymentRetries) => number): Column<DeploymentRetries> => ({
    label,
    num: true,
    value,
    text: (d) => formatCount(value(d)),
  });
  const deployments = keepGrid(
    "grid-deployments",
    new Grid<DeploymentRetries>(
      "grid-deployments",
      [
        { label: "Deployment", value: (d) => d.deployment, text: (d) => d.deployment },
        n("Requests", (d) => d.requests),
        n("Answered", (d) => d.answered),
        n("Errors", (d) => d.errors),
        n("Retries", (d) => d.retries),
        n("Answered as fallback", (d) => d.fallback_answers),
        n("Failed over", (d) => d.failed_over),
      ],
      {
        empty: "No request reached a deployment in this range.",
        filename: "tollgate-retries-per-deployment.csv",
        onRow: (d) => drill({ provider: d.deployment.split("/")[0] }),
      },
    ),
  );
  deployments.set(data.deployments);
}
