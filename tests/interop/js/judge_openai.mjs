// A client over the official `openai` npm package, judged by `python -m conformance serve`.
//
// Usage: node judge_openai.mjs <serve url> [flaw], or under judge (the URL in CONFORMANCE_URL):
//   python -m conformance judge --wire openai-chat -- node judge_openai.mjs [flaw]
// It asks serve what to run (GET /conformance/task) and runs it against serve's
// OpenAI Chat Completions wire:
//   - a backend scenario ("kind": "backend"): one chat.completions.create, whole or
//     streamed, its answer or its error classified as the contract's error kinds;
//   - an agent-loop stage ("kind": "loop"): a loop that sends the conversation, runs each
//     complete call through POST /conformance/tools/<name> and sends every result back
//     under its call id, until the model answers with text or the budget is spent.
// Then it reports how its run ended (POST /conformance/outcome), prints serve's verdict
// as JSON on stdout, and exits 0 (serve's exit status carries the verdict).
//
// A flaw makes it a deliberately broken client, for the judge to catch:
//   "run-twice": the loop runs every tool call twice;
//   "retry-quota": the backend keeps the SDK's default retries (2), so it sends a quota
//     error, which no retry can help, twice more.

import OpenAI from "openai";

// The URL as the first argument (a run of serve), else from the environment (a run of judge).
const args = process.argv.slice(2);
const url = args[0]?.startsWith("http") ? args.shift() : process.env.CONFORMANCE_URL;
const flaw = args[0] ?? "";

async function post(path, body) {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(`${path} answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer;
}

function client() {
  return new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: "test",
    maxRetries: flaw === "retry-quota" ? 2 : 0,
    timeout: 10000,
  });
}

// One request, whole or streamed, read into the same shape.
async function complete(openai, params, stream) {
  if (!stream) {
    const reply = await openai.chat.completions.create(params);
    const choice = reply.choices[0];
    return {
      content: choice.message.content ?? "",
      finish: choice.finish_reason,
      calls: (choice.message.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, text: c.function.arguments })),
      usage: reply.usage,
    };
  }
  const chunks = await openai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let content = "";
  let finish = null;
  let usage = null;
  const calls = [];
  for await (const chunk of chunks) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices ?? []) {
      content += choice.delta?.content ?? "";
      for (const piece of choice.delta?.tool_calls ?? []) {
        // Fragments belong to the call at their index; only the first carries id and name.
        const call = (calls[piece.index] ??= { id: "", name: "", text: "" });
        call.id ||= piece.id ?? "";
        call.name ||= piece.function?.name ?? "";
        call.text += piece.function?.arguments ?? "";
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { content, finish, calls: calls.filter(Boolean), usage };
}

function parsed(text) {
  try {
    const value = JSON.parse(text);
    if (value !== null && typeof value === "object" && !Array.isArray(value)) return value;
  } catch {
    // Not JSON: the tools refuse it as the text it is.
  }
  return text;
}

// The contract's error kinds from the SDK's APIError: by status, then by the body's code.
function classify(error) {
  const status = error.status;
  const code = error.code ?? error.error?.code;
  const header = (name) => (error.headers?.get ? error.headers.get(name) : error.headers?.[name]);
  const kinds = {
    rate_limit: ["LLM_RATE_LIMITED", true],
    quota: ["LLM_QUOTA_EXCEEDED", false],
    auth: ["LLM_AUTH_FAILED", false],
    overloaded: ["LLM_OVERLOADED", true],
    server_error: ["LLM_SERVER_ERROR", true],
    context_overflow: ["LLM_CONTEXT_LENGTH_EXCEEDED", false],
  };
  let kind = "server_error";
  if (status === 429) kind = code === "insufficient_quota" ? "quota" : "rate_limit";
  else if (status === 401 || status === 403) kind = "auth";
  else if (status === 400 && code === "context_length_exceeded") kind = "context_overflow";
  else if (status === 503 || status === 529) kind = "overloaded";
  let retryAfter = null;
  if (kind === "rate_limit") {
    const ms = header("retry-after-ms");
    const seconds = header("retry-after");
    if (ms) retryAfter = Number(ms) / 1000;
    else if (seconds) retryAfter = Number(seconds);
  }
  const [contractCode, retryable] = kinds[kind];
  return {
    name: error.constructor?.name ?? "Error",
    message: error.message,
    kind,
    code: contractCode,
    retryable,
    retry_after: retryAfter,
    status: status ?? null,
    details: { kind },
  };
}

async function backend(task) {
  const params = {
    model: task.model,
    max_tokens: task.max_tokens,
    messages: [
      { role: "system", content: task.system },
      { role: "user", content: task.question },
    ],
    tools: task.tools.map((t) => ({ type: "function", function: t })),
  };
  try {
    const got = await complete(client(), params, task.stream);
    return {
      content: got.content,
      finish_reason: got.finish,
      tool_calls: got.calls.map((c) => ({ id: c.id, name: c.name, arguments: parsed(c.text) })),
      usage: got.usage && {
        input_tokens: got.usage.prompt_tokens,
        output_tokens: got.usage.completion_tokens,
        total_tokens: got.usage.total_tokens,
      },
      error: null,
    };
  } catch (error) {
    return { error: classify(error) };
  }
}

async function loop(task) {
  const openai = client();
  const messages = [{ role: "user", content: task.prompt }];
  const tools = task.tools.map((t) => ({ type: "function", function: t }));
  const forced = task.tool_choice;
  for (let sent = 0; sent < task.max_requests; sent++) {
    const params = { model: task.model, messages, tools };
    // Force the tool on the first request only, so the model can answer once it has the result.
    if (forced && sent === 0) {
      params.tool_choice = forced.mode === "tool" ? { type: "function", function: { name: forced.name } } : forced.mode;
    }
    let got;
    try {
      got = await complete(openai, params, task.stream);
    } catch (error) {
      return { error: { name: error.constructor?.name ?? "Error", message: error.message, status: error.status ?? null } };
    }
    if (got.calls.length === 0) return { text: got.content, finish_reason: got.finish, stopped: "done" };
    messages.push({
      role: "assistant",
      content: got.content || null,
      tool_calls: got.calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.text } })),
    });
    for (const call of got.calls) {
      const runs = flaw === "run-twice" ? 2 : 1;
      let result;
      for (let i = 0; i < runs; i++) {
        result = await post(`/conformance/tools/${encodeURIComponent(call.name)}`, {
          call_id: call.id,
          arguments: parsed(call.text),
        });
      }
      messages.push({ role: "tool", tool_call_id: call.id, content: result.content });
    }
  }
  return { text: "", finish_reason: "tool_calls", stopped: "budget" };
}

const task = await (await fetch(`${url}/conformance/task`)).json();
const outcome = task.kind === "loop" ? await loop(task) : await backend(task);
process.stdout.write(JSON.stringify(await post("/conformance/outcome", outcome)) + "\n");
