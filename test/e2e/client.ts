/** HTTP client for the e2e Worker. */
import { expect, inject } from "vitest";
import { E2E_ROOT_TOKEN } from "./env";

export interface Res {
  status: number;
  // Parsed JSON of any shape: tests assert it field by field.
  body: any;
  text: string;
  headers: Headers;
}

export async function call(method: string, path: string, body?: unknown, token: string | null = E2E_ROOT_TOKEN): Promise<Res> {
  const headers: Record<string, string> = {};
  if (token) headers["x-service-token"] = token;
  if (body !== undefined) headers["content-type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
  const res = await fetch(`${inject("baseUrl")}/v1/${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, text, headers: res.headers };
}

export async function ok(method: string, path: string, body?: unknown, status = 200): Promise<Res> {
  const r = await call(method, path, body);
  expect(r.status, `${method} ${path}: ${r.text}`).toBe(status);
  return r;
}

/** Enables a PKI mount with a random name. */
export async function pkiMount(prefix = "pki"): Promise<string> {
  const path = `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
  await ok("POST", `sys/mounts/${path}`, { type: "pki" }, 204);
  return path;
}

/**
 * A far notAfter for CA certificates: mount TTLs are capped at 768h (docs/http-conventions.md
 * "Settled questions"), and, as in Vault, an absolute not_after is not capped by max_ttl (Vault
 * API: /v1/pki/root/generate/:type, `not_after`), so long-lived CAs use it.
 */
export const CA_NOT_AFTER = "2036-01-01T00:00:00Z";
