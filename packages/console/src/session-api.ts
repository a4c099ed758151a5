/**
 * The session endpoints, apart from the Connect clients (api.ts) so that the sign-in page loads without
 * them. The page never sees the session token: the browser attaches the HttpOnly cookie itself.
 */
let csrf = "";

/** The CSRF token every cookie-authenticated call carries (x-svc-csrf). */
export function csrfToken(): string {
  return csrf;
}

function setCsrfToken(token: string): void {
  csrf = token;
}

/** Called when any call says the session is gone, so the app can show the login page. */
let onSignedOut: () => void = () => {};
export function whenSignedOut(f: () => void): void {
  onSignedOut = f;
}
export function sessionEnded(): void {
  onSignedOut();
}

export interface ConsoleSession {
  signedIn: true;
  user: string;
  email: string;
  displayName: string;
  csrfToken: string;
  expireTime: string;
  apiOrigin: string;
  projects: { name: string; displayName: string; role: string }[];
}

async function sessionCall(method: string, body?: unknown): Promise<Response> {
  return fetch("/console/api/session", {
    method,
    credentials: "same-origin",
    headers: {
      ...(body ? { "content-type": "application/json" } : {}),
      ...(method === "DELETE" ? { "x-svc-csrf": csrf } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
}

export async function readSession(): Promise<ConsoleSession | undefined> {
  const r = await sessionCall("GET");
  if (!r.ok) throw new Error(`session check failed: HTTP ${r.status}`);
  const s = (await r.json()) as ConsoleSession | { signedIn: false };
  if (!s.signedIn) return undefined;
  setCsrfToken(s.csrfToken);
  return s;
}

export async function signIn(email: string, password: string): Promise<ConsoleSession> {
  const r = await sessionCall("POST", { email, password });
  const body = (await r.json()) as ConsoleSession | { message: string };
  if (!r.ok) throw new Error("message" in body ? body.message : `HTTP ${r.status}`);
  const s = body as ConsoleSession;
  setCsrfToken(s.csrfToken);
  return s;
}

export async function signOut(): Promise<void> {
  await sessionCall("DELETE");
  setCsrfToken("");
}
