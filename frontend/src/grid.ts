// A sortable table whose CSV export is exactly what it shows: the visible columns, in the visible
// order, with each cell's displayed text. Text only (textContent), never HTML from the API.

export interface Column<R> {
  label: string; // with its unit, e.g. "Spend (USD)"
  num?: boolean;
  /** What sorting compares; null sorts last. */
  value: (row: R) => number | string | null;
  text: (row: R) => string;
  title?: (row: R) => string;
  className?: (row: R) => string;
  swatch?: (row: R) => string | null;
}

export interface GridOptions<R> {
  empty: string;
  filename: string;
  onRow?: (row: R) => void;
  rowTitle?: string;
}

export class Grid<R> {
  private rows: R[] = [];
  private sortBy: number | null = null;
  private descending = true;
  private readonly table: HTMLTableElement;

  constructor(
    id: string,
    private readonly columns: Column<R>[],
    private readonly options: GridOptions<R>,
  ) {
    this.table = document.getElementById(id) as HTMLTableElement;
  }

  /** New rows (already in the API's order: largest spend first); null with a note when unanswerable. */
  set(rows: R[] | null, note: string | null = null): void {
    this.rows = rows ?? [];
    this.render(rows === null ? note : null);
  }

  /** Rows as shown, header first: what the CSV holds and what a test reads back from the page. */
  shown(): string[][] {
    return [this.columns.map((c) => c.label), ...this.ordered().map((row) => this.columns.map((c) => c.text(row)))];
  }

  csv(): string {
    return this.shown().map((cells) => cells.map(csvCell).join(",")).join("\r\n") + "\r\n";
  }

  download(): void {
    const blob = new Blob([this.csv()], { type: "text/csv;charset=utf-8" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = this.options.filename.replace(/[^A-Za-z0-9_.-]+/g, "-");
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  }

  private ordered(): R[] {
    if (this.sortBy === null) return this.rows;
    const column = this.columns[this.sortBy];
    const sign = this.descending ? -1 : 1;
    return [...this.rows].sort((a, b) => {
      const x = column.value(a);
      const y = column.value(b);
      if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
      if (typeof x === "number" && typeof y === "number") return sign * (x - y);
      return sign * String(x).localeCompare(String(y));
    });
  }

  private sort(index: number): void {
    if (this.sortBy === index) this.descending = !this.descending;
    else {
      this.sortBy = index;
      this.descending = Boolean(this.columns[index].num);
    }
    this.render(null);
  }

  private render(note: string | null): void {
    const head = this.table.tHead ?? this.table.createTHead();
    head.replaceChildren();
    const tr = head.insertRow();
    this.columns.forEach((column, i) => {
      const th = document.createElement("th");
      if (column.num) th.className = "num";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.textContent = column.label;
      button.addEventListener("click", () => this.sort(i));
      const state = this.sortBy === i ? (this.descending ? "descending" : "ascending") : "none";
      th.setAttribute("aria-sort", state);
      th.append(button);
      tr.append(th);
    });
    const body = this.table.tBodies[0] ?? this.table.createTBody();
    body.replaceChildren();
    const rows = this.ordered();
    if (!rows.length) {
      const cell = body.insertRow().insertCell();
      cell.colSpan = this.columns.length;
      cell.className = "dim";
      cell.textContent = note ?? this.options.empty;
    }
    for (const row of rows) {
      const line = body.insertRow();
      if (this.options.onRow) {
        line.className = "link";
        line.tabIndex = 0;
        line.title = this.options.rowTitle ?? "Show the requests behind this row";
        line.addEventListener("click", () => this.options.onRow?.(row));
        line.addEventListener("keydown", (event) => {
          if (event.key === "Enter") this.options.onRow?.(row);
        });
      }
      for (const column of this.columns) {
        const td = line.insertCell();
        const colour = column.swatch?.(row);
        if (colour) {
          const swatch = document.createElement("span");
          swatch.className = "swatch";
          swatch.style.background = colour;
          td.append(swatch);
        }
        td.append(column.text(row));
        const extra = column.className?.(row);
        td.className = [column.num ? "num" : "", extra ?? ""].join(" ").trim();
        const title = column.title?.(row);
        if (title) td.title = title;
      }
    }
    this.table.dataset.rows = String(rows.length);
  }
}

/** RFC 4180 quoting; a text cell a spreadsheet would run as a formula is prefixed with a quote. */
function csvCell(text: string): string {
  const safe = /^[=+@\t\r]/.test(text) || /^-(?![$\d.])/.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}
