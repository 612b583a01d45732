/**
 * Serves the five fake providers over HTTP for manual runs (docs/secrets-sync.md "Trying it
 * against the fakes"). Bundle and run with Node:
 *   npx esbuild test/helpers/fake-serve.ts --bundle --platform=node --format=cjs --outfile=/tmp/lanyard-fakes.cjs --log-level=warning
 *   node /tmp/lanyard-fakes.cjs # ports 9101-9105, or FAKE_PORT_BASE=9200 node /tmp/lanyard-fakes.cjs
 * then point the Worker at them with the endpoint variables it prints. `GET /__fake/state` on
 * each port shows what the fake holds (values included: these are fakes).
 */
import { startFakeServers } from "./fake-http";

async function main(): Promise<void> {
  const base = Number(process.env.FAKE_PORT_BASE ?? "9100");
  const { endpoints } = await startFakeServers(base);
  console.log(`fake providers listening; put these in .dev.vars:
${Object.entries(endpoints)
  .map(([k, v]) => `${k}=${v}`)
  .join("\n")}`);
}

void main();
