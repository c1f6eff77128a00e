#!/usr/bin/env python3
"""Writes the seed corpora (fuzz/corpus/<target>/seed-*) from the repository's
examples: the capability manifests in examples/manifests, their schemas with
sample arguments and results, the contract's interaction shapes and message
requests. Rerun after changing an example; libFuzzer adds its finds next to
these (only the seeds are committed, see README.md)."""
import json, pathlib

root = pathlib.Path(__file__).resolve().parent.parent
corpus = root / "fuzz" / "corpus"

def put(target, name, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data if isinstance(data, bytes) else data.encode())

def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)

def sample(schema):
    """A value of the schema's shape, plus an undeclared member to prune."""
    t = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if t == "object":
        v = {k: sample(s) for k, s in schema.get("properties", {}).items()}
        v["undeclared"] = {"x": [1, 2]}
        return v
    if t == "array":
        return [sample(schema.get("items", {}))] * 2
    if t == "string":
        return "A-1"
    if t == "integer":
        return 3
    if t == "number":
        return 2.5
    if t == "boolean":
        return True
    return None

for manifest in sorted((root / "examples" / "manifests").glob("*.json")):
    doc = json.loads(manifest.read_text())
    for cap in doc.get("capabilities", []):
        name = f"{manifest.stem}-{cap['name']}"
        put("check_definition", name, json.dumps(cap, indent=1))
        inp, out = cap.get("input_schema"), cap.get("output_schema")
        if inp:
            args = {k: v for k, v in sample(inp).items() if k != "undeclared"}
            put("validate_arguments", name, compact(inp) + "\0" + compact(args))
            put("validate_arguments", name + "-extra", compact(inp) + "\0" + compact(sample(inp)))
        if out:
            put("prune_output", name, compact(out) + "\0" + compact(sample(out)))

interactions = {
    "confirm": {"type": "confirm_operation", "operation": "cancel_order", "operation_ref": "op_7f3a",
                "expires_at": "2026-11-22T15:00:00Z",
                "preview": {"title": "Cancel order A-1", "fields": [{"label": "Order", "value": "A-1"}]}},
    "selection": {"type": "selection", "operation": "cancel_order", "selection_ref": "sel_1",
                  "expires_at": "2026-11-22T15:00:00+01:00", "title": "Which order?",
                  "options": [{"option_ref": "o1", "label": "A-1"},
                              {"option_ref": "o2", "label": "A-2", "description": "yesterday"}]},
    "not-found": {"type": "not_found"},
}
for name, v in interactions.items():
    put("shape_interaction", name, compact(v))

messages = {
    "minimal": {"message": {"type": "text", "body": "hola"}},
    "full": {"user_id": "u-1", "conversation_id": "conv_1", "message": {"type": "text", "body": "¿dónde está A-1?"},
             "metadata": {"channel": "web", "n": 1, "vip": True, "none": None}},
    "inline-image": {"message": {"type": "text", "body": "x"}, "image": "iVBORw0KGgo="},
}
for name, v in messages.items():
    put("message_json", name, compact(v))

def form(parts, boundary="XyZ"):
    body = b""
    for name, ctype, data in parts:
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"x\"\r\n"
                 f"Content-Type: {ctype}\r\n\r\n").encode() + data + b"\r\n"
    return body + f"--{boundary}--\r\n".encode()

png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01"
jpeg = b"\xff\xd8\xff\xe0\0\x10JFIF"
payload = compact(messages["minimal"]).encode()
for name, chunk, parts in [
    ("payload-only", 255, [("payload", "application/json", payload)]),
    ("payload-png", 7, [("payload", "application/json; charset=utf-8", payload), ("image", "image/png", png)]),
    ("payload-jpeg", 0, [("payload", "application/json", payload), ("image", "image/jpeg", jpeg)]),
    ("two-images", 31, [("payload", "application/json", payload), ("image", "image/png", png), ("image", "image/png", png)]),
]:
    put("message_multipart", name, bytes([chunk]) + b"multipart/form-data; boundary=XyZ\n" + form(parts))

meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
rpc = {
    "initialize": {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "c", "version": "1"}}},
    "initialized": {"jsonrpc": "2.0", "method": "notifications/initialized"},
    "discover": {"jsonrpc": "2.0", "id": "d-1", "method": "server/discover", "params": {"_meta": meta}},
    "list": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
    "call": {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "order_status", "arguments": {"order": "A-1001"}, "_meta": meta}},
    "batch": [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
    "response": {"jsonrpc": "2.0", "id": 1, "result": {}},
}
for name, v in rpc.items():
    put("mcp_jsonrpc", name, compact(v))
