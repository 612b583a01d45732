// The WebCrypto floor of one EC P-256 issuance, measured inside workerd (npm run bench):
// generate a P-256 key pair, export its public key, and make one ECDSA-SHA256 signature over a
// certificate-sized buffer. Local workerd advances the clock during CPU work, so the mean over
// many iterations is meaningful here (it would not be in production, where timers freeze).
export default {
  async fetch(request) {
    const n = Number(new URL(request.url).searchParams.get("n") ?? "500");
    const data = crypto.getRandomValues(new Uint8Array(400));
    const ca = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"]);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"]);
      await crypto.subtle.exportKey("spki", pair.publicKey);
      await crypto.subtle.exportKey("pkcs8", pair.privateKey);
      await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, ca.privateKey, data);
    }
    const ms = performance.now() - t0;
    return Response.json({ iterations: n, totalMs: ms, msPerOp: ms / n });
  },
};
