/**
 * sys/audit and sys/audit-hash (Vault API: /sys/audit): list, enable and disable
 * audit devices (sudo, as Vault's), and the HMAC of an input with a device's salt (no sudo, so an
 * operator can look a known value up in the log). Devices are cluster-wide as in Vault: these
 * paths answer only in the root namespace. Device types fit Workers: `http` (a collector URL,
 * delivered through the Queue), `r2` (NDJSON objects in AUDIT_BUCKET), `stdout` (the Worker's
 * log). The http `headers` map (e.g. an Authorization header for the collector) is sealed at rest
 * and read back as asterisks; the salt is never read back. Storage: src/audit/audit-store.ts.
 */
import { deleteDevice, deviceAt, insertDevice, listDevices, MASKED, parseBool } from "../../audit/audit-store";
import { parseFilterOption } from "../../audit/filter";
import { hmacValue } from "../../audit/hmac";
import { AUDIT_DEVICE_TYPES, type AuditDevice, type AuditDeviceType } from "../../audit/types";
import { loadConfig } from "../../core/config";
import { badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { MAX_URL_BYTES } from "../../core/limits";
import { ROOT_NAMESPACE } from "../../core/mount-store";
import { route, type Req } from "../../core/route";
import { utf8Length } from "../../core/text";

/** Boolean options Vault's devices take (OpenBao internal/audit): strconv.ParseBool values. */
const BOOL_OPTIONS = ["log_raw", "hmac_accessor", "elide_list_responses"] as const;
/** Options each type understands, beyond the common ones (`compress`: gzip the NDJSON, a boolean). */
const TYPE_OPTIONS: Record<AuditDeviceType, readonly string[]> = { http: ["address", "headers", "compress"], r2: ["prefix", "compress"], stdout: [] };
const COMMON_OPTIONS = [...BOOL_OPTIONS, "format", "filter"];
const DEFAULT_R2_PREFIX = "audit/";

/** Devices are cluster-wide (Vault: sys/audit is a root-namespace path). */
function rootOnly(req: Req): void {
  if (req.ns.id !== ROOT_NAMESPACE.id) throw badRequest("audit devices are cluster-wide: manage them from the root namespace (no namespace header)");
}

/** "collector" → "collector/": mount-style segments of letters, digits, '_', '-', '.'. */
function devicePath(raw: string): string {
  const segs = raw.split("/").filter((s) => s !== "");
  if (segs.length === 0) throw badRequest("path: an audit device path is required");
  for (const s of segs) if (!/^[\w.-]+$/.test(s) || s === "." || s === "..") throw badRequest(`path: invalid segment "${s}" (letters, digits, '_', '-', '.')`);
  const path = `${segs.join("/")}/`;
  if (path.length > 128) throw badRequest("path: at most 128 characters");
  return path;
}

/** Vault's list shape: `{type, description, options, local, path}`; header values masked. */
function view(d: AuditDevice): Record<string, unknown> {
  return { type: d.type, description: d.description, options: d.options, local: d.local, path: d.path };
}

const enableFields = defineFields({
  path: { type: "string", description: "Where the device is enabled (sys/audit/<path>).", required: true },
  type: { type: "string", description: "http, r2 or stdout.", default: "" },
  description: { type: "string", description: "Human-friendly description.", default: "" },
  options: { type: "map", description: "Device options: log_raw, hmac_accessor, elide_list_responses, filter; http: address, headers, compress; r2: prefix, compress.", default: {} },
  local: { type: "bool", description: "Accepted for compatibility (Lanyard has one cluster).", default: false },
});

/** A header map safe to send: RFC 7230 token names, values without CR/LF/NUL. */
function headerMap(v: unknown): Record<string, string> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw badRequest("options.headers: expected a JSON object of header names to string values");
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(v)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw badRequest(`options.headers: invalid header name "${name.slice(0, 64)}"`);
    if (typeof value !== "string" || /[\r\n\0]/.test(value)) throw badRequest(`options.headers.${name}: expected a string without line breaks`);
    if (value === MASKED) throw badRequest(`options.headers.${name}: send the header's value, not the masked read-back`);
    out[name] = value;
  }
  return out;
}

/** The options of a new device, checked (400 naming the option) with their defaults filled. */
function checkOptions(req: Req, type: AuditDeviceType, raw: Record<string, unknown>): { options: Record<string, string>; headers: Record<string, string> | null } {
  const options: Record<string, string> = {};
  let headers: Record<string, string> | null = null;
  const known = [...COMMON_OPTIONS, ...TYPE_OPTIONS[type]];
  const unknown: string[] = [];
  for (const [k, v] of Object.entries(raw)) {
    if (k === "headers" && type === "http") {
      headers = headerMap(v);
      continue;
    }
    if (typeof v === "object" && v !== null) throw badRequest(`options.${k}: expected a string`);
    const s = v === null ? "" : String(v);
    if (((BOOL_OPTIONS as readonly string[]).includes(k) || k === "compress") && parseBool(s) === null) throw badRequest(`options.${k}: expected a boolean, got "${s.slice(0, 32)}"`);
    if (k === "format" && s !== "json") throw badRequest(`options.format: only "json" is supported`);
    // Vault's filter expression (docs/audit.md "Filters"): refused here, at enable, when it does not parse.
    if (k === "filter") parseFilterOption(s);
    if (!known.includes(k)) unknown.push(k);
    else options[k] = s;
  }
  if (unknown.length > 0) req.warnings.push(`options ignored by the ${type} device type: ${unknown.sort().join(", ")}`);
  if (type === "http") options.address = checkAddress(options.address);
  if (type === "r2") {
    if (!req.env.AUDIT_BUCKET) throw badRequest("type r2: the Worker has no AUDIT_BUCKET binding (wrangler.toml [[r2_buckets]])");
    const prefix = options.prefix ?? DEFAULT_R2_PREFIX;
    if (/[\0-\x1f]/.test(prefix) || prefix.startsWith("/") || prefix.length > 256) throw badRequest("options.prefix: an R2 key prefix without control characters or a leading '/', at most 256 characters");
    options.prefix = prefix;
  }
  return { options, headers: headers && Object.keys(headers).length > 0 ? headers : null };
}

/**
 * An http device's collector: a full http(s) URL. Loopback and private addresses are allowed on
 * purpose: enabling a device needs sudo, and a collector on the operator's network is the usual
 * setup. Credentials belong in `headers`, not in the URL, which is read back.
 */
function checkAddress(raw: string | undefined): string {
  if (!raw) throw badRequest("options.address: required for an http device (a full http:// or https:// URL)");
  if (utf8Length(raw) > MAX_URL_BYTES) throw badRequest(`options.address: longer than ${MAX_URL_BYTES} bytes`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest("options.address: not a valid URL (expected a full http:// or https:// URL)");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw badRequest("options.address: the scheme must be http or https");
  if (url.username || url.password) throw badRequest("options.address: put credentials in options.headers, not in the URL (the address is read back)");
  return raw;
}

async function enable(req: Req<typeof enableFields>): Promise<null> {
  rootOnly(req);
  const f = req.fields;
  const path = devicePath(f.path);
  if (f.type === "") throw badRequest(`type: required (one of ${AUDIT_DEVICE_TYPES.join(", ")})`);
  if (!(AUDIT_DEVICE_TYPES as readonly string[]).includes(f.type)) throw badRequest(`type: unknown audit device type "${f.type.slice(0, 32)}" (supported: ${AUDIT_DEVICE_TYPES.join(", ")})`);
  const type = f.type as AuditDeviceType;
  const { options, headers } = checkOptions(req, type, f.options);
  const added = await insertDevice(req.db, loadConfig(req.env).seal, { path, type, description: f.description, options, headers, local: f.local });
  if (!added) throw badRequest(`path already in use: ${path}`);
  return null;
}

const hashFields = defineFields({
  path: { type: "string", description: "The audit device.", required: true },
  input: { type: "string", description: "The value to hash.", default: "" },
});

export const auditRoutes = [
  route({
    pattern: "audit",
    sudo: ["read"],
    handlers: {
      async read(req) {
        rootOnly(req);
        const out: Record<string, unknown> = {};
        for (const d of await listDevices(req.db, loadConfig(req.env).seal)) out[d.path] = view(d);
        return { data: out, topLevel: out };
      },
    },
  }),
  route({
    pattern: "audit/*path",
    fields: enableFields,
    sudo: ["create", "update", "delete"],
    handlers: {
      update: enable,
      async delete(req) {
        rootOnly(req);
        await deleteDevice(req.db, devicePath(req.params.path ?? ""));
        return null;
      },
    },
  }),
  route({
    pattern: "audit-hash/*path",
    fields: hashFields,
    handlers: {
      async update(req) {
        rootOnly(req);
        const path = devicePath(req.fields.path);
        if (req.fields.input === "") throw badRequest('the "input" parameter is empty');
        const device = await deviceAt(req.db, loadConfig(req.env).seal, path);
        if (!device) throw badRequest(`unknown audit backend "${path}"`);
        const data = { hash: hmacValue(device.salt, req.fields.input) };
        return { data, topLevel: data };
      },
    },
  }),
];
