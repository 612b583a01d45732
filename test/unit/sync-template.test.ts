import { describe, expect, it } from "vitest";
import {
  MAX_RENDERED_LENGTH,
  MAX_TEMPLATE_LENGTH,
  TemplateError,
  parseTemplate,
  renderTemplate,
  type TemplateData,
} from "../../src/engines/sync/template";
import { providerOf } from "../../src/engines/sync/providers/registry";

// The example of Vault API: secret_name_template: namespace ns1/ns2, mount path/to/kv1,
// secret path/to/secret1, key foo.
const DATA: TemplateData = {
  DestinationType: "cloudone-sm",
  DestinationName: "dest1",
  NamespacePath: "ns1/ns2",
  NamespaceBaseName: "ns2",
  NamespaceID: "RQegM",
  MountPath: "path/to/kv1",
  MountBaseName: "kv1",
  MountAccessor: "kv_1234",
  SecretPath: "path/to/secret1",
  SecretBaseName: "secret1",
  SecretKey: "foo",
};

const render = async (src: string, data: TemplateData = DATA) => renderTemplate(parseTemplate(src), data);
const fails = (src: string) => expect(() => parseTemplate(src)).toThrow(TemplateError);

describe("secret-name templates: the documented examples (Vault API: secret_name_template)", () => {
  it.each([
    ["prefix-{{ .SecretPath }}", "prefix-path/to/secret1"],
    ["{{ .SecretBaseName | uppercase }}", "SECRET1"],
    ["{{ .MountAccessor }}_{{ .SecretKey }}", "kv_1234_foo"],
    ['{{ .SecretPath | replace "/" "_" }}', "path_to_secret1"],
    ["vault/{{ .MountAccessor }}/{{ .SecretPath }}", "vault/kv_1234/path/to/secret1"],
    [
      "VAULT_{{ .MountAccessor | uppercase }}_{{ .SecretPath | uppercase }}_{{ .SecretKey | uppercase }}",
      "VAULT_KV_1234_PATH/TO/SECRET1_FOO",
    ],
  ])("%s → %s", async (src, want) => {
    expect(await render(src)).toBe(want);
  });

  it("exposes every variable of the table", async () => {
    const src = [
      "DestinationType",
      "DestinationName",
      "NamespacePath",
      "NamespaceBaseName",
      "NamespaceID",
      "MountPath",
      "MountBaseName",
      "MountAccessor",
      "SecretPath",
      "SecretBaseName",
      "SecretKey",
    ]
      .map((v) => `{{.${v}}}`)
      .join("|");
    expect(await render(src)).toBe("cloudone-sm|dest1|ns1/ns2|ns2|RQegM|path/to/kv1|kv1|kv_1234|path/to/secret1|secret1|foo");
  });
});

describe("secret-name templates: functions", () => {
  it("lowercase, uppercase, replace with the piped value last", async () => {
    expect(await render('{{ lowercase "ABC" }}')).toBe("abc");
    expect(await render('{{ replace "to" "TO" .SecretPath }}')).toBe("path/TO/secret1");
    expect(await render('{{ .SecretPath | replace "/" "-" | uppercase }}')).toBe("PATH-TO-SECRET1");
  });

  it("truncate and truncate_sha256", async () => {
    expect(await render("{{ .SecretPath | truncate 4 }}")).toBe("path");
    expect(await render("{{ .SecretKey | truncate 10 }}")).toBe("foo");
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("h/to/secret1")));
    const hex = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
    expect(await render("{{ .SecretPath | truncate_sha256 11 }}")).toBe(`pat${hex.slice(0, 8)}`);
    expect(await render("{{ .SecretKey | truncate_sha256 9 }}")).toBe("foo");
    await expect(render("{{ .SecretPath | truncate_sha256 8 }}")).rejects.toThrow(/must be > 8/);
    await expect(render("{{ .SecretPath | truncate 0 }}")).rejects.toThrow(/must be > 0/);
  });

  it("sha256 and base64", async () => {
    expect(await render('{{ sha256 "abc" }}')).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(await render('{{ "hello" | base64 }}')).toBe("aGVsbG8=");
  });

  it("printf and print", async () => {
    expect(await render('{{ printf "%s-%s" .MountBaseName .SecretKey }}')).toBe("kv1-foo");
    expect(await render('{{ printf "%d/%q/%x/%X/%%" 42 "a" "hi" 255 }}')).toBe('42/"a"/6869/FF/%');
    expect(await render('{{ printf "%s" }}')).toBe("%!s(MISSING)");
    expect(await render('{{ printf "x" "extra" }}')).toBe("x%!(EXTRA extra)");
    expect(await render('{{ print "a" 1 2 "b" }}')).toBe("a1 2b");
    await expect(render('{{ printf "%5s" "a" }}')).rejects.toThrow(/unsupported verb/);
  });

  it("refuses values of the wrong type", async () => {
    await expect(render('{{ truncate "3" .SecretKey }}')).rejects.toThrow(/expected int/);
    await expect(render("{{ uppercase 3 }}")).rejects.toThrow(/expected string/);
  });
});

describe("secret-name templates: syntax", () => {
  it("variables: declare, assign, use; a declaration prints nothing", async () => {
    expect(await render("{{ $unused := .SecretKey }}{{ .SecretBaseName }}")).toBe("secret1");
    expect(await render("{{ $x := .SecretKey }}{{ $x = uppercase $x }}{{ $x }}-{{ $x }}")).toBe("FOO-FOO");
    fails("{{ $y }}");
    fails("{{ $y = 1 }}");
    fails("{{ $x := $x }}");
    fails("{{ $ }}");
  });

  it("parentheses, literals, comments and trim markers", async () => {
    expect(await render('{{ printf "%s_%s" (.SecretPath | replace "/" "_") (uppercase .SecretKey) }}')).toBe("path_to_secret1_FOO");
    expect(await render("{{ `raw\\n` }}|{{ \"q\\t\\x41\\u00e9\" }}|{{ 7 }}|{{ -3 }}|{{ true }}")).toBe("raw\\n|q\tAé|7|-3|true");
    expect(await render("a {{/* a comment */}}b")).toBe("a b");
    expect(await render("a  {{- /* trimmed */ -}}  b")).toBe("ab");
    expect(await render("x  {{- .SecretKey -}}  \n y")).toBe("xfooy");
    expect(await render("{{ .SecretKey }}}")).toBe("foo}");
    expect(await render('{{ "}}" }}')).toBe("}}");
    expect(await render("")).toBe("");
    expect(await render("plain text")).toBe("plain text");
  });

  it("records which variables a template mentions", () => {
    expect([...parseTemplate("{{ $k := .SecretKey }}{{ .SecretPath }}").variables].sort()).toEqual(["SecretKey", "SecretPath"]);
    expect(parseTemplate('{{ printf "%s" (.SecretKey | uppercase) }}').variables.has("SecretKey")).toBe(true);
    expect(parseTemplate("{{ .SecretPath }}").variables.has("SecretKey")).toBe(false);
  });

  it.each([
    ["{{ .Nope }}", /unknown variable "\.Nope"/],
    ["{{ .SecretKey.Len }}", /chained fields/],
    ["{{ . }}", /dot itself/],
    ["{{ nothere }}", /function "nothere" not defined/],
    ["{{ .SecretKey", /unclosed action/],
    ["{{ }}", /missing value/],
    ["{{ .SecretKey .SecretPath }}", /non-function/],
    ["{{ 3 | .SecretKey }}", /piped into a function/],
    ['{{ replace "a" .SecretKey }}', /wrong number of args for replace: want 3 got 2/],
    ["{{ uppercase }}", /wrong number of args/],
    ["{{ printf }}", /want at least 1/],
    ['{{ "abc }}', /unterminated quoted string/],
    ["{{ `abc }}", /unterminated raw string/],
    ['{{ "\\q" }}', /unsupported escape/],
    ["{{ 1.5 }}", /integer/],
    ["{{ 0x10 }}", /integer/],
    ["{{ 99999999999999999999 }}", /out of range/],
    ["{{ (uppercase .SecretKey }}", /unclosed left paren/],
    ["{{ uppercase .SecretKey) }}", /unexpected rparen/],
    ["{{/* never closed }}", /unclosed comment/],
    ["{{ nil }}", /nil/],
    ["{{ .SecretKey ; }}", /unexpected ";"/],
    ["{{ printf \"%s\" ($x := 1) }}", /only be declared at the start/],
  ])("refuses %s", (src, msg) => {
    expect(() => parseTemplate(src)).toThrow(msg);
  });
});

describe("secret-name templates: safety", () => {
  it.each(["if", "range", "with", "define", "template", "block", "end", "else", "break", "continue"])(
    "refuses the control structure %s",
    (kw) => {
      expect(() => parseTemplate(`{{ ${kw} .SecretKey }}x{{ end }}`)).toThrow(/control structures are not supported/);
    },
  );

  it.each(["random 10", "uuid", "unix_time", "unix_time_millis", 'timestamp "2006"'])("refuses the non-deterministic %s", (call) => {
    expect(() => parseTemplate(`{{ ${call} }}`)).toThrow(/must render the same every time/);
  });

  it("refuses calling anything that is not in the function table", () => {
    for (const name of ["call", "js", "html", "index", "slice", "len", "and", "or", "not", "eq", "constructor", "__proto__", "toString"]) {
      expect(() => parseTemplate(`{{ ${name} .SecretKey }}`), name).toThrow(TemplateError);
    }
  });

  it("bounds the template size, nesting and every produced string", async () => {
    expect(() => parseTemplate("x".repeat(MAX_TEMPLATE_LENGTH + 1))).toThrow(/longer than/);
    const deep = `${"(".repeat(9)}.SecretKey${")".repeat(9)}`;
    expect(() => parseTemplate(`{{ ${deep} }}`)).toThrow(/nested deeper/);
    // Each replace multiplies the length; the cap stops it long before memory matters.
    const grow = `{{ .SecretPath${' | replace "" "0123456789"'.repeat(6)} }}`;
    await expect(render(grow)).rejects.toThrow(new RegExp(`longer than ${MAX_RENDERED_LENGTH}`));
    const many = "{{ .SecretPath }}".repeat(Math.floor(MAX_TEMPLATE_LENGTH / 17));
    const long = { ...DATA, SecretPath: "p".repeat(300) };
    await expect(render(many, long)).rejects.toThrow(/longer than/);
  });

  it("is not fooled by template text that looks like code", async () => {
    expect(await render("${process.exit()}`{{ .SecretKey }}`")).toBe("${process.exit()}`foo`");
    fails("{{ .constructor }}");
    fails('{{ "a" | constructor }}');
  });
});

describe("per-type normalisation of rendered names", () => {
  it("cloudone keeps / and replaces what the provider refuses", () => {
    expect(providerOf("cloudone-sm").normalizeName("vault/kv_1234/my secret!")).toBe("vault/kv_1234/my_secret_");
  });
  it("cloudtwo turns every non-alphanumeric into -", () => {
    expect(providerOf("cloudtwo-kv").normalizeName("vault-kv_1234-my/secret")).toBe("vault-kv-1234-my-secret");
  });
  it("cloudthree allows letters, digits, _ and -", () => {
    expect(providerOf("cloudthree-sm").normalizeName("vault/kv_1234/my-secret.x")).toBe("vault_kv_1234_my-secret_x");
  });
  it("repohost and webhost-project upper-case, replaces the rest with _ and never starts with a digit", () => {
    expect(providerOf("repohost").normalizeName("vault_kv-1234_my/secret_foo")).toBe("VAULT_KV_1234_MY_SECRET_FOO");
    expect(providerOf("webhost-project").normalizeName("vault_kv-1234_my/secret_foo")).toBe("VAULT_KV_1234_MY_SECRET_FOO");
    expect(providerOf("repohost").normalizeName("1abc")).toBe("_1ABC");
  });
});
