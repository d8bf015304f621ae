// Drives the AWS SDK for JavaScript v3 BedrockRuntimeClient against the fake provider.
//
// Usage: node bedrock_converse.mjs <provider url> <model id> <plan as JSON>
// The plan is a list of {"scenario": ..., "operation": "converse" | "converse-stream"},
// and optionally:
//   "history": an earlier turn to send after the question, as a loop would have kept it:
//     {"calls": [{toolUseId, name, input}], "reasoning": [{text, signature}],
//      "results": [{toolUseId, text, error}]}
//   "followUp": the scenario of a second call that answers every tool call the first
//     one returned: the assistant message as the SDK gave it back, then one user turn
//     with a toolResult per call, under the call's own toolUseId, whose content is a
//     JSON document holding the call's input.
// Each call carries its scenario in an x-conformance-scenario header, so one provider
// can script them all. The client keeps its default request handler, NodeHttp2Handler,
// which speaks h2c with prior knowledge to an http:// endpoint and closes its session
// (GOAWAY) as soon as the response headers arrive.
//
// Prints one JSON object on stdout: {"handler": ..., "results": [...]}, with per call
// the text, the tool calls, the stop reason, the usage, the event names in the order
// they arrived, and the error's name, message and HTTP status if the call failed; a
// call with a follow-up reports the second call the same way under "followUp".

import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
} from "@aws-sdk/client-bedrock-runtime";

const QUESTION = "What is the weather in Paris today?";
const SYSTEM = "You are a concise weather assistant.";
const TOOL = {
  toolSpec: {
    name: "get_weather",
    description: "Get the current weather for a city.",
    inputSchema: {
      json: {
        type: "object",
        properties: {
          city: { type: "string", description: "City name, e.g. Paris" },
          unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        },
        required: ["city"],
      },
    },
  },
};
// How long an abort scenario waits before aborting a call that never answers.
const ABORT_AFTER_MS = 150;
// No call may take longer than this, whatever the provider does.
const CALL_TIMEOUT_MS = 5000;

function makeClient(endpoint) {
  return new BedrockRuntimeClient({
    region: "us-east-1",
    endpoint,
    credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "conformance-secret" },
    maxAttempts: 1,
  });
}

const QUESTION_TURN = { role: "user", content: [{ text: QUESTION }] };

function input(model, messages) {
  return {
    modelId: model,
    system: [{ text: SYSTEM }],
    messages,
    inferenceConfig: { maxTokens: 256 },
    toolConfig: { tools: [TOOL] },
  };
}

// The question, then the earlier assistant turn (its reasoning, then its toolUse
// blocks) and the user turn answering each call with a toolResult.
function historyMessages({ calls, reasoning = [], results }) {
  const assistant = [
    ...reasoning.map(({ text, signature }) => ({ reasoningContent: { reasoningText: { text, signature } } })),
    ...calls.map(({ toolUseId, name, input: args }) => ({ toolUse: { toolUseId, name, input: args } })),
  ];
  const answers = results.map(({ toolUseId, text, error }) => ({
    toolResult: { toolUseId, content: [{ text }], ...(error ? { status: "error" } : {}) },
  }));
  return [QUESTION_TURN, { role: "assistant", content: assistant }, { role: "user", content: answers }];
}

// The turn after `assistant` (the message the first call returned): one toolResult per
// call, its content a JSON document, so the SDK serializes documents both ways.
function followUpMessages(assistant, calls) {
  const answers = calls.map(({ id, input: args }) => ({
    toolResult: { toolUseId: id, content: [{ json: { request: args, conditions: "sunny" } }] },
  }));
  return [QUESTION_TURN, assistant, { role: "user", content: answers }];
}

function withScenario(command, scenario) {
  command.middlewareStack.add(
    (next) => async (args) => {
      args.request.headers["x-conformance-scenario"] = scenario;
      return next(args);
    },
    { step: "build", name: "conformanceScenario" },
  );
  return command;
}

function describeError(error) {
  return {
    name: error?.name ?? String(error),
    message: error?.message ?? "",
    status: error?.$metadata?.httpStatusCode ?? null,
    fault: error?.$fault ?? null,
  };
}

// Returns the assistant message exactly as the SDK gave it back.
async function converse(client, model, scenario, messages, signal, result) {
  const out = await client.send(withScenario(new ConverseCommand(input(model, messages)), scenario), {
    abortSignal: signal,
  });
  result.stopReason = out.stopReason;
  result.usage = out.usage;
  for (const block of out.output?.message?.content ?? []) {
    if (block.text !== undefined) result.text += block.text;
    if (block.toolUse) {
      const { toolUseId, name, input: args } = block.toolUse;
      result.toolCalls.push({ id: toolUseId, name, input: args });
    }
  }
  return out.output?.message;
}

// Fills `result` as events arrive, so what came before a failure is kept, and returns
// the assistant message a loop builds from the stream: its text, then its calls.
async function converseStream(client, model, scenario, messages, signal, result, onEvent) {
  const out = await client.send(withScenario(new ConverseStreamCommand(input(model, messages)), scenario), {
    abortSignal: signal,
  });
  const open = new Map();
  for await (const event of out.stream) {
    const name = Object.keys(event).find((key) => event[key] !== undefined) ?? "(empty)";
    result.events.push(name);
    onEvent();
    if (event.contentBlockStart?.start?.toolUse) {
      const { toolUseId, name: toolName } = event.contentBlockStart.start.toolUse;
      open.set(event.contentBlockStart.contentBlockIndex, { id: toolUseId, name: toolName, parts: [] });
    } else if (event.contentBlockDelta) {
      const { delta, contentBlockIndex } = event.contentBlockDelta;
      if (delta.text !== undefined) result.text += delta.text;
      if (delta.toolUse) open.get(contentBlockIndex)?.parts.push(delta.toolUse.input ?? "");
    } else if (event.contentBlockStop) {
      const index = event.contentBlockStop.contentBlockIndex;
      const call = open.get(index);
      if (call) {
        open.delete(index);
        const raw = call.parts.join("");
        let args;
        try {
          args = JSON.parse(raw);
        } catch {
          args = { unparsed: raw };
        }
        result.toolCalls.push({ id: call.id, name: call.name, input: args });
      }
    } else if (event.messageStop) {
      result.stopReason = event.messageStop.stopReason;
    } else if (event.metadata) {
      result.usage = event.metadata.usage;
    }
  }
  const content = result.text ? [{ text: result.text }] : [];
  for (const { id, name, input: args } of result.toolCalls) {
    content.push({ toolUse: { toolUseId: id, name, input: args } });
  }
  return { role: "assistant", content };
}

function emptyResult(scenario, operation) {
  return { scenario, operation, text: "", toolCalls: [], stopReason: null, usage: null, events: [] };
}

async function runOne(endpoint, model, { scenario, operation, history, followUp }) {
  const client = makeClient(endpoint);
  const controller = new AbortController();
  const timers = [setTimeout(() => controller.abort(new Error("call timed out")), CALL_TIMEOUT_MS)];
  // An abort scenario aborts a whole call that never answers after a moment, and a
  // stream as soon as its first event is in.
  const abort = scenario === "abort" ? () => controller.abort() : () => {};
  if (operation === "converse") timers.push(setTimeout(abort, ABORT_AFTER_MS));
  const result = emptyResult(scenario, operation);
  const call = (current, header, messages) =>
    operation === "converse"
      ? converse(client, model, header, messages, controller.signal, current)
      : converseStream(client, model, header, messages, controller.signal, current, abort);
  const started = Date.now();
  try {
    const assistant = await call(result, scenario, history ? historyMessages(history) : [QUESTION_TURN]);
    result.error = null;
    if (followUp) {
      result.followUp = emptyResult(followUp, operation);
      try {
        await call(result.followUp, followUp, followUpMessages(assistant, result.toolCalls));
        result.followUp.error = null;
      } catch (error) {
        result.followUp.error = describeError(error);
      }
    }
  } catch (error) {
    result.error = describeError(error);
  } finally {
    timers.forEach(clearTimeout);
    client.destroy();
  }
  result.ms = Date.now() - started;
  return result;
}

async function main() {
  const [endpoint, model, planJson] = process.argv.slice(2);
  if (!endpoint || !model || !planJson) {
    process.stderr.write("usage: node bedrock_converse.mjs <provider url> <model id> <plan as JSON>\n");
    process.exit(2);
  }
  const handler = makeClient(endpoint).config.requestHandler;
  const handlerName = typeof handler === "function" ? handler.name : handler?.constructor?.name ?? String(handler);
  const results = [];
  for (const call of JSON.parse(planJson)) {
    results.push(await runOne(endpoint, model, call));
  }
  process.stdout.write(JSON.stringify({ handler: handlerName, results }) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
