import { lazy, Suspense, useCallback, useEffect, useState } from "react";
import { loadShell, preloadFor } from "./chunks.ts";
import { LoginPage } from "./pages/login.tsx";
import { type ConsoleSession, readSession, signOut, whenSignedOut } from "./session-api.ts";

/** Everything past sign-in, in chunks of its own (shell.tsx): the sign-in page loads only this file's. */
const SignedIn = lazy(loadShell);

function Loading() {
  return <p className="muted loading">Loading the console…</p>;
}

export function App() {
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const [error, setError] = useState<string>();

  useEffect(() => {
    readSession()
      .then((s) => {
        if (s) preloadFor(window.location.pathname);
        setSession(s ?? null);
      })
      .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)));
    whenSignedOut(() => setSession(null));
  }, []);

  const onSignOut = useCallback(async () => {
    await signOut().catch(() => {});
    setSession(null);
  }, []);

  if (error) return <p className="banner banner-error">The console could not reach svc: {error}</p>;
  if (session === undefined) return <Loading />;
  if (session === null)
    return <LoginPage onSigningIn={() => preloadFor(window.location.pathname)} onSignedIn={setSession} />;
  return (
    <Suspense fallback={<Loading />}>
      <SignedIn session={session} onSignOut={onSignOut} />
    </Suspense>
  );
}
