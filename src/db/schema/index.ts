export * from "./core";
export * from "./kv";
