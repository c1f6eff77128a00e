// Renders a form from a prompt integration's public bundle (contract 2.13),
// gets a single-use token from the challenge widget (rendered with the
// bundle's sitekey and action), posts {input, challenge_token} to the
// bundle's endpoint from this page's origin, and shows `data` or the error.
const $ = (id) => document.getElementById(id);
const bundleName = new URLSearchParams(location.search).get("bundle") || "bundle";

const config = await (await fetch("/config.json")).json();
const bundle = await (await fetch(`/bundle.json?bundle=${encodeURIComponent(bundleName)}`)).json();
$("title").textContent = bundle.id;
renderFields($("fields"), bundle.input_schema, []);

// The widget: Turnstile's explicit-render API (or a stand-in with the same
// surface). Each token is single use: after every attempt the widget is
// reset for a new one.
await loadScript(config.widget_url);
let token = null;
const widget = window.turnstile.render($("challenge"), {
  sitekey: bundle.challenge_sitekey,
  action: bundle.challenge_action,
  callback: (t) => {
    token = t;
    $("submit").disabled = false;
  },
});

$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("error").textContent = "";
  $("result").replaceChildren();
  $("status").textContent = "Sending…";
  const body = { input: readFields(bundle.input_schema, []), challenge_token: token };
  token = null;
  $("submit").disabled = true;
  try {
    const response = await fetch(bundle.endpoint, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await response.json();
    if (response.ok) {
      $("status").textContent = "Done.";
      showData($("result"), answer.data);
    } else {
      const retry = response.headers.get("retry-after");
      $("status").textContent = `Refused (${response.status}).`;
      $("error").textContent =
        `${answer.error.code}: ${answer.error.message}` + (retry ? ` (retry after ${retry} s)` : "");
    }
  } catch (err) {
    // A refused preflight (another origin) surfaces here: the browser
    // withholds the answer from this page.
    $("status").textContent = "Refused.";
    $("error").textContent = `NETWORK_ERROR: the service did not let this page read its answer (${err.message})`;
  } finally {
    window.turnstile.reset(widget);
  }
});

function renderFields(container, schema, path) {
  for (const [name, property] of Object.entries(schema.properties || {})) {
    const id = ["field", ...path, name].join("-");
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = property.description || name;
    if (property.type === "object") {
      const group = document.createElement("fieldset");
      const legend = document.createElement("legend");
      legend.textContent = property.description || name;
      group.append(legend);
      renderFields(group, property, [...path, name]);
      container.append(group);
      continue;
    }
    let input;
    if (Array.isArray(property.enum)) {
      input = document.createElement("select");
      for (const value of property.enum) input.append(new Option(value, value));
    } else if (property.type === "boolean") {
      input = document.createElement("input");
      input.type = "checkbox";
    } else if (property.type === "integer" || property.type === "number") {
      input = document.createElement("input");
      input.type = "number";
      if (property.minimum !== undefined) input.min = property.minimum;
      if (property.maximum !== undefined) input.max = property.maximum;
      input.step = property.type === "integer" ? "1" : "any";
    } else if (property.type === "array") {
      // One value per line.
      input = document.createElement("textarea");
    } else {
      input = document.createElement("input");
      input.type = "text";
      if (property.maxLength !== undefined) input.maxLength = property.maxLength;
    }
    input.id = id;
    input.required = (schema.required || []).includes(name);
    container.append(label, input);
  }
}

function readFields(schema, path) {
  const out = {};
  for (const [name, property] of Object.entries(schema.properties || {})) {
    if (property.type === "object") {
      out[name] = readFields(property, [...path, name]);
      continue;
    }
    const input = document.getElementById(["field", ...path, name].join("-"));
    if (property.type === "boolean") out[name] = input.checked;
    else if (property.type === "integer" || property.type === "number") {
      if (input.value !== "") out[name] = Number(input.value);
    } else if (property.type === "array") {
      out[name] = input.value.split("\n").map((s) => s.trim()).filter(Boolean);
    } else if (input.value !== "" || (schema.required || []).includes(name)) {
      out[name] = input.value;
    }
  }
  return out;
}

function showData(list, data) {
  for (const [key, value] of Object.entries(data)) {
    const dt = document.createElement("dt");
    dt.textContent = key;
    const dd = document.createElement("dd");
    dd.textContent = typeof value === "string" ? value : JSON.stringify(value);
    list.append(dt, dd);
  }
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`cannot load ${src}`));
    document.head.append(script);
  });
}
