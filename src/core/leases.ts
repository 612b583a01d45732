/**
 * Leases as Vault's expiration manager hands them out (Vault API: /sys/leases). An engine
 * that returns a secret with a lease calls `registerLease` and puts what it returns at the top of
 * the response envelope; sys/leases/* (src/app/sys/leases.ts) looks leases up and revokes them, the
 * revocation itself going back to the engine through its Engine value (`revokeLease`,
 * src/core/engine.ts), so the app never reaches into an engine.
 */
import type { Db } from "./db/client";
import { formatGoDuration } from "./duration";
import { getLease, insertLease, type LeaseRow } from "./lease-store";
import { effectiveTtls, ROOT_NAMESPACE, type MountRow, type NamespaceRef } from "./mount-store";
import { trimEndChar } from "./text";

export type { LeaseRow };

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Vault's base62.Random(24): uniform characters (bytes ≥ 248 are drawn again). */
function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const b of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

/**
 * Vault's lease id: the request path (relative to the namespace) joined with 24 random base62
 * characters, e.g. `pki/issue/web/AbCdEf0123456789XyZaBcDe`; outside the root namespace Vault
 * appends `.<namespace id>` (expiration.go Register).
 */
export function newLeaseId(ns: NamespaceRef, requestPath: string): string {
  const id = `${trimEndChar(requestPath, "/")}/${randomBase62(24)}`;
  return ns.id === ROOT_NAMESPACE.id ? id : `${id}.${ns.id}`;
}

export interface LeaseRequest {
  ns: NamespaceRef;
  mount: MountRow;
  /** The request's path relative to the namespace ("pki/issue/web"). */
  requestPath: string;
  /** When the secret itself stops being valid (a certificate's notAfter), Unix ms. */
  validUntil: number;
  /** What the engine needs to revoke the secret later (Vault's Secret.InternalData). */
  internalData: Record<string, string>;
  now?: number;
}

export interface LeaseGrant {
  /** The envelope's top-level lease members (src/core/envelope.ts: JsonReply.topLevel). */
  topLevel: { lease_id: string; lease_duration: number; renewable: false };
  warnings: string[];
}

/**
 * Stores a lease and answers the envelope members. The TTL is the secret's remaining life,
 * capped by the mount's max lease TTL with Vault's warning (request_handling.go): a capped lease
 * then revokes its secret when it expires, before the secret would have run out on its own.
 */
export async function registerLease(db: Db, r: LeaseRequest): Promise<LeaseGrant> {
  const now = r.now ?? Date.now();
  const { maxTtl } = effectiveTtls(r.mount);
  let ttl = Math.max(0, Math.floor((r.validUntil - now) / 1000));
  const warnings: string[] = [];
  if (ttl > maxTtl) {
    warnings.push(`TTL of "${formatGoDuration(ttl)}" exceeded the effective max_ttl of "${formatGoDuration(maxTtl)}"; TTL value is capped accordingly`);
    ttl = maxTtl;
  }
  const id = newLeaseId(r.ns, r.requestPath);
  await insertLease(db, {
    namespaceId: r.ns.id,
    id,
    mountId: r.mount.id,
    internalData: r.internalData,
    issueTime: now,
    expireTime: now + ttl * 1000,
  });
  // PKI secrets have no renew handler, so the lease is never renewable (secret_certs.go).
  return { topLevel: { lease_id: id, lease_duration: ttl, renewable: false }, warnings };
}

/** A lease that exists and has not expired; Vault revokes and forgets a lease at expiry. */
export async function liveLease(db: Db, ns: NamespaceRef, id: string, now = Date.now()): Promise<LeaseRow | null> {
  const row = await getLease(db, ns.id, id);
  return row && row.expireTime > now ? row : null;
}
