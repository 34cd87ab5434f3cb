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

/** The gateway's own API (`/v1/...`) beside the dashboard, behind the same proxy prefix. */
function gatewayBase(): string {
  return location.pathname.replace(/\/+$/, "").replace(/\/dashboard$/, "");
}

export async function getJson<T>(path: string, params: Params = {}): Promise<T> {
  return fetchJson<T>(apiBase() + path, params);
}

/** `GET /v1/...`: the spend API and the request explorer, scoped to the key like the dashboard. */
export async function getV1<T>(path: string, params: Params = {}): Promise<T> {
  return fetchJson<T>(`${gatewayBase()}/v1/${path}`, params);
}

async function fetchJson<T>(path: string, params: Params): Promise<T> {
  const url = new URL(path, location.origin);
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
  providers?: string[];
  groupings?: { table: string[]; latency: string[]; errors: string[] };
}

/** Baseline and savings are null (or absent) when no baseline model is configured: never a loss. */
export interface SpendTotals {
  requests: number;
  errors: number;
  error_rate: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_nano: number;
  baseline_cost_nano: number | null;
  savings_nano: number | null;
  cache_saving_nano: number;
}

/** End-to-end latency for every successful request; TTFT only for the streamed ones. */
export interface Latency {
  name: string | null;
  requests: number;
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
  streamed: number;
  ttft_p50_ms: number | null;
  ttft_p95_ms: number | null;
  tokens_per_second_p50: number | null;
  overhead_p50_ms: number | null;
}

export interface Summary {
  since: string;
  until: string;
  totals: SpendTotals;
  savings: {
    routing_nano: number | null;
    caching_nano: number;
    caching_tracked: boolean;
    context_nano: number;
    context_tokens: number;
    context_tracked: boolean;
  };
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
  requests: number[];
  cost_nano: number[];
  baseline_cost_nano: (number | null)[];
  cache_saving_nano: number[];
  routing_saving_nano: (number | null)[];
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
  model?: string | null;
  provider?: string | null;
  prefix?: string | null;
  name?: string | null;
  team?: string | null;
  key_team?: string | null;
}

export interface Top {
  keys: SpendRow[] | null;
  tags: SpendRow[] | null;
  tags_cost_nano?: number | null;
}

export interface Table {
  by: string;
  rows: SpendRow[] | null;
  reason: string | null;
}

export interface LatencyReport {
  by: string;
  overall: Latency;
  groups: Latency[];
}

export interface ErrorKind {
  status: number;
  error_type: string | null;
  provider: string | null;
  model: string | null;
  errors: number;
  last_at: string | null;
}

export interface DeploymentRetries {
  deployment: string;
  requests: number;
  answered: number;
  errors: number;
  retries: number;
  fallback_answers: number;
  failed_over: number;
}

export interface ErrorsReport {
  bucket: "hour" | "day";
  by: string;
  labels: string[];
  series: { name: string; errors: number[] }[];
  total: number;
  kinds: ErrorKind[];
  deployments: DeploymentRetries[];
}

export interface ListedRequest {
  id: string;
  created_at: string;
  team: string | null;
  key_id: string | null;
  requested_model: string;
  model: string | null;
  provider: string | null;
  tier: string | null;
  route_reason: string | null;
  status: number;
  error_type: string | null;
  stream: boolean;
  attempts: number;
  fallback_used: boolean;
  cache_status: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  cost_nano: number;
  latency_ms: number;
  ttft_ms: number | null;
  tags: string[];
}

export interface RequestPage {
  since: string;
  until: string;
  data: ListedRequest[];
  matched: number;
  cost_nano: number;
  prompt_tokens: number;
  completion_tokens: number;
  next_before: string | null;
}

export interface CostClass {
  class: string;
  tokens: number;
  cost_nano: number;
}

export interface RequestDetail extends ListedRequest {
  finished_at: string;
  client_request_id: string | null;
  user: string | null;
  upstream_model: string | null;
  route_score: number | null;
  error_message: string | null;
  deployments_tried: string[];
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  usage_estimated: boolean;
  price_source: string | null;
  price_unknown: boolean;
  flags: string[];
  escalated_from: string | null;
  escalation_reason: string | null;
  shadow_of: string | null;
  cost: {
    billed: { input_nano: number; output_nano: number; escalation_nano: number; total_nano: number };
    classes: CostClass[] | null;
    priced: "as_billed" | "current_price" | "unknown" | "cache_hit";
  };
  latency_split: {
    total_ms: number;
    gateway_ms: number | null;
    upstream_ms: number | null;
    first_token_ms: number | null;
    generation_ms: number | null;
  };
  bodies: { request: string; response: string | null; truncated: boolean } | null;
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
