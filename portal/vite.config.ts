/// <reference types="vitest/config" />
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `npm run dev` proxies the API of `make up` (port 8787), so the session cookie stays
// same-origin as in production, where cairn-api serves the built files itself.
export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false },
  server: { proxy: { "/v1": "http://127.0.0.1:8787" } },
  // Unit tests only: e2e/ is Playwright's, run against the real stack.
  test: { include: ["src/**/*.test.ts"] },
});
