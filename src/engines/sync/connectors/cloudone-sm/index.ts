/**
 * `cloudone-sm` connector (reference §2.1): PutSecretValue on an existing secret, CreateSecret
 * (with the built-in and custom tags) when it does not exist, RestoreSecret when the name is
 * scheduled for deletion; DeleteSecret with ForceDeleteWithoutRecovery so the name can be reused.
 */
import { ConnectorError, type Connector, type ConnectorContext } from "../types";
import { call } from "./client";

/** The ownership tag every synced secret carries (reference §1.13). */
export const OWNERSHIP_TAG = "hashicorp:vault";

function tags(ctx: ConnectorContext): { Key: string; Value: string }[] {
  return [{ Key: OWNERSHIP_TAG, Value: "" }, ...Object.entries(ctx.dest.options.customTags).map(([Key, Value]) => ({ Key, Value }))];
}

const isCode = (e: unknown, code: string): boolean => e instanceof ConnectorError && e.code === code;

async function putValue(ctx: ConnectorContext, name: string, value: string): Promise<void> {
  await call(ctx, "PutSecretValue", { SecretId: name, SecretString: value, ClientRequestToken: crypto.randomUUID() });
  await call(ctx, "TagResource", { SecretId: name, Tags: tags(ctx) });
}

export const cloudoneConnector: Connector = {
  async put(ctx, secret) {
    try {
      await putValue(ctx, secret.name, secret.value);
      return;
    } catch (e) {
      if (isCode(e, "InvalidRequestException")) {
        // Most likely scheduled for deletion: bring it back, then write the new value.
        const d = await call(ctx, "DescribeSecret", { SecretId: secret.name });
        if (d.DeletedDate === undefined) throw e;
        await call(ctx, "RestoreSecret", { SecretId: secret.name });
        await putValue(ctx, secret.name, secret.value);
        return;
      }
      if (!isCode(e, "ResourceNotFoundException")) throw e;
    }
    try {
      await call(ctx, "CreateSecret", { Name: secret.name, SecretString: secret.value, ClientRequestToken: crypto.randomUUID(), Tags: tags(ctx) });
    } catch (e) {
      // Created meanwhile by someone else: write the value as a new version.
      if (!isCode(e, "ResourceExistsException")) throw e;
      await putValue(ctx, secret.name, secret.value);
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
