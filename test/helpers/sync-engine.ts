/** Helpers for the sync engine's integration tests: a KV secret, a destination, an association. */
import { expect, vi } from "vitest";
import { mount, read, write, type CallOptions } from "./api";

export const destPath = (type: string, name: string) => `sys/sync/destinations/${type}/${name}`;

export interface SyncSetup {
  mount: string;
  accessor: string;
  secret: string;
}

/** A fresh KV-v2 mount with one secret written; returns its mount path and accessor. */
export async function kvSecret(data: Record<string, unknown>, secret = "app/config", opts: CallOptions = {}): Promise<SyncSetup> {
  const m = await mount("kv");
  await write(`${m}/data/${secret}`, { data }, opts);
  const mounts = await read("sys/mounts", opts);
  const accessor = mounts.body.data[`${m}/`].accessor as string;
  return { mount: m, accessor, secret };
}

export async function setAssoc(type: string, name: string, s: SyncSetup, opts: CallOptions = {}, status = 200) {
  return write(`${destPath(type, name)}/associations/set`, { mount: s.mount, secret_name: s.secret }, opts, status);
}

export async function removeAssoc(type: string, name: string, s: SyncSetup, opts: CallOptions = {}, status = 200) {
  return write(`${destPath(type, name)}/associations/remove`, { mount: s.mount, secret_name: s.secret }, opts, status);
}

/** The `associated_secrets` entries of a destination. */
export async function entries(type: string, name: string, opts: CallOptions = {}): Promise<Record<string, Record<string, unknown>>> {
  const r = await read(`${destPath(type, name)}/associations`, opts);
  return r.body.data.associated_secrets as Record<string, Record<string, unknown>>;
}

/** Waits until every entry of the association has the status (the queue runs in the background). */
export async function waitForStatus(type: string, name: string, key: string, status: string, timeout = 20_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const e = await entries(type, name);
      expect(e[key]?.sync_status).toBe(status);
    },
    { timeout, interval: 200 },
  );
}

export const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d+(Z|[+-]\d{2}:\d{2})$/;
