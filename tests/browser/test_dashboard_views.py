"""The dashboard's Tables, Latency, Errors and Requests views in headless Chromium after real
traffic: each table is the spend API's rows, its CSV is exactly the table, latency is there for a
team that never streams, and the explorer lists and opens exactly the ledger's rows."""

from __future__ import annotations

import csv
import io
from typing import Any

import httpx

from gateway.accounting.insights import percentile
from tests.browser.conftest import (
    ADMIN,
    ALPHA,
    BETA,
    GAMMA,
    GAMMA_TAGS,
    open_dashboard,
    shown_ms,
    shown_usd,
    spend,
)

DASH = "\u2013"  # what the page shows for a figure it has no sample for
NUMBERS = ["Requests", "Errors", "Error rate", "Input tokens", "Output tokens", "Spend (USD)"]


def show(page: Any, view: str) -> None:
    page.click(f"#tabs button[data-view='{view}']")
    page.wait_for_selector(f"body[data-view='{view}'][data-state='ready']", timeout=15_000)


def table_text(page: Any, table: str) -> list[list[str]]:
    """The table as the reader sees it: header and cells, by their rendered text."""
    rows: list[list[str]] = page.evaluate(
        "(id) => [...document.getElementById(id).rows].map((r) => [...r.cells].map((c) => c.innerText.trim()))",
        table,
    )
    return rows


def downloaded_csv(page: Any, table: str) -> list[list[str]]:
    with page.expect_download() as download:
        page.click(f"button[data-csv='{table}']")
    with open(download.value.path(), encoding="utf-8") as file:
        text = file.read()
    return list(csv.reader(io.StringIO(text)))


def today_rows(traffic: dict[str, Any]) -> list[dict[str, Any]]:
    since = traffic["since"]
    return [r for r in traffic["server"].ledger_rows() if r["created_at"].date().isoformat() >= since]


def test_tables_are_the_spend_api_rows_and_the_csv_is_the_table(
    traffic: dict[str, Any], browser: Any
) -> None:
    server, since = traffic["server"], traffic["since"]
    page = open_dashboard(browser, server.base_url, ADMIN)
    try:
        show(page, "tables")
        # The choices are the server's: a dimension added there is a button here.
        choices = page.eval_on_selector_all("#table-by button", "(bs) => bs.map((b) => b.dataset.by)")
        assert choices == ["team", "model", "provider", "route", "key"]
        for by in choices:
            page.click(f"#table-by button[data-by='{by}']")
            page.wait_for_selector("body[data-state='ready']")
            header, *cells = table_text(page, "grid-spend")
            api = spend(server, ADMIN, since=since, group_by=by)["data"]
            assert len(cells) == len(api), by
            first = 2 if by == "key" else 1
            assert header[first : first + len(NUMBERS)] == NUMBERS
            for row, shown in zip(api, cells, strict=True):
                if by != "key":
                    assert shown[0] == (row[by] or "(none)")
                requests, errors, _, prompt, completion, cost = shown[first : first + 6]
                assert (requests, errors) == (f"{row['requests']:,}", f"{row['errors']:,}")
                assert (prompt, completion) == (f"{row['prompt_tokens']:,}", f"{row['completion_tokens']:,}")
                assert cost == shown_usd(row["cost_nano"])
                assert shown[first + 7] == shown_usd(row["savings_nano"])  # a baseline is configured
            # The CSV is what the table shows, header included, in the order shown.
            assert downloaded_csv(page, "grid-spend") == [header, *cells], by

        # Sorting by a column reorders the table and the CSV with it.
        page.click("#table-by button[data-by='team']")
        page.wait_for_selector("body[data-state='ready']")
        page.click("#grid-spend th:has-text('Requests') button")
        header, *cells = table_text(page, "grid-spend")
        counts = [int(row[1].replace(",", "")) for row in cells]
        assert counts == sorted(counts, reverse=True)
        page.click("#grid-spend th:has-text('Requests') button")
        header, *ascending = table_text(page, "grid-spend")
        assert [int(row[1].replace(",", "")) for row in ascending] == sorted(counts)
        assert page.get_attribute("#grid-spend th:has-text('Requests')", "aria-sort") == "ascending"
        assert downloaded_csv(page, "grid-spend") == [header, *ascending]

        # A row links to the requests behind it: the explorer's totals are that row's.
        alpha = next(
            row for row in spend(server, ADMIN, since=since, group_by="team")["data"] if row["team"] == ALPHA
        )
        page.click(f"#grid-spend tbody tr:has-text('{ALPHA}')")
        page.wait_for_selector("body[data-view='requests'][data-state='ready']")
        summary = page.locator("#explorer-summary")
        assert summary.get_attribute("data-matched") == str(alpha["requests"])
        assert summary.get_attribute("data-cost") == str(alpha["cost_nano"])
        assert page.input_value("#x-team") == ALPHA
        assert page.errors == []
    finally:
        page.close()


def test_a_team_that_never_streams_sees_end_to_end_latency(traffic: dict[str, Any], browser: Any) -> None:
    server = traffic["server"]
    page = open_dashboard(browser, server.base_url, traffic["gamma"])
    try:
        rows = [r for r in today_rows(traffic) if r["team"] == GAMMA and r["status"] < 400]
        assert rows and all(not r["stream"] and r["ttft_ms"] is None for r in rows)
        assert page.locator("#kpi-latency-p95 .value").inner_text() == shown_ms(
            percentile([r["latency_ms"] for r in rows], 0.95) or 0.0
        )
        assert page.locator("#kpi-ttft-p95 .value").inner_text() == DASH
        assert page.locator("#kpi-ttft-hint").inner_text() == "no streamed requests"
        # The overview's latency chart has bars, not "No data".
        assert int(page.get_attribute("#chart-ttft", "data-points") or 0) > 0
        assert page.locator("#chart-ttft ~ .chart-empty").count() == 0

        show(page, "latency")
        header, *cells = table_text(page, "grid-latency-model")
        assert header[:5] == ["Model", "Requests", "End to end p50 (ms)", "End to end p95 (ms)", "Streamed"]
        for shown in cells:
            mine = [r["latency_ms"] for r in rows if r["model"] == shown[0]]
            assert shown[1:6] == [
                str(len(mine)),
                shown_ms(percentile(mine, 0.5) or 0.0),
                shown_ms(percentile(mine, 0.95) or 0.0),
                "0",
                DASH,
            ]
        assert {shown[0] for shown in cells} == {r["model"] for r in rows}
        assert int(page.get_attribute("#chart-latency", "data-points") or 0) > 0
        assert downloaded_csv(page, "grid-latency-model") == [header, *cells]
        providers = table_text(page, "grid-latency-provider")[1:]
        assert {shown[0] for shown in providers} == {r["provider"] for r in rows}

        # Both tags of every request count under each: the note says the tags add up past the total.
        show(page, "overview")
        note = page.locator("#tags-note")
        assert note.is_visible() and "counts under each" in note.inner_text()
        assert set(GAMMA_TAGS) <= set(page.inner_text("#table-tags").split())
        assert page.errors == []
    finally:
        page.close()


def test_errors_by_status_type_provider_and_model_and_retries_per_deployment(
    traffic: dict[str, Any], browser: Any
) -> None:
    server = traffic["server"]
    page = open_dashboard(browser, server.base_url, ADMIN)
    try:
        rows = today_rows(traffic)
        failed = [r for r in rows if r["status"] >= 400]
        assert len(failed) == 2
        show(page, "errors")
        for by, column in (
            ("status", "status"),
            ("error_type", "error_type"),
            ("provider", "provider"),
            ("model", "model"),
        ):
            page.click(f"#errors-by button[data-by='{by}']")
            page.wait_for_selector("body[data-state='ready']")
            drawn = page.evaluate(
                "() => Object.fromEntries(window.tollgate.charts['chart-errors'].data.datasets"
                ".map((d) => [d.label, d.data.reduce((a, b) => a + b, 0)]))"
            )
            expected: dict[str, int] = {}
            for r in failed:
                name = "(none)" if r[column] is None else str(r[column])
                expected[name] = expected.get(name, 0) + 1
            assert drawn == expected, by

        header, *kinds = table_text(page, "grid-error-kinds")
        assert header[:5] == ["Status", "Error type", "Provider", "Model", "Errors"]
        seen = sorted((int(k[0]), k[1], k[2], k[3], int(k[4])) for k in kinds)
        grouped: dict[tuple[Any, ...], int] = {}
        for r in failed:
            key = (
                r["status"],
                r["error_type"] or "(none)",
                r["provider"] or "(none)",
                r["model"] or "(none)",
            )
            grouped[key] = grouped.get(key, 0) + 1
        assert seen == sorted((*key, n) for key, n in grouped.items())

        header, *deployments = table_text(page, "grid-deployments")
        by_name = {row[0]: dict(zip(header, row, strict=True)) for row in deployments}
        # Recomputed from the ledger: who ended each request, and who was given up on before.
        ended = [r for r in rows if r["deployments_tried"]]
        for name, shown in by_name.items():
            finals = [r for r in ended if r["deployments_tried"].split(",")[-1] == name]
            given_up = [r for r in ended if name in r["deployments_tried"].split(",")[:-1]]
            fallbacks = [r for r in finals if r["fallback_used"] and r["status"] < 400]
            assert int(shown["Requests"]) == len(finals), name
            assert int(shown["Failed over"]) == len(given_up), name
            assert int(shown["Answered as fallback"]) == len(fallbacks), name
        # ghost-with-fallback: its dead deployment was given up on, gpt-4o-mini answered instead.
        assert sum(int(row["Failed over"]) for row in by_name.values()) >= 1
        assert int(by_name["openai/gpt-4o-mini"]["Answered as fallback"]) >= 1
        assert sum(int(row["Requests"]) for row in by_name.values()) == len(ended)
        assert sum(int(row["Retries"]) for row in by_name.values()) == sum(
            r["attempts"] - len(r["deployments_tried"].split(",")) for r in ended
        )
        assert downloaded_csv(page, "grid-deployments") == [header, *deployments]

        # A failed kind links to exactly its requests.
        page.click("#grid-error-kinds tbody tr >> nth=0")
        page.wait_for_selector("body[data-view='requests'][data-state='ready']")
        status = page.input_value("#x-status")
        listed = table_text(page, "grid-requests")[1:]
        assert listed and all(row[4] == status for row in listed)
        assert page.errors == []
    finally:
        page.close()


def test_the_explorer_lists_and_opens_the_ledger_rows(traffic: dict[str, Any], browser: Any) -> None:
    server, since = traffic["server"], traffic["since"]
    page = open_dashboard(browser, server.base_url, ADMIN)
    try:
        rows = today_rows(traffic)
        show(page, "requests")
        summary = page.locator("#explorer-summary")
        assert summary.get_attribute("data-matched") == str(len(rows))
        assert summary.get_attribute("data-cost") == str(sum(r["cost_nano"] for r in rows))
        header, *listed = table_text(page, "grid-requests")
        newest = sorted(rows, key=lambda r: (r["created_at"], r["id"]), reverse=True)
        assert [row[7] for row in listed] == [shown_usd(r["cost_nano"]) for r in newest]
        assert [row[1] for row in listed] == [r["team"] or "" for r in newest]
        assert downloaded_csv(page, "grid-requests") == [header, *listed]

        # Filters: cost above X, a status class, a model; each equals the ledger's own count.
        page.fill("#x-min-cost", "0.000001")
        page.click("#x-apply")
        page.wait_for_selector("body[data-state='ready']")
        assert summary.get_attribute("data-matched") == str(sum(1 for r in rows if r["cost_nano"] > 1000))
        page.fill("#x-min-cost", "")
        page.select_option("#x-status", "error")
        page.wait_for_selector("body[data-state='ready']")
        assert summary.get_attribute("data-matched") == "2"
        page.select_option("#x-status", "")
        page.select_option("#x-model", "llama")
        page.wait_for_selector("body[data-state='ready']")
        assert summary.get_attribute("data-matched") == str(sum(1 for r in rows if r["model"] == "llama"))

        # One request opened: what the ledger holds for it, and the bodies its team keeps.
        kept = next(r for r in newest if r["team"] == GAMMA and r["model"] == "llama")
        page.click(f"#grid-requests tbody tr:has-text('{GAMMA}')")
        page.wait_for_selector(f"#request-detail[data-id='{kept['id']}']")
        detail = page.inner_text("#request-detail")
        assert kept["id"] in detail and (kept["route_reason"] or "") in detail
        assert f"Attempts\n{kept['attempts']}" in detail
        assert kept["deployments_tried"].replace(",", " → ") in detail
        cost = table_text(page, "d-cost")
        assert cost[-1] == [
            "Total billed",
            f"{kept['prompt_tokens'] + kept['completion_tokens']:,}",
            shown_usd(kept["cost_nano"]),
        ]
        classes = {row[0]: row for row in cost[1:-1]}
        assert (
            classes["Input (uncached)"][1]
            == f"{kept['prompt_tokens'] - kept['cached_tokens'] - kept['cache_write_tokens']:,}"
        )
        assert classes["Output"][1] == f"{kept['completion_tokens'] - kept['reasoning_tokens']:,}"
        assert "Say hello to the dashboard." in page.inner_text("#d-bodies")
        assert "not streamed" in page.inner_text("#d-latency")

        # A bar of the spend chart links to the rows behind it: their cost is the bar's.
        show(page, "overview")
        box = page.locator("#chart-spend").bounding_box()
        point = page.evaluate(
            "() => { const c = window.tollgate.charts['chart-spend']; const d = c.data.datasets;"
            " for (let s = 0; s < d.length; s++) for (let i = 0; i < d[s].data.length; i++)"
            " if (d[s].data[i] > 0) { const e = c.getDatasetMeta(s).data[i];"
            " return {x: e.x, y: (e.y + e.base) / 2, value: d[s].data[i], label: d[s].label}; } }"
        )
        page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
        page.wait_for_selector("body[data-view='requests'][data-state='ready']")
        assert abs(int(summary.get_attribute("data-cost") or 0) / 1e9 - point["value"]) < 1e-9
        assert page.input_value("#x-team") == point["label"]
        assert page.errors == []
    finally:
        page.close()

    # The API behind it, scoped like /v1/spend: a team key sees its own rows, never another team's.
    beta_row = next(r for r in rows if r["team"] == BETA)
    alpha_row = next(r for r in rows if r["team"] == ALPHA)
    as_alpha = {"authorization": f"Bearer {traffic['alpha']}"}
    url = server.base_url + "/v1/spend/requests"
    assert httpx.get(f"{url}/{beta_row['id']}", headers=as_alpha).status_code == 404
    assert httpx.get(f"{url}/{alpha_row['id']}", headers=as_alpha).json()["id"] == alpha_row["id"]
    assert httpx.get(url, params={"team": BETA}, headers=as_alpha).status_code == 403
    own = httpx.get(url, params={"since": since}, headers=as_alpha).json()
    assert {r["team"] for r in own["data"]} == {ALPHA}
    assert own["matched"] == sum(1 for r in rows if r["team"] == ALPHA)
    assert (
        httpx.get(f"{url}/{beta_row['id']}", headers={"authorization": f"Bearer {ADMIN}"}).status_code == 200
    )


def test_signing_out_forgets_every_filter(traffic: dict[str, Any], browser: Any) -> None:
    server = traffic["server"]
    page = open_dashboard(browser, server.base_url, ADMIN, range_days="30")
    try:
        page.select_option("#f-team", BETA)
        page.wait_for_selector("body[data-state='ready']")
        page.click("#stack button[data-stack='model']")
        page.wait_for_selector("body[data-state='ready']")
        show(page, "errors")
        page.click("#sign-out")
        page.wait_for_selector("body[data-state='signed-out']")
        page.fill("#key", traffic["alpha"])
        page.click("#sign-in-button")
        page.wait_for_selector("body[data-view='overview'][data-state='ready']")
        assert page.input_value("#f-range") == "7"
        assert page.input_value("#f-team") == ALPHA
        assert page.get_attribute("#stack button[data-stack='team']", "aria-pressed") == "true"
        show(page, "requests")
        assert page.input_value("#x-team") == ALPHA and page.input_value("#x-status") == ""

        page.select_option("#x-status", "error")
        page.wait_for_selector("body[data-state='ready']")
        page.click("#sign-out")
        page.wait_for_selector("body[data-state='signed-out']")
        page.fill("#key", ADMIN)
        page.click("#sign-in-button")
        page.wait_for_selector("body[data-view='overview'][data-state='ready']")
        assert page.input_value("#f-team") == ""  # all teams again, not the last caller's
        labels = page.evaluate(
            "() => window.tollgate.charts['chart-spend'].data.datasets.map((d) => d.label)"
        )
        assert BETA in labels and ALPHA in labels
        show(page, "requests")
        assert page.input_value("#x-team") == "" and page.input_value("#x-status") == ""
    finally:
        page.close()


def test_team_and_model_views_share_no_colour(traffic: dict[str, Any], browser: Any) -> None:
    server = traffic["server"]
    page = open_dashboard(browser, server.base_url, ADMIN)
    try:
        colours = {}
        for stack in ("team", "model", "provider"):
            page.click(f"#stack button[data-stack='{stack}']")
            page.wait_for_selector("body[data-state='ready']")
            colours[stack] = page.evaluate(
                "() => Object.fromEntries(window.tollgate.charts['chart-spend'].data.datasets"
                ".map((d) => [d.label, d.backgroundColor]))"
            )
            assert len(set(colours[stack].values())) == len(colours[stack]), stack
        assert not set(colours["team"].values()) & set(colours["model"].values())
        assert not set(colours["model"].values()) & set(colours["provider"].values())
        # A bucket without requests has no baseline point: the line breaks instead of diving to zero.
        page.select_option("#f-range", "7")
        page.wait_for_selector("body[data-state='ready']")
        baseline = page.evaluate(
            "() => window.tollgate.charts['chart-savings'].data.datasets.find((d) => d.label === 'Baseline').data"
        )
        assert baseline[:-1] == [None] * (len(baseline) - 1) and baseline[-1] > 0
        assert page.inner_text("#table-fleet thead").count("$/MTok") == 2
    finally:
        page.close()


def click_bar(page: Any, chart: str, *, label: str | None = None) -> dict[str, Any]:
    """Clicks the first drawn element (of the dataset `label`, if given) of a chart; says which."""
    page.locator(f"#{chart}").scroll_into_view_if_needed()
    box = page.locator(f"#{chart}").bounding_box()
    hit: dict[str, Any] = page.evaluate(
        "([id, wanted]) => { const c = window.tollgate.charts[id]; const sets = c.data.datasets;"
        " for (let s = 0; s < sets.length; s++) { if (wanted && sets[s].label !== wanted) continue;"
        " for (let i = 0; i < sets[s].data.length; i++) { const v = sets[s].data[i];"
        " if (v === null || v === 0 || v === undefined) continue; const e = c.getDatasetMeta(s).data[i];"
        " const across = c.options.indexAxis === 'y', bar = e.base !== undefined;"
        " const x = bar && across ? (e.x + e.base) / 2 : e.x, y = bar && !across ? (e.y + e.base) / 2 : e.y;"
        " return {x, y, index: i, label: sets[s].label, category: c.data.labels[i]}; } } return null; }",
        [chart, label],
    )
    assert hit, chart
    page.mouse.click(box["x"] + hit["x"], box["y"] + hit["y"])
    page.wait_for_selector("body[data-view='requests'][data-state='ready']")
    return hit


def test_every_chart_and_top_table_links_to_its_rows(traffic: dict[str, Any], browser: Any) -> None:
    server = traffic["server"]
    page = open_dashboard(browser, server.base_url, ADMIN)
    rows = today_rows(traffic)
    matched = page.locator("#explorer-summary")
    try:
        click_bar(page, "chart-savings", label="Actual cost")  # the hour with all of today's traffic
        assert matched.get_attribute("data-matched") == str(len(rows))

        show(page, "overview")
        hit = click_bar(page, "chart-ttft")
        ok = [r for r in rows if r["model"] == hit["category"] and r["status"] < 400]
        assert (page.input_value("#x-model"), page.input_value("#x-status")) == (hit["category"], "ok")
        assert matched.get_attribute("data-matched") == str(len(ok))

        show(page, "overview")
        hit = click_bar(page, "chart-fleet")
        model, provider = hit["category"].split(" · ")
        assert matched.get_attribute("data-matched") == str(
            sum(1 for r in rows if r["model"] == model and r["provider"] == provider)
        )

        show(page, "overview")
        hit = click_bar(page, "chart-budget")
        assert page.input_value("#x-team") == hit["label"]

        show(page, "overview")
        page.click("#table-keys tbody tr:has-text('beta-service')")
        page.wait_for_selector("body[data-view='requests'][data-state='ready']")
        assert matched.get_attribute("data-matched") == str(sum(1 for r in rows if r["team"] == BETA))
        assert page.errors == []
    finally:
        page.close()
