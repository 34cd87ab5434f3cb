// The dashboard page: sign-in, filters, views, and one refresh that loads the open view's figures.
// Every number comes from /dashboard/api or /v1 (computed server-side from the ledger); nothing is
// summed here. Signing out forgets every filter, so the next person starts from the defaults.

import {
  ApiError,
  type Budgets,
  type ErrorsReport,
  type Fleet,
  getJson,
  type LatencyReport,
  type Me,
  type Params,
  type Routing,
  type SpendOverTime,
  type Summary,
  session,
  type Table,
  type Top,
  Unauthorized,
} from "./api";
import { type Drill, fillErrors, fillLatency, fillSpendTable, gridById, NOT_CONFIGURED } from "./breakdown";
import { destroyAll, drawBudgets, drawErrors, drawFleet, drawLatency, drawSavings, drawSpend } from "./charts";
import { forgetNames, knowNames } from "./colours";
import { closeDetail, explorerOptions, explorerParams, loadRequests, resetExplorer, setExplorer } from "./explorer";
import { dayLabel, formatCount, formatMs, formatPercent, formatUsd } from "./format";
import { fillBudgets, fillFleet, fillRouting, fillTop } from "./tables";

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;

const VIEWS = ["overview", "tables", "latency", "errors", "requests"] as const;
type View = (typeof VIEWS)[number];
const DEFAULTS = { range: "7", stack: "team", tableBy: "team", errorsBy: "status", view: "overview" as View };

let me: Me | null = null;
let stack = DEFAULTS.stack;
let tableBy = DEFAULTS.tableBy;
let errorsBy = DEFAULTS.errorsBy;
let view: View = DEFAULTS.view;
let explorerReady = false;
let generation = 0;

const baselineConfigured = (): boolean => Boolean(me?.baseline_model);

function setState(state: "loading" | "ready" | "error" | "signed-out"): void {
  document.body.dataset.state = state;
}

function notice(text: string | null): void {
  const box = $("notice");
  box.hidden = text === null;
  box.textContent = text ?? "";
}

function options(select: HTMLSelectElement, values: string[], allLabel: string | null): void {
  const current = select.value;
  select.replaceChildren();
  if (allLabel !== null) select.add(new Option(allLabel, ""));
  for (const value of values) select.add(new Option(value, value));
  if ([...select.options].some((o) => o.value === current)) select.value = current;
}

/** The first instant of the range: whole UTC days, like the spend API's daily rollup. */
function since(range: string): string {
  const now = new Date();
  const first =
    range === "mtd"
      ? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))
      : new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (Number(range) - 1)));
  return first.toISOString().slice(0, 10);
}

function filters(): Params {
  return {
    since: since($<HTMLSelectElement>("f-range").value),
    team: $<HTMLSelectElement>("f-team").value || undefined,
    model: $<HTMLSelectElement>("f-model").value || undefined,
    tag: $<HTMLSelectElement>("f-tag").value || undefined,
  };
}

/** A tag filter combines only with a team filter (the tag rollup has no model or provider). */
function applyConstraints(): void {
  const model = $<HTMLSelectElement>("f-model");
  const tag = $<HTMLSelectElement>("f-tag");
  tag.disabled = model.value !== "";
  model.disabled = tag.value !== "";
  const tagged = tag.value !== "";
  if (tagged) stack = "team";
  for (const button of document.querySelectorAll<HTMLButtonElement>("#stack button")) {
    button.disabled = tagged && button.dataset.stack !== "team";
    button.setAttribute("aria-pressed", String(button.dataset.stack === stack));
  }
}

function tile(id: string, text: string, raw: number | string | null, tone?: "good" | "warn" | "bad"): void {
  const element = $(id);
  const value = element.querySelector(".value") as HTMLElement;
  value.textContent = text;
  element.dataset.raw = raw === null ? "" : String(raw);
  element.classList.remove("good", "warn", "bad");
  if (tone) element.classList.add(tone);
}

function plural(count: number, noun: string): string {
  return `${formatCount(count)} ${noun}${count === 1 ? "" : "s"}`;
}

function hint(id: string, text: string): void {
  $(id).textContent = text;
}

function showTiles(summary: Summary): void {
  const t = summary.totals;
  tile("kpi-cost", formatUsd(t.cost_nano), t.cost_nano);
  const routing = summary.savings.routing_nano;
  if (baselineConfigured() && t.baseline_cost_nano !== null && routing !== null) {
    tile("kpi-baseline", formatUsd(t.baseline_cost_nano), t.baseline_cost_nano);
    hint("kpi-baseline-hint", `on ${me?.baseline_model}, uncached`);
    tile("kpi-saved-routing", formatUsd(routing), routing, routing < 0 ? "bad" : "good");
  } else {
    // No baseline model: there is nothing to save against, which is not a loss.
    tile("kpi-baseline", NOT_CONFIGURED, null);
    hint("kpi-baseline-hint", "set pricing.baseline_model");
    tile("kpi-saved-routing", NOT_CONFIGURED, null);
  }
  if (summary.savings.caching_tracked) {
    const caching = summary.savings.caching_nano;
    tile("kpi-saved-caching", formatUsd(caching), caching, caching < 0 ? "bad" : "good");
  } else {
    tile("kpi-saved-caching", "n/a", null);
  }
  if (summary.savings.context_tracked) {
    const context = summary.savings.context_nano;
    tile("kpi-saved-context", formatUsd(context), context);
    hint("kpi-saved-context-hint", `${formatCount(summary.savings.context_tokens)} input tokens left out`);
  } else {
    tile("kpi-saved-context", "n/a", null);
  }
  tile("kpi-requests", formatCount(t.requests), t.requests);
  hint("kpi-requests-hint", plural(t.errors, "error"));
  tile("kpi-tokens", formatCount(t.prompt_tokens + t.completion_tokens), t.prompt_tokens + t.completion_tokens);
  hint("kpi-tokens-hint", `in ${formatCount(t.prompt_tokens)} · out ${formatCount(t.completion_tokens)}`);
  const errorTone = t.error_rate >= 0.05 ? "bad" : t.error_rate >= 0.01 ? "warn" : undefined;
  tile("kpi-error-rate", formatPercent(t.error_rate), t.error_rate, errorTone);
  hint("kpi-errors-hint", `${formatCount(t.errors)} of ${formatCount(t.requests)}`);
  const r = summary.rates;
  tile("kpi-fallback-rate", formatPercent(r.fallback_rate), r.fallback_rate);
  hint("kpi-fallback-hint", `${formatCount(r.fallbacks)} fell back`);
  tile("kpi-cache-hit", formatPercent(r.cache_hit_rate), r.cache_hit_rate);
  hint("kpi-cache-hint", `response cache: ${formatCount(r.cache_hits)} of ${formatCount(r.cacheable)}`);
  tile("kpi-prompt-cache", formatPercent(r.prompt_cache_read_share), r.prompt_cache_read_share);
  const overall = summary.latency.overall;
  tile("kpi-latency-p95", formatMs(overall.latency_p95_ms), overall.latency_p95_ms);
  hint(
    "kpi-latency-hint",
    overall.requests ? `p50 ${formatMs(overall.latency_p50_ms)} · ${formatCount(overall.requests)} req` : "end to end, every request",
  );
  tile("kpi-ttft-p95", formatMs(overall.ttft_p95_ms), overall.ttft_p95_ms);
  hint(
    "kpi-ttft-hint",
    overall.streamed ? `p50 ${formatMs(overall.ttft_p50_ms)} · ${formatCount(overall.streamed)} streamed` : "no streamed requests",
  );
  $("range-note").textContent =
    `${dayLabel(summary.since)} – ${dayLabel(summary.until)} ${summary.until.slice(0, 4)} (UTC, whole days, as the spend API counts them)`;
  $("savings-caption").textContent = !baselineConfigured()
    ? "no baseline model configured: savings against it are not shown"
    : summary.savings.caching_tracked
      ? "cost + routing savings + caching savings = baseline"
      : "caching savings are not kept per tag";
}

/** The page's filters (range, team, model, tag) as explorer fields. */
function pageFilters(): Record<string, string> {
  return Object.fromEntries(Object.entries(filters()).filter(([, v]) => v)) as Record<string, string>;
}

/** The explorer on the page's range, team, model and tag; its own fields (key, provider, status,
 * error type, cost) kept. Opening its tab or changing the page's filters does this. */
function explorerFromPage(): void {
  const own = explorerParams();
  for (const name of ["since", "until", "team", "model", "tag"]) delete own[name];
  setExplorer({ ...(own as Record<string, string>), ...pageFilters() });
}

/** A bucket of a chart as an explorer time range: [start, start + 1 hour or day). */
function bucketRange(label: string, bucket: "hour" | "day"): { since: string; until: string } {
  const start = new Date(bucket === "hour" ? `${label}Z` : `${label}T00:00:00Z`);
  const end = new Date(start.getTime() + (bucket === "hour" ? 3_600_000 : 86_400_000));
  const iso = (d: Date) => d.toISOString().replace(".000Z", "Z");
  return { since: iso(start), until: iso(end) };
}

/** The explorer, filtered to what a chart bar or a table row stands for (on top of the page's filters). */
const drill: Drill = (extra) => {
  const base = filters();
  const chosen: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...base, ...extra })) if (value) chosen[name] = value;
  setExplorer(chosen);
  void show("requests", false);
};

async function refreshOverview(params: Params): Promise<void> {
  const [summary, series, budgets, top, fleet, routing] = await Promise.all([
    getJson<Summary>("summary", params),
    getJson<SpendOverTime>("spend-over-time", { ...params, stack }),
    getJson<Budgets>("budgets", params),
    getJson<Top>("top", params),
    getJson<Fleet>("fleet", params),
    getJson<Routing>("routing", params),
  ]);
  drawOverview(summary, series, budgets, top, fleet);
  fillRouting(routing);
}

function drawOverview(summary: Summary, series: SpendOverTime, budgets: Budgets, top: Top, fleet: Fleet): void {
  showTiles(summary);
  drawSpend(series, (index, name) => {
    const range = bucketRange(series.labels[index], series.bucket);
    drill({ ...range, ...(name && name !== "(none)" ? { [series.stack]: name } : {}) });
  });
  drawSavings(series, summary.savings.caching_tracked, baselineConfigured(), (index) =>
    drill(bucketRange(series.labels[index], series.bucket)),
  );
  drawLatency(summary.latency.models, { onClick: (model) => drill({ ...(model ? { model } : {}), status: "ok" }) });
  drawBudgets(budgets, (team, day) => {
    const date = `${budgets.month}-${String(day).padStart(2, "0")}`;
    drill({ team, model: "", tag: "", ...bucketRange(date, "day") }); // budgets ignore model and tag
  });
  fillBudgets(budgets);
  $("budget-caption").textContent = `${budgets.month}, % of monthly budget left`;
  drawFleet(fleet, (d) => drill({ model: d.model, provider: d.provider, tag: "" }));
  fillFleet(fleet);
  $("fleet-caption").textContent = `blended $/MTok at ${fleet.mix.input}:${fleet.mix.output} in:out`;
  fillTop(top, drill);
  const note = $("tags-note");
  const tagged = top.tags_cost_nano ?? null;
  note.hidden = tagged === null || tagged <= summary.totals.cost_nano;
  note.textContent =
    tagged === null
      ? ""
      : `A request with several tags counts under each of them: all tags add up to ${formatUsd(tagged)}, ` +
        `more than the ${formatUsd(summary.totals.cost_nano)} actually spent.`;
}

async function refreshView(params: Params): Promise<void> {
  if (view === "overview") return refreshOverview(params);
  if (view === "tables") {
    fillSpendTable(await getJson<Table>("table", { ...params, by: tableBy }), baselineConfigured(), drill);
    return;
  }
  if (view === "latency") {
    const [models, providers] = await Promise.all([
      getJson<LatencyReport>("latency", { ...params, by: "model" }),
      getJson<LatencyReport>("latency", { ...params, by: "provider" }),
    ]);
    drawLatency(models.groups, {
      canvas: "chart-latency",
      speed: null,
      onClick: (model) => drill({ ...(model ? { model } : {}), status: "ok" }),
    });
    fillLatency(models, "grid-latency-model", drill);
    fillLatency(providers, "grid-latency-provider", drill);
    return;
  }
  if (view === "errors") {
    const report = await getJson<ErrorsReport>("errors", { ...params, by: errorsBy });
    drawErrors(report, (index, name) => {
      const range = bucketRange(report.labels[index], report.bucket);
      const value = name && name !== "(none)" ? { [report.by]: name } : {};
      drill({ ...range, status: "error", ...value, ...(report.by === "status" && name ? { status: name } : {}) });
    });
    $("errors-caption").textContent = `${formatCount(report.total)} failed requests`;
    fillErrors(report, drill);
    return;
  }
  if (!explorerReady) await prepareExplorer(params);
  await loadRequests();
}

/** The explorer's choice lists: teams, models, providers and tags from /api/me, keys from the key table. */
async function prepareExplorer(params: Params): Promise<void> {
  if (!me) return;
  const keys = await getJson<Table>("table", { since: params.since, team: params.team, by: "key" });
  const item = (value: string) => ({ value, label: value });
  explorerOptions(
    {
      "x-model": me.models.map(item),
      "x-provider": (me.providers ?? []).map(item),
      "x-tag": me.tags.map(item),
      "x-key": (keys.rows ?? [])
        .filter((row) => row.key)
        .map((row) => ({ value: row.key as string, label: `${row.prefix ?? row.key}… ${row.name ?? ""}`.trim() })),
      ...(me.kind === "team_key" ? {} : { "x-team": me.teams.map(item) }),
    },
    me.kind === "team_key" ? me.team : null,
  );
  explorerReady = true;
}

/** Opens a view; `load` false when the caller has set the explorer's filters and loads it itself. */
async function show(next: View, fromTab = true): Promise<void> {
  view = next;
  for (const section of document.querySelectorAll<HTMLElement>(".view")) section.hidden = section.dataset.view !== next;
  for (const button of document.querySelectorAll<HTMLButtonElement>("#tabs button")) {
    button.setAttribute("aria-pressed", String(button.dataset.view === next));
  }
  document.body.dataset.view = next;
  if (next === "requests" && fromTab) explorerFromPage();
  await refresh();
}

async function refresh(): Promise<void> {
  const mine = ++generation;
  const params = filters();
  setState("loading");
  notice(null);
  try {
    await refreshView(params);
    if (mine !== generation) return;
    setState("ready");
  } catch (error) {
    if (mine !== generation) return;
    if (error instanceof Unauthorized) {
      signOut(error.message);
      return;
    }
    notice(error instanceof ApiError ? `${error.status}: ${error.message}` : String(error));
    setState("error");
  }
}

function describe(who: Me): void {
  const label = $("who");
  label.replaceChildren();
  const strong = document.createElement("strong");
  if (who.kind === "admin") {
    label.append("signed in as ", Object.assign(strong, { textContent: "admin" }));
  } else if (who.kind === "team_key") {
    label.append("team ", Object.assign(strong, { textContent: who.team ?? "" }));
  } else {
    label.append(Object.assign(strong, { textContent: "open mode" }), " (no keys configured)");
  }
  $("sign-out").hidden = who.kind === "open";
}

async function enter(): Promise<boolean> {
  try {
    me = await getJson<Me>("me");
  } catch (error) {
    if (error instanceof Unauthorized) return false;
    throw error;
  }
  describe(me);
  knowNames("team", me.teams);
  knowNames("model", me.models);
  knowNames("provider", me.providers ?? []);
  groupButtons("#table-by", me.groupings?.table);
  const team = $<HTMLSelectElement>("f-team");
  options(team, me.teams, me.kind === "team_key" ? null : "All teams");
  team.disabled = me.kind === "team_key";
  options($<HTMLSelectElement>("f-model"), me.models, "All models");
  options($<HTMLSelectElement>("f-tag"), me.tags, "All tags");
  applyConstraints();
  $("sign-in").hidden = true;
  $("main").hidden = false;
  $("tabs").hidden = false;
  await show(view);
  return true;
}

/** Every filter and choice back to its default: the next person to sign in inherits nothing. */
function forgetFilters(): void {
  $<HTMLSelectElement>("f-range").value = DEFAULTS.range;
  // Emptied, not just reset: a value left in a list would be kept by the next caller's options().
  for (const [id, all] of [
    ["f-team", "All teams"],
    ["f-model", "All models"],
    ["f-tag", "All tags"],
  ]) {
    const select = $<HTMLSelectElement>(id);
    select.replaceChildren(new Option(all, ""));
    select.value = "";
    select.disabled = false;
  }
  stack = DEFAULTS.stack;
  tableBy = DEFAULTS.tableBy;
  errorsBy = DEFAULTS.errorsBy;
  view = DEFAULTS.view;
  explorerReady = false;
  resetExplorer();
  forgetNames();
  for (const section of document.querySelectorAll<HTMLElement>(".view")) section.hidden = section.dataset.view !== view;
  pressed("#stack", "stack", stack);
  pressed("#table-by", "by", tableBy);
  pressed("#errors-by", "by", errorsBy);
  applyConstraints();
}

/** The Tables view's "group by" choices are the server's (`/api/me`): a new dimension there
 * (a `route` column) is a new button here with no change to the page. */
function groupButtons(group: string, choices: string[] | undefined): void {
  const holder = document.querySelector<HTMLElement>(group);
  if (!holder || !choices?.length) return;
  const current = [...holder.querySelectorAll<HTMLButtonElement>("button")].map((b) => b.dataset.by);
  if (current.join() === choices.join()) return;
  holder.replaceChildren(
    ...choices.map((by) => {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.by = by;
      button.textContent = by === "error_type" ? "Error type" : by[0].toUpperCase() + by.slice(1);
      button.setAttribute("aria-pressed", String(by === tableBy));
      return button;
    }),
  );
}

function pressed(group: string, attribute: string, value: string): void {
  for (const button of document.querySelectorAll<HTMLButtonElement>(`${group} button`)) {
    button.setAttribute("aria-pressed", String(button.dataset[attribute] === value));
  }
}

function signOut(reason: string | null = null): void {
  generation++;
  session.clear();
  me = null;
  destroyAll();
  forgetFilters();
  $("main").hidden = true;
  $("tabs").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  const error = $("sign-in-error");
  error.hidden = reason === null;
  error.textContent = reason ?? "";
  $("sign-in").hidden = false;
  $<HTMLInputElement>("key").focus();
  setState("signed-out");
}

async function signIn(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const input = $<HTMLInputElement>("key");
  const key = input.value.trim();
  if (!key) return;
  session.set(key);
  input.value = "";
  try {
    if (!(await enter())) signOut("That key was not accepted.");
  } catch (error) {
    signOut(String(error instanceof Error ? error.message : error));
  }
}

function wire(): void {
  $<HTMLFormElement>("sign-in-form").addEventListener("submit", (e) => void signIn(e));
  $("sign-out").addEventListener("click", () => signOut());
  $("refresh").addEventListener("click", () => void refresh());
  for (const id of ["f-range", "f-team", "f-model", "f-tag"]) {
    $(id).addEventListener("change", () => {
      applyConstraints();
      if (view === "requests") explorerFromPage();
      void refresh();
    });
  }
  for (const button of document.querySelectorAll<HTMLButtonElement>("#stack button")) {
    button.addEventListener("click", () => {
      stack = button.dataset.stack ?? "team";
      applyConstraints();
      void refresh();
    });
  }
  for (const button of document.querySelectorAll<HTMLButtonElement>("#tabs button")) {
    button.addEventListener("click", () => void show((button.dataset.view as View) ?? "overview"));
  }
  for (const [group, set] of [
    ["#table-by", (value: string) => (tableBy = value)],
    ["#errors-by", (value: string) => (errorsBy = value)],
  ] as const) {
    // Delegated: the table's buttons are rebuilt from /api/me on every sign-in.
    document.querySelector(group)?.addEventListener("click", (event) => {
      const button = (event.target as HTMLElement).closest<HTMLButtonElement>("button[data-by]");
      if (!button) return;
      set(button.dataset.by ?? "");
      pressed(group, "by", button.dataset.by ?? "");
      void refresh();
    });
  }
  for (const button of document.querySelectorAll<HTMLButtonElement>("button.csv")) {
    button.addEventListener("click", () => gridById(button.dataset.csv ?? "")?.download());
  }
  const explorer = $<HTMLFormElement>("explorer");
  explorer.addEventListener("submit", (event) => {
    event.preventDefault();
    void refresh();
  });
  explorer.addEventListener("change", (event) => {
    if (event.target instanceof HTMLSelectElement) void refresh();
  });
  $("x-reset").addEventListener("click", () => {
    setExplorer(pageFilters());
    void refresh();
  });
  $("x-more").addEventListener("click", () => {
    loadRequests(true).catch((error: unknown) => notice(String(error instanceof Error ? error.message : error)));
  });
  $("d-close").addEventListener("click", () => closeDetail());
}

async function start(): Promise<void> {
  wire();
  try {
    if (!(await enter())) signOut();
  } catch (error) {
    notice(String(error instanceof Error ? error.message : error));
    setState("error");
  }
}

void start();
