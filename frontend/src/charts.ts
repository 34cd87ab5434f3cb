// Every chart on the page, drawn by Chart.js (only the parts used are bundled). Each drawn chart
// is kept in `window.tollgate.charts` and its canvas is stamped with data-* attributes, so a
// browser test can check that it rendered with data.

import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  type ChartConfiguration,
  type ChartDataset,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";

import type { Budgets, ErrorsReport, Fleet, Latency, SpendOverTime } from "./api";
import { colourFor } from "./colours";
import { bucketLabel, formatCount, formatMs, formatPercent, formatUsd, formatUsdAxis, nanoToUsd } from "./format";

Chart.register(
  BarController,
  BarElement,
  CategoryScale,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
);
Chart.defaults.color = "#a4a7ad";
Chart.defaults.borderColor = "rgba(255,255,255,0.07)";
Chart.defaults.font.family = 'Inter, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
Chart.defaults.font.size = 11;
Chart.defaults.animation = false;
Chart.defaults.maintainAspectRatio = false;
Chart.defaults.plugins.legend.position = "bottom";
Chart.defaults.plugins.legend.labels.boxWidth = 10;
Chart.defaults.plugins.legend.labels.boxHeight = 10;
Chart.defaults.datasets.bar.maxBarThickness = 28;

const BLUE = "#5794f2";
const GREEN = "#73bf69";
const TEAL = "#6ed0e0";
const RED = "#f2495c";

const COMPACT = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

const charts: Record<string, Chart> = {};
const exposed = window as unknown as { tollgate?: Record<string, unknown> };
exposed.tollgate = { ...exposed.tollgate, charts };

type AnyConfig = ChartConfiguration<"bar" | "line", (number | null)[], string>;

/** Clicks on a chart of categories (one bar group per model, deployment...): the category clicked. */
function byIndex<T>(onClick: ((item: T) => void) | undefined, items: T[]) {
  return onClick ? clickable((index) => onClick(items[index]), []) : {};
}

/** A click on a bar: which bucket (index into the API's labels) and which series (its name). */
export type BarClick = (index: number, series: string | null) => void;

function clickable(onClick: BarClick | undefined, names: (string | null)[]) {
  if (!onClick) return {};
  return {
    onClick: (_event: unknown, elements: { index: number; datasetIndex: number }[]) => {
      const hit = elements[0];
      if (hit) onClick(hit.index, names[hit.datasetIndex] ?? null);
    },
    onHover: (event: { native: Event | null }, elements: unknown[]) => {
      const target = event.native?.target as HTMLElement | undefined;
      if (target) target.style.cursor = elements.length ? "pointer" : "default";
    },
  };
}

function draw(id: string, config: AnyConfig): void {
  charts[id]?.destroy();
  const canvas = document.getElementById(id) as HTMLCanvasElement;
  const points = config.data.datasets.reduce(
    (count, dataset) => count + dataset.data.filter((v) => v !== null && v !== 0).length,
    0,
  );
  charts[id] = new Chart(canvas, config as ChartConfiguration);
  canvas.dataset.datasets = String(config.data.datasets.length);
  canvas.dataset.points = String(points);
  canvas.dataset.rendered = "true";
  emptyNote(canvas, points === 0 ? "No data for these filters" : null);
}

function emptyNote(canvas: HTMLCanvasElement, text: string | null): void {
  const holder = canvas.parentElement as HTMLElement;
  let note = holder.querySelector<HTMLElement>(".chart-empty");
  if (text === null) {
    note?.remove();
    return;
  }
  if (!note) {
    note = document.createElement("div");
    note.className = "chart-empty";
    holder.append(note);
  }
  note.textContent = text;
}

export function destroyAll(): void {
  for (const id of Object.keys(charts)) {
    charts[id].destroy();
    delete charts[id];
  }
}

const moneyTooltip = {
  callbacks: {
    label: (item: { dataset: { label?: string }; parsed: { y: number | null; x: number | null } }) =>
      `${item.dataset.label ?? ""}: ${formatUsd(Math.round((item.parsed.y ?? 0) * 1e9))}`,
  },
};

export function drawSpend(data: SpendOverTime, onClick?: BarClick): void {
  const datasets: ChartDataset<"bar", number[]>[] = data.series.map((series) => ({
    label: series.name,
    data: series.cost_nano.map(nanoToUsd),
    backgroundColor: colourFor(data.stack, series.name),
    borderWidth: 0,
    stack: "cost",
  }));
  draw("chart-spend", {
    type: "bar",
    data: { labels: data.labels.map((l) => bucketLabel(l, data.bucket)), datasets },
    options: {
      interaction: { mode: "nearest", intersect: true },
      ...clickable(onClick, data.series.map((series) => (series.name === "other" ? null : series.name))),
      scales: {
        x: { stacked: true, grid: { display: false } },
        y: { stacked: true, beginAtZero: true, ticks: { callback: (v) => formatUsdAxis(Number(v)) } },
      },
      plugins: {
        tooltip: {
          ...moneyTooltip,
          filter: (item) => (item.parsed.y ?? 0) !== 0,
        },
      },
    },
  } as AnyConfig);
}

/** Cost, savings by cause and the baseline per bucket. A bucket without requests has no baseline
 * (null, so the line breaks there instead of dropping to zero and climbing back diagonally); with
 * no baseline model configured there is no baseline and no routing saving to draw at all. */
export function drawSavings(
  data: SpendOverTime,
  cachingTracked: boolean,
  baselineConfigured: boolean,
  onClick?: BarClick,
): void {
  const labels = data.labels.map((l) => bucketLabel(l, data.bucket));
  const usd = (values: (number | null)[]) => values.map((v) => (v === null ? null : nanoToUsd(v)));
  const bar = (label: string, values: (number | null)[], color: string): ChartDataset<"bar", (number | null)[]> => ({
    type: "bar",
    label,
    data: usd(values),
    backgroundColor: color,
    borderWidth: 0,
    stack: "split",
  });
  const empty = (i: number) => !data.requests || data.requests[i] === 0;
  const datasets: unknown[] = [bar("Actual cost", data.cost_nano, BLUE)];
  if (baselineConfigured) {
    datasets.push(bar(cachingTracked ? "Saved by routing" : "Saved (routing + caching)", data.routing_saving_nano, GREEN));
  }
  datasets.push(bar("Saved by caching", cachingTracked ? data.cache_saving_nano : data.cache_saving_nano.map(() => 0), TEAL));
  if (baselineConfigured) {
    datasets.push({
      type: "line" as const,
      label: "Baseline",
      data: data.baseline_cost_nano.map((v, i) => (v === null || empty(i) ? null : nanoToUsd(v))),
      borderColor: "#d8d9da",
      borderDash: [5, 4],
      borderWidth: 1.5,
      spanGaps: false,
      pointRadius: 2,
      stack: "baseline",
    });
  }
  draw("chart-savings", {
    type: "bar",
    data: { labels, datasets },
    options: {
      interaction: { mode: "index", intersect: false },
      ...clickable(onClick, []),
      scales: {
        x: { stacked: true, grid: { display: false } },
        y: { stacked: true, ticks: { callback: (v: string | number) => formatUsdAxis(Number(v)) } },
      },
      plugins: { tooltip: moneyTooltip },
    },
  } as unknown as AnyConfig);
}

function horizontal(unit: (v: number) => string) {
  return {
    indexAxis: "y" as const,
    scales: {
      x: { beginAtZero: true, ticks: { callback: (v: string | number) => unit(Number(v)) } },
      y: { grid: { display: false } },
    },
    plugins: {
      tooltip: {
        callbacks: {
          label: (item: { dataset: { label?: string }; parsed: { x: number | null } }) =>
            `${item.dataset.label ?? ""}: ${unit(item.parsed.x ?? 0)}`,
        },
      },
    },
  };
}

/** End-to-end p50/p95 (every successful request) beside TTFT p50/p95 (streams only) per group. */
export function drawLatency(
  groups: Latency[],
  { canvas = "chart-ttft", speed = "chart-speed" as string | null, onClick }: { canvas?: string; speed?: string | null; onClick?: (name: string | null) => void } = {},
): void {
  const measured = groups.filter((g) => g.requests > 0);
  const labels = measured.map((g) => g.name ?? "(none)");
  const set = (label: string, values: (number | null)[], color: string) => ({
    label,
    data: values,
    backgroundColor: color,
    borderWidth: 0,
  });
  draw(canvas, {
    type: "bar",
    data: {
      labels,
      datasets: [
        set("end to end p50", measured.map((g) => g.latency_p50_ms), BLUE),
        set("end to end p95", measured.map((g) => g.latency_p95_ms), "#b877d9"),
        set("TTFT p50", measured.map((g) => g.ttft_p50_ms), TEAL),
        set("TTFT p95", measured.map((g) => g.ttft_p95_ms), "#ff9830"),
      ],
    },
    options: { ...horizontal((v) => formatMs(v)), ...byIndex(onClick, measured.map((g) => g.name)) },
  } as AnyConfig);
  if (speed === null) return;
  const fast = groups.filter((g) => g.tokens_per_second_p50 !== null);
  draw(speed, {
    type: "bar",
    data: {
      labels: fast.map((g) => g.name ?? "(none)"),
      datasets: [
        {
          label: "output tokens/s (median)",
          data: fast.map((g) => g.tokens_per_second_p50),
          backgroundColor: GREEN,
          borderWidth: 0,
        },
      ],
    },
    options: { ...horizontal((v) => `${COMPACT.format(v)} tok/s`), ...byIndex(onClick, fast.map((g) => g.name)) },
  } as AnyConfig);
}

export function drawErrors(data: ErrorsReport, onClick?: BarClick): void {
  const dimension = data.by === "error_type" ? "status" : data.by;
  const datasets: ChartDataset<"bar", number[]>[] = data.series.map((series) => ({
    label: series.name,
    data: series.errors,
    backgroundColor: colourFor(dimension, series.name),
    borderWidth: 0,
    stack: "errors",
  }));
  draw("chart-errors", {
    type: "bar",
    data: { labels: data.labels.map((l) => bucketLabel(l, data.bucket)), datasets },
    options: {
      interaction: { mode: "nearest", intersect: true },
      ...clickable(onClick, data.series.map((series) => (series.name === "other" ? null : series.name))),
      scales: {
        x: { stacked: true, grid: { display: false } },
        y: { stacked: true, beginAtZero: true, ticks: { precision: 0, callback: (v) => formatCount(Number(v)) } },
      },
      plugins: { tooltip: { filter: (item) => (item.parsed.y ?? 0) !== 0 } },
    },
  } as AnyConfig);
}

/** Budget remaining, % of each team's monthly budget, day by day; dashed: the linear projection. */
export function drawBudgets(data: Budgets, onClick?: (team: string, day: number) => void): void {
  const budgeted = data.teams.filter((t) => t.budget_nano !== null && t.budget_nano > 0);
  const days = Array.from({ length: data.days }, (_, i) => String(i + 1));
  const datasets: ChartDataset<"line", (number | null)[]>[] = [];
  budgeted.forEach((team) => {
    const budget = team.budget_nano as number;
    const remaining = (spent: number) => 100 - (spent / budget) * 100;
    const color = colourFor("team", team.team);
    const actual = days.map((_, d) => (d < data.today ? remaining(team.cumulative_nano[d] ?? 0) : null));
    const projection = days.map((_, d) => {
      if (d + 1 < data.today) return null;
      const share = data.days === data.today ? 1 : (d + 1 - data.today) / (data.days - data.today);
      return remaining(team.spent_nano + (team.projected_nano - team.spent_nano) * share);
    });
    datasets.push({ label: team.team, data: actual, borderColor: color, backgroundColor: color, pointRadius: 2, borderWidth: 2 });
    datasets.push({
      label: `${team.team} (projected)`,
      data: projection,
      borderColor: color,
      borderDash: [4, 4],
      pointRadius: 0,
      borderWidth: 1.5,
    });
  });
  if (budgeted.length) {
    datasets.push({
      label: "Budget exhausted",
      data: days.map(() => 0),
      borderColor: RED,
      borderDash: [2, 3],
      pointRadius: 0,
      borderWidth: 1,
    });
  }
  draw("chart-budget", {
    type: "line",
    data: { labels: days, datasets },
    options: {
      interaction: { mode: "index", intersect: false },
      ...clickable(
        onClick ? (index, name) => name && onClick(name, index + 1) : undefined,
        datasets.map((d) => (d.label && d.label !== "Budget exhausted" ? d.label.replace(/ \(projected\)$/, "") : null)),
      ),
      scales: {
        x: { title: { display: true, text: `day of ${data.month}` }, grid: { display: false } },
        y: { suggestedMin: 0, suggestedMax: 100, ticks: { callback: (v) => `${v}%` } },
      },
      plugins: {
        legend: { labels: { filter: (item) => !item.text.endsWith("(projected)") } },
        tooltip: {
          filter: (item) => item.parsed.y !== null && item.dataset.label !== "Budget exhausted",
          callbacks: { label: (item) => `${item.dataset.label}: ${formatPercent((item.parsed.y ?? 0) / 100)} left` },
        },
      },
    },
  } as AnyConfig);
}

/** Blended $/MTok (at the API's input:output mix) per deployment, self-hosted ones first. */
export function drawFleet(data: Fleet, onClick?: (deployment: Fleet["deployments"][number]) => void): void {
  const priced = data.deployments.filter((d) => d.blended_nano_per_mtok !== null);
  const labels = priced.map((d) => `${d.model} · ${d.provider}`);
  const value = (d: (typeof priced)[number]) => nanoToUsd(d.blended_nano_per_mtok as number);
  draw("chart-fleet", {
    type: "bar",
    data: {
      labels,
      datasets: [
        {
          label: "Self-hosted",
          data: priced.map((d) => (d.self_hosted ? value(d) : null)),
          backgroundColor: GREEN,
          borderWidth: 0,
        },
        {
          label: "Managed",
          data: priced.map((d) => (d.self_hosted ? null : value(d))),
          backgroundColor: BLUE,
          borderWidth: 0,
        },
      ],
    },
    options: { ...horizontal((v) => formatUsdAxis(v)), skipNull: true, ...byIndex(onClick, priced) },
  } as AnyConfig);
}
