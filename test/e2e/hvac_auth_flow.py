#!/usr/bin/env python3
"""Machine identities through hvac's own helpers, unmodified (docs/auth-methods.md): AppRole end to end, JWT
against a JWKS the test serves, Kubernetes against a fake TokenReview API. Run by
test/e2e/client-hvac-auth.test.ts, which starts those servers and mints the JWTs; the script
prints one JSON document of {name, ok, detail|error} steps and exits 0 whatever they did.

Environment: LANYARD_ADDR, LANYARD_TOKEN (root), JWKS_URL, JWT_ISSUER, JWT_OK (a JWT the role
accepts), JWT_WRONG_AUD, K8S_HOST, K8S_REVIEWER, K8S_JWT (a service account token the fake knows),
K8S_JWT_OTHER_NS (one of another namespace).
"""
import json
import os
import sys
import time
import traceback
import uuid

try:
    import hvac
    from hvac import exceptions
except ImportError as e:  # pragma: no cover - the Vitest test turns this into a clear failure
    print(json.dumps({"error": "hvac is not importable: %s (install Debian's python3-hvac)" % e}))
    sys.exit(3)

ADDR = os.environ["LANYARD_ADDR"].rstrip("/")
ROOT = os.environ["LANYARD_TOKEN"]
RUN = uuid.uuid4().hex[:8]
steps = []
state = {}


def step(name):
    def run(fn):
        started = time.time()
        try:
            detail = fn()
            steps.append({"name": name, "ok": True, "detail": detail, "ms": int((time.time() - started) * 1000)})
        except Exception as e:  # every failure is a failed step, never a crash
            msg = "%s: %s" % (type(e).__name__, e)
            if not isinstance(e, (AssertionError, exceptions.VaultError)):
                msg += " | " + traceback.format_exc(limit=3).strip().splitlines()[-3]
            steps.append({"name": name, "ok": False, "error": msg})
        return fn

    return run


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def client(token=ROOT):
    return hvac.Client(url=ADDR, token=token, strict_http=True)


def refused(fn, status_cls, text=None):
    """Runs fn, which must raise the hvac exception for the expected status (and message)."""
    try:
        fn()
    except status_cls as e:
        if text is not None:
            check(text in str(e), "error %r does not contain %r" % (str(e), text))
        return str(e)
    raise AssertionError("expected %s" % status_cls.__name__)


c = client()
APPROLE = "approle-" + RUN
JWT = "jwt-" + RUN
K8S = "kubernetes-" + RUN
c.sys.create_or_update_policy(name="machines-" + RUN, policy='path "auth/token/lookup-self" { capabilities = ["read"] }')

# ---------------------------------------------------------------- AppRole


@step("approle.enable")
def _():
    c.sys.enable_auth_method(method_type="approle", path=APPROLE, description="hvac e2e")
    methods = c.sys.list_auth_methods()
    entry = methods["data"][APPROLE + "/"]
    check(entry["type"] == "approle", "type %r" % entry["type"])
    check(entry["accessor"].startswith("auth_approle_"), "accessor %r" % entry["accessor"])
    return entry["accessor"]


@step("approle.role")
def _():
    c.auth.approle.create_or_update_approle(
        role_name="app", token_policies=["machines-" + RUN], token_ttl="1h", token_max_ttl="4h", secret_id_num_uses=0, mount_point=APPROLE
    )
    role = c.auth.approle.read_role(role_name="app", mount_point=APPROLE)["data"]
    check(role["token_policies"] == ["machines-" + RUN], "token_policies %r" % role["token_policies"])
    check(role["token_ttl"] == 3600 and role["token_max_ttl"] == 14400, "ttls %r %r" % (role["token_ttl"], role["token_max_ttl"]))
    check(role["bind_secret_id"] is True, "bind_secret_id %r" % role["bind_secret_id"])
    check("role_id" not in role, "a role read must not show role_id")
    keys = c.auth.approle.list_roles(mount_point=APPROLE)["data"]["keys"]
    check(keys == ["app"], "roles %r" % keys)
    return role


@step("approle.role_id")
def _():
    state["role_id"] = c.auth.approle.read_role_id(role_name="app", mount_point=APPROLE)["data"]["role_id"]
    check(len(state["role_id"]) == 36, "role_id %r" % state["role_id"])
    return state["role_id"]


@step("approle.secret_id")
def _():
    r = c.auth.approle.generate_secret_id(role_name="app", metadata={"host": "web-1"}, mount_point=APPROLE)["data"]
    state["secret_id"], state["secret_accessor"] = r["secret_id"], r["secret_id_accessor"]
    listed = c.auth.approle.list_secret_id_accessors(role_name="app", mount_point=APPROLE)["data"]["keys"]
    check(listed == [r["secret_id_accessor"]], "accessors %r" % listed)
    looked = c.auth.approle.read_secret_id(role_name="app", secret_id=r["secret_id"], mount_point=APPROLE)["data"]
    check(looked["metadata"] == {"host": "web-1"}, "metadata %r" % looked["metadata"])
    check(state["secret_id"] not in json.dumps(looked), "the SecretID must not appear in its lookup")
    return {"accessor": r["secret_id_accessor"]}


@step("approle.login")
def _():
    m = client(token=None)
    r = m.auth.approle.login(role_id=state["role_id"], secret_id=state["secret_id"], mount_point=APPROLE)
    auth = r["auth"]
    check(m.token == auth["client_token"], "use_token did not set the client's token")
    check(auth["policies"] == ["default", "machines-" + RUN], "policies %r" % auth["policies"])
    check(auth["lease_duration"] == 3600 and auth["renewable"] is True, "lease %r %r" % (auth["lease_duration"], auth["renewable"]))
    check(auth["metadata"] == {"role_name": "app", "host": "web-1"}, "metadata %r" % auth["metadata"])
    me = m.auth.token.lookup_self()["data"]
    check(me["path"] == "auth/%s/login" % APPROLE, "path %r" % me["path"])
    check(me["meta"]["role_name"] == "app", "meta %r" % me["meta"])
    renewed = m.auth.token.renew_self(increment="2h")["auth"]
    check(7100 <= renewed["lease_duration"] <= 7200, "renewed lease %r" % renewed["lease_duration"])
    state["approle_token"] = auth["client_token"]
    return {"accessor": auth["accessor"]}


@step("approle.wrong_secret")
def _():
    m = client(token=None)
    return refused(lambda: m.auth.approle.login(role_id=state["role_id"], secret_id=str(uuid.uuid4()), mount_point=APPROLE), exceptions.InvalidRequest, "invalid role or secret ID")


@step("approle.destroy_secret_id")
def _():
    c.auth.approle.destroy_secret_id(role_name="app", secret_id=state["secret_id"], mount_point=APPROLE)
    m = client(token=None)
    return refused(lambda: m.auth.approle.login(role_id=state["role_id"], secret_id=state["secret_id"], mount_point=APPROLE), exceptions.InvalidRequest, "invalid role or secret ID")


@step("approle.disable_revokes")
def _():
    c.sys.disable_auth_method(path=APPROLE)
    m = client(token=state["approle_token"])
    refused(lambda: m.auth.token.lookup_self(), exceptions.Forbidden)
    check(APPROLE + "/" not in c.sys.list_auth_methods()["data"], "still listed")
    return "revoked"


# ---------------------------------------------------------------- JWT


@step("jwt.configure")
def _():
    c.sys.enable_auth_method(method_type="jwt", path=JWT)
    c.auth.jwt.configure(jwks_url=os.environ["JWKS_URL"], bound_issuer=os.environ["JWT_ISSUER"], path=JWT)
    cfg = c.auth.jwt.read_config(path=JWT)["data"]
    check(cfg["jwks_url"] == os.environ["JWKS_URL"], "jwks_url %r" % cfg["jwks_url"])
    return cfg["bound_issuer"]


@step("jwt.role")
def _():
    c.auth.jwt.create_role(
        name="ci",
        role_type="jwt",
        user_claim="repository",
        allowed_redirect_uris=[],
        bound_audiences=["https://github.com/acme"],
        bound_claims={"repository": "acme/web", "ref": "refs/heads/main"},
        claim_mappings={"ref": "git_ref"},
        token_policies=["machines-" + RUN],
        token_ttl="15m",
        path=JWT,
    )
    role = c.auth.jwt.read_role(name="ci", path=JWT)["data"]
    check(role["role_type"] == "jwt" and role["user_claim"] == "repository", "role %r" % role)
    return role["bound_claims"]


@step("jwt.login")
def _():
    m = client(token=None)
    r = m.auth.jwt.jwt_login(role="ci", jwt=os.environ["JWT_OK"], path=JWT)
    auth = r["auth"]
    check(m.token == auth["client_token"], "use_token did not set the client's token")
    check(auth["lease_duration"] == 900, "lease %r" % auth["lease_duration"])
    check(auth["metadata"].get("git_ref") == "refs/heads/main", "metadata %r" % auth["metadata"])
    me = m.auth.token.lookup_self()["data"]
    check(me["path"] == "auth/%s/login" % JWT, "path %r" % me["path"])
    return auth["policies"]


@step("jwt.wrong_audience")
def _():
    m = client(token=None)
    return refused(lambda: m.auth.jwt.jwt_login(role="ci", jwt=os.environ["JWT_WRONG_AUD"], path=JWT), exceptions.InvalidRequest, "error validating token")


# ---------------------------------------------------------------- Kubernetes


@step("kubernetes.configure")
def _():
    c.sys.enable_auth_method(method_type="kubernetes", path=K8S)
    c.auth.kubernetes.configure(kubernetes_host=os.environ["K8S_HOST"], token_reviewer_jwt=os.environ["K8S_REVIEWER"], mount_point=K8S)
    cfg = c.auth.kubernetes.read_config(mount_point=K8S)  # hvac returns the data block itself here
    check(cfg["kubernetes_host"] == os.environ["K8S_HOST"], "host %r" % cfg["kubernetes_host"])
    check(cfg.get("token_reviewer_jwt_set") is True and "token_reviewer_jwt" not in cfg, "reviewer JWT shown: %r" % cfg)
    return cfg["kubernetes_host"]


@step("kubernetes.role")
def _():
    c.auth.kubernetes.create_role(
        name="cert-manager",
        bound_service_account_names=["cert-manager"],
        bound_service_account_namespaces=["cert-manager"],
        policies=["machines-" + RUN],
        ttl="20m",
        mount_point=K8S,
    )
    role = c.auth.kubernetes.read_role(name="cert-manager", mount_point=K8S)  # the data block itself
    check(role["bound_service_account_names"] == ["cert-manager"], "role %r" % role)
    return role["token_policies"]


@step("kubernetes.login")
def _():
    m = client(token=None)
    r = m.auth.kubernetes.login(role="cert-manager", jwt=os.environ["K8S_JWT"], mount_point=K8S)
    auth = r["auth"]
    check(m.token == auth["client_token"], "use_token did not set the client's token")
    check(auth["lease_duration"] == 1200, "lease %r" % auth["lease_duration"])
    check(auth["metadata"]["service_account_namespace"] == "cert-manager", "metadata %r" % auth["metadata"])
    check(auth["metadata"]["service_account_name"] == "cert-manager", "metadata %r" % auth["metadata"])
    me = m.auth.token.lookup_self()["data"]
    check(me["path"] == "auth/%s/login" % K8S, "path %r" % me["path"])
    return auth["policies"]


@step("kubernetes.wrong_namespace")
def _():
    m = client(token=None)
    return refused(lambda: m.auth.kubernetes.login(role="cert-manager", jwt=os.environ["K8S_JWT_OTHER_NS"], mount_point=K8S), exceptions.Forbidden)


print(json.dumps({"client": "hvac", "version": getattr(hvac, "__version__", "?"), "steps": steps}))
