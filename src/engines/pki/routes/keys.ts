/** keys, key/:ref, keys/generate/:type, keys/import, config/keys (Vault API /pki/key/:key_ref). */
import { badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { keyGenFields } from "../fields";
import { route, type Req } from "../../../core/route";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import { privateKeyFacts, publicKeyFacts, toPkcs8 } from "../x509/asn1";
import { DerError } from "../x509/der";
import { checkObjectName, resolveKeyIn } from "../ca/issuers";
import { sealPrivateKey } from "../storage/keystore";
import { checkKeySize, validateKeySpec } from "../x509/keytypes";
import { PemError, bytesColonHex, decodePemBlocks, toPem } from "../x509/pem";
import { traditionalPrivateKey } from "../x509/asn1";
import {
  deleteKeyStmt,
  getAllConfig,
  insertKeyStmt,
  listIssuers,
  listKeys,
  putConfigStmt,
  renameKey,
  runBatch,
  type KeyRow,
  type Stmt,
} from "../storage/store";
import { generateKeyPair, publicKeyOf } from "../x509/x509";
import { mountOf, paginate } from "./common";

async function load(req: Req) {
  const mount = mountOf(req);
  const [keys, cfg, issuers] = await Promise.all([listKeys(req.db, mount.id), getAllConfig(req.db, mount.id), listIssuers(req.db, mount.id)]);
  return { mount, keys, cfg, issuers };
}

async function keyView(k: KeyRow) {
  const facts = await publicKeyFacts(base64ToBytes(k.publicKey));
  return { key_id: k.id, key_name: k.name, key_type: k.keyType, subject_key_id: bytesColonHex(facts.ski) };
}

/** Stores a new key (and makes it the default key when there is none). */
async function storeKey(req: Req, pkcs8: Uint8Array<ArrayBuffer>, name: string) {
  const { mount, keys, cfg } = await load(req);
  if (name !== "") {
    checkObjectName("key", name);
    if (keys.some((k) => k.name === name)) throw badRequest("key name already in use");
  }
  let spki: Uint8Array<ArrayBuffer>;
  try {
    spki = await publicKeyOf(pkcs8);
  } catch (e) {
    throw badRequest(`unable to parse private key: ${e instanceof Error ? e.message : String(e)}`);
  }
  const b64 = bytesToBase64(spki);
  const existing = keys.find((k) => k.publicKey === b64);
  if (existing) return { row: existing, existed: true };
  const facts = await publicKeyFacts(spki);
  const id = crypto.randomUUID();
  const row: KeyRow = {
    id,
    mountId: mount.id,
    name,
    keyType: facts.type,
    keyBits: facts.bits,
    publicKey: b64,
    sealedPrivateKey: await sealPrivateKey(req.env, mount.id, id, pkcs8),
    createdAt: Date.now(),
  };
  const stmts: Stmt[] = [insertKeyStmt(req.db, row)];
  if (cfg.keys.default === "" || !keys.some((k) => k.id === cfg.keys.default)) stmts.push(putConfigStmt(req.db, mount.id, "keys", { default: id }));
  await runBatch(req.db, stmts);
  return { row, existed: false };
}

const refField = { ref: { type: "string", description: "Key id, name or 'default'.", required: true } } as const;

export const keyRoutes = [
  route({
    pattern: "keys",
    handlers: {
      async list(req) {
        const { keys, cfg } = await load(req);
        const ids = paginate(keys.map((k) => k.id), req);
        if (ids.length === 0) throw notFound();
        const info: Record<string, unknown> = {};
        for (const id of ids) {
          const k = keys.find((x) => x.id === id);
          if (k) info[id] = { key_name: k.name, is_default: cfg.keys.default === id };
        }
        return { data: { keys: ids, key_info: info } };
      },
    },
  }),
  route({
    pattern: "key/:ref",
    fields: defineFields({ ...refField, key_name: { type: "string", description: "New name ('' removes it)." } }),
    handlers: {
      async read(req) {
        const { keys, cfg } = await load(req);
        return { data: await keyView(resolveKeyIn(keys, cfg.keys, req.fields.ref)) };
      },
      async update(req) {
        const { mount, keys, cfg } = await load(req);
        const key = resolveKeyIn(keys, cfg.keys, req.fields.ref);
        const name = req.fields.key_name ?? "";
        const warnings: string[] = [];
        if (name === "") warnings.push("Name successfully deleted, you will now need to reference this key by it's Id: " + key.id);
        else {
          if (!/^\w(([\w.-]+)?\w)?$/.test(name) || name.toLowerCase() === "default") throw badRequest("new key name outside of valid character limits");
          if (keys.some((k) => k.id !== key.id && k.name === name)) throw badRequest("key name already in use");
        }
        await renameKey(req.db, mount.id, key.id, name);
        return { data: await keyView({ ...key, name }), warnings };
      },
      async delete(req) {
        const { mount, keys, cfg, issuers } = await load(req);
        let key: KeyRow;
        try {
          key = resolveKeyIn(keys, cfg.keys, req.fields.ref);
        } catch {
          return null;
        }
        const user = issuers.find((i) => i.keyId === key.id);
        if (user) throw badRequest(`Failed to Delete Key.  Key in Use by Issuer: ${user.id}`);
        const stmts: Stmt[] = [deleteKeyStmt(req.db, mount.id, key.id)];
        if (cfg.keys.default === key.id) {
          stmts.push(putConfigStmt(req.db, mount.id, "keys", { default: "" }));
          await runBatch(req.db, stmts);
          return {
            data: null,
            warnings: [`Deleted key ${key.id} (via key_ref ${req.fields.ref}); this was configured as the default key. Operations without an explicit key will not work until a new default is configured.`],
          };
        }
        await runBatch(req.db, stmts);
        return null;
      },
    },
  }),
  route({
    pattern: "keys/generate/:type",
    fields: defineFields({
      type: { type: "string", description: "internal or exported.", required: true },
      key_name: { type: "string", description: "Name of the key.", default: "" },
      ...keyGenFields,
    }),
    handlers: {
      async update(req) {
        const f = req.fields;
        if (!["internal", "exported"].includes(f.type)) throw badRequest(`type: must be "internal" or "exported"; "${f.type}" is not supported`);
        let spec;
        try {
          spec = validateKeySpec(f.key_type, f.key_bits, 0, true);
        } catch (e) {
          throw badRequest(`Validation for key_type, key_bits failed: ${e instanceof Error ? e.message : String(e)}`);
        }
        const pair = await generateKeyPair(spec.keyType as "rsa" | "ec" | "ed25519", spec.keyBits);
        const { row } = await storeKey(req, pair.pkcs8, f.key_name);
        const data: Record<string, unknown> = { key_id: row.id, key_name: row.name, key_type: row.keyType };
        if (f.type === "exported") {
          const t = traditionalPrivateKey(pair.pkcs8);
          data.private_key = toPem(t.label, t.der);
        }
        return { data };
      },
    },
  }),
  route({
    pattern: "keys/import",
    fields: defineFields({
      pem_bundle: { type: "string", description: "One PEM private key.", default: "" },
      key_name: { type: "string", description: "Name of the key.", default: "" },
    }),
    handlers: {
      async update(req) {
        const text = req.fields.pem_bundle;
        if (text.length < 64) throw badRequest("provided data for import was too short; perhaps a path was passed to the API rather than the contents of a PEM file");
        let blocks;
        try {
          blocks = decodePemBlocks(text);
        } catch (e) {
          throw badRequest(e instanceof PemError ? e.message : "invalid PEM data");
        }
        const [block] = blocks;
        if (blocks.length !== 1 || !block) throw badRequest("only a single key can be present within the pem_bundle for importing");
        if (block.label.includes("CERTIFICATE")) throw badRequest("pem_bundle: expected a private key, found a certificate");
        let pkcs8;
        let facts;
        try {
          pkcs8 = toPkcs8(block.label, block.der);
          facts = privateKeyFacts(pkcs8);
        } catch (e) {
          throw badRequest(`unable to parse private key: ${e instanceof DerError ? e.message : String(e)}`);
        }
        checkKeySize("pem_bundle", facts);
        const stored = await storeKey(req, pkcs8, req.fields.key_name);
        const warnings = stored.existed ? ["Key already imported, use key/ endpoint to update name."] : [];
        return { data: { key_id: stored.row.id, key_name: stored.row.name, key_type: stored.row.keyType }, warnings };
      },
    },
  }),
  route({
    pattern: "config/keys",
    fields: defineFields({ default: { type: "string", description: "Key to make the default." } }),
    handlers: {
      async read(req) {
        const { cfg } = await load(req);
        return { data: cfg.keys };
      },
      async update(req) {
        const { mount, keys, cfg } = await load(req);
        const ref = (req.fields.default ?? "").trim();
        if (ref === "" || ref.toLowerCase() === "default") throw badRequest("Invalid key specification; must be non-empty and can't be 'default'.");
        const key = resolveKeyIn(keys, cfg.keys, ref);
        await runBatch(req.db, [putConfigStmt(req.db, mount.id, "keys", { default: key.id })]);
        return { data: { default: key.id } };
      },
    },
  }),
];
