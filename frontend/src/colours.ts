// One colour per name and per dimension, the same in every chart and every refresh: teams, models
// and providers draw from palettes that share no colour, so a team is never mistaken for a model.

const PALETTES: Record<string, string[]> = {
  // blues and violets
  team: ["#5794f2", "#b877d9", "#8ab8ff", "#8f3bb8", "#3274d9", "#ca95e5", "#c0d8ff", "#705da0"],
  // greens, yellows and oranges
  model: ["#73bf69", "#fade2a", "#ff9830", "#37872d", "#ffcb7d", "#96d98d", "#e0b400", "#fa6400"],
  // teals, reds and pinks
  provider: ["#6ed0e0", "#f2495c", "#ff7383", "#1f9fb4", "#c4162a", "#8ae0ee", "#ffa6b0", "#0a6e7d"],
  // errors by status, type: warm reds through greys
  status: ["#f2495c", "#ff9830", "#fade2a", "#b877d9", "#8e9299", "#c4162a", "#ffcb7d", "#6ed0e0"],
};
const OTHER = "#6c7079"; // "other" and "(none)" are grey in every view

const known: Record<string, string[]> = {};

/** The names the signed-in caller may see, per dimension, in a fixed order (from /api/me). */
export function knowNames(dimension: string, names: string[]): void {
  known[dimension] = [...names].sort();
}

export function forgetNames(): void {
  for (const dimension of Object.keys(known)) delete known[dimension];
}

export function colourFor(dimension: string, name: string): string {
  if (name === "other" || name === "(none)") return OTHER;
  const palette = PALETTES[dimension] ?? PALETTES.status;
  const list = known[dimension] ?? [];
  let at = list.indexOf(name);
  if (at < 0) {
    // A name the caller's lists do not hold (an old model): placed by its hash after the known ones.
    let hash = 0;
    for (const char of name) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
    at = list.length + (hash % palette.length);
  }
  return palette[at % palette.length];
}

export function paletteOf(dimension: string): string[] {
  return [...(PALETTES[dimension] ?? PALETTES.status)];
}
