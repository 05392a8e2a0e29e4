/** "Show more" of one list; `what` names the list for a screen reader (a page may hold two). */
export function ShowMore({ pages, what }: { pages: { hasNextPage: boolean; isFetchingNextPage: boolean; fetchNextPage: () => unknown }; what: string }) {
  if (!pages.hasNextPage) return null;
  return (
    <button
      type="button"
      className="show-more"
      aria-label={`Show more ${what}`}
      disabled={pages.isFetchingNextPage}
      onClick={() => pages.fetchNextPage()}
    >
      {pages.isFetchingNextPage ? "Loading…" : "Show more"}
    </button>
  );
}
