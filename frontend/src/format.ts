// Display formatting. Money arrives as integer nano-USD and is rounded here with integer
// arithmetic (half up), so what a tile shows is exactly reproducible from the API's integers.

const NANO_DIGITS = 9;

/** Dollars with 2 decimals from $1 up, else 3 significant digits (at most 6 decimals). */
export function formatUsd(nano: number): string {
  const negative = nano < 0;
  const n = BigInt(Math.abs(Math.round(nano)));
  const digits = n.toString().length;
  const decimals = n === 0n || digits >= 10 ? 2 : Math.min(6, 12 - digits);
  const unit = 10n ** BigInt(NANO_DIGITS - decimals);
  const rounded = (n + unit / 2n) / unit;
  const scale = 10n ** BigInt(decimals);
  const whole = (rounded / scale).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const fraction = (rounded % scale).toString().padStart(decimals, "0");
  return `${negative && rounded > 0n ? "-" : ""}$${whole}.${fraction}`;
}

/** Short dollars for chart axes: $1.2k, $35.00, $0.0120. */
export function formatUsdAxis(usd: number): string {
  const abs = Math.abs(usd);
  if (abs >= 1e6) return `${usd < 0 ? "-" : ""}$${(abs / 1e6).toFixed(1)}M`;
  if (abs >= 1e3) return `${usd < 0 ? "-" : ""}$${(abs / 1e3).toFixed(1)}k`;
  return formatUsd(Math.round(usd * 1e9));
}

export function formatCount(value: number): string {
  return value.toLocaleString("en-US");
}

export function formatPercent(rate: number): string {
  return `${(rate * 100).toFixed(1)}%`;
}

export function formatMs(ms: number | null): string {
  if (ms === null) return "–";
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}

export function nanoToUsd(nano: number): number {
  return nano / 1e9;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** "2026-11-01" -> "Nov 1"; "2026-11-01T13:00:00" -> "13:00" (with the date at midnight). */
export function bucketLabel(label: string, bucket: string): string {
  const month = MONTHS[Number(label.slice(5, 7)) - 1];
  const day = `${month} ${Number(label.slice(8, 10))}`;
  if (bucket === "day") return day;
  const hour = label.slice(11, 16);
  return hour === "00:00" ? `${day} 00:00` : hour;
}

export function dayLabel(iso: string): string {
  return bucketLabel(iso.slice(0, 10), "day");
}
