import "./styles.css";
import { type ConsoleSession, readSession, signIn } from "./session-api.ts";

/**
 * The console's entry: the sign-in page without React. index.html holds the form; this file (a few KB,
 * the only script a signed-out page loads) asks the session probe, then either shows the form or loads
 * the signed-in console (app.tsx, with React) and hands it the session. The console's chunks are fetched
 * on submit, alongside the password check, not after it.
 */
type AppModule = typeof import("./app.tsx");

function byId<T extends HTMLElement>(id: string): T {
  return document.getElementById(id) as T;
}
const status = byId<HTMLParagraphElement>("boot-status");
const login = byId<HTMLElement>("login");
const form = byId<HTMLFormElement>("login-form");
const error = byId<HTMLParagraphElement>("login-error");
const button = form.querySelector("button") as HTMLButtonElement;
const root = byId<HTMLDivElement>("root");

let appModule: Promise<AppModule> | undefined;
/** The signed-in console and the chunks `path` needs; a failed download is tried again next time. */
function loadApp(): Promise<AppModule> {
  appModule ??= import("./app.tsx").then(
    async (m) => {
      await m.preloadFor(window.location.pathname);
      return m;
    },
    (err: unknown) => {
      appModule = undefined;
      throw err;
    },
  );
  return appModule;
}

function showError(message: string | undefined): void {
  error.textContent = message ?? "";
  error.hidden = !message;
}

function setBusy(busy: boolean): void {
  button.disabled = busy;
  button.textContent = busy ? "Signing in…" : "Sign in";
}

function showLogin(): void {
  status.hidden = true;
  form.reset();
  showError(undefined);
  setBusy(false);
  login.hidden = false;
}

function start(session: ConsoleSession, app: AppModule): void {
  login.hidden = true;
  status.hidden = true;
  app.mountConsole(root, session, showLogin);
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const data = new FormData(form);
  setBusy(true);
  showError(undefined);
  const app = loadApp();
  app.catch(() => {}); // reported below, once the password check has answered
  try {
    const session = await signIn(String(data.get("email") ?? ""), String(data.get("password") ?? ""));
    start(session, await app);
  } catch (err) {
    showError(err instanceof Error ? err.message : String(err));
    setBusy(false);
  }
});

readSession().then(
  async (s) => {
    if (!s) return showLogin();
    start(s, await loadApp());
  },
  (e: unknown) => {
    status.className = "banner banner-error";
    status.textContent = `The console could not reach svc: ${e instanceof Error ? e.message : String(e)}`;
  },
);
