import { invalidArgument } from "./errors.ts";

/**
 * The one check of text people type (display names, comments, reasons, passwords), used by every
 * domain (docs/api.md, "Free text"): bounded, and free of what can hide or forge what a reader sees
 * in the console, a log line, a terminal or an email: NUL and other control characters, bidi
 * overrides and isolates (the "Trojan Source" reordering), unpaired surrogates.
 */

/** Display names: projects, users, VMs, alert rules, destinations. */
export const MAX_DISPLAY_NAME = 200;
/** Display names of keys and service accounts (shown in narrow tables and audit rows). */
export const MAX_CREDENTIAL_NAME = 100;
/** Comments and reasons: a silence's comment, a maintenance window's reason. */
export const MAX_COMMENT = 500;
/** Email addresses (RFC 5321's limit of a path). */
export const MAX_EMAIL = 254;
/** Passwords: long enough for any passphrase, short enough that hashing one costs nothing notable. */
export const MAX_PASSWORD = 1024;

export interface FreeTextRules {
  /** Characters (code points) at most. */
  readonly max: number;
  /** Refuses an empty value (after trimming when `trim`). */
  readonly required?: boolean;
  /** Allows line feeds and tabs (comments); a name stays on one line. */
  readonly multiline?: boolean;
  /** Trims surrounding white space first (default); a password is taken as typed. */
  readonly trim?: boolean;
}

// Control characters (C0, DEL, C1), NUL included; a multi-line text keeps tab and line breaks.
const CONTROL = /\p{Cc}/gu;
// LRE, RLE, PDF, LRO, RLO and LRI, RLI, FSI, PDI.
const BIDI = /[\u202a-\u202e\u2066-\u2069]/u;
// A lone high or low surrogate: no character, and not storable as UTF-8.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const hex = (c: string) => (c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0");

/** The first character the rules refuse, described for the message, or undefined. */
function refusedCharacter(value: string, multiline: boolean): string | undefined {
  if (value.includes("\u0000")) return "a NUL character";
  for (const [c] of value.matchAll(CONTROL)) {
    if (multiline && (c === "\t" || c === "\n" || c === "\r")) continue;
    return `a control character (U+${hex(c)})`;
  }
  const bidi = BIDI.exec(value)?.[0];
  if (bidi !== undefined) return `a bidirectional override or isolate (U+${hex(bidi)})`;
  if (LONE_SURROGATE.test(value)) return "an unpaired surrogate (not a character)";
  return undefined;
}

/**
 * Checks `value` of the request field `field` and answers it as stored (trimmed unless the rules say
 * not). Refuses with invalid_argument naming the field.
 */
export function checkFreeText(field: string, value: string, rules: FreeTextRules): string {
  const v = rules.trim === false ? value : value.trim();
  if (rules.required && !v) throw invalidArgument(field, "is required");
  // Counted in code points; the length in UTF-16 units bounds the work before counting.
  if (v.length > rules.max * 2 || [...v].length > rules.max)
    throw invalidArgument(field, `must be at most ${rules.max} characters`);
  const bad = refusedCharacter(v, rules.multiline === true);
  if (bad) throw invalidArgument(field, `must not contain ${bad}`);
  return v;
}
