// A small OpenAI-compatible chat-completions server over a local GGUF model, for the
// real-model clean-up test (tests/cleanup_real_model.rs, issue #27). It is test
// infrastructure, not part of the app: the app never links llama.cpp (two copies of ggml
// beside whisper.cpp would collide); an on-device clean-up engine is a process like this
// one, spoken to over the same protocol as any model server.
//
//   node server.mjs --model PATH.gguf [--port N]
//
// Prints `listening <port>` on stdout once the model is loaded, and `served <ms> <tokens>`
// after each completion (the time the model took inside the server and the tokens it
// produced: the baseline the clean-up bench sets Persyk's latency beside). Serves
//   GET  /v1/models            → the one model
//   POST /v1/chat/completions  → non-streaming completions; temperature and max_tokens
//                                honoured; finish_reason "length" when max_tokens cut it.
// Requests are answered one at a time (one context, CPU only). Other fields, such as
// `reasoning_effort`, are ignored, as llama-server does; so is `response_format` (a JSON
// schema turned into a grammar made this model loop to its token limit, 37–84 s a reply on
// two cores), so the test model exercises Persyk's plain-reply path.
import http from "node:http";
import path from "node:path";
import { getLlama, LlamaChatSession } from "node-llama-cpp";

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const modelPath = arg("--model");
const port = Number(arg("--port", "0"));
if (!modelPath) {
  console.error("usage: node server.mjs --model PATH.gguf [--port N]");
  process.exit(2);
}

const llama = await getLlama({ gpu: false, build: "never", progressLogs: false });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize: 2048, threads: 2 });
const sequence = context.getSequence();
const modelName = path.basename(modelPath);

let queue = Promise.resolve();

function history(messages) {
  const items = [];
  for (const m of messages) {
    const text = typeof m.content === "string" ? m.content : "";
    if (m.role === "system") items.push({ type: "system", text });
    else if (m.role === "user") items.push({ type: "user", text });
    else if (m.role === "assistant") items.push({ type: "model", response: [text] });
  }
  return items;
}

async function complete(body) {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const last = messages[messages.length - 1];
  if (!last || last.role !== "user" || typeof last.content !== "string") {
    return { status: 400, json: { error: { message: "the last message must be from the user" } } };
  }
  const started = Date.now();
  sequence.clearHistory();
  const session = new LlamaChatSession({ contextSequence: sequence, autoDisposeSequence: false });
  try {
    session.setChatHistory(history(messages.slice(0, -1)));
    const { responseText, stopReason } = await session.promptWithMeta(last.content, {
      temperature: typeof body.temperature === "number" ? body.temperature : 0,
      maxTokens: typeof body.max_tokens === "number" ? body.max_tokens : 256,
    });
    const tokens = model.tokenize(responseText).length;
    const promptTokens = model.tokenize(messages.map((m) => String(m.content ?? "")).join("\n")).length;
    console.log(`served ${Date.now() - started} ${tokens}`);
    return {
      status: 200,
      json: {
        id: `chatcmpl-${started}`,
        object: "chat.completion",
        created: Math.floor(started / 1000),
        model: modelName,
        choices: [{
          index: 0,
          message: { role: "assistant", content: responseText },
          finish_reason: stopReason === "maxTokens" ? "length" : "stop",
        }],
        usage: { prompt_tokens: promptTokens, completion_tokens: tokens, total_tokens: promptTokens + tokens },
      },
    };
  } finally {
    session.dispose({ disposeSequence: false });
  }
}

const server = http.createServer((req, res) => {
  const send = (status, json) => {
    const data = JSON.stringify(json);
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) });
    res.end(data);
  };
  if (req.method === "GET" && req.url === "/v1/models") {
    send(200, { object: "list", data: [{ id: modelName, object: "model" }] });
    return;
  }
  if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
    send(404, { error: { message: "not found" } });
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      send(400, { error: { message: "malformed JSON" } });
      return;
    }
    queue = queue
      .then(() => complete(body))
      .then(({ status, json }) => send(status, json))
      .catch((e) => send(500, { error: { message: String(e && e.message || e) } }));
  });
});

server.listen(port, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
