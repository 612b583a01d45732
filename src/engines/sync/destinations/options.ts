/**
 * The options every destination has (spec "Destination (read form)"; Vault API: /v1/sys/sync/destinations/:type/:name, Vault API: patch a destination,
 * Vault API: secret_name_template–1.13): granularity, secret-name template and, on the three cloud types, custom tags.
 * Also the field table of a type's write endpoint and the name rendering part 2 will use.
 */
import { defineFields, type FieldSchema } from "../../../core/fields";
import type { DestinationOptions } from "../store";
import { parseTemplate, renderTemplate, TemplateError, type TemplateData } from "../template";
import { GRANULARITIES, invalid, type DestinationDef, type Granularity } from "./types";
import { trimEndChar } from "../../../core/text";

const COMMON = defineFields({
  secret_name_template: { type: "string", default: "", description: "Template of the external secret name; empty for the type's default." },
  drift_repair: {
    type: "bool",
    default: true,
    description: "Rewrite a synced secret changed or deleted at the provider out of band (default true); false only reports the drift.",
  },
});

const TAG_FIELDS = defineFields({
  // A map rather than a string map: a merge patch removes a tag with null (RFC 7386).
  custom_tags: { type: "map", description: "Tags added to every synced secret, merged with the built-in ones." },
  tags_to_remove: { type: "comma-string-slice", description: "PATCH only: custom tags to remove." },
});

/** The field table of a type's create/update endpoint. */
export function writeFields(def: DestinationDef): FieldSchema {
  const granularity = {
    granularity: {
      type: "string",
      default: def.defaultGranularity,
      allowed: GRANULARITIES,
      description: `secret-path (one external secret per KV secret) or secret-key (one per key); default ${def.defaultGranularity}.`,
    },
  } satisfies FieldSchema;
  return { ...def.fields, ...COMMON, ...granularity, ...(def.tags ? TAG_FIELDS : {}) };
}

export function effectiveTemplate(def: DestinationDef, opts: DestinationOptions): string {
  return opts.secretNameTemplate !== "" ? opts.secretNameTemplate : def.defaultTemplate[opts.granularity];
}

/** Checks custom tags against the provider's limits (the three cloud providers' API references). */
export function validateTags(def: DestinationDef, tags: Record<string, unknown>): Record<string, string> {
  const rules = def.tags;
  if (!rules) return {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(tags)) {
    if (typeof v !== "string") throw invalid("custom_tags", `the value of "${k}" must be a string`);
    if (k === "" || k.length > rules.maxKeyLength) throw invalid("custom_tags", `key "${k}" must be 1 to ${rules.maxKeyLength} characters`);
    if (v.length > rules.maxValueLength) throw invalid("custom_tags", `the value of "${k}" must be at most ${rules.maxValueLength} characters`);
    const keyProblem = rules.checkKey?.(k);
    if (keyProblem) throw invalid("custom_tags", `key "${k}" ${keyProblem}`);
    const valueProblem = rules.checkValue?.(v);
    if (valueProblem) throw invalid("custom_tags", `the value of "${k}" ${valueProblem}`);
    out[k] = v;
  }
  if (Object.keys(out).length > rules.maxTags) throw invalid("custom_tags", `at most ${rules.maxTags} custom tags are allowed for ${def.type}`);
  return out;
}

export interface NameInputs {
  destinationType: string;
  destinationName: string;
  /** "" for the root namespace, else "a/b/" (with the trailing slash, as stored). */
  namespacePath: string;
  namespaceId: string;
  /** Mount path, with or without its trailing slash. */
  mountPath: string;
  mountAccessor: string;
  secretPath: string;
  /** "" with secret-path granularity. */
  secretKey: string;
}

const baseName = (p: string): string => p.split("/").filter((s) => s !== "").pop() ?? "";

/** The variables of Vault API: secret_name_template for one secret. */
function templateData(i: NameInputs): TemplateData {
  const ns = trimEndChar(i.namespacePath, "/");
  const mount = trimEndChar(i.mountPath, "/");
  return {
    DestinationType: i.destinationType,
    DestinationName: i.destinationName,
    NamespacePath: ns,
    NamespaceBaseName: baseName(ns),
    NamespaceID: i.namespaceId,
    MountPath: mount,
    MountBaseName: baseName(mount),
    MountAccessor: i.mountAccessor,
    SecretPath: i.secretPath,
    SecretBaseName: baseName(i.secretPath),
    SecretKey: i.secretKey,
  };
}

/** The external name of one secret: the template rendered, then normalised for the type. */
export async function renderSecretName(def: DestinationDef, opts: DestinationOptions, inputs: NameInputs): Promise<string> {
  const parsed = parseTemplate(effectiveTemplate(def, opts));
  return def.normalizeName(await renderTemplate(parsed, templateData(inputs)));
}

const TEMPLATE_INVALID = "secret name template is invalid";

/**
 * A template must parse, reference .SecretKey under secret-key granularity (Vault API: secret_name_template,
 * Vault's literal error strings, with upstream's literal message) and render a non-empty name for a sample secret.
 */
export async function validateTemplate(def: DestinationDef, opts: DestinationOptions, sample: Omit<NameInputs, "mountPath" | "mountAccessor" | "secretPath" | "secretKey">): Promise<void> {
  const source = effectiveTemplate(def, opts);
  try {
    const parsed = parseTemplate(source);
    if (opts.granularity === "secret-key" && !parsed.variables.has("SecretKey")) {
      throw new TemplateError("external name template should contain reference to the secret key");
    }
    const data = templateData({
      ...sample,
      mountPath: "kv",
      mountAccessor: "kv_1234abcd",
      secretPath: "path/to/secret",
      secretKey: opts.granularity === "secret-key" ? "key" : "",
    });
    const name = def.normalizeName(await renderTemplate(parsed, data));
    if (name === "") throw new TemplateError("the template renders an empty name");
  } catch (e) {
    if (e instanceof TemplateError) throw invalid("secret_name_template", `${TEMPLATE_INVALID}: ${e.message}`);
    throw e;
  }
}

export function isGranularity(s: string): s is Granularity {
  return (GRANULARITIES as readonly string[]).includes(s);
}
