// The Vercel AI SDK's own agent loop (`ai` with `@ai-sdk/openai` or `@ai-sdk/anthropic`),
// judged by `python -m conformance serve --stage`.
//
// Usage: node judge_ai_sdk.mjs <serve url> [flaw]
// It asks serve for the stage's task (GET /conformance/task), builds the provider for the
// wire serve speaks (openai-chat: @ai-sdk/openai's Chat Completions model; anthropic:
// @ai-sdk/anthropic), and lets generateText (chat mode) or streamText (stream mode) run
// the conversation with stopWhen: stepCountIs(max_requests). Each tool's execute is a
// POST /conformance/tools/<name> with the SDK's toolCallId, so serve records every
// execution. It reports the last step's text and finish reason (and "budget" when the
// steps ran out on a tool turn) as POST /conformance/outcome, prints serve's verdict as
// JSON on stdout and exits 0 (serve's exit status carries the verdict).
//
// A flaw makes it a deliberately broken loop, for the judge to catch:
//   "run-twice": each execute runs its tool twice.

import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";

const [url, flaw = ""] = process.argv.slice(2);

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

function model(task) {
  if (task.wire === "anthropic") return createAnthropic({ baseURL: `${url}/v1`, apiKey: "test" })(task.model);
  if (task.wire === "openai-chat") return createOpenAI({ baseURL: `${url}/v1`, apiKey: "test" }).chat(task.model);
  throw new Error(`this client speaks openai-chat and anthropic, not ${task.wire}`);
}

function tools(task) {
  const runs = flaw === "run-twice" ? 2 : 1;
  return Object.fromEntries(
    task.tools.map((spec) => [
      spec.name,
      tool({
        description: spec.description,
        inputSchema: jsonSchema(spec.parameters),
        execute: async (input, { toolCallId }) => {
          let result;
          for (let i = 0; i < runs; i++) {
            result = await post(`/conformance/tools/${encodeURIComponent(spec.name)}`, {
              call_id: toolCallId,
              arguments: input,
            });
          }
          // The result as text; a failed tool's text is its structured error as JSON.
          return result.content;
        },
      }),
    ]),
  );
}

// The AI SDK's finish reasons, in the contract's words.
const FINISH = { stop: "stop", length: "length", "content-filter": "content_filter", "tool-calls": "tool_calls" };

async function run(task) {
  const forced = task.tool_choice;
  const options = {
    model: model(task),
    prompt: task.prompt,
    tools: tools(task),
    maxRetries: 0,
    // Set, so the SDK has no default of its own to warn about for a model it does not know.
    maxOutputTokens: 1024,
    stopWhen: stepCountIs(task.max_requests),
    // Force the tool on the first step only, so that the model can answer once it has the result.
    prepareStep: ({ stepNumber }) =>
      forced && stepNumber === 0
        ? { toolChoice: forced.mode === "tool" ? { type: "tool", toolName: forced.name } : forced.mode }
        : { toolChoice: "auto" },
  };
  let text;
  let finishReason;
  if (task.stream) {
    let failure = null;
    const result = streamText({ ...options, onError: ({ error }) => (failure ??= error) });
    text = await result.text;
    finishReason = await result.finishReason;
    if (failure) throw failure;
  } else {
    const result = await generateText(options);
    text = result.text;
    finishReason = result.finishReason;
  }
  const stopped = finishReason === "tool-calls" ? "budget" : "done";
  return { text, finish_reason: FINISH[finishReason] ?? finishReason, stopped };
}

const task = await (await fetch(`${url}/conformance/task`)).json();
let outcome;
try {
  outcome = await run(task);
} catch (error) {
  outcome = { error: { name: error.constructor?.name ?? "Error", message: String(error.message ?? error) } };
}
process.stdout.write(JSON.stringify(await post("/conformance/outcome", outcome)) + "\n");
