import { useSession, useSignOut, useSwitchProject } from "./api/session";
import { ErrorNote } from "./components/ErrorNote";
import { JobDetail } from "./pages/JobDetail";
import { FileBrowser } from "./pages/FileBrowser";
import { Jobs } from "./pages/Jobs";
import { Overview } from "./pages/Overview";
import { Plans } from "./pages/Plans";
import { Usage } from "./pages/Usage";
import { VolumeDetail } from "./pages/VolumeDetail";
import { SignIn } from "./pages/SignIn";
import { Volumes } from "./pages/Volumes";
import { Webhooks } from "./pages/Webhooks";
import { Link, useRoute } from "./router";

export function App() {
  const session = useSession();
  if (session.isLoading) return <p className="muted center">Loading…</p>;
  if (session.error) return <ErrorNote error={session.error} />;
  if (!session.data) return <SignIn />;
  return <Shell />;
}

function Shell() {
  const { data: session } = useSession();
  const signOut = useSignOut();
  const switchProject = useSwitchProject();
  const { path } = useRoute();
  if (!session) return null;
  const route = path.split("?")[0] ?? "/";
  return (
    <div className="shell">
      <nav className="top" aria-label="Main">
        <span className="brand">Cairn</span>
        <Link to="/">Overview</Link>
        <Link to="/volumes">Volumes</Link>
        <Link to="/plans">Plans</Link>
        <Link to="/jobs">Jobs</Link>
        <Link to="/webhooks">Webhooks</Link>
        <Link to="/usage">Usage</Link>
        <span className="spacer" />
        {session.projects.length > 1 ? (
          <select
            aria-label="Project"
            value={session.project_id}
            disabled={switchProject.isPending}
            onChange={(e) => switchProject.mutate(e.target.value)}
          >
            {session.projects.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        ) : (
          <span className="muted">
            {session.projects[0]?.name ?? session.project_id}
          </span>
        )}
        <span className="user" title={session.roles.join(", ")}>
          {session.user_name}
        </span>
        <button type="button" onClick={() => signOut.mutate()} disabled={signOut.isPending}>
          Sign out
        </button>
      </nav>
      <ErrorNote error={switchProject.error ?? signOut.error} />
      <main>
        <Page route={route} />
      </main>
    </div>
  );
}

function Page({ route }: { route: string }) {
  const volume = /^\/volumes\/([^/]+)$/.exec(route);
  if (volume?.[1]) return <VolumeDetail volumeId={decodeURIComponent(volume[1])} />;
  const files = /^\/restore-points\/([^/]+)\/files$/.exec(route);
  if (files?.[1]) return <FileBrowser pointId={decodeURIComponent(files[1])} />;
  const job = /^\/jobs\/([^/]+)$/.exec(route);
  if (job?.[1]) return <JobDetail jobId={decodeURIComponent(job[1])} />;
  switch (route) {
    case "/":
      return <Overview />;
    case "/volumes":
      return <Volumes />;
    case "/plans":
      return <Plans />;
    case "/jobs":
      return <Jobs />;
    case "/webhooks":
      return <Webhooks />;
    case "/usage":
      return <Usage />;
    default:
      return <p>No such page: {route}</p>;
  }
}
