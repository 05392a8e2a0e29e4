// After Vite's build: the API reference's files into dist/api-docs/ (cairn-api serves /docs
// from there): Swagger UI from its npm package, its licence, and our initializer. /docs
// then loads no script from another origin.
import { copyFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "dist", "api-docs");
const swagger = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
mkdirSync(out, { recursive: true });
for (const file of ["swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE"]) {
  copyFileSync(join(swagger, file), join(out, file));
}
copyFileSync(join(here, "init.js"), join(out, "init.js"));
