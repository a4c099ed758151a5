import { Suspense, useCallback, useEffect, useState } from "react";
import { fromChunk, loadShell, preloadFor } from "./chunks.ts";
import { LoginPage } from "./pages/login.tsx";
import { type ConsoleSession, readSession, signOut, whenSignedOut } from "./session-api.ts";

/** Everything past sign-in, in chunks of its own (shell.tsx): the sign-in page loads only this file's. */
const SignedIn = fromChunk(loadShell, (m) => m.default);

function Loading() {
  return <p className="muted loading">Loading the console…</p>;
}

export function App() {
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const [error, setError] = useState<string>();

  useEffect(() => {
    readSession()
      .then(async (s) => {
        if (s) await preloadFor(window.location.pathname);
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
    return (
      <LoginPage
        onSigningIn={() => void preloadFor(window.location.pathname)}
        // The chunks were fetched alongside the password check: wait for them (not for a Suspense
        // fallback) before showing the signed-in console.
        onSignedIn={async (s) => {
          await preloadFor(window.location.pathname);
          setSession(s);
        }}
      />
    );
  return (
    <Suspense fallback={<Loading />}>
      <SignedIn session={session} onSignOut={onSignOut} />
    </Suspense>
  );
}
