#!/usr/bin/env python3
"""The first day of Vault's tutorials, driven by hvac, unmodified. Run by
test/e2e/client-hvac.test.ts against the e2e Worker; also runnable by hand:

    LANYARD_ADDR=http://127.0.0.1:8787 LANYARD_TOKEN=dev-root-token \\
    FAKE_REPOHOST=http://127.0.0.1:9104 SYNC_GH_BODY="$(cat /tmp/lanyard-fakes/gh.json)" \\
    /usr/bin/python3 test/e2e/hvac_flow.py

Every client is configured as hvac's README says, with the one documented list switch
(`strict_http=True`: LIST goes as `GET ?list=true`). Each step is independent of the test harness:
it calls hvac, checks the answer as Vault would give it, and records {name, ok, detail|error}.
The script prints one JSON document on stdout and exits 0 whatever the steps did (the Vitest test
judges them); it exits 3 when hvac cannot be imported.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
import uuid

try:
    import hvac
    from hvac import exceptions
except ImportError as e:  # pragma: no cover - the Vitest test turns this into a clear failure
    print(json.dumps({"error": "hvac is not importable: %s (install Debian's python3-hvac)" % e}))
    sys.exit(3)

ADDR = os.environ["LANYARD_ADDR"].rstrip("/")
ROOT = os.environ["LANYARD_TOKEN"]
FAKE_REPOHOST = os.environ.get("FAKE_REPOHOST", "")
GH_BODY = json.loads(os.environ.get("SYNC_GH_BODY", "{}"))
RUN = uuid.uuid4().hex[:8]

steps = []
state = {}


def step(name):
    """Runs the decorated function at once as one step; its return value is the step's detail."""

    def run(fn):
        started = time.time()
        try:
            detail = fn()
            steps.append({"name": name, "ok": True, "detail": detail, "ms": int((time.time() - started) * 1000)})
        except Exception as e:  # every failure is a failed step, never a crash
            msg = "%s: %s" % (type(e).__name__, e)
            if isinstance(e, AssertionError) or isinstance(e, exceptions.VaultError):
                where = ""
            else:
                where = " | " + traceback.format_exc(limit=3).strip().splitlines()[-3]
            steps.append({"name": name, "ok": False, "error": msg + where})
        return fn

    return run


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def client(token=ROOT, namespace=None):
    return hvac.Client(url=ADDR, token=token, namespace=namespace, strict_http=True)


def openssl(*args, stdin=None):
    r = subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, "openssl %s failed: %s" % (" ".join(args[:2]), r.stderr.strip()))
    return r.stdout


def serial_hex(serial):
    return serial.strip().replace(":", "").replace("-", "").upper().lstrip("0")


def fake_state(endpoint):
    with urllib.request.urlopen(endpoint + "/__fake/state", timeout=10) as r:
        return json.loads(r.read().decode())


def entries(associated):
    return list(associated.values()) if isinstance(associated, dict) else list(associated or [])


c = client()
KV = "kv-hvac-" + RUN
PKI = "pki-hvac-" + RUN
NS = "team-hvac-" + RUN
POLICY_ACL = "hvac-acl-" + RUN
POLICY_LEGACY = "hvac-legacy-" + RUN

# ---------------------------------------------------------------- tokens


@step("token.create")
def _():
    r = c.auth.token.create(policies=["default"], ttl="1h", display_name="hvac", renewable=True)
    auth = r["auth"]
    check(auth["client_token"], "no auth.client_token")
    check(auth["lease_duration"] == 3600, "lease_duration %r, want 3600" % auth["lease_duration"])
    check(auth["renewable"] is True, "renewable %r" % auth["renewable"])
    check("default" in auth["policies"], "policies %r" % auth["policies"])
    state["child"], state["accessor"] = auth["client_token"], auth["accessor"]
    return {"policies": auth["policies"], "accessor": auth["accessor"]}


@step("token.lookup_self")
def _():
    child = client(state["child"])
    check(child.is_authenticated(), "is_authenticated() is False for the new token")
    d = child.auth.token.lookup_self()["data"]
    check(d["id"] == state["child"], "data.id is not the token")
    check(d["accessor"] == state["accessor"], "accessor %r" % d["accessor"])
    check(0 < d["ttl"] <= 3600, "ttl %r" % d["ttl"])
    check(d["display_name"] == "token-hvac", "display_name %r, want token-hvac" % d["display_name"])
    return {"ttl": d["ttl"], "policies": d["policies"]}


@step("token.lookup")
def _():
    d = c.auth.token.lookup(state["child"])["data"]
    check(d["accessor"] == state["accessor"], "accessor %r" % d["accessor"])
    return {"ttl": d["ttl"]}


@step("token.lookup_accessor")
def _():
    d = c.auth.token.lookup_accessor(state["accessor"])["data"]
    check(d["accessor"] == state["accessor"], "accessor %r" % d["accessor"])
    check(d.get("id", "") == "", "lookup-accessor must not reveal the token id")
    return {"policies": d["policies"]}


@step("token.renew")
def _():
    auth = c.auth.token.renew(state["child"], increment="30m")["auth"]
    check(auth["client_token"] == state["child"], "renew answered another token")
    check(0 < auth["lease_duration"] <= 3600, "lease_duration %r" % auth["lease_duration"])
    return {"lease_duration": auth["lease_duration"]}


@step("token.renew_self")
def _():
    auth = client(state["child"]).auth.token.renew_self(increment="1h")["auth"]
    check(0 < auth["lease_duration"] <= 3600, "lease_duration %r" % auth["lease_duration"])
    return {"lease_duration": auth["lease_duration"]}


@step("token.revoke")
def _():
    c.auth.token.revoke(state["child"])
    child = client(state["child"])
    check(not child.is_authenticated(), "the revoked token still authenticates")
    try:
        child.auth.token.lookup_self()
        raise AssertionError("lookup-self with the revoked token succeeded")
    except exceptions.Forbidden:
        pass
    return "revoked; lookup-self is 403"


# ---------------------------------------------------------------- KV version 2

kv2 = c.secrets.kv.v2


@step("kv.mount")
def _():
    c.sys.enable_secrets_engine(backend_type="kv", path=KV, options={"version": "2"})
    m = c.sys.list_mounted_secrets_engines()["data"][KV + "/"]
    check(m["type"] == "kv" and m["options"]["version"] == "2", "mount %r" % m)
    state["kv_accessor"] = m["accessor"]
    return {"accessor": m["accessor"]}


@step("kv.write")
def _():
    v1 = kv2.create_or_update_secret(path="app/db", secret={"user": "app", "pass": "p1"}, mount_point=KV)["data"]
    v2 = kv2.create_or_update_secret(path="app/db", secret={"user": "app", "pass": "p2"}, mount_point=KV)["data"]
    check(v1["version"] == 1 and v2["version"] == 2, "versions %r %r" % (v1["version"], v2["version"]))
    return {"version": v2["version"]}


@step("kv.read")
def _():
    r = kv2.read_secret_version(path="app/db", mount_point=KV)["data"]
    check(r["data"] == {"user": "app", "pass": "p2"}, "data %r" % r["data"])
    check(r["metadata"]["version"] == 2, "metadata %r" % r["metadata"])
    old = kv2.read_secret_version(path="app/db", version=1, mount_point=KV)["data"]
    check(old["data"]["pass"] == "p1", "version 1 %r" % old["data"])
    return r["metadata"]


@step("kv.patch")
def _():
    r = kv2.patch(path="app/db", secret={"pass": "p3"}, mount_point=KV)["data"]
    check(r["version"] == 3, "version %r" % r["version"])
    d = kv2.read_secret_version(path="app/db", mount_point=KV)["data"]["data"]
    check(d == {"user": "app", "pass": "p3"}, "after patch %r" % d)
    return {"version": 3}


@step("kv.list")
def _():
    kv2.create_or_update_secret(path="app/api", secret={"key": "k"}, mount_point=KV)
    top = kv2.list_secrets(path="", mount_point=KV)["data"]["keys"]
    app = kv2.list_secrets(path="app", mount_point=KV)["data"]["keys"]
    check(top == ["app/"], "top-level keys %r" % top)
    check(sorted(app) == ["api", "db"], "app/ keys %r" % app)
    return {"keys": app}


@step("kv.delete")
def _():
    kv2.delete_latest_version_of_secret(path="app/db", mount_point=KV)
    try:
        kv2.read_secret_version(path="app/db", mount_point=KV)
        raise AssertionError("the deleted version still reads")
    except exceptions.InvalidPath:
        pass
    meta = kv2.read_secret_metadata(path="app/db", mount_point=KV)["data"]
    check(meta["versions"]["3"]["deletion_time"] != "", "version 3 has no deletion_time")
    return "version 3 deleted"


@step("kv.undelete")
def _():
    kv2.undelete_secret_versions(path="app/db", versions=[3], mount_point=KV)
    d = kv2.read_secret_version(path="app/db", mount_point=KV)["data"]["data"]
    check(d["pass"] == "p3", "after undelete %r" % d)
    return "version 3 back"


@step("kv.destroy")
def _():
    kv2.destroy_secret_versions(path="app/db", versions=[1], mount_point=KV)
    try:
        kv2.read_secret_version(path="app/db", version=1, mount_point=KV)
        raise AssertionError("the destroyed version still reads")
    except exceptions.InvalidPath:
        pass
    return "version 1 destroyed"


@step("kv.metadata")
def _():
    kv2.update_metadata(path="app/db", max_versions=5, mount_point=KV)
    m = kv2.read_secret_metadata(path="app/db", mount_point=KV)["data"]
    check(m["current_version"] == 3, "current_version %r" % m["current_version"])
    check(m["max_versions"] == 5, "max_versions %r" % m["max_versions"])
    check(m["versions"]["1"]["destroyed"] is True, "version 1 %r" % m["versions"]["1"])
    check(m["versions"]["3"]["deletion_time"] == "", "version 3 %r" % m["versions"]["3"])
    kv2.delete_metadata_and_all_versions(path="app/api", mount_point=KV)
    check(kv2.list_secrets(path="app", mount_point=KV)["data"]["keys"] == ["db"], "app/api still listed")
    return {"current_version": 3, "max_versions": 5}


# ---------------------------------------------------------------- PKI (Vault's PKI tutorial)

pki = c.secrets.pki


@step("pki.mount")
def _():
    c.sys.enable_secrets_engine(backend_type="pki", path=PKI)
    check(c.sys.list_mounted_secrets_engines()["data"][PKI + "/"]["type"] == "pki", "not a pki mount")
    return PKI


@step("pki.tune")
def _():
    c.sys.tune_mount_configuration(path=PKI, max_lease_ttl="87600h")
    d = c.sys.read_mount_configuration(path=PKI)["data"]
    check(d["max_lease_ttl"] == 87600 * 3600, "max_lease_ttl %r, want 315360000" % d["max_lease_ttl"])
    return {"max_lease_ttl": d["max_lease_ttl"], "default_lease_ttl": d["default_lease_ttl"]}


@step("pki.root_generate")
def _():
    d = pki.generate_root(type="internal", common_name="example.com", extra_params={"ttl": "87600h", "issuer_name": "root-2024"}, mount_point=PKI)["data"]
    check(d["certificate"].startswith("-----BEGIN CERTIFICATE-----"), "no certificate")
    years = (float(d["expiration"]) - time.time()) / (365.25 * 86400)
    check(years > 9.9, "root expires in %.2f years, want 10 (ttl=87600h)" % years)
    state["root"] = d["certificate"]
    check(pki.read_ca_certificate(mount_point=PKI).strip() == d["certificate"].strip(), "ca/pem is not the new root")
    return {"issuer_id": d.get("issuer_id"), "years": round(years, 2)}


@step("pki.config_urls")
def _():
    urls = {"issuing_certificates": "%s/v1/%s/ca" % (ADDR, PKI), "crl_distribution_points": "%s/v1/%s/crl" % (ADDR, PKI)}
    pki.set_urls(urls, mount_point=PKI)
    d = pki.read_urls(mount_point=PKI)["data"]
    check(d["issuing_certificates"] == [urls["issuing_certificates"]], "issuing_certificates %r" % d["issuing_certificates"])
    check(d["crl_distribution_points"] == [urls["crl_distribution_points"]], "crl_distribution_points %r" % d["crl_distribution_points"])
    return d


@step("pki.role")
def _():
    pki.create_or_update_role("example-dot-com", extra_params={"allowed_domains": "example.com", "allow_subdomains": True, "max_ttl": "72h"}, mount_point=PKI)
    d = pki.read_role("example-dot-com", mount_point=PKI)["data"]
    check(d["allowed_domains"] == ["example.com"] and d["allow_subdomains"] is True, "role %r" % d)
    check(d["max_ttl"] == 72 * 3600, "max_ttl %r" % d["max_ttl"])
    check(pki.list_roles(mount_point=PKI)["data"]["keys"] == ["example-dot-com"], "roles list")
    return {"max_ttl": d["max_ttl"]}


@step("pki.issue")
def _():
    d = pki.generate_certificate("example-dot-com", "test.example.com", extra_params={"ttl": "24h"}, mount_point=PKI)["data"]
    for k in ("certificate", "private_key", "issuing_ca", "serial_number"):
        check(d.get(k), "no %s" % k)
    with tempfile.TemporaryDirectory() as t:
        open(os.path.join(t, "root.pem"), "w").write(state["root"] + "\n")
        open(os.path.join(t, "leaf.pem"), "w").write(d["certificate"] + "\n")
        out = openssl("verify", "-CAfile", os.path.join(t, "root.pem"), os.path.join(t, "leaf.pem"))
        check(out.strip().endswith("OK"), "openssl verify: %s" % out)
        subject = openssl("x509", "-in", os.path.join(t, "leaf.pem"), "-noout", "-subject")
    check("test.example.com" in subject, "subject %s" % subject)
    state["issued_serial"] = d["serial_number"]
    return {"serial_number": d["serial_number"]}


@step("pki.sign")
def _():
    with tempfile.TemporaryDirectory() as t:
        key = os.path.join(t, "k.pem")
        # The role's key_type is Vault's default, rsa (2048 bits): the CSR must match it.
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key)
        csr = openssl("req", "-new", "-key", key, "-subj", "/CN=signed.example.com")
        d = pki.sign_certificate("example-dot-com", csr, "signed.example.com", extra_params={"ttl": "24h"}, mount_point=PKI)["data"]
        open(os.path.join(t, "c.pem"), "w").write(d["certificate"] + "\n")
        cert_pub = openssl("x509", "-in", os.path.join(t, "c.pem"), "-noout", "-pubkey")
        key_pub = openssl("pkey", "-in", key, "-pubout")
    check(cert_pub.strip() == key_pub.strip(), "the signed certificate does not carry the CSR's key")
    check("private_key" not in d, "sign answered a private key")
    state["signed_serial"] = d["serial_number"]
    return {"serial_number": d["serial_number"]}


@step("pki.revoke")
def _():
    d = pki.revoke_certificate(state["issued_serial"], mount_point=PKI)["data"]
    check(d["revocation_time"] > 0, "revocation_time %r" % d["revocation_time"])
    return d


@step("pki.crl")
def _():
    crl = pki.read_crl(mount_point=PKI)
    check(crl.startswith("-----BEGIN X509 CRL-----"), "crl/pem is not a PEM CRL: %r" % crl[:60])
    with tempfile.TemporaryDirectory() as t:
        open(os.path.join(t, "crl.pem"), "w").write(crl + "\n")
        open(os.path.join(t, "root.pem"), "w").write(state["root"] + "\n")
        text = openssl("crl", "-in", os.path.join(t, "crl.pem"), "-CAfile", os.path.join(t, "root.pem"), "-noout", "-text")
    serials = [serial_hex(line.split(":", 1)[1]) for line in text.splitlines() if "Serial Number:" in line]
    check(serial_hex(state["issued_serial"]) in serials, "revoked serial not in the CRL: %r" % serials)
    check(serial_hex(state["signed_serial"]) not in serials, "the unrevoked serial is in the CRL")
    return {"revoked": len(serials)}


@step("pki.lease")
def _():
    # A generate_lease role: the issue answer carries a lease that sys/leases reads and revokes.
    pki.create_or_update_role("leased", extra_params={"allowed_domains": "example.com", "allow_subdomains": True, "generate_lease": True}, mount_point=PKI)
    r = pki.generate_certificate("leased", "lease.example.com", extra_params={"ttl": "1h"}, mount_point=PKI)
    lease_id, serial = r["lease_id"], r["data"]["serial_number"]
    check(lease_id.startswith(PKI + "/issue/leased/"), "lease_id %r" % lease_id)
    check(0 < r["lease_duration"] <= 3600 and r["renewable"] is False, "lease_duration %r renewable %r" % (r["lease_duration"], r["renewable"]))
    d = c.sys.read_lease(lease_id)["data"]
    check(d["id"] == lease_id and d["renewable"] is False and d["last_renewal"] is None and 0 < d["ttl"] <= 3600, "lookup %r" % d)
    c.sys.revoke_lease(lease_id)
    revoked = c.read("%s/cert/%s" % (PKI, serial))["data"]["revocation_time"]
    check(revoked > 0, "the lease's certificate was not revoked: revocation_time %r" % revoked)
    try:
        c.sys.read_lease(lease_id)
        raise AssertionError("lookup of the revoked lease succeeded")
    except exceptions.InvalidRequest as e:
        check("invalid lease" in str(e), "lookup after revoke: %s" % e)
    return {"lease_id": lease_id, "revocation_time": revoked}


# ---------------------------------------------------------------- policies, both path families

RULES = 'path "%s/data/app/*" {\n  capabilities = ["read"]\n}\n' % KV


@step("policy.acl_write")
def _():
    c.adapter.put("/v1/sys/policies/acl/" + POLICY_ACL, json={"policy": RULES})
    return POLICY_ACL


@step("policy.acl_read")
def _():
    d = c.adapter.get("/v1/sys/policies/acl/" + POLICY_ACL)["data"]
    check(d["name"] == POLICY_ACL and d["policy"] == RULES, "read %r" % d)
    return "policy text round-trips"


@step("policy.acl_list")
def _():
    keys = c.adapter.list("/v1/sys/policies/acl")["data"]["keys"]
    check(POLICY_ACL in keys and "default" in keys, "keys %r" % keys)
    return {"count": len(keys)}


@step("policy.legacy_write")
def _():
    c.sys.create_or_update_policy(name=POLICY_LEGACY, policy=RULES)
    return POLICY_LEGACY


@step("policy.legacy_read")
def _():
    r = c.sys.read_policy(name=POLICY_LEGACY)
    check(r["data"]["rules"] == RULES, "data.rules %r" % r["data"].get("rules"))
    check(c.get_policy(POLICY_ACL) == RULES, "a policy written under sys/policies/acl does not read under sys/policy")
    return "rules round-trip; one store for both families"


@step("policy.legacy_list")
def _():
    r = c.sys.list_policies()
    pols = r["data"]["policies"]
    check(POLICY_LEGACY in pols and POLICY_ACL in pols and "root" in pols, "policies %r" % pols)
    check(sorted(r["data"]["keys"]) == sorted(pols), "keys and policies differ")
    return {"count": len(pols)}


@step("policy.enforced")
def _():
    kv2.create_or_update_secret(path="app/db", secret={"user": "app", "pass": "p4"}, mount_point=KV)
    tok = c.auth.token.create(policies=[POLICY_LEGACY], ttl="10m")["auth"]["client_token"]
    limited = client(tok)
    d = limited.secrets.kv.v2.read_secret_version(path="app/db", mount_point=KV)["data"]["data"]
    check(d["pass"] == "p4", "read through the policy %r" % d)
    try:
        limited.secrets.kv.v2.create_or_update_secret(path="app/db", secret={"x": "y"}, mount_point=KV)
        raise AssertionError("write allowed by a read-only policy")
    except exceptions.Forbidden:
        pass
    c.auth.token.revoke(tok)
    return "read allowed, write 403"


@step("policy.delete")
def _():
    c.sys.delete_policy(name=POLICY_LEGACY)
    c.adapter.delete("/v1/sys/policies/acl/" + POLICY_ACL)
    check(c.get_policy(POLICY_LEGACY) is None, "the legacy policy still reads")
    check(POLICY_ACL not in c.sys.list_policies()["data"]["policies"], "the ACL policy is still listed")
    return "both gone"


# ---------------------------------------------------------------- namespaces through the client option


@step("ns.create")
def _():
    c.sys.create_namespace(path=NS)
    keys = c.sys.list_namespaces()["data"]["keys"]
    check(NS + "/" in keys, "namespaces %r" % keys)
    return {"keys": keys}


nsc = client(namespace=NS)


@step("ns.mount")
def _():
    nsc.sys.enable_secrets_engine(backend_type="kv", path="secret", options={"version": "2"})
    check("secret/" in nsc.sys.list_mounted_secrets_engines()["data"], "the mount is not in the namespace")
    return "secret/ in " + NS


@step("ns.kv_write_read")
def _():
    nsc.secrets.kv.v2.create_or_update_secret(path="team", secret={"owner": NS}, mount_point="secret")
    d = nsc.secrets.kv.v2.read_secret_version(path="team", mount_point="secret")["data"]["data"]
    check(d == {"owner": NS}, "read %r" % d)
    return d


@step("ns.not_in_root")
def _():
    # Through the root namespace: the secret is under the namespace's path prefix, not at root.
    r = c.read("%s/secret/data/team" % NS)
    check(r is not None and r["data"]["data"] == {"owner": NS}, "root-namespace read of %s/secret/data/team: %r" % (NS, r))
    mounts = c.sys.list_mounted_secrets_engines()["data"]
    check("secret/" not in mounts or c.read("secret/data/team") is None, "the namespace's secret landed in the root namespace")
    return "secret only in " + NS


@step("ns.delete")
def _():
    nsc.sys.disable_secrets_engine(path="secret")
    c.sys.delete_namespace(path=NS)
    listed = c.list("sys/namespaces")  # None on 404: no namespace left
    keys = listed["data"]["keys"] if listed else []
    check(NS + "/" not in keys, "namespace still listed")
    return "deleted"


# ---------------------------------------------------------------- secrets sync against the fake repository host

DEST = "hvac-" + RUN
VALUE = "k1-" + RUN


@step("sync.activate")
def _():
    c.adapter.put("/v1/sys/activation-flags/secrets-sync/activate")
    c.adapter.put("/v1/sys/activation-flags/secrets-sync/activate")  # idempotent
    d = c.read("sys/activation-flags")["data"]
    check("secrets-sync" in d["activated"], "activation flags %r" % d)
    return d


@step("sync.config")
def _():
    r = c.adapter.request("PATCH", "/v1/sys/sync/config", json={"disabled": False}, headers={"Content-Type": "application/merge-patch+json"})
    check(r["data"]["disabled"] is False, "patch answer %r" % r)
    d = c.read("sys/sync/config")["data"]
    check(d["disabled"] is False and d["queue_capacity"] > 0, "config %r" % d)
    return d


@step("sync.destination_create")
def _():
    check(GH_BODY, "SYNC_GH_BODY is not set")
    c.write("sys/sync/destinations/gh/" + DEST, **GH_BODY)
    d = c.read("sys/sync/destinations/gh/" + DEST)["data"]
    check(d["name"] == DEST and d["type"] in ("gh", "repohost"), "destination %r" % d)
    check(GH_BODY["access_token"] not in json.dumps(d), "the access token is echoed")
    keys = c.list("sys/sync/destinations/gh")["data"]["keys"]
    check(DEST in keys, "destinations of type gh %r" % keys)
    return {"type": d["type"]}


@step("sync.association_set")
def _():
    kv2.create_or_update_secret(path="syncapp", secret={"api_key": VALUE}, mount_point=KV)
    d = c.write("sys/sync/destinations/gh/%s/associations/set" % DEST, mount=KV, secret_name="syncapp")["data"]
    deadline = time.time() + 15
    while True:
        statuses = [e["sync_status"] for e in entries(d["associated_secrets"])]
        if statuses and all(s == "SYNCED" for s in statuses) or time.time() > deadline:
            break
        time.sleep(0.3)
        d = c.read("sys/sync/destinations/gh/%s/associations" % DEST)["data"]
    check(statuses and all(s == "SYNCED" for s in statuses), "statuses %r" % statuses)
    held = json.dumps(fake_state(FAKE_REPOHOST))
    check(VALUE in held, "the fake repository host does not hold the value")
    return {"statuses": statuses}


@step("sync.association_remove")
def _():
    c.write("sys/sync/destinations/gh/%s/associations/remove" % DEST, mount=KV, secret_name="syncapp")
    deadline = time.time() + 15
    while VALUE in json.dumps(fake_state(FAKE_REPOHOST)) and time.time() < deadline:
        time.sleep(0.3)
    check(VALUE not in json.dumps(fake_state(FAKE_REPOHOST)), "the value is still at the fake")
    return "unsynced"


@step("sync.destination_delete")
def _():
    c.delete("sys/sync/destinations/gh/" + DEST)
    check(c.read("sys/sync/destinations/gh/" + DEST) is None, "destination still reads")
    return "deleted"


try:
    from importlib.metadata import version

    HVAC_VERSION = version("hvac")
except Exception:
    HVAC_VERSION = getattr(hvac, "__version__", "unknown")
print(json.dumps({"client": "hvac", "version": HVAC_VERSION, "steps": steps}))
