// @peculiar/x509 needs the reflect polyfill before it is evaluated (workers-stack.md pitfall 3).
import "reflect-metadata";
import { app } from "./app";

export { Authority } from "./authority/authority";

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
