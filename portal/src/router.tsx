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

export function Link({ to, children, className }: { to: string; children: ReactNode; className?: string }) {
  const { go, path } = useRoute();
  const active = path === to || (to !== "/" && path.startsWith(to));
  return (
    <a
      href={to}
      className={[className, active ? "active" : ""].filter(Boolean).join(" ")}
      aria-current={active ? "page" : undefined}
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
