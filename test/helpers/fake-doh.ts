/**
 * A DNS-over-HTTPS resolver for the ACME tests (RFC 8484 wire format): answers TXT questions from
 * a map the test fills (name → values), NXDOMAIN for anything else. Install it with
 * ./fake-router.ts `installFakes` at the host of the mount's `dns_resolver`.
 */
import { DNS_TYPE, decodeDnsMessage, encodeDnsMessage, encodeTxtRdata } from "../../src/engines/pki/acme/validate-dns-wire";

export function fakeDohResolver(txt: ReadonlyMap<string, string[]>): { handle(req: Request): Promise<Response> } {
  return {
    async handle(req: Request): Promise<Response> {
      const q = decodeDnsMessage(new Uint8Array(await req.arrayBuffer()));
      const question = q.questions[0];
      const name = question?.name.replace(/\.$/, "").toLowerCase() ?? "";
      const answers = (question?.type === DNS_TYPE.TXT ? (txt.get(name) ?? []) : []).map((v) => ({ name, type: DNS_TYPE.TXT, class: 1, ttl: 60, rdata: encodeTxtRdata([v]) }));
      const body = encodeDnsMessage({ id: q.id, response: true, questions: q.questions, answers, rcode: answers.length ? 0 : 3 });
      return new Response(body, { headers: { "content-type": "application/dns-message" } });
    },
  };
}
