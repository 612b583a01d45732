/**
 * `<mount>/config/notifications` (docs/pki-notifications.md): where expiry notifications go
 * (`targets`: `{url, format, headers}`) and when (`thresholds`, durations before not_after).
 * URLs follow the outbound-URL rules of every other outbound call (src/core/outbound-url.ts,
 * NOTIFY_ALLOW_HTTP for plain http); header values are sealed under SEAL_KEY at rest, bound to
 * the mount and the target, and read back as asterisks, as an audit device's headers are
 * (docs/audit.md). A write that repeats a target with every header value masked keeps the
 * stored headers, so a read-modify-write never turns them into asterisks.
 */
import { badRequest } from "../../../core/errors";
import { loadConfig } from "../../../core/config";
import { seal, unseal } from "../../../core/db/seal";
import { parseDurationSeconds } from "../../../core/duration";
import { bytesToHex, sha256 } from "../../../core/encoding";
import { checkOutboundUrl } from "../../../core/outbound-url";
import { MAX_URL_BYTES } from "../../../core/limits";
import type { StoredNotifyConfig, StoredTarget } from "../storage/notify-store";

export const MASKED = "********";
export const DEFAULT_THRESHOLDS = ["720h", "168h", "24h"];
const MAX_TARGETS = 10;
const MAX_THRESHOLDS = 10;
const MAX_HEADERS = 20;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A duration as the shortest whole unit: "720h", "90m", "45s" (the key of a threshold). */
export function thresholdText(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${seconds}s`;
}

export function thresholdSeconds(text: string): number {
  return parseDurationSeconds(text);
}

/** A target's identity: its format and URL (headers may change without re-sending anything). */
export async function targetKey(t: { url: string; format: string }): Promise<string> {
  return bytesToHex(await sha256(`${t.format} ${t.url}`)).slice(0, 32);
}

const headersContext = (mountId: string, key: string) => `pki-notify-headers:${mountId}:${key}`;

function parseThresholds(v: unknown): string[] {
  if (v === undefined || v === null) return DEFAULT_THRESHOLDS;
  const list = typeof v === "string" ? v.split(",").map((s) => s.trim()).filter((s) => s !== "") : v;
  if (!Array.isArray(list) || list.length === 0) throw badRequest("thresholds: must be a non-empty list of durations");
  if (list.length > MAX_THRESHOLDS) throw badRequest(`thresholds: at most ${MAX_THRESHOLDS}`);
  const out = new Set<string>();
  for (const t of list) {
    let secs: number;
    try {
      secs = parseDurationSeconds(t);
    } catch {
      throw badRequest(`thresholds: "${String(t)}" is not a duration`);
    }
    if (secs < 60) throw badRequest(`thresholds: "${String(t)}" must be at least 1m`);
    out.add(thresholdText(secs));
  }
  return [...out].sort((a, b) => thresholdSeconds(b) - thresholdSeconds(a));
}

function parseHeaders(v: unknown, i: number): Record<string, string> | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "object" || Array.isArray(v)) throw badRequest(`targets[${i}].headers: must be an object of header name to value`);
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > MAX_HEADERS) throw badRequest(`targets[${i}].headers: at most ${MAX_HEADERS}`);
  for (const [name, value] of entries) {
    if (!HEADER_NAME.test(name)) throw badRequest(`targets[${i}].headers: "${name}" is not a header name`);
    if (typeof value !== "string" || /[\r\n\0]/.test(value) || value.length > 4096) throw badRequest(`targets[${i}].headers: the value of "${name}" must be a single-line string`);
  }
  return entries.length === 0 ? null : Object.fromEntries(entries as [string, string][]);
}

/** Validates and seals a written configuration; `previous` supplies headers sent back masked. */
export async function sealNotifyConfig(env: Env, mountId: string, body: Record<string, unknown>, previous: StoredNotifyConfig | null): Promise<StoredNotifyConfig> {
  const raw = body.targets;
  if (!Array.isArray(raw) || raw.length === 0) throw badRequest("targets: must be a non-empty list of {url, format, headers}");
  if (raw.length > MAX_TARGETS) throw badRequest(`targets: at most ${MAX_TARGETS}`);
  const keys = loadConfig(env).seal;
  const targets: StoredTarget[] = [];
  const seen = new Set<string>();
  for (const [i, t] of raw.entries()) {
    if (typeof t !== "object" || t === null || Array.isArray(t)) throw badRequest(`targets[${i}]: must be an object {url, format, headers}`);
    const o = t as Record<string, unknown>;
    if (typeof o.url !== "string" || o.url === "") throw badRequest(`targets[${i}].url: required`);
    if (o.url.length > MAX_URL_BYTES) throw badRequest(`targets[${i}].url: longer than ${MAX_URL_BYTES} bytes`);
    const url = checkOutboundUrl(env, `targets[${i}].url`, o.url, "NOTIFY_ALLOW_HTTP").toString();
    const format = o.format ?? "json";
    if (format !== "json" && format !== "slack") throw badRequest(`targets[${i}].format: "${String(format)}" is not one of json, slack`);
    const key = await targetKey({ url, format });
    if (seen.has(key)) throw badRequest(`targets[${i}]: the same url and format twice`);
    seen.add(key);
    const headers = parseHeaders(o.headers, i);
    let sealed: string | null = headers === null ? null : await seal(keys, JSON.stringify(headers), headersContext(mountId, key));
    if (headers !== null && Object.values(headers).every((h) => h === MASKED)) {
      // Sent back as read: keep what is stored for this target (if it has those very names).
      const old = await findTarget(previous, key);
      const oldNames = old?.sealed_headers ? Object.keys(await unsealHeaders(env, mountId, key, old.sealed_headers)) : [];
      if (old && oldNames.length === Object.keys(headers).length && oldNames.every((n) => n in headers)) sealed = old.sealed_headers;
      else throw badRequest(`targets[${i}].headers: masked values ("${MASKED}") can only repeat the stored headers of the same target`);
    }
    targets.push({ url, format, sealed_headers: sealed });
  }
  return { targets, thresholds: parseThresholds(body.thresholds) };
}

async function findTarget(cfg: StoredNotifyConfig | null, key: string): Promise<StoredTarget | undefined> {
  for (const t of cfg?.targets ?? []) if ((await targetKey(t)) === key) return t;
  return undefined;
}

export async function unsealHeaders(env: Env, mountId: string, key: string, sealed: string | null): Promise<Record<string, string>> {
  if (sealed === null) return {};
  return JSON.parse(await unseal(loadConfig(env).seal, sealed, headersContext(mountId, key))) as Record<string, string>;
}

/** The configuration as read: header names with masked values, never the values. */
export async function readableNotifyConfig(env: Env, mountId: string, cfg: StoredNotifyConfig) {
  const targets = [];
  for (const t of cfg.targets) {
    const names = Object.keys(await unsealHeaders(env, mountId, await targetKey(t), t.sealed_headers));
    targets.push({ url: t.url, format: t.format, headers: Object.fromEntries(names.map((n) => [n, MASKED])) });
  }
  return { targets, thresholds: cfg.thresholds };
}

/** The stored target with this key and its unsealed headers, or null when it is gone. */
export async function targetOf(env: Env, mountId: string, cfg: StoredNotifyConfig | null, key: string): Promise<{ target: StoredTarget; headers: Record<string, string> } | null> {
  const t = await findTarget(cfg, key);
  if (!t) return null;
  return { target: t, headers: await unsealHeaders(env, mountId, key, t.sealed_headers) };
}
