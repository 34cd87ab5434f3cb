// The dashboard's JSON endpoints, called with the signed-in key (kept in sessionStorage only).

const KEY = "tollgate.dashboard.key";

export const session = {
  get: (): string | null => sessionStorage.getItem(KEY),
  set: (key: string): void => sessionStorage.setItem(KEY, key),
  clear: (): void => sessionStorage.removeItem(KEY),
};

export class Unauthorized extends Error {}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export type Params = Record<string, string | undefined>;

/** `/dashboard/api/`, relative to wherever the page is served (a proxy prefix is kept). */
function apiBase(): string {
  return `${location.pathname.replace(/\/+$/, "")}/api/`;
}

export async function getJson<T>(path: string, params: Params = {}): Promise<T> {
  const url = new URL(apiBase() + path, location.origin);
  for (const [name, value] of Object.entries(params)) {
    if (value) url.searchParams.set(name, value);
  }
  const headers: Record<string, string> = { accept: "application/json" };
  const key = session.get();
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(url, { headers, cache: "no-store", credentials: "omit" });
  if (response.ok) return (await response.json()) as T;
  const body = (await response.json().catch(() => null)) as { error?: { message?: string } } | null;
  const message = body?.error?.message ?? response.statusText;
  if (response.status === 401) throw new Unauthorized(message);
  throw new ApiError(response.status, message);
}

export interface Me {
  kind: "admin" | "team_key" | "open";
  team: string | null;
  teams: string[];
  models: string[];
  tags: string[];
  baseline_model: string | null;
}

export interface SpendTotals {
  requests: number;
  errors: number;
  error_rate: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_nano: number;
  baseline_cost_nano: number;
  savings_nano: number;
  cache_saving_nano: number;
}

export interface Latency {
  model: string | null;
  samples: number;
  ttft_p50_ms: number | null;
  ttft_p95_ms: number | null;
  tokens_per_second_p50: number | null;
}

export interface Summary {
  since: string;
  until: string;
  totals: SpendTotals;
  savings: { routing_nano: number; caching_nano: number; caching_tracked: boolean };
  rates: {
    requests: number;
    fallbacks: number;
    fallback_rate: number;
    cache_hits: number;
    cacheable: number;
    cache_hit_rate: number;
    prompt_cache_read_share: number;
  };
  latency: { overall: Latency; models: Latency[] };
}

export interface SpendOverTime {
  bucket: "hour" | "day";
  stack: string;
  labels: string[];
  series: { name: string; cost_nano: number[] }[];
  cost_nano: number[];
  baseline_cost_nano: number[];
  cache_saving_nano: number[];
  routing_saving_nano: number[];
}

export interface TeamBudget {
  team: string;
  budget_nano: number | null;
  spent_nano: number;
  projected_nano: number;
  cumulative_nano: number[];
}

export interface Budgets {
  month: string;
  days: number;
  today: number;
  teams: TeamBudget[];
}

export interface SpendRow extends SpendTotals {
  key?: string | null;
  tag?: string | null;
  prefix?: string | null;
  name?: string | null;
  team?: string | null;
}

export interface Top {
  keys: SpendRow[] | null;
  tags: SpendRow[] | null;
}

export interface FleetDeployment {
  model: string;
  provider: string;
  upstream_model: string;
  tier: string;
  self_hosted: boolean;
  source: string | null;
  input_nano_per_mtok: number | null;
  output_nano_per_mtok: number | null;
  blended_nano_per_mtok: number | null;
  requests: number;
  tokens: number;
  cost_nano: number;
  realised_nano_per_mtok: number | null;
  utilisation_assumed: number | null;
  utilisation_measured: number | null;
}

export interface Fleet {
  mix: { input: number; output: number };
  deployments: FleetDeployment[];
}

export interface RouteChecks {
  route: string;
  requests: number;
  answered_low: number;
  share_low: number | null;
  savings_nano: number;
  escalated: number;
  escalation_cost_nano: number;
  shadow_checks: number;
  shadow_verdicts: number;
  shadow_agreed: number;
  agreement: number | null;
  shadow_cost_nano: number;
}

export interface Routing {
  routes: RouteChecks[];
}
