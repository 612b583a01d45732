/**
 * Reading a `cloudone-sm` secret back (docs/secrets-sync.md "3. Drift is detected and repaired"; AWS Secrets Manager API Reference): GetSecretValue's
 * SecretString. Not found is absent; InvalidRequestException on a secret that DescribeSecret
 * shows with a DeletedDate means it is scheduled for deletion, which counts as absent too (the
 * repair then brings it back with RestoreSecret, ./index.ts).
 */
import type { ReadBack } from "../../connectors/read-back";
import { ConnectorError, type ConnectorContext } from "../../connectors/types";
import { call } from "./client";

const isCode = (e: unknown, code: string): boolean => e instanceof ConnectorError && e.code === code;

export async function readCloudone(ctx: ConnectorContext, name: string): Promise<ReadBack> {
  try {
    const r = await call(ctx, "GetSecretValue", { SecretId: name });
    // A binary secret (SecretBinary) was not written by Lanyard, which writes strings.
    return typeof r.SecretString === "string" ? { kind: "value", value: r.SecretString } : { kind: "changed" };
  } catch (e) {
    if (isCode(e, "ResourceNotFoundException")) return { kind: "absent" };
    if (isCode(e, "InvalidRequestException")) {
      const d = await call(ctx, "DescribeSecret", { SecretId: name });
      if (d.DeletedDate !== undefined) return { kind: "absent" };
    }
    throw e;
  }
}
