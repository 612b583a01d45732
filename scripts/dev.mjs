#!/usr/bin/env node
// `npm run dev`: creates .dev.vars with development defaults when it is missing (never
// overwrites one), applies local D1 migrations, then runs `wrangler dev` on 127.0.0.1:8787.
// Extra arguments pass through to wrangler dev: `npm run dev -- --port 9000`.
// The scheduled jobs (lease expiry, PKI auto-tidy and CRL rebuild, sync reconciliation, SecretID
// tidy: wrangler.toml [triggers]) never fire under `wrangler dev` by themselves: this script runs
// wrangler dev with --test-scheduled and calls its /__scheduled route every 60 s, as the cron
// trigger would (https://developers.cloudflare.com/workers/configuration/cron-triggers/#test-cron-triggers-locally).
// `--no-cron` (or LANYARD_DEV_CRON=off) turns that off; then trigger a run by hand with
// `curl "http://127.0.0.1:8787/__scheduled?cron=*+*+*+*+*"`.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
process.chdir(root);
const cronOff = process.argv.includes("--no-cron") || process.env.LANYARD_DEV_CRON === "off";
const args = process.argv.slice(2).filter((a) => a !== "--no-cron");
const env = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
};
const wrangler = path.join(root, "node_modules", ".bin", "wrangler");

if (!existsSync(".dev.vars")) {
  const vars = [
    "# Development settings for `wrangler dev` (git-ignored). Never use these values in production.",
    "ENVIRONMENT=development",
    "ROOT_TOKEN=dev-root-token",
    `SEAL_KEY=${randomBytes(32).toString("base64")}`,
    "",
  ].join("\n");
  writeFileSync(".dev.vars", vars, { mode: 0o600 });
  console.log("Created .dev.vars with development defaults.");
}
const devVars = Object.fromEntries(
  readFileSync(".dev.vars", "utf8")
    .split("\n")
    .filter((l) => /^\s*[A-Z_][A-Z0-9_]*\s*=/.test(l))
    .map((l) => {
      const i = l.indexOf("=");
      return [l.slice(0, i).trim(), l.slice(i + 1).trim().replace(/^"(.*)"$/, "$1")];
    }),
);

const persist = args.find((a, i) => args[i - 1] === "--persist-to") ?? args.find((a) => a.startsWith("--persist-to="))?.split("=")[1];
const migrate = spawnSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", ...(persist ? ["--persist-to", persist] : [])], {
  env,
  stdio: ["ignore", "pipe", "pipe"],
  encoding: "utf8",
});
if (migrate.status !== 0) {
  process.stderr.write(migrate.stdout + migrate.stderr);
  process.exit(migrate.status ?? 1);
}
console.log("Local D1 migrations applied.");

const flag = (name) => {
  const i = args.findIndex((a) => a === name || a.startsWith(`${name}=`));
  if (i < 0) return undefined;
  return args[i].includes("=") ? args[i].split("=")[1] : args[i + 1];
};
const ip = flag("--ip") ?? "127.0.0.1";
const port = flag("--port") ?? "8787";
const defaults = [];
if (!flag("--ip")) defaults.push("--ip", ip);
if (!flag("--port")) defaults.push("--port", port);
if (!args.some((a) => a.startsWith("--show-interactive-dev-session"))) defaults.push("--show-interactive-dev-session=false");
if (!args.includes("--test-scheduled")) defaults.push("--test-scheduled");

console.log(`Lanyard will listen on http://${ip}:${port}/v1/  (health: http://${ip}:${port}/v1/sys/health)`);
console.log(`Development root token: ${devVars.ROOT_TOKEN ?? "(ROOT_TOKEN is not set in .dev.vars)"}`);
// Printed once at start-up: Cloudflare refuses the LIST verb before the Worker runs.
console.log(
  "Vault clients: lists must use GET ?list=true. The vault CLI, Terraform and Vault's Go client already do; " +
    "use hvac.Client(strict_http=True) and node-vault's noCustomHTTPVerbs: true (README: \"Use it with your Vault tools\").",
);

const child = spawn(wrangler, ["dev", ...defaults, ...args], { env, stdio: "inherit" });

// The cron trigger, every minute as wrangler.toml's "* * * * *". A failed call (the server still
// starting, or restarting after an edit) is skipped: the next minute tries again.
const host = ip === "0.0.0.0" || ip === "::" ? "127.0.0.1" : ip.includes(":") ? `[${ip}]` : ip;
const scheduledUrl = `http://${host}:${port}/__scheduled?cron=*+*+*+*+*`;
let cron;
if (cronOff) {
  console.log(`Scheduled jobs: off (--no-cron). Run them once with: curl "${scheduledUrl}"`);
} else {
  console.log("Scheduled jobs: run every 60 s (turn off with --no-cron or LANYARD_DEV_CRON=off).");
  cron = setInterval(() => {
    fetch(scheduledUrl, { signal: AbortSignal.timeout(30_000) }).then(
      (r) => r.body?.cancel(),
      () => undefined,
    );
  }, 60_000);
}

const stop = (sig) => {
  clearInterval(cron);
  child.kill(sig);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
child.on("exit", (code, signal) => {
  clearInterval(cron);
  process.exit(code ?? (signal ? 1 : 0));
});
