/**
 * `cloudone-sm` connector (AWS Secrets Manager API Reference): PutSecretValue on an existing secret, CreateSecret
 * (with the built-in and custom tags) when it does not exist, RestoreSecret when the name is
 * scheduled for deletion; DeleteSecret with ForceDeleteWithoutRecovery so the name can be reused.
 * Ownership (docs/secrets-sync.md "2. Never delete what Lanyard did not create"): a successful CreateSecret means Lanyard created the secret (it is
 * tagged `lanyard-managed=true`); PutSecretValue succeeding, ResourceExistsException on create,
 * or a secret scheduled for deletion mean it was already there (no managed tag is added).
 */
import { ConnectorError, MANAGED_TAG, MANAGED_VALUE, type Connector, type ConnectorContext, type ExternalSecret, type PutResult } from "../../connectors/types";
import { call } from "./client";

/** The ownership tag every synced secret carries (Vault API: custom_tags). */
export const OWNERSHIP_TAG = "hashicorp:vault";

function tags(ctx: ConnectorContext, managed: boolean): { Key: string; Value: string }[] {
  const own = managed ? [{ Key: MANAGED_TAG, Value: MANAGED_VALUE }] : [];
  return [{ Key: OWNERSHIP_TAG, Value: "" }, ...own, ...Object.entries(ctx.dest.options.customTags).map(([Key, Value]) => ({ Key, Value }))];
}

const versionOf = (r: Record<string, unknown>): string | undefined => (typeof r.VersionId === "string" ? r.VersionId : undefined);

const isCode = (e: unknown, code: string): boolean => e instanceof ConnectorError && e.code === code;

/**
 * Writes a new version of an existing secret and sets Lanyard's tags (`managed` keeps Lanyard's
 * tag on what it created), unless `tagsCurrent` says the last write already left them as they
 * would be now (half the writes against the 20 writes/s cap of ../../limits.ts).
 */
async function putValue(ctx: ConnectorContext, secret: ExternalSecret, tagsCurrent: boolean): Promise<PutResult> {
  const r = await call(ctx, "PutSecretValue", { SecretId: secret.name, SecretString: secret.value, ClientRequestToken: crypto.randomUUID() });
  if (!tagsCurrent) await call(ctx, "TagResource", { SecretId: secret.name, Tags: tags(ctx, secret.ownership === "created_by_lanyard") });
  return { created: false, version: versionOf(r) };
}

export const cloudoneConnector: Connector = {
  async put(ctx, secret) {
    try {
      // Only a secret found as Lanyard left it may skip the tags; the recoveries below always set them.
      return await putValue(ctx, secret, secret.tagsCurrent === true);
    } catch (e) {
      if (isCode(e, "InvalidRequestException")) {
        // Most likely scheduled for deletion: bring it back, then write the new value.
        const d = await call(ctx, "DescribeSecret", { SecretId: secret.name });
        if (d.DeletedDate === undefined) throw e;
        await call(ctx, "RestoreSecret", { SecretId: secret.name });
        return await putValue(ctx, secret, false);
      }
      if (!isCode(e, "ResourceNotFoundException")) throw e;
    }
    try {
      const r = await call(ctx, "CreateSecret", { Name: secret.name, SecretString: secret.value, ClientRequestToken: crypto.randomUUID(), Tags: tags(ctx, true) });
      return { created: true, version: versionOf(r) };
    } catch (e) {
      // Created meanwhile by someone else: write the value as a new version (theirs, not ours).
      if (!isCode(e, "ResourceExistsException")) throw e;
      return await putValue(ctx, secret, false);
    }
  },
  async remove(ctx, name) {
    try {
      await call(ctx, "DeleteSecret", { SecretId: name, ForceDeleteWithoutRecovery: true });
    } catch (e) {
      if (!isCode(e, "ResourceNotFoundException")) throw e;
    }
  },
};
