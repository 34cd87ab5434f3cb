// The small tables: top keys, top tags, budgets, fleet prices, routing per route. Text only (textContent), never HTML
// from the API, so a key or tag name can't inject markup.

import type { Budgets, Fleet, Routing, Top } from "./api";
import { formatCount, formatPercent, formatUsd } from "./format";

type Cell = string | { text: string; className?: string; title?: string; badge?: string };

/** `links[i]`: the explorer filters row i stands for (a click or Enter opens them), or none. */
function fill(
  id: string,
  rows: Cell[][],
  emptyText: string,
  links: (Record<string, string> | null)[] = [],
  drill?: (filters: Record<string, string>) => void,
): void {
  const body = document.querySelector<HTMLTableSectionElement>(`#${id} tbody`) as HTMLTableSectionElement;
  const columns = document.querySelectorAll(`#${id} thead th`).length;
  body.replaceChildren();
  if (!rows.length) rows = [[{ text: emptyText, className: "dim" }]];
  rows.forEach((row, at) => {
    const tr = body.insertRow();
    const link = links[at];
    if (link && drill) {
      tr.className = "link";
      tr.tabIndex = 0;
      tr.title = "Show the requests behind this row";
      tr.addEventListener("click", () => drill(link));
      tr.addEventListener("keydown", (event) => {
        if (event.key === "Enter") drill(link);
      });
    }
    row.forEach((cell, i) => {
      const td = tr.insertCell();
      const spec = typeof cell === "string" ? { text: cell } : cell;
      td.textContent = spec.text;
      if (spec.className) td.className = spec.className;
      if (spec.title) td.title = spec.title;
      if (spec.badge) {
        const badge = document.createElement("span");
        badge.className = "badge";
        badge.textContent = spec.badge;
        td.append(badge);
      }
      if (row.length === 1) td.colSpan = columns;
      else if (i > 0 && document.querySelectorAll(`#${id} thead th`)[i]?.classList.contains("num")) {
        td.classList.add("num");
      }
    });
  });
  body.parentElement?.setAttribute("data-rows", String(rows.length));
}

export function fillTop(top: Top, drill?: (filters: Record<string, string>) => void): void {
  if (top.keys === null) {
    fill("table-keys", [[{ text: "Keys are not kept per tag: clear the tag filter.", className: "dim" }]], "");
  } else {
    fill(
      "table-keys",
      top.keys.map((row) => [
        row.key
          ? { text: `${row.prefix ?? row.key}… ${row.name ?? ""}`.trim(), title: row.key }
          : { text: "(no key)", className: "dim" },
        row.team ?? "",
        formatCount(row.requests),
        formatUsd(row.cost_nano),
      ]),
      "No keys spent anything in this range.",
      top.keys.map((row) => (row.key ? { key: row.key } : null)),
      drill,
    );
  }
  if (top.tags === null) {
    fill("table-tags", [[{ text: "Tags are not kept per model: clear the model filter.", className: "dim" }]], "");
  } else {
    fill(
      "table-tags",
      top.tags.map((row) => [row.tag ?? "", formatCount(row.requests), formatCount(row.errors), formatUsd(row.cost_nano)]),
      "No tagged requests in this range.",
      top.tags.map((row) => (row.tag ? { tag: row.tag, model: "" } : null)),
      drill,
    );
  }
}

export function fillBudgets(data: Budgets): void {
  fill(
    "table-budgets",
    data.teams.map((team) => {
      const over = team.budget_nano !== null && team.projected_nano > team.budget_nano;
      return [
        team.team,
        formatUsd(team.spent_nano),
        team.budget_nano === null ? { text: "no budget", className: "dim" } : formatUsd(team.budget_nano),
        {
          text: formatUsd(team.projected_nano),
          className: team.budget_nano === null ? "" : over ? "over" : "ok",
          title: over ? "projected past the monthly budget" : "",
        },
      ];
    }),
    "No teams.",
  );
}

export function fillFleet(data: Fleet): void {
  fill(
    "table-fleet",
    data.deployments.map((d) => [
      {
        text: `${d.model} · ${d.provider}`,
        title: `${d.upstream_model}${d.source ? ` (price: ${d.source})` : ""}`,
        badge: d.self_hosted ? "self-hosted" : undefined,
      },
      d.input_nano_per_mtok === null || d.output_nano_per_mtok === null
        ? { text: "unpriced", className: "dim" }
        : `${formatUsd(d.input_nano_per_mtok)} / ${formatUsd(d.output_nano_per_mtok)}`,
      d.realised_nano_per_mtok === null
        ? { text: "–", className: "dim" }
        : { text: formatUsd(d.realised_nano_per_mtok), title: `${formatCount(d.tokens)} tokens served` },
      d.utilisation_measured === null
        ? { text: "–", className: "dim" }
        : {
            text: d.utilisation_measured > 0 && d.utilisation_measured < 0.001 ? "<0.1%" : formatPercent(d.utilisation_measured),
            title: `assumed in its price: ${formatPercent(d.utilisation_assumed ?? 0)}`,
          },
    ]),
    "No models configured.",
  );
}

export function fillRouting(data: Routing): void {
  fill(
    "table-routing",
    data.routes.map((r) => [
      r.route || { text: "(none)", className: "dim" },
      formatCount(r.requests),
      r.share_low === null ? { text: "–", className: "dim" } : { text: formatPercent(r.share_low), title: `${formatCount(r.answered_low)} below the top tier` },
      { text: formatUsd(r.savings_nano), className: r.savings_nano < 0 ? "over" : "" },
      { text: formatCount(r.escalated), title: `discarded attempts cost ${formatUsd(r.escalation_cost_nano)}` },
      r.agreement === null
        ? { text: "–", className: "dim", title: `${formatCount(r.shadow_checks)} shadow checks` }
        : {
            text: formatPercent(r.agreement),
            title: `${formatCount(r.shadow_agreed)} of ${formatCount(r.shadow_verdicts)} verdicts; shadow cost ${formatUsd(r.shadow_cost_nano)}`,
          },
    ]),
    "No auto requests in this range.",
  );
}
