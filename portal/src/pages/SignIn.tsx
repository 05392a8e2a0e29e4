import { useState, type FormEvent } from "react";
import { useSignedOutNote, useSignIn, useSignInOptions } from "../api/session";
import { ErrorNote } from "../components/ErrorNote";

/** Keystone's domain, user name and password, as OpenStack's own consoles ask; under
 * noauth (development) only the project. */
export function SignIn() {
  const options = useSignInOptions();
  const signIn = useSignIn();
  const signedOutNote = useSignedOutNote();
  const noauth = options.data?.auth_strategy === "noauth";
  const [domain, setDomain] = useState("Default");
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [project, setProject] = useState("");

  const submit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate(
      noauth
        ? { project_id: project }
        : { domain, username, password, project_id: project || undefined },
    );
  };

  if (!options.data) return <ErrorNote error={options.error} />;
  return (
    <main className="signin">
      <form onSubmit={submit} aria-label="Sign in">
        <h1>Cairn</h1>
        <p className="muted">Backups of your volumes</p>
        {signedOutNote && <p role="status">{signedOutNote}</p>}
        {!noauth && (
          <>
            <label>
              Domain
              <input value={domain} onChange={(e) => setDomain(e.target.value)} required />
            </label>
            <label>
              User name
              <input
                value={username}
                onChange={(e) => setUsername(e.target.value)}
                autoComplete="username"
                required
              />
            </label>
            <label>
              Password
              <input
                type="password"
                value={password}
                onChange={(e) => setPassword(e.target.value)}
                autoComplete="current-password"
                required
              />
            </label>
          </>
        )}
        <label>
          Project {noauth ? "" : <span className="muted">(optional)</span>}
          <input value={project} onChange={(e) => setProject(e.target.value)} required={noauth} />
        </label>
        <button type="submit" className="primary" disabled={signIn.isPending}>
          {signIn.isPending ? "Signing in…" : "Sign in"}
        </button>
        <ErrorNote error={signIn.error} />
      </form>
    </main>
  );
}
