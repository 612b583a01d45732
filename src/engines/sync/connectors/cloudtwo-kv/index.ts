/**
 * `cloudtwo-kv` connector (reference §2.2): PUT /secrets/{name} (a new version) with the tags;
 * a name sitting soft-deleted (409 ObjectIsDeletedButRecoverable) is recovered and written
 * again. Unsync deletes the secret (404 is done) and then purges the soft-deleted copy when the
 * vault allows it (best effort: purge protection or a missing purge permission leave it
 * soft-deleted, which still frees nothing but is not an error of the sync).
 */
import { ConnectorError, type Connector, type ConnectorContext } from "../types";
import { KeyVaultError, request } from "./client";

export const OWNERSHIP_TAG = "hashicorp:vault";
const NAME = /^[0-9A-Za-z-]{1,127}$/;

function checkName(name: string): void {
  if (!NAME.test(name)) throw new ConnectorError("client", "BadParameter", `key vault: the secret name "${name}" must be 1-127 letters, digits or hyphens`);
}

function body(ctx: ConnectorContext, value: string) {
  return { value, contentType: "text/plain", tags: { [OWNERSHIP_TAG]: "", ...ctx.dest.options.customTags } };
}

export const cloudtwoConnector: Connector = {
  async put(ctx, secret) {
    checkName(secret.name);
    const path = `/secrets/${secret.name}`;
    try {
      await request(ctx, "PUT", path, body(ctx, secret.value));
    } catch (e) {
      if (!(e instanceof KeyVaultError && e.status === 409 && e.azure.inner === "ObjectIsDeletedButRecoverable")) throw e;
      await request(ctx, "POST", `/deletedsecrets/${secret.name}/recover`);
      await request(ctx, "PUT", path, body(ctx, secret.value));
    }
  },
  async remove(ctx, name) {
    checkName(name);
    await request(ctx, "DELETE", `/secrets/${name}`, undefined, [404]);
    await request(ctx, "DELETE", `/deletedsecrets/${name}`, undefined, [403, 404, 409]);
  },
};
