/**
 * The `cloudtwo-kv` provider: an Azure-like key vault (Vault's azure-kv). Its connection fields
 * and their validation (./destination.ts), the connector that writes and removes secrets
 * (./connector.ts), the read-back for drift (./read.ts), the rate limits (./limits.ts) and the
 * endpoint variable of its client (./client.ts).
 */
import type { SyncProvider } from "../types";
import { ENDPOINT_VAR } from "./client";
import { cloudtwoConnector } from "./connector";
import { destination } from "./destination";
import { limits } from "./limits";
import { readCloudtwo } from "./read";

export const cloudtwoKv: SyncProvider = {
  ...destination,
  vaultType: "azure-kv",
  endpointVar: ENDPOINT_VAR,
  connector: cloudtwoConnector,
  read: readCloudtwo,
  limits,
};
