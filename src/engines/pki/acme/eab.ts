/**
 * External account binding keys (RFC 8555 §7.3.4; Vault API /pki/acme/new-eab), managed with a Vault token:
 * `<directory>/new-eab` on each of the four directory prefixes, LIST `eab`, DELETE `eab/:key_id`.
 * A key is an HMAC key: base64url of 41 bytes, 9 fixed ones that make it start with the text
 * `vault-eab-0-` (Vault's, so it never begins with "-") and 32 random ones. It is shown once, at
 * creation, and stored sealed; it is bound to the directory that made it and single-use
 * (accounts.ts spends it when it creates an account).
 */
import { loadConfig } from "../../../core/config";
import { seal } from "../../../core/db/seal";
import { badRequest, notFound } from "../../../core/errors";
import { base64UrlToBytes, bytesToBase64Url, concatBytes } from "../../../core/encoding";
import { route, type JsonReply, type Req, type RouteDef } from "../../../core/route";
import { mountOf } from "../routes/common";
import { deleteEab, insertEab, listEabs } from "../storage/acme-store";
import { eabSealContext } from "./accounts";
import { directoryPrefix } from "./config";

const KEY_PREFIX = base64UrlToBytes("vault-eab-0-");
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

async function newEab(req: Req): Promise<JsonReply> {
  const mount = mountOf(req);
  const id = crypto.randomUUID();
  const key = bytesToBase64Url(concatBytes([KEY_PREFIX, crypto.getRandomValues(new Uint8Array(32))]));
  const prefix = directoryPrefix(req.params);
  const now = Date.now();
  await insertEab(req.db, { mountId: mount.id, id, sealedKey: await seal(loadConfig(req.env).seal, key, eabSealContext(mount.id, id)), directory: prefix, createdAt: now });
  return { data: { id, key_type: "hs", key, acme_directory: `${prefix}/directory`, created_on: rfc3339(now) } };
}

async function listEab(req: Req): Promise<JsonReply> {
  const rows = await listEabs(req.db, mountOf(req).id);
  if (rows.length === 0) throw notFound();
  const keyInfo: Record<string, unknown> = {};
  for (const r of rows) keyInfo[r.id] = { key_type: "hs", acme_directory: `${r.directory}/directory`, created_on: rfc3339(r.createdAt) };
  return { data: { keys: rows.map((r) => r.id), key_info: keyInfo } };
}

async function removeEab(req: Req): Promise<JsonReply> {
  const id = req.params.key_id ?? "";
  if (!UUID_RE.test(id)) throw badRequest("key_id: badly formatted key_id field");
  if (!(await deleteEab(req.db, mountOf(req).id, id))) return { warnings: [`No key id found with id: ${id}`] };
  return { data: null };
}

const PREFIXES = ["acme", "issuer/:issuer_ref/acme", "roles/:role/acme", "issuer/:issuer_ref/roles/:role/acme"];

export const eabRoutes: RouteDef[] = [
  ...PREFIXES.map((p) => route({ pattern: `${p}/new-eab`, handlers: { update: newEab } })),
  route({ pattern: "eab", handlers: { list: listEab } }),
  route({ pattern: "eab/:key_id", handlers: { delete: removeEab } }),
];
