// The request explorer: the ledger's rows (`GET /v1/spend/requests`) under a filter, a page at a
// time, and one request opened in full (`GET /v1/spend/requests/{id}`): route and reason, attempts,
// deployments tried, tokens, cost by token class, latency split and, where kept, the bodies.

import { getV1, type ListedRequest, type Params, type RequestDetail, type RequestPage } from "./api";
import { colourFor } from "./colours";
import { formatCount, formatMs, formatUsd } from "./format";
import { Grid } from "./grid";
import { keepGrid } from "./breakdown";

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;

/** Form field id -> API parameter. */
const FIELDS: Record<string, string> = {
  "x-since": "since",
  "x-until": "until",
  "x-team": "team",
  "x-key": "key",
  "x-model": "model",
  "x-provider": "provider",
  "x-status": "status",
  "x-error-type": "error_type",
  "x-tag": "tag",
  "x-min-cost": "min_cost_usd",
};

// Filters a link set that have no field of their own (a new dimension, e.g. `route`): shown as chips.
let extra: Record<string, string> = {};
let loaded: ListedRequest[] = [];
let next: string | null = null;
let generation = 0;

const grid = keepGrid(
  "grid-requests",
  new Grid<ListedRequest>(
    "grid-requests",
    [
      { label: "Time (UTC)", value: (r) => r.created_at, text: (r) => r.created_at.slice(0, 19).replace("T", " ") },
      { label: "Team", value: (r) => r.team, text: (r) => r.team ?? "", swatch: (r) => (r.team ? colourFor("team", r.team) : null) },
      { label: "Model", value: (r) => r.model ?? r.requested_model, text: (r) => r.model ?? r.requested_model },
      { label: "Provider", value: (r) => r.provider, text: (r) => r.provider ?? "" },
      {
        label: "Status",
        num: true,
        value: (r) => r.status,
        text: (r) => String(r.status),
        className: (r) => (r.status >= 400 ? "over" : ""),
        title: (r) => r.error_type ?? "",
      },
      { label: "Input tokens", num: true, value: (r) => r.prompt_tokens, text: (r) => formatCount(r.prompt_tokens) },
      { label: "Output tokens", num: true, value: (r) => r.completion_tokens, text: (r) => formatCount(r.completion_tokens) },
      { label: "Cost (USD)", num: true, value: (r) => r.cost_nano, text: (r) => formatUsd(r.cost_nano) },
      { label: "Latency (ms)", num: true, value: (r) => r.latency_ms, text: (r) => formatMs(r.latency_ms) },
      { label: "TTFT (ms)", num: true, value: (r) => r.ttft_ms, text: (r) => formatMs(r.ttft_ms) },
      { label: "Tags", value: (r) => r.tags.join(","), text: (r) => r.tags.join(", ") },
    ],
    {
      empty: "No request matches these filters.",
      filename: "tollgate-requests.csv",
      onRow: (row) => void show(row.id),
      rowTitle: "Open this request",
    },
  ),
);

export function explorerParams(): Params {
  const params: Params = { ...extra };
  for (const [id, name] of Object.entries(FIELDS)) {
    const value = $<HTMLInputElement | HTMLSelectElement>(id).value.trim();
    if (value) params[name] = value;
  }
  return params;
}

/** Sets every field: the given filters, the rest cleared (a team key's team stays its own). */
export function setExplorer(filters: Record<string, string>): void {
  const fielded = new Set(Object.values(FIELDS));
  extra = Object.fromEntries(Object.entries(filters).filter(([name, value]) => value && !fielded.has(name)));
  chips();
  for (const [id, name] of Object.entries(FIELDS)) {
    const field = $<HTMLInputElement | HTMLSelectElement>(id);
    if (field.disabled) continue;
    const value = filters[name] ?? "";
    if (field instanceof HTMLSelectElement && value && ![...field.options].some((o) => o.value === value)) {
      field.add(new Option(value, value));
    }
    field.value = value;
  }
}

function chips(): void {
  const holder = $("x-extra");
  holder.replaceChildren();
  holder.hidden = Object.keys(extra).length === 0;
  for (const [name, value] of Object.entries(extra)) {
    const chip = document.createElement("button");
    chip.type = "button";
    chip.className = "chip";
    chip.title = "Remove this filter";
    chip.textContent = `${name} = ${value} ✕`;
    chip.addEventListener("click", () => {
      delete extra[name];
      chips();
      void loadRequests().catch(() => undefined);
    });
    holder.append(chip);
  }
}

export function explorerOptions(lists: Record<string, { value: string; label: string }[]>, lockedTeam: string | null): void {
  for (const [id, values] of Object.entries(lists)) {
    const select = $<HTMLSelectElement>(id);
    const current = select.value;
    select.replaceChildren(new Option("any", ""));
    for (const { value, label } of values) select.add(new Option(label, value));
    if ([...select.options].some((o) => o.value === current)) select.value = current;
  }
  const team = $<HTMLSelectElement>("x-team");
  team.disabled = lockedTeam !== null;
  if (lockedTeam !== null) {
    team.replaceChildren(new Option(lockedTeam, lockedTeam));
    team.value = lockedTeam;
  }
}

export async function loadRequests(more = false): Promise<void> {
  const mine = ++generation;
  const params = { ...explorerParams(), limit: "100", before: more ? (next ?? undefined) : undefined };
  const page = await getV1<RequestPage>("spend/requests", params);
  if (mine !== generation) return;
  loaded = more ? [...loaded, ...page.data] : page.data;
  next = page.next_before;
  grid.set(loaded);
  $("x-more").hidden = next === null;
  const summary = $("explorer-summary");
  summary.textContent =
    `${formatCount(page.matched)} matched · ${formatUsd(page.cost_nano)} · ` +
    `${formatCount(page.prompt_tokens)} in / ${formatCount(page.completion_tokens)} out tokens` +
    (page.matched > loaded.length ? ` · showing the newest ${formatCount(loaded.length)}` : "");
  summary.dataset.matched = String(page.matched);
  summary.dataset.cost = String(page.cost_nano);
}

export function resetExplorer(): void {
  generation++;
  loaded = [];
  next = null;
  // Every list emptied, the team unlocked: the next caller's lists are filled on their first visit.
  for (const id of ["x-team", "x-key", "x-model", "x-provider", "x-tag"]) {
    const select = $<HTMLSelectElement>(id);
    select.disabled = false;
    select.replaceChildren(new Option("any", ""));
  }
  setExplorer({});
  grid.set([]);
  closeDetail();
}

export function closeDetail(): void {
  $("request-detail").hidden = true;
  delete $("request-detail").dataset.id;
}

function terms(id: string, entries: [string, string | null | undefined][]): void {
  const list = $(id);
  list.replaceChildren();
  for (const [term, value] of entries) {
    if (value === null || value === undefined || value === "") continue;
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    list.append(dt, dd);
  }
}

const CLASS_LABELS: Record<string, string> = {
  input: "Input (uncached)",
  cached: "Cached input",
  cache_write: "Cache write",
  output: "Output",
  reasoning: "Reasoning",
};

export async function show(id: string): Promise<void> {
  const detail = await getV1<RequestDetail>(`spend/requests/${encodeURIComponent(id)}`);
  const panel = $("request-detail");
  panel.hidden = false;
  panel.dataset.id = detail.id;
  $("d-id").textContent = detail.id;
  terms("d-route", [
    ["Time (UTC)", detail.created_at.slice(0, 23).replace("T", " ")],
    ["Team", detail.team],
    ["Key", detail.key_id],
    ["User", detail.user],
    ["Asked for", detail.requested_model],
    ["Answered by", detail.model ? `${detail.model} (${detail.provider}/${detail.upstream_model})` : "nobody"],
    ["Tier", detail.tier],
    ["Route reason", detail.route_reason],
    ["Route score", detail.route_score === null ? null : detail.route_score.toFixed(3)],
    ["Escalated from", detail.escalated_from ? `${detail.escalated_from} (${detail.escalation_reason ?? ""})` : null],
    ["Tags", detail.tags.join(", ")],
    ["Flags", detail.flags.join(", ")],
  ]);
  terms("d-attempts", [
    ["Status", detail.error_type ? `${detail.status} ${detail.error_type}` : String(detail.status)],
    ["Error", detail.error_message],
    ["Attempts", String(detail.attempts)],
    ["Deployments tried", detail.deployments_tried.join(" → ") || "none"],
    ["Fallback used", detail.fallback_used ? "yes" : "no"],
    ["Response cache", detail.cache_status],
    ["Stream", detail.stream ? "yes" : "no"],
    ["Usage", detail.usage_estimated ? "estimated (the provider reported none)" : "as reported"],
  ]);
  fillCost(detail);
  const split = detail.latency_split;
  terms("d-latency", [
    ["End to end", formatMs(split.total_ms)],
    ["Gateway overhead", split.gateway_ms === null ? null : formatMs(split.gateway_ms)],
    ["Upstream (incl. backoff)", split.upstream_ms === null ? null : formatMs(split.upstream_ms)],
    ["First token", split.first_token_ms === null ? "not streamed" : formatMs(split.first_token_ms)],
    ["Generation after it", split.generation_ms === null ? null : formatMs(split.generation_ms)],
  ]);
  const bodies = $("d-bodies");
  bodies.replaceChildren();
  if (detail.bodies === null) {
    bodies.append("Bodies are not stored for this team (teams opt in with store_bodies).");
  } else {
    for (const [label, text] of [
      ["Request", detail.bodies.request],
      ["Response", detail.bodies.response ?? "(none)"],
    ] as const) {
      const heading = document.createElement("h4");
      heading.textContent = label + (detail.bodies.truncated ? " (truncated)" : "");
      const pre = document.createElement("pre");
      pre.textContent = text;
      bodies.append(heading, pre);
    }
  }
  panel.scrollIntoView({ block: "nearest" });
}

function fillCost(detail: RequestDetail): void {
  const table = $<HTMLTableElement>("d-cost");
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const label of ["", "Tokens", "Cost (USD)"]) {
    const th = document.createElement("th");
    th.textContent = label;
    if (label) th.className = "num";
    head.append(th);
  }
  const body = table.createTBody();
  const line = (label: string, tokens: number | null, nano: number | null, className = "") => {
    const tr = body.insertRow();
    tr.className = className;
    for (const [i, text] of [label, tokens === null ? "" : formatCount(tokens), nano === null ? "" : formatUsd(nano)].entries()) {
      const td = tr.insertCell();
      td.textContent = text;
      if (i) td.className = "num";
    }
  };
  const cost = detail.cost;
  for (const part of cost.classes ?? []) line(CLASS_LABELS[part.class] ?? part.class, part.tokens, part.cost_nano);
  if (!cost.classes) {
    line("Input", detail.prompt_tokens, cost.billed.input_nano);
    line("Output", detail.completion_tokens, cost.billed.output_nano);
  }
  if (cost.billed.escalation_nano) line("Discarded first attempt (escalation)", null, cost.billed.escalation_nano);
  line("Total billed", detail.prompt_tokens + detail.completion_tokens, cost.billed.total_nano, "total");
  const notes: Record<string, string> = {
    as_billed: `Input ${formatUsd(cost.billed.input_nano)} and output ${formatUsd(cost.billed.output_nano)} as billed, split by token class.`,
    current_price: "The price changed since this was billed: the classes are at today's price, the total is what was billed.",
    unknown: "No price is known for the deployment that answered.",
    cache_hit: "Answered from the response cache: nothing was billed upstream.",
  };
  $("d-cost-note").textContent = notes[cost.priced] ?? "";
}
