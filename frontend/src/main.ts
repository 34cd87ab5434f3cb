// The dashboard page: sign-in, filters, and one refresh that loads every figure in parallel.
// Every number comes from /dashboard/api (computed server-side from the ledger); nothing is summed here.

import {
  ApiError,
  type Budgets,
  type Fleet,
  getJson,
  type Me,
  type Params,
  type Routing,
  type SpendOverTime,
  type Summary,
  session,
  type Top,
  Unauthorized,
} from "./api";
import { destroyAll, drawBudgets, drawFleet, drawLatency, drawSavings, drawSpend } from "./charts";
import { dayLabel, formatCount, formatMs, formatPercent, formatUsd } from "./format";
import { fillBudgets, fillFleet, fillRouting, fillTop } from "./tables";

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;

let me: Me | null = null;
let stack = "team";
let generation = 0;

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
  tile("kpi-baseline", formatUsd(t.baseline_cost_nano), t.baseline_cost_nano);
  hint("kpi-baseline-hint", me?.baseline_model ? `on ${me.baseline_model}, uncached` : "no baseline model set");
  const routing = summary.savings.routing_nano;
  tile("kpi-saved-routing", formatUsd(routing), routing, routing < 0 ? "bad" : "good");
  if (summary.savings.caching_tracked) {
    const caching = summary.savings.caching_nano;
    tile("kpi-saved-caching", formatUsd(caching), caching, caching < 0 ? "bad" : "good");
  } else {
    tile("kpi-saved-caching", "n/a", null);
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
  tile("kpi-ttft-p95", formatMs(overall.ttft_p95_ms), overall.ttft_p95_ms);
  hint("kpi-ttft-hint", overall.samples ? `p50 ${formatMs(overall.ttft_p50_ms)} · ${formatCount(overall.samples)} req` : "");
  $("range-note").textContent =
    `${dayLabel(summary.since)} – ${dayLabel(summary.until)} ${summary.until.slice(0, 4)} (UTC, whole days, as the spend API counts them)`;
  $("savings-caption").textContent = summary.savings.caching_tracked
    ? "cost + routing savings + caching savings = baseline"
    : "caching savings are not kept per tag";
}

async function refresh(): Promise<void> {
  const mine = ++generation;
  const params = filters();
  setState("loading");
  notice(null);
  try {
    const [summary, series, budgets, top, fleet, routing] = await Promise.all([
      getJson<Summary>("summary", params),
      getJson<SpendOverTime>("spend-over-time", { ...params, stack }),
      getJson<Budgets>("budgets", params),
      getJson<Top>("top", params),
      getJson<Fleet>("fleet", params),
      getJson<Routing>("routing", params),
    ]);
    if (mine !== generation) return;
    showTiles(summary);
    drawSpend(series);
    drawSavings(series, summary.savings.caching_tracked);
    drawLatency(summary.latency.models);
    drawBudgets(budgets);
    fillBudgets(budgets);
    $("budget-caption").textContent = `${budgets.month}, % of monthly budget left`;
    drawFleet(fleet);
    fillFleet(fleet);
    $("fleet-caption").textContent = `blended $/MTok at ${fleet.mix.input}:${fleet.mix.output} in:out`;
    fillTop(top);
    fillRouting(routing);
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
  const team = $<HTMLSelectElement>("f-team");
  options(team, me.teams, me.kind === "team_key" ? null : "All teams");
  team.disabled = me.kind === "team_key";
  options($<HTMLSelectElement>("f-model"), me.models, "All models");
  options($<HTMLSelectElement>("f-tag"), me.tags, "All tags");
  applyConstraints();
  $("sign-in").hidden = true;
  $("main").hidden = false;
  await refresh();
  return true;
}

function signOut(reason: string | null = null): void {
  generation++;
  session.clear();
  me = null;
  destroyAll();
  $("main").hidden = true;
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
