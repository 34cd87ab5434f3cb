// Builds the dashboard into gateway/dashboard/assets/ (committed, so the gateway needs no node at
// run time): one script bundle with Chart.js inside, one stylesheet, and the page itself.
// `npm ci && npm run build` from the lockfile gives the same bytes on every machine.
import { copyFileSync, mkdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "gateway", "dashboard", "assets");
mkdirSync(out, { recursive: true });

const common = { bundle: true, minify: true, legalComments: "eof", logLevel: "warning" };
await esbuild.build({
  ...common,
  entryPoints: [join(here, "src", "main.ts")],
  outfile: join(out, "dashboard.js"),
  format: "iife",
  target: ["es2020"],
  platform: "browser",
});
await esbuild.build({ ...common, entryPoints: [join(here, "src", "dashboard.css")], outfile: join(out, "dashboard.css") });
copyFileSync(join(here, "src", "index.html"), join(out, "index.html"));

for (const name of ["index.html", "dashboard.js", "dashboard.css"]) {
  console.log(`${name.padEnd(14)} ${(statSync(join(out, name)).size / 1024).toFixed(1)} KiB`);
}
