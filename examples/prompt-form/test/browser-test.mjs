// The prompt-form example in headless Chromium against the real
// `warden serve`, with the fake widget, verifier and model (fakes.mjs) on
// loopback. Five cases, a screenshot each. Run by scripts/browser-test.sh:
//   WARDEN_BIN   the warden binary
//   BROWSER_TEST_OUT  where screenshots and logs go
//   CHROMIUM     the browser (default /usr/bin/chromium)
import { chromium } from "playwright-core";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, createWriteStream, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakes, SECRET } from "./fakes.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const WARDEN = process.env.WARDEN_BIN;
const OUT = process.env.BROWSER_TEST_OUT;
if (!WARDEN || !OUT) throw new Error("set WARDEN_BIN and BROWSER_TEST_OUT");
mkdirSync(OUT, { recursive: true });
const work = mkdtempSync(join(tmpdir(), "warden-browser-"));
const children = [];
process.on("exit", () => children.forEach((c) => c.kill("SIGKILL")));

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

function start(command, args, env, name) {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  const log = createWriteStream(join(OUT, `${name}.log`));
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  return child;
}

async function pageServer(name, bundles) {
  const child = start("node", [join(here, "..", "server.mjs")], {
    PORT: "0", PROMPT_FORM_BUNDLES: bundles, PROMPT_FORM_WIDGET_URL: `http://127.0.0.1:${fakes.port}/widget.js`,
  }, name);
  return new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(d.toString());
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`${name} exited ${code}`)));
  });
}

const fakes = await startFakes({ title: "Boots for every trail" });
const bundles = join(work, "bundles");
mkdirSync(bundles);
const pageA = await pageServer("page-a", bundles);
const pageB = await pageServer("page-b", bundles);
const wardenPort = await freePort();
const base = `http://127.0.0.1:${wardenPort}`;
const env = {
  WARDEN_DATABASE_URL: `sqlite://${join(work, "warden.db")}`,
  WARDEN_MASTER_KEY: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
  WARDEN_ENVIRONMENT: "browser-test",
  WARDEN_LOG: "warn",
  WARDEN_GUEST_CACHE_DIR: join(work, "guest-cache"),
  WARDEN_PUBLIC_BASE_URL: base,
  WARDEN_CHALLENGE_SITEKEY: "test-sitekey",
};
const admin = (...args) =>
  JSON.parse(execFileSync(WARDEN, ["admin", ...args], { env: { ...process.env, ...env } }).toString());

admin("account", "create", "forms");
const manifest = {
  version: 1,
  name: "Title helper",
  origin: pageA,
  data_classification: "non_sensitive",
  prompt: "Write a product title for the topic.",
  input_schema: {
    type: "object", additionalProperties: false, required: ["topic"],
    properties: { topic: { type: "string", minLength: 1, maxLength: 40, description: "Topic" } },
  },
  output_schema: {
    type: "object", additionalProperties: false, required: ["title"],
    properties: { title: { type: "string", maxLength: 80 } },
  },
};
writeFileSync(join(work, "manifest.json"), JSON.stringify(manifest));
const ids = {};
for (const name of ["success", "wrong_origin", "reuse", "burst", "disabled"]) {
  const bundle = admin("prompt-integration", "create", "--account", "forms", "--manifest", join(work, "manifest.json"));
  writeFileSync(join(bundles, `${name}.json`), JSON.stringify(bundle));
  ids[name] = bundle.id;
}
admin("prompt-integration", "disable", ids.disabled);

start(WARDEN, ["serve"], {
  ...env,
  WARDEN_LISTEN: `127.0.0.1:${wardenPort}`,
  WARDEN_CHALLENGE_VERIFY_URL: `http://127.0.0.1:${fakes.port}/siteverify`,
  WARDEN_CHALLENGE_SECRET: SECRET,
  WARDEN_INFERENCE_URL: `http://127.0.0.1:${fakes.port}/v1`,
  WARDEN_INFERENCE_MODEL: "fake-model",
}, "warden");
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`${base}/health`)).ok) break;
  } catch {}
  if (i > 300) throw new Error("warden serve did not come up");
  await new Promise((r) => setTimeout(r, 100));
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu"],
});
const failures = [];

async function scenario(name, origin, run) {
  const page = await browser.newPage();
  try {
    await page.goto(`${origin}/?bundle=${name}`);
    await page.fill("#field-topic", "trail boots");
    await run(page);
    console.log(`ok   ${name}`);
  } catch (err) {
    failures.push(name);
    console.log(`FAIL ${name}: ${err.message}`);
  } finally {
    await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
    await page.close();
  }
}

async function submit(page) {
  await page.waitForSelector("#submit:not([disabled])", { timeout: 10000 });
  await page.click("#submit");
  await page.waitForFunction(() => !/Sending/.test(document.getElementById("status").textContent), null, { timeout: 15000 });
  return { result: await page.textContent("#result"), error: await page.textContent("#error") };
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

await scenario("success", pageA, async (page) => {
  const { result, error } = await submit(page);
  expect(result.includes("Boots for every trail"), `data shown (result ${JSON.stringify(result)}, error ${JSON.stringify(error)})`);
});
await scenario("wrong_origin", pageB, async (page) => {
  const { result, error } = await submit(page);
  expect(result === "" && /NETWORK_ERROR/.test(error), `refused before the page could read anything (error ${JSON.stringify(error)})`);
});
await scenario("reuse", pageA, async (page) => {
  await page.evaluate(() => { window.__fakeWidgetReuse = true; });
  const first = await submit(page);
  expect(first.result.includes("Boots"), `first use succeeds (${JSON.stringify(first)})`);
  const again = await submit(page);
  expect(/CHALLENGE_INVALID/.test(again.error), `a reused token is refused (${JSON.stringify(again)})`);
});
await scenario("burst", pageA, async (page) => {
  for (let n = 0; n < 3; n++) {
    const ok = await submit(page);
    expect(ok.result.includes("Boots"), `request ${n + 1} succeeds (${JSON.stringify(ok)})`);
  }
  const fourth = await submit(page);
  expect(/RATE_LIMITED/.test(fourth.error) && /retry after \d+ s/.test(fourth.error), `the fourth is limited (${JSON.stringify(fourth)})`);
});
await scenario("disabled", pageA, async (page) => {
  const { error } = await submit(page);
  expect(/INTEGRATION_DISABLED/.test(error), `disabled shown (${JSON.stringify(error)})`);
});

await browser.close();
console.log(`screenshots: ${OUT}`);
if (failures.length) {
  console.log(`--- warden log ---\n${readFileSync(join(OUT, "warden.log"), "utf8")}`);
  process.exit(1);
}
process.exit(0);
