/**
 * Request helpers for integration tests: every call goes through the Worker's fetch, exactly as
 * a client's would. `api()` returns status and parsed body; read/write/list/del are shorthands
 * that also assert the expected status.
 */
import { SELF } from "cloudflare:test";
import { expect } from "vitest";

export const ROOT = "test-root-token-0123456789";

export interface ApiResult {
  status: number;
  // Parsed JSON of any shape: tests assert it field by field.
  body: any;
  headers: Headers;
  text: string;
}

export interface CallOptions {
  token?: string | null;
  namespace?: string;
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

export async function api(method: string, path: string, opts: CallOptions = {}): Promise<ApiResult> {
  const headers: Record<string, string> = { ...opts.headers };
  const token = opts.token === undefined ? ROOT : opts.token;
  if (token !== null) headers["x-service-token"] = token;
  if (opts.namespace) headers["x-service-namespace"] = opts.namespace;
  let body: BodyInit | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
    headers["content-type"] = opts.contentType ?? (method === "PATCH" ? "application/merge-patch+json" : "application/json");
  }
  const res = await SELF.fetch(`http://lanyard.test/v1/${path.replace(/^\//, "")}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

async function expectStatus(p: Promise<ApiResult>, status: number | undefined): Promise<ApiResult> {
  const r = await p;
  if (status !== undefined) expect(r.status, `${JSON.stringify(r.body)}`).toBe(status);
  return r;
}

export const read = (path: string, opts: CallOptions = {}, status: number | undefined = 200) =>
  expectStatus(api("GET", path, opts), status);
export const list = (path: string, opts: CallOptions = {}, status: number | undefined = 200) =>
  expectStatus(api("GET", `${path}${path.includes("?") ? "&" : "?"}list=true`, opts), status);
export const write = (path: string, body: unknown = {}, opts: CallOptions = {}, status: number | undefined = 200) =>
  expectStatus(api("POST", path, { ...opts, body }), status);
export const patch = (path: string, body: unknown, opts: CallOptions = {}, status: number | undefined = 200) =>
  expectStatus(api("PATCH", path, { ...opts, body }), status);
export const del = (path: string, opts: CallOptions = {}, status: number | undefined = 204) =>
  expectStatus(api("DELETE", path, opts), status);

/** Mounts an engine and returns its path; a random suffix keeps tests in one file apart. */
export async function mount(type: "kv" | "pki", prefix = type): Promise<string> {
  const path = `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
  const body = type === "kv" ? { type: "kv", options: { version: "2" } } : { type };
  await write(`sys/mounts/${path}`, body, {}, 204);
  return path;
}

/** Writes a policy and creates a token holding it; returns the token. */
export async function tokenWithPolicy(policy: string, opts: { namespace?: string; extra?: Record<string, unknown> } = {}): Promise<string> {
  const name = `p-${crypto.randomUUID().slice(0, 8)}`;
  await write(`sys/policies/acl/${name}`, { policy }, { namespace: opts.namespace }, 204);
  const r = await write("auth/token/create", { policies: [name], ...opts.extra }, { namespace: opts.namespace });
  return r.body.auth.client_token as string;
}
