// Stand-ins for the three third parties of a prompt integration, on
// loopback, speaking their real protocols:
// - GET  /widget.js           a challenge widget with Turnstile's explicit-render
//                             surface (turnstile.render / reset); its tokens are
//                             `ok~HOST~ACTION~N`, HOST being the page's host;
//                             window.__fakeWidgetReuse = true makes it hand out
//                             the previous token again;
// - POST /siteverify          a siteverify endpoint (form: secret, response,
//                             remoteip, idempotency_key) that reports what the
//                             token says, truthfully (single use is Warden's job);
// - POST /v1/chat/completions an OpenAI-compatible model answering JSON content.
import { createServer } from "node:http";

export const SECRET = "0x-browser-test-secret";

const widget = `
(() => {
  let n = 0;
  const widgets = [];
  function mint(w) {
    if (!(window.__fakeWidgetReuse && w.last)) {
      w.last = "ok~" + location.hostname + "~" + w.options.action + "~" + Date.now() + "-" + (n++);
    }
    setTimeout(() => w.options.callback(w.last), 10);
  }
  window.turnstile = {
    render(container, options) {
      const w = { options, last: null };
      widgets.push(w);
      container.textContent = "challenge passed (test widget)";
      mint(w);
      return widgets.length - 1;
    },
    reset(id) { mint(widgets[id]); },
  };
})();
`;

export function startFakes({ title = "Boots for every trail" } = {}) {
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString("utf8");
    const url = new URL(req.url, "http://localhost");
    if (req.method === "GET" && url.pathname === "/widget.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      return res.end(widget);
    }
    if (req.method === "POST" && url.pathname === "/siteverify") {
      const form = new URLSearchParams(body);
      const [verdict, host, action] = (form.get("response") || "").split("~");
      const ok = form.get("secret") === SECRET && verdict === "ok";
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify(ok
        ? { success: true, hostname: host, action, challenge_ts: new Date().toISOString(), "error-codes": [] }
        : { success: false, "error-codes": ["invalid-input-response"] }));
    }
    if (req.method === "POST" && url.pathname === "/v1/chat/completions") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({
        choices: [{ message: { role: "assistant", content: JSON.stringify({ title }) } }],
      }));
    }
    res.writeHead(404).end();
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve({ server, port: server.address().port })));
}
