// Client-side routes on the History API: the API serves index.html for any path that is
// not its own, so a reload or a shared link opens the same screen.
import { createContext, useContext, useEffect, useState, type ReactNode } from "react";

const RouteContext = createContext<{ path: string; go: (to: string) => void }>({
  path: "/",
  go: () => undefined,
});

export function Router({ children }: { children: ReactNode }) {
  const [path, setPath] = useState(window.location.pathname + window.location.search);
  useEffect(() => {
    const onPop = () => setPath(window.location.pathname + window.location.search);
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, []);
  const go = (to: string) => {
    window.history.pushState(null, "", to);
    setPath(to);
  };
  return <RouteContext.Provider value={{ path, go }}>{children}</RouteContext.Provider>;
}

export function useRoute() {
  return useContext(RouteContext);
}

type LinkProps = { to: string; children: ReactNode; className?: string; exact?: boolean; label?: string };

/** A link to a screen of the portal; `exact`: current only at that very address (a
 * directory's crumb is not current below it, as a section's nav link is). */
export function Link({ to, children, className, exact, label }: LinkProps) {
  const { go, path } = useRoute();
  const active = path === to || (!exact && to !== "/" && path.startsWith(to));
  return (
    <a
      href={to}
      className={[className, active ? "active" : ""].filter(Boolean).join(" ")}
      aria-current={active ? "page" : undefined}
      aria-label={label}
      onClick={(event) => {
        if (event.metaKey || event.ctrlKey || event.shiftKey) return;
        event.preventDefault();
        go(to);
      }}
    >
      {children}
    </a>
  );
}

/** What the API lets a browser download: its file routes, on the portal's own origin. */
const DOWNLOADS = /^\/v1\/restore-points\/[^/?#]+\/files\/(content|archive)\?/;

/** A plain link to one of the API's download routes (built by files.ts from a path the
 * API listed): the browser streams the answer to disk itself, with the session cookie, so
 * a file of any size never passes through the page's memory. Anything else is not made a
 * link at all. */
export function Download({ to, children, label }: { to: string; children: ReactNode; label?: string }) {
  if (!DOWNLOADS.test(to)) return <span>{children}</span>;
  return (
    <a href={to} download aria-label={label} className="download">
      {children}
    </a>
  );
}
