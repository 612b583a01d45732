/**
 * The `cloudone-sm` provider: an AWS-like secrets manager (Vault's aws-sm). Its connection
 * fields and their validation (./destination.ts), the connector that writes and removes secrets
 * (./connector.ts), the read-back for drift (./read.ts), the rate limits (./limits.ts) and the
 * endpoint variable of its client (./client.ts).
 */
import type { SyncProvider } from "../types";
import { ENDPOINT_VAR } from "./client";
import { cloudoneConnector } from "./connector";
import { destination } from "./destination";
import { limits } from "./limits";
import { readCloudone } from "./read";

export const cloudoneSm: SyncProvider = {
  ...destination,
  vaultType: "aws-sm",
  endpointVar: ENDPOINT_VAR,
  connector: cloudoneConnector,
  read: readCloudone,
  limits,
};
