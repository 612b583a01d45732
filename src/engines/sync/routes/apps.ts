/**
 * sys/sync/repohost-apps (spec "Custom repository-host application"; Vault API: /v1/sys/sync/github-apps, Vault docs: secrets sync policies):
 * app credentials that `repohost` destinations use instead of an access token. The private key
 * is sealed at rest and read back as asterisks with the host's fingerprint of its public key.
 * Deleting an app that a destination references is refused; it never touches the host.
 */
import { loadConfig } from "../../../core/config";
import { badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { route, type Req } from "../../../core/route";
import { OBFUSCATED } from "../destinations/types";
import { KeyError, parseRsaPrivateKey, type RsaKeyInfo } from "../rsa";
import { appExists, deleteAppIfUnreferenced, destinationsUsingApp, getApp, listApps, putApp, type RepohostApp } from "../store";

/** The host's keys are RSA 2048; shorter keys are refused (GitHub REST API, Actions secrets). */
const MIN_KEY_BITS = 2048;

const fields = defineFields({
  name: { type: "string", required: true, description: "Name of the app in the service; recommended equal to its name at the host." },
  app_id: { type: "string", required: true, description: "The app's id at the host (a string on input, an integer on output)." },
  private_key: { type: "string", required: true, description: "The app's RSA private key in PEM: PKCS#1 (BEGIN RSA PRIVATE KEY) or PKCS#8." },
});

const view = (app: RepohostApp) => ({ name: app.name, app_id: app.appId, fingerprint: app.fingerprint, private_key: OBFUSCATED });

function parseAppId(raw: string): number {
  const s = raw.trim();
  const n = Number(s);
  if (!/^[1-9]\d*$/.test(s) || !Number.isSafeInteger(n)) throw badRequest("app_id: must be a positive integer");
  return n;
}

async function writeApp(req: Req<typeof fields>) {
  const appId = parseAppId(req.fields.app_id);
  let key: RsaKeyInfo;
  try {
    key = await parseRsaPrivateKey(req.fields.private_key);
  } catch (e) {
    if (e instanceof KeyError) throw badRequest(`private_key: ${e.message}`);
    throw e;
  }
  if (key.modulusBits < MIN_KEY_BITS) throw badRequest(`private_key: RSA keys must have at least ${MIN_KEY_BITS} bits`);
  const app: RepohostApp = { namespaceId: req.ns.id, name: req.fields.name, appId, privateKey: key.pkcs8Pem, fingerprint: key.fingerprint };
  await putApp(req.db, loadConfig(req.env).seal, app);
  return { data: view(app) };
}

export const appRoutes = [
  route({
    pattern: "sync/repohost-apps",
    handlers: {
      async list(req) {
        const names = await listApps(req.db, req.ns.id);
        if (names.length === 0) throw notFound();
        return { data: { keys: names } };
      },
    },
  }),
  route({
    pattern: "sync/repohost-apps/:name",
    fields,
    // Runs before field coercion (src/app/dispatch.ts), so it reads the path parameter.
    exists: (req) => appExists(req.db, req.ns.id, req.params.name ?? ""),
    handlers: {
      async read(req) {
        const app = await getApp(req.db, loadConfig(req.env).seal, req.ns.id, req.fields.name);
        if (!app) throw notFound();
        return { data: view(app) };
      },
      create: writeApp,
      update: writeApp,
      async delete(req) {
        const name = req.fields.name;
        if (!(await appExists(req.db, req.ns.id, name))) return null;
        if (await deleteAppIfUnreferenced(req.db, req.ns.id, name)) return null;
        const users = await destinationsUsingApp(req.db, req.ns.id, name);
        if (users.length === 0) return null; // deleted by a concurrent request
        throw badRequest(
          `repository-host app "${name}" cannot be deleted: destinations ${users.map((u) => `repohost/${u}`).join(", ")} still use it; ` +
            "point them at another app or an access token first (deleting here never removes the app at the host)",
        );
      },
    },
  }),
];
