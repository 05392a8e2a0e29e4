import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { ApiError, setCsrf, whenSignedOut } from "./api/client";
import { keys } from "./api/keys";
import { Router } from "./router";
import "./styles.css";

const client = new QueryClient({
  defaultOptions: {
    queries: {
      // A refused request (4xx) will be refused again; a lost connection may not be.
      retry: (count, error) => !(error instanceof ApiError && error.status >= 400 && error.status < 500) && count < 2,
      refetchOnWindowFocus: true,
    },
  },
});

whenSignedOut(() => {
  setCsrf(null);
  client.setQueryData(keys.session, null);
});

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={client}>
        <Router>
          <App />
        </Router>
      </QueryClientProvider>
    </StrictMode>,
  );
}
