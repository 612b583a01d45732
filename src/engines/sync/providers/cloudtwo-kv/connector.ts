/**
 * `cloudtwo-kv` connector (Azure Key Vault REST API): PUT /secrets/{name} (a new version) with the tags;
 * a name sitting soft-deleted (409 ObjectIsDeletedButRecoverable) is recovered and written
 * again. Unsync deletes the secret (404 is done) and then purges the soft-deleted copy when the
 * vault allows it (best effort: purge protection or a missing purge permission leave it
 * soft-deleted, which still frees nothing but is not an error of the sync).
 * Ownership (docs/secrets-sync.md "2. Never delete what Lanyard did not create"): a PUT answers 200 whether or not the secret existed, so before a
 * name's first write the connector reads it (GET, 404 = absent): absent means Lanyard creates it
 * and tags it `lanyard-managed=true`; present, or soft-deleted (recovered), means it was there.
 */
import { ConnectorError, MANAGED_TAG, MANAGED_VALUE, type Connector, type ConnectorContext, type PutResult } from "../../connectors/types";
import { KeyVaultError, request } from "./client";

export const OWNERSHIP_TAG = "hashicorp:vault";
const NAME = /^[0-9A-Za-z-]{1,127}$/;

function checkName(name: string): void {
  if (!NAME.test(name)) throw new ConnectorError("client", "BadParameter", `key vault: the secret name "${name}" must be 1-127 letters, digits or hyphens`);
}

function body(ctx: ConnectorContext, value: string, managed: boolean) {
  const own = managed ? { [MANAGED_TAG]: MANAGED_VALUE } : {};
  return { value, contentType: "text/plain", tags: { [OWNERSHIP_TAG]: "", ...own, ...ctx.dest.options.customTags } };
}

/** The version (last segment of the id) and `attributes.updated` of a PUT's answer. */
async function written(res: Response, created: boolean): Promise<PutResult> {
  const b = (await res.json().catch(() => null)) as { id?: unknown; attributes?: { updated?: unknown } } | null;
  const version = typeof b?.id === "string" ? b.id.split("/").pop() : undefined;
  const updated = b?.attributes?.updated;
  return { created, version, updatedAt: typeof updated === "number" ? String(updated) : undefined };
}

export const cloudtwoConnector: Connector = {
  async put(ctx, secret) {
    checkName(secret.name);
    const path = `/secrets/${secret.name}`;
    let creating = false;
    if (secret.ownership === undefined) creating = (await request(ctx, "GET", path, undefined, [404])).status === 404;
    const managed = creating || secret.ownership === "created_by_lanyard";
    try {
      return await written(await request(ctx, "PUT", path, body(ctx, secret.value, managed)), creating);
    } catch (e) {
      if (!(e instanceof KeyVaultError && e.status === 409 && e.azure.inner === "ObjectIsDeletedButRecoverable")) throw e;
      // Soft-deleted: it existed (someone's, unless the record says Lanyard made it).
      await request(ctx, "POST", `/deletedsecrets/${secret.name}/recover`);
      const ours = secret.ownership === "created_by_lanyard";
      return await written(await request(ctx, "PUT", path, body(ctx, secret.value, ours)), false);
    }
  },
  async remove(ctx, name) {
    checkName(name);
    await request(ctx, "DELETE", `/secrets/${name}`, undefined, [404]);
    await request(ctx, "DELETE", `/deletedsecrets/${name}`, undefined, [403, 404, 409]);
  },
};
