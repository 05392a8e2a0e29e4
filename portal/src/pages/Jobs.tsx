import { JobList } from "../components/JobList";

export function Jobs() {
  return (
    <section>
      <header className="page-head">
        <h2>Jobs</h2>
      </header>
      <JobList />
    </section>
  );
}
