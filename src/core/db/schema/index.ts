export * from "./core";
export * from "./kv";
export * from "./pki";
export * from "./sync";
export * from "./leases";
export * from "./auth";
export * from "./acme";
export * from "./audit";
