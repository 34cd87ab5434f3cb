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

import type { Budgets, Fleet, Latency, SpendOverTime } from "./api";
import { bucketLabel, formatMs, formatPercent, formatUsd, formatUsdAxis, nanoToUsd } from "./format";

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

// Grafana's classic palette: distinct on a dark background.
const PALETTE = ["#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0", "#508642"];
const BLUE = "#5794f2";
const GREEN = "#73bf69";
const TEAL = "#6ed0e0";
const RED = "#f2495c";

const COMPACT = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

const charts: Record<string, Chart> = {};
(window as unknown as { tollgate: { charts: Record<string, Chart> } }).tollgate = { charts };

type AnyConfig = ChartConfiguration<"bar" | "line", (number | null)[], string>;

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

export function drawSpend(data: SpendOverTime): void {
  const datasets: ChartDataset<"bar", number[]>[] = data.series.map((series, i) => ({
    label: series.name,
    data: series.cost_nano.map(nanoToUsd),
    backgroundColor: PALETTE[i % PALETTE.length],
    borderWidth: 0,
    stack: "cost",
  }));
  draw("chart-spend", {
    type: "bar",
    data: { labels: data.labels.map((l) => bucketLabel(l, data.bucket)), datasets },
    options: {
      interaction: { mode: "index", intersect: false },
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

export function drawSavings(data: SpendOverTime, cachingTracked: boolean): void {
  const labels = data.labels.map((l) => bucketLabel(l, data.bucket));
  const bar = (label: string, values: number[], color: string): ChartDataset<"bar", number[]> => ({
    type: "bar",
    label,
    data: values.map(nanoToUsd),
    backgroundColor: color,
    borderWidth: 0,
    stack: "split",
  });
  const datasets = [
    bar("Actual cost", data.cost_nano, BLUE),
    bar(cachingTracked ? "Saved by routing" : "Saved (routing + caching)", data.routing_saving_nano, GREEN),
    bar("Saved by caching", cachingTracked ? data.cache_saving_nano : data.cache_saving_nano.map(() => 0), TEAL),
    {
      type: "line" as const,
      label: "Baseline",
      data: data.baseline_cost_nano.map(nanoToUsd),
      borderColor: "#d8d9da",
      borderDash: [5, 4],
      borderWidth: 1.5,
      pointRadius: (context: { raw: unknown }) => (context.raw ? 2 : 0),
      stack: "baseline",
    },
  ];
  draw("chart-savings", {
    type: "bar",
    data: { labels, datasets },
    options: {
      interaction: { mode: "index", intersect: false },
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

export function drawLatency(models: Latency[]): void {
  const measured = models.filter((m) => m.samples > 0);
  const labels = measured.map((m) => m.model ?? "(none)");
  draw("chart-ttft", {
    type: "bar",
    data: {
      labels,
      datasets: [
        { label: "p50", data: measured.map((m) => m.ttft_p50_ms), backgroundColor: BLUE, borderWidth: 0 },
        { label: "p95", data: measured.map((m) => m.ttft_p95_ms), backgroundColor: "#ff9830", borderWidth: 0 },
      ],
    },
    options: horizontal((v) => formatMs(v)),
  } as AnyConfig);
  const fast = models.filter((m) => m.tokens_per_second_p50 !== null);
  draw("chart-speed", {
    type: "bar",
    data: {
      labels: fast.map((m) => m.model ?? "(none)"),
      datasets: [
        {
          label: "output tokens/s (median)",
          data: fast.map((m) => m.tokens_per_second_p50),
          backgroundColor: GREEN,
          borderWidth: 0,
        },
      ],
    },
    options: horizontal((v) => `${COMPACT.format(v)} tok/s`),
  } as AnyConfig);
}

/** Budget remaining, % of each team's monthly budget, day by day; dashed: the linear projection. */
export function drawBudgets(data: Budgets): void {
  const budgeted = data.teams.filter((t) => t.budget_nano !== null && t.budget_nano > 0);
  const days = Array.from({ length: data.days }, (_, i) => String(i + 1));
  const datasets: ChartDataset<"line", (number | null)[]>[] = [];
  budgeted.forEach((team, i) => {
    const budget = team.budget_nano as number;
    const remaining = (spent: number) => 100 - (spent / budget) * 100;
    const color = PALETTE[i % PALETTE.length];
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
export function drawFleet(data: Fleet): void {
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
    options: { ...horizontal((v) => formatUsdAxis(v)), skipNull: true },
  } as AnyConfig);
}
