import { createContext, useContext } from "react";
import type { ConsoleSession } from "./session-api.ts";

export interface SessionContextValue {
  session: ConsoleSession;
  signOut: () => Promise<void>;
}

export const SessionContext = createContext<SessionContextValue | undefined>(undefined);

export function useSession(): SessionContextValue {
  const s = useContext(SessionContext);
  if (!s) throw new Error("useSession outside a signed-in page");
  return s;
}

/** The project the page is about: `projects/<id>` from the URL, and the user's role in it. */
export interface ProjectContextValue {
  id: string;
  name: string;
  role: string;
  /** Owner or editor: may change rules, keys and destinations. */
  canWrite: boolean;
}

export const ProjectContext = createContext<ProjectContextValue | undefined>(undefined);

export function useProject(): ProjectContextValue {
  const p = useContext(ProjectContext);
  if (!p) throw new Error("useProject outside a project page");
  return p;
}
