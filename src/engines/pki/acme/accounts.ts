/**
 * ACME accounts (RFC 8555 §7.3): new-account (with `onlyReturnExisting` and the External Account
 * Binding of §7.3.4 as config/acme eab_policy demands), account/:kid (read, update `contact`,
 * deactivate, §7.3.2 and §7.3.6) and key-change (§7.3.5). Vault's rules (OpenBao
 * builtin/logical/pki/path_acme_account.go, path_acme_eab.go): an account is bound to the
 * directory that created it, an existing key answers 200 with the same Location, an EAB key is
 * single-use and bound to its directory, and
 * `termsOfServiceAgreed` is not enforced (no terms are published).
 */
import { loadConfig } from "../../../core/config";
import { unseal } from "../../../core/db/seal";
import { base64UrlToBytes, randomHex } from "../../../core/encoding";
import { isUniqueViolation } from "../../../core/lifecycle";
import {
  getAccountByThumbprint,
  getEab,
  insertAccount,
  insertAccountSpendingEab,
  replaceAccountKey,
  updateAccount,
  type AcmeAccountRow,
} from "../storage/acme-store";
import type { AcmeReply, AcmeRequest, SignedRequest } from "./context";
import { thumbprint, verifyEab, verifyKeyChange } from "./jws";
import { AcmeError, acmeError } from "./problem";

/** The seal context of an EAB key (eab.ts seals with the same). */
export const eabSealContext = (mountId: string, id: string): string => `pki-acme-eab:${mountId}:${id}`;

export function accountJson(a: AcmeRequest, acct: AcmeAccountRow): Record<string, unknown> {
  return {
    status: acct.status,
    contact: acct.contact,
    orders: a.url(`account/${acct.id}/orders`),
    ...(acct.eabId ? { externalAccountBinding: { kid: acct.eabId } } : {}),
  };
}

function accountReply(a: AcmeRequest, acct: AcmeAccountRow, status: number): AcmeReply {
  return { status, json: accountJson(a, acct), headers: { location: a.url(`account/${acct.id}`) } };
}

/** `contact`: a list of mailto: URLs (RFC 8555 §7.3; other schemes are unsupportedContact). */
function contactsOf(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((c) => typeof c === "string")) throw acmeError("invalidContact", "'contact' must be an array of URL strings");
  if (v.length > 10) throw acmeError("invalidContact", "at most 10 contacts");
  for (const c of v as string[]) {
    if (!c.startsWith("mailto:")) throw acmeError("unsupportedContact", `contact ${JSON.stringify(c.slice(0, 64))}: only mailto: contacts are supported`);
    if (c.length > 320 || !/^mailto:[^@\s,?]+@[^@\s,?]+$/.test(c)) throw acmeError("invalidContact", `contact ${JSON.stringify(c.slice(0, 64))} is not a single e-mail address`);
  }
  return v as string[];
}

export async function newAccount(s: SignedRequest): Promise<AcmeReply> {
  const p = s.payload;
  if (!p) throw acmeError("malformed", "new-account needs a payload (POST-as-GET is not allowed here)");
  const { db, mount } = s.ctx;
  const tp = await thumbprint(s.jwk);
  const existing = await getAccountByThumbprint(db, mount.id, tp);
  if (existing) {
    if (existing.directory !== s.dir.prefix) throw acmeError("unauthorized", "this key's account belongs to another ACME directory of this mount");
    // RFC 8555 §7.3.6: a deactivated account's key authorizes nothing any more.
    if (existing.status !== "valid") throw acmeError("unauthorized", `the account of this key is ${existing.status}`);
    return accountReply(s, existing, 200);
  }
  if (p.onlyReturnExisting === true) throw acmeError("accountDoesNotExist", "no account exists for this key (onlyReturnExisting)");
  const contact = contactsOf(p.contact);

  const eabValue = p.externalAccountBinding;
  if (eabValue === undefined && s.cfg.eab_policy !== "not-required") {
    throw acmeError("externalAccountRequired", "this mount requires an external account binding to create an account (config/acme eab_policy)");
  }
  const row: AcmeAccountRow = {
    mountId: mount.id,
    id: randomHex(16),
    thumbprint: tp,
    jwk: s.jwk,
    status: "valid",
    contact,
    directory: s.dir.prefix,
    eabId: "",
    createdAt: s.now,
    updatedAt: s.now,
  };

  let created: boolean;
  if (eabValue !== undefined) {
    row.eabId = await verifyEab(eabValue, s.url("new-account"), s.jwk, async (kid) => {
      const eab = await getEab(db, mount.id, kid);
      if (!eab) return null;
      if (eab.directory !== s.dir.prefix) throw acmeError("unauthorized", `externalAccountBinding: the EAB key belongs to directory ${eab.directory}/, not ${s.dir.prefix}/`);
      return base64UrlToBytes(await unseal(loadConfig(s.ctx.env).seal, eab.sealedKey, eabSealContext(mount.id, eab.id)));
    });
    if (!(await insertAccountSpendingEab(db, row))) throw acmeError("unauthorized", "externalAccountBinding: eab was already used");
    created = true;
  } else {
    created = await insertAccount(db, row);
  }
  // A concurrent new-account with the same key won the unique index: answer with its account.
  const acct = await getAccountByThumbprint(db, mount.id, tp);
  if (!acct) throw acmeError("serverInternal", "the account was not stored");
  return accountReply(s, acct, created && acct.id === row.id ? 201 : 200);
}

/** The path's account must be the signer's (RFC 8555 §7.3.2: only the account holder). */
function ownAccount(s: SignedRequest): AcmeAccountRow {
  const acct = s.account;
  if (!acct || acct.id !== s.req.params.kid) throw acmeError("unauthorized", "the request's 'kid' does not name this account");
  return acct;
}

export async function accountUpdate(s: SignedRequest): Promise<AcmeReply> {
  const acct = ownAccount(s);
  const p = s.payload;
  if (!p) return accountReply(s, acct, 200);
  const patch: { status?: string; contact?: string[] } = {};
  if (p.status !== undefined) {
    if (p.status !== "deactivated") throw acmeError("malformed", "an account's 'status' may only be set to \"deactivated\"");
    patch.status = "deactivated";
  }
  if (p.contact !== undefined) patch.contact = contactsOf(p.contact);
  if (Object.keys(patch).length === 0) return accountReply(s, acct, 200);
  const updated = await updateAccount(s.ctx.db, s.ctx.mount.id, acct.id, patch);
  if (!updated) throw acmeError("accountDoesNotExist", "the account no longer exists");
  return accountReply(s, updated, 200);
}

/**
 * key-change (RFC 8555 §7.3.5): the outer JWS signed by the current key (`kid`), its payload the
 * inner JWS signed by the new key. A new key that another account holds is 409 with that
 * account's Location.
 */
export async function keyChange(s: SignedRequest): Promise<AcmeReply> {
  const acct = s.account;
  if (!acct) throw acmeError("accountDoesNotExist", "no account exists with the provided 'kid'");
  if (!s.payload) throw acmeError("malformed", "key-change needs the inner JWS as its payload");
  const inner = await verifyKeyChange(s.payload, s.jws.header.url);
  if (inner.account !== s.jws.header.kid) throw acmeError("unauthorized", "key-change: the inner 'account' is not the outer 'kid'");
  if ((await thumbprint(inner.oldKey)) !== acct.thumbprint) throw acmeError("unauthorized", "key-change: 'oldKey' is not the account's current key");
  const next = await thumbprint(inner.jwk);
  const { db, mount } = s.ctx;
  const holder = next === acct.thumbprint ? acct : await getAccountByThumbprint(db, mount.id, next);
  const conflict = (id: string) => new AcmeError("malformed", "key-change: the new key is already in use by an account", 409, { location: s.url(`account/${id}`) });
  if (holder) throw conflict(holder.id);
  let replaced: boolean;
  try {
    replaced = await replaceAccountKey(db, mount.id, acct.id, acct.thumbprint, { thumbprint: next, jwk: inner.jwk });
  } catch (e) {
    if (!isUniqueViolation(e)) throw e;
    const winner = await getAccountByThumbprint(db, mount.id, next);
    throw conflict(winner?.id ?? "");
  }
  if (!replaced) throw acmeError("unauthorized", "key-change: the account key changed concurrently; retry with the current key");
  return accountReply(s, { ...acct, thumbprint: next, jwk: inner.jwk, updatedAt: s.now }, 200);
}
