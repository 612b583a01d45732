/**
 * A fake of the cloudone-sm provider (AWS Secrets Manager JSON 1.1, STS AssumeRole and
 * AssumeRoleWithWebIdentity) at the HTTP boundary, for tests, benchmarks and manual runs. It
 * verifies every SigV4 signature against the credentials it knows (temporary ones with their
 * session token, refused once expired), enforces the name rules, and answers with the provider's
 * error shapes (`{"__type","message"}` with 400, STS XML errors). A web-identity token is checked
 * as STS does (./fake-oidc-trust.ts): the role trusts an OIDC provider registered with its URL and
 * client ids (audiences), whose discovery document and key set are fetched over HTTP.
 */
import { amzDate, signature } from "../../src/engines/sync/providers/cloudone-sm/sigv4";
import { FakeThrottle } from "./fake-limits";
import { applyFault, json, type Fault } from "./fake-router";
import { isRefusal, OidcTrust } from "./fake-oidc-trust";

export interface FakeSecret {
  arn: string;
  value: string;
  versions: string[];
  tags: Record<string, string>;
  /** Set while the secret is scheduled for deletion (DeleteSecret with a recovery window). */
  deletedDate?: number;
  /** Ms of the last change of value or metadata (DescribeSecret LastChangedDate). */
  lastChangedDate: number;
  /** Ms the current version was created (GetSecretValue CreatedDate). */
  versionCreated: number;
}

export interface FakeRole {
  externalId?: string;
  /** Access key ids allowed to assume the role. */
  trusted: string[];
  /** AssumeRoleWithWebIdentity: the OIDC provider (issuer URL) the trust policy names, and the `sub` its condition requires. */
  webIdentity?: { issuer: string; sub?: string };
}

const NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;

function smError(type: string, message: string, status = 400): Response {
  return json({ __type: type, message }, status, { "x-amzn-errortype": type, "content-type": "application/x-amz-json-1.1" });
}

function stsError(code: string, message: string, status = 403): Response {
  return new Response(`<ErrorResponse><Error><Type>Sender</Type><Code>${code}</Code><Message>${message}</Message></Error></ErrorResponse>`, {
    status,
    headers: { "content-type": "text/xml" },
  });
}

export class FakeCloudone {
  readonly secrets = new Map<string, FakeSecret>();
  readonly users = new Map<string, string>();
  readonly roles = new Map<string, FakeRole>();
  private readonly sessions = new Map<string, { secret: string; token: string; expiresAt: number }>();
  /** IAM OIDC identity providers: issuer URL → client ids (the audiences it accepts). */
  readonly oidcProviders = new Map<string, string[]>();
  /** How token services check web-identity tokens (fetching discovery and keys over HTTP). */
  readonly oidc = new OidcTrust();
  /** Lifetime of the temporary credentials handed out (STS: DurationSeconds, at most the role's maximum). */
  sessionSeconds = 3600;
  assumeRoleWithWebIdentityCalls = 0;
  /** Every temporary credential handed out (access key, secret key, session token): tests grep for them. */
  readonly handedOut: string[] = [];
  readonly faults: Fault[] = [];
  /** Operations in arrival order: "CreateSecret vault/x", "AssumeRole arn:...". */
  readonly calls: string[] = [];
  assumeRoleCalls = 0;
  /**
   * Request limits (docs/secrets-sync.md "4. Provider limits are respected"). Over them it answers 400 ThrottlingException "Rate
   * exceeded" with no Retry-After, as Secrets Manager does; `retryAfterSeconds` is then the quiet
   * time the test expects the client to keep.
   */
  readonly throttle = new FakeThrottle();

  constructor(users: Record<string, string> = {}) {
    for (const [k, v] of Object.entries(users)) this.users.set(k, v);
  }

  value(name: string): string | undefined {
    const s = this.secrets.get(name);
    return s && s.deletedDate === undefined ? s.value : undefined;
  }

  /** Someone creates the secret at the provider before Lanyard writes it (docs/secrets-sync.md "2. Never delete what Lanyard did not create"), with its own tags. */
  createOutOfBand(name: string, value: string, tags: Record<string, string> = {}): void {
    if (this.secrets.has(name)) throw new Error(`fake-cloudone: secret ${name} exists`);
    const now = Date.now();
    this.secrets.set(name, { arn: `arn:aws:secretsmanager:us-east-1:123456789012:secret:${name}-AbCdEf`, value, versions: [crypto.randomUUID()], tags: { ...tags }, lastChangedDate: now, versionCreated: now });
  }

  /** Someone changes the value at the provider, not through Lanyard (a new AWSCURRENT version). */
  editOutOfBand(name: string, value: string): void {
    const s = this.secrets.get(name);
    if (!s) throw new Error(`fake-cloudone: no secret ${name}`);
    s.value = value;
    s.versions.push(crypto.randomUUID());
    s.lastChangedDate = s.versionCreated = Date.now();
  }

  /**
   * Someone deletes the secret at the provider: by default with the 30-day recovery window (the
   * secret is then "scheduled for deletion": reads and writes fail with InvalidRequestException
   * until RestoreSecret), or at once with `force`.
   */
  deleteOutOfBand(name: string, opts: { force?: boolean } = {}): void {
    const s = this.secrets.get(name);
    if (!s) throw new Error(`fake-cloudone: no secret ${name}`);
    if (opts.force) this.secrets.delete(name);
    else s.deletedDate = s.lastChangedDate = Date.now();
  }

  private async verify(req: Request, body: string, service: string): Promise<{ akid: string } | Response> {
    const auth = req.headers.get("authorization") ?? "";
    const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
    const deny = (code: string, msg: string) => (service === "sts" ? stsError(code, msg) : smError(code, msg));
    if (!m) return deny("IncompleteSignature", "Authorization header requires a valid SigV4 signature");
    const [, akid = "", day, region = "", svc, signed = "", sig] = m;
    const date = req.headers.get("x-amz-date") ?? "";
    if (svc !== service || date.slice(0, 8) !== day) return deny("IncompleteSignature", "credential scope does not match the request");
    const skew = Math.abs(Date.parse(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`) - Date.now());
    if (!(skew < 15 * 60_000)) return deny("InvalidSignatureException", "Signature expired");
    const session = this.sessions.get(akid);
    const secret = this.users.get(akid) ?? session?.secret;
    if (!secret) return deny(service === "sts" ? "InvalidClientTokenId" : "UnrecognizedClientException", "The security token included in the request is invalid.");
    if (session && req.headers.get("x-amz-security-token") !== session.token) return deny("UnrecognizedClientException", "The security token included in the request is invalid.");
    if (session && session.expiresAt <= Date.now()) return deny("ExpiredTokenException", "The security token included in the request is expired");
    const names = signed.split(";");
    const headers: Record<string, string> = {};
    for (const n of names) if (n !== "host") headers[n] = req.headers.get(n) ?? "";
    const url = new URL(req.url);
    const expected = await signature({ secretAccessKey: secret }, { method: req.method, url, headers, body, region, service, amzDate: date }, names);
    if (expected.signature !== sig) {
      return deny(service === "sts" ? "SignatureDoesNotMatch" : "InvalidSignatureException", "The request signature we calculated does not match the signature you provided.");
    }
    return { akid };
  }

  async handle(req: Request): Promise<Response> {
    const faulted = applyFault(this.faults);
    if (faulted) return faulted;
    const body = new TextDecoder().decode(await req.arrayBuffer());
    const target = req.headers.get("x-amz-target");
    if (!target) return this.sts(req, body);
    const op = target.replace(/^secretsmanager\./, "");
    const admission = this.throttle.enter(req, op);
    try {
      if (admission.throttled) return smError("ThrottlingException", "Rate exceeded");
      const v = await this.verify(req, body, "secretsmanager");
      if (v instanceof Response) return v;
      if (req.headers.get("content-type") !== "application/x-amz-json-1.1") return smError("SerializationException", "wrong content type");
      return await this.operation(op, body);
    } finally {
      admission.leave();
    }
  }

  private async operation(op: string, body: string): Promise<Response> {
    let p: Record<string, unknown>;
    try {
      p = JSON.parse(body) as Record<string, unknown>;
    } catch {
      return smError("SerializationException", "body is not JSON");
    }
    const id = typeof p.SecretId === "string" ? p.SecretId : typeof p.Name === "string" ? p.Name : "";
    this.calls.push(`${op} ${id}`);
    const s = this.secrets.get(id);
    const notFound = () => smError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
    switch (op) {
      case "CreateSecret": {
        if (!NAME.test(id)) return smError("ValidationException", "Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!");
        if (s?.deletedDate !== undefined) return smError("InvalidRequestException", "You can't create this secret because a secret with this name is already scheduled for deletion.");
        if (s) return smError("ResourceExistsException", `The operation failed because the secret ${id} already exists.`);
        const tags: Record<string, string> = {};
        for (const t of (p.Tags as { Key: string; Value: string }[] | undefined) ?? []) tags[t.Key] = t.Value;
        const version = String(p.ClientRequestToken ?? crypto.randomUUID());
        const arn = `arn:aws:secretsmanager:us-east-1:123456789012:secret:${id}-${crypto.randomUUID().slice(0, 6)}`;
        const now = Date.now();
        this.secrets.set(id, { arn, value: String(p.SecretString ?? ""), versions: [version], tags, lastChangedDate: now, versionCreated: now });
        return json({ ARN: arn, Name: id, VersionId: version });
      }
      case "PutSecretValue": {
        if (!s) return notFound();
        if (s.deletedDate !== undefined) return smError("InvalidRequestException", "You can't perform this operation on the secret because it was marked for deletion.");
        if (typeof p.SecretString !== "string") return smError("InvalidParameterException", "SecretString is required");
        s.value = p.SecretString;
        const version = String(p.ClientRequestToken ?? crypto.randomUUID());
        s.versions.push(version);
        s.lastChangedDate = s.versionCreated = Date.now();
        return json({ ARN: s.arn, Name: id, VersionId: version, VersionStages: ["AWSCURRENT"] });
      }
      case "TagResource": {
        if (!s) return notFound();
        for (const t of (p.Tags as { Key: string; Value: string }[] | undefined) ?? []) s.tags[t.Key] = t.Value;
        s.lastChangedDate = Date.now();
        return json({});
      }
      case "DescribeSecret": {
        if (!s) return notFound();
        return json({
          ARN: s.arn,
          Name: id,
          LastChangedDate: s.lastChangedDate / 1000,
          Tags: Object.entries(s.tags).map(([Key, Value]) => ({ Key, Value })),
          VersionIdsToStages: { [s.versions[s.versions.length - 1] ?? ""]: ["AWSCURRENT"] },
          ...(s.deletedDate !== undefined ? { DeletedDate: s.deletedDate / 1000 } : {}),
        });
      }
      case "GetSecretValue": {
        if (!s) return notFound();
        if (s.deletedDate !== undefined) return smError("InvalidRequestException", "You can't perform this operation on the secret because it was marked for deletion.");
        return json({ ARN: s.arn, Name: id, SecretString: s.value, VersionId: s.versions[s.versions.length - 1], VersionStages: ["AWSCURRENT"], CreatedDate: s.versionCreated / 1000 });
      }
      case "RestoreSecret": {
        if (!s) return notFound();
        delete s.deletedDate;
        s.lastChangedDate = Date.now();
        return json({ ARN: s.arn, Name: id });
      }
      case "DeleteSecret": {
        if (!s) return notFound();
        if (p.ForceDeleteWithoutRecovery === true) this.secrets.delete(id);
        else s.deletedDate = s.lastChangedDate = Date.now();
        return json({ ARN: s.arn, Name: id, DeletionDate: Date.now() / 1000 });
      }
      default:
        return smError("InvalidAction", `unknown operation ${op}`);
    }
  }

  private session(xmlRoot: string): Response {
    const akid = `ASIA${crypto.randomUUID().replace(/-/g, "").slice(0, 16).toUpperCase()}`;
    const secret = crypto.randomUUID();
    const token = crypto.randomUUID();
    const expiresAt = Date.now() + this.sessionSeconds * 1000;
    this.sessions.set(akid, { secret, token, expiresAt });
    this.handedOut.push(akid, secret, token);
    return new Response(
      `<${xmlRoot}Response><${xmlRoot}Result><Credentials><AccessKeyId>${akid}</AccessKeyId><SecretAccessKey>${secret}</SecretAccessKey>` +
        `<SessionToken>${token}</SessionToken><Expiration>${new Date(expiresAt).toISOString()}</Expiration></Credentials></${xmlRoot}Result></${xmlRoot}Response>`,
      { status: 200, headers: { "content-type": "text/xml" } },
    );
  }

  /** AssumeRoleWithWebIdentity (AWS STS API Reference): unsigned; the token is the credential. */
  private async webIdentity(form: URLSearchParams): Promise<Response> {
    const arn = form.get("RoleArn") ?? "";
    this.calls.push(`AssumeRoleWithWebIdentity ${arn}`);
    this.assumeRoleWithWebIdentityCalls++;
    const role = this.roles.get(arn);
    const issuer = role?.webIdentity?.issuer ?? "";
    const audiences = this.oidcProviders.get(issuer);
    if (!role?.webIdentity || !audiences) return stsError("AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity");
    if (!/^[\w+=,.@-]{2,64}$/.test(form.get("RoleSessionName") ?? "")) return stsError("ValidationError", "RoleSessionName is invalid", 400);
    const v = await this.oidc.verify(form.get("WebIdentityToken") ?? "", issuer, audiences);
    if (isRefusal(v)) {
      if (v.kind === "expired") return stsError("ExpiredTokenException", "Token expired", 400);
      if (v.kind === "audience") return stsError("InvalidIdentityToken", "Incorrect token audience", 400);
      if (v.kind === "issuer") return stsError("InvalidIdentityToken", "No OpenIDConnect provider found in your account for this issuer", 400);
      return stsError("InvalidIdentityToken", `Couldn't verify the token: ${v.message}`, 400);
    }
    if (role.webIdentity.sub !== undefined && role.webIdentity.sub !== v.sub) return stsError("AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity");
    return this.session("AssumeRoleWithWebIdentity");
  }

  private async sts(req: Request, body: string): Promise<Response> {
    const form = new URLSearchParams(body);
    if (form.get("Action") === "AssumeRoleWithWebIdentity") return this.webIdentity(form);
    const v = await this.verify(req, body, "sts");
    if (v instanceof Response) return v;
    if (form.get("Action") !== "AssumeRole") return stsError("InvalidAction", "unsupported action", 400);
    const arn = form.get("RoleArn") ?? "";
    this.calls.push(`AssumeRole ${arn}`);
    this.assumeRoleCalls++;
    const role = this.roles.get(arn);
    if (!role || !role.trusted.includes(v.akid)) return stsError("AccessDenied", `User is not authorized to perform: sts:AssumeRole on resource: ${arn}`);
    if ((role.externalId ?? null) !== form.get("ExternalId")) return stsError("AccessDenied", `User is not authorized to perform: sts:AssumeRole on resource: ${arn}`);
    return this.session("AssumeRole");
  }
}

export const CLOUDONE_HOSTS = [".amazonaws.com"];
export { amzDate };
