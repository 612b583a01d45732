/**
 * Serves the five fake providers over HTTP for manual runs (docs/secrets-sync.md "Trying it
 * against the fakes"). Bundle and run with Node:
 *   npx esbuild test/helpers/fake-serve.ts --bundle --platform=node --format=cjs --outfile=/tmp/lanyard-fakes.cjs --log-level=warning
 *   node /tmp/lanyard-fakes.cjs # ports 9101-9105, or FAKE_PORT_BASE=9200 node /tmp/lanyard-fakes.cjs
 * It prints the endpoint variables that point the service at the fakes, and writes ready request
 * bodies the fakes accept into FAKE_DIR (default /tmp/lanyard-fakes): one destination body per
 * name used in the docs (aws, az, gcp, gh, gh-app, site), the repository-host app registration
 * (repohost-app.json, whose key the repohost fake trusts), and the cloudthree service-account key
 * file itself (cloudthree-credentials.json). `GET /__fake/state` on each port shows what that
 * fake holds (values included: these are fakes; the keys are test keys that protect nothing).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { BODIES, FAKE_APP, serviceAccountJson, startFakeServers } from "./fake-http";

/** Request bodies by the destination names the docs use. */
function bodies(): Record<string, unknown> {
  return {
    aws: BODIES["cloudone-sm"],
    az: BODIES["cloudtwo-kv"],
    gcp: { credentials: serviceAccountJson() },
    gh: BODIES.repohost,
    "gh-app": {
      app_name: FAKE_APP.name,
      installation_id: String(FAKE_APP.installationId),
      repository_owner: BODIES.repohost.repository_owner,
      repository_name: BODIES.repohost.repository_name,
      environment_name: "production",
    },
    site: BODIES["webhost-project"],
    "repohost-app": { app_id: String(FAKE_APP.appId), private_key: FAKE_APP.privateKey },
  };
}

async function main(): Promise<void> {
  const base = Number(process.env.FAKE_PORT_BASE ?? "9100");
  const dir = process.env.FAKE_DIR ?? "/tmp/lanyard-fakes";
  mkdirSync(dir, { recursive: true });
  for (const [name, body] of Object.entries(bodies())) writeFileSync(path.join(dir, `${name}.json`), `${JSON.stringify(body, null, 2)}\n`);
  writeFileSync(path.join(dir, "cloudthree-credentials.json"), serviceAccountJson());
  const { endpoints } = await startFakeServers(base);
  const vars = Object.entries(endpoints);
  console.log(`fake providers listening.

Point the service at them, either in .dev.vars:
${vars.map(([k, v]) => `${k}=${v}`).join("\n")}
or on the command line:
npm run dev -- ${vars.map(([k, v]) => `--var ${k}:${v}`).join(" ")}

Request bodies the fakes accept are in ${dir}:
  aws.json az.json gcp.json gh.json gh-app.json site.json   destinations (cloudone-sm/aws, cloudtwo-kv/az,
                                                            cloudthree-sm/gcp, repohost/gh, repohost/gh-app,
                                                            webhost-project/site)
  repohost-app.json                                         register it first for gh-app:
      curl -H "X-Service-Token: $TOKEN" -d @${dir}/repohost-app.json $ADDR/v1/sys/sync/repohost-apps/${FAKE_APP.name}
  cloudthree-credentials.json                               the service-account key file inside gcp.json
What each fake holds: curl -s ${endpoints.CLOUDONE_ENDPOINT}/__fake/state (and the other ports).`);
}

void main();
