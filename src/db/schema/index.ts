export * from "./core";
export * from "./kv";
export * from "./sync";
