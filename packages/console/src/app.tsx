import { StrictMode, Suspense } from "react";
import { createRoot, type Root } from "react-dom/client";
import { fromChunk, loadShell } from "./chunks.ts";
import { type ConsoleSession, signOut, whenSignedOut } from "./session-api.ts";

export { preloadFor } from "./chunks.ts";

/** Everything past sign-in, in chunks of its own (shell.tsx); boot.ts loads this file on sign-in. */
const SignedIn = fromChunk(loadShell, (m) => m.default);

function Loading() {
  return <p className="muted loading">Loading the console…</p>;
}

let mounted: Root | undefined;

/**
 * Shows the signed-in console in `el` until the user signs out or the session ends (a call answers
 * unauthenticated); then it is unmounted, its query cache with it, and `onSignedOut` shows the sign-in
 * page again.
 */
export function mountConsole(el: HTMLElement, session: ConsoleSession, onSignedOut: () => void): void {
  mounted?.unmount();
  const root = createRoot(el);
  mounted = root;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    // Not from inside a render or an effect that is running: after the current task.
    setTimeout(() => {
      root.unmount();
      if (mounted === root) mounted = undefined;
      onSignedOut();
    });
  };
  whenSignedOut(end);
  const onSignOut = async () => {
    await signOut().catch(() => {});
    end();
  };
  root.render(
    <StrictMode>
      <Suspense fallback={<Loading />}>
        <SignedIn session={session} onSignOut={onSignOut} />
      </Suspense>
    </StrictMode>,
  );
}
