// The example form's own origin: serves the static page (public/), the
// integration's public bundle(s) and the page's configuration. No
// dependencies: `node server.mjs`.
//
//   PORT=8090                      port to listen on (0: any; the port is printed)
//   PROMPT_FORM_BUNDLES=bundles/   directory of bundles, one JSON file each, as
//                                  `warden admin prompt-integration create` prints
//                                  them; the page loads ?bundle=NAME (default
//                                  "bundle", i.e. bundles/bundle.json)
//   PROMPT_FORM_WIDGET_URL=...     the challenge widget script (default:
//                                  Cloudflare Turnstile's)
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const publicDir = join(here, "public");
const bundles = resolve(process.env.PROMPT_FORM_BUNDLES || join(here, "bundles"));
const widgetUrl =
  process.env.PROMPT_FORM_WIDGET_URL ||
  "https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit";
const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css" };

const server = createServer(async (req, res) => {
  const url = new URL(req.url, "http://localhost");
  try {
    if (url.pathname === "/config.json") {
      return send(res, 200, "application/json", JSON.stringify({ widget_url: widgetUrl }));
    }
    if (url.pathname === "/bundle.json") {
      const name = url.searchParams.get("bundle") || "bundle";
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) return send(res, 404, "text/plain", "no such bundle");
      const text = await readFile(join(bundles, `${name}.json`), "utf8");
      return send(res, 200, "application/json", text);
    }
    const file = url.pathname === "/" ? "index.html" : url.pathname.slice(1);
    if (!/^[A-Za-z0-9_.-]+$/.test(file)) return send(res, 404, "text/plain", "not found");
    const body = await readFile(join(publicDir, file));
    return send(res, 200, types[extname(file)] || "application/octet-stream", body);
  } catch {
    return send(res, 404, "text/plain", "not found");
  }
});

function send(res, status, type, body) {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
  res.end(body);
}

server.listen(Number(process.env.PORT ?? 8090), "127.0.0.1", () => {
  console.log(`prompt-form listening on http://127.0.0.1:${server.address().port}`);
});
