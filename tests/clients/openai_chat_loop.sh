#!/bin/sh
# An agent loop in POSIX shell, over curl and jq, for the OpenAI Chat Completions wire:
# a client with no SDK and no Python, judged by `python -m conformance judge`.
#
#   python -m conformance judge --wire openai-chat -- sh tests/clients/openai_chat_loop.sh
#
# It reads the task from CONFORMANCE_TASK_URL, sends the conversation to
# $CONFORMANCE_URL/v1/chat/completions (whole, or streamed and joined by jq), runs each
# complete call of a tool the task has, on arguments that parse, through
# $CONFORMANCE_TOOLS_URL<name>, sends every result back under its call id, and writes
# its outcome to CONFORMANCE_OUTCOME_FILE (judge's file form: no POST of its own).
# It checks no argument against its tool's schema: the judge names that as
# [arguments-schema] on the invalid-arguments stage.
# With "run-twice" as its argument it runs every call twice, for the judge to catch.
flaw="${1:-}"
task=$(curl -sS --max-time 10 "$CONFORMANCE_TASK_URL") || exit 1
stream=$(printf '%s' "$task" | jq -r .stream)
max_requests=$(printf '%s' "$task" | jq -r .max_requests)
max_seconds=$(printf '%s' "$task" | jq -r .max_seconds)
body=$(printf '%s' "$task" | jq -c '
  {model, messages: [{role: "user", content: .prompt}], tools: [.tools[] | {type: "function", function: .}]}
  + (if .tool_choice == null then {}
     elif .tool_choice.mode == "tool" then {tool_choice: {type: "function", function: {name: .tool_choice.name}}}
     else {tool_choice: .tool_choice.mode} end)')

finish() { printf '%s\n' "$1" > "$CONFORMANCE_OUTCOME_FILE"; exit 0; }
failed() { finish "$(jq -cn --arg m "$1" '{error: {name: "LoopError", message: $m}}')"; }

# A stream's chunks joined: the text, the last finish reason, each call's fragments by index.
join='reduce .[] as $c ({content: "", finish: null, calls: []};
  reduce ($c.choices // [])[] as $ch (.;
    .content += ($ch.delta.content // "")
    | (if $ch.finish_reason then .finish = $ch.finish_reason else . end)
    | reduce ($ch.delta.tool_calls // [])[] as $p (.;
        .calls[$p.index] |= ((. // {id: "", name: "", text: ""})
          | (if .id == "" then .id = ($p.id // "") else . end)
          | (if .name == "" then .name = ($p.function.name // "") else . end)
          | .text += ($p.function.arguments // "")))))
  | .calls |= map(select(. != null))'
whole='.choices[0] | {content: (.message.content // ""), finish: .finish_reason,
  calls: [(.message.tool_calls // [])[] | {id, name: .function.name, text: .function.arguments}]}'

sent=0
while [ "$sent" -lt "$max_requests" ]; do
  sent=$((sent + 1))
  if [ "$stream" = true ]; then
    raw=$(printf '%s' "$body" | jq -c '. + {stream: true}' | curl -sS -N --max-time "$max_seconds" \
      -H 'content-type: application/json' --data-binary @- "$CONFORMANCE_URL/v1/chat/completions" \
      -w '\n%{http_code}') || failed "request $sent failed (curl $?)"
    status=$(printf '%s' "$raw" | tail -n 1)
    [ "$status" = 200 ] || failed "request $sent answered $status"
    # Only a stream that ended with [DONE] is whole.
    printf '%s' "$raw" | grep -qx 'data: \[DONE\]' || failed "request $sent: the stream ended before [DONE]"
    turn=$(printf '%s' "$raw" | sed -n 's/^data: //p' | grep -v '^\[DONE\]$' | jq -cs "$join") \
      || failed "request $sent: a chunk is not JSON"
  else
    raw=$(printf '%s' "$body" | curl -sS --max-time "$max_seconds" -H 'content-type: application/json' \
      --data-binary @- "$CONFORMANCE_URL/v1/chat/completions" -w '\n%{http_code}') \
      || failed "request $sent failed (curl $?)"
    status=$(printf '%s' "$raw" | tail -n 1)
    [ "$status" = 200 ] || failed "request $sent answered $status"
    turn=$(printf '%s' "$raw" | sed '$d' | jq -c "$whole") || failed "request $sent: the reply is not JSON"
  fi
  body=$(printf '%s' "$body" | jq -c 'del(.tool_choice)')
  if [ "$(printf '%s' "$turn" | jq '.calls | length')" = 0 ]; then
    finish "$(printf '%s' "$turn" | jq -c '{text: .content, finish_reason: .finish, stopped: "done"}')"
  fi
  body=$(jq -cn --argjson b "$body" --argjson t "$turn" '$b | .messages += [{role: "assistant",
    content: (if $t.content == "" then null else $t.content end),
    tool_calls: [$t.calls[] | {id, type: "function", function: {name, arguments: .text}}]}]')
  count=$(printf '%s' "$turn" | jq '.calls | length')
  i=0
  while [ "$i" -lt "$count" ]; do
    call=$(printf '%s' "$turn" | jq -c ".calls[$i]")
    i=$((i + 1))
    name=$(printf '%s' "$call" | jq -r .name)
    id=$(printf '%s' "$call" | jq -r .id)
    arguments=$(printf '%s' "$call" | jq -c '.text | try fromjson catch null')
    if ! printf '%s' "$task" | jq -e --arg n "$name" 'any(.tools[]; .name == $n)' > /dev/null; then
      content=$(jq -cn --arg n "$name" '{code: "unknown_tool", message: "no tool \($n)"}')
    elif [ "$(printf '%s' "$arguments" | jq -r type)" != object ]; then
      content='{"code": "invalid_arguments", "message": "the arguments are not a JSON object"}'
    else
      runs=1
      [ "$flaw" = run-twice ] && runs=2
      while [ "$runs" -gt 0 ]; do
        runs=$((runs - 1))
        result=$(jq -cn --arg id "$id" --argjson a "$arguments" '{call_id: $id, arguments: $a}' \
          | curl -sS --max-time 10 -H 'content-type: application/json' --data-binary @- \
            "$CONFORMANCE_TOOLS_URL$name") || failed "tool $name failed"
      done
      content=$(printf '%s' "$result" | jq -r .content)
    fi
    body=$(jq -cn --argjson b "$body" --arg id "$id" --arg c "$content" \
      '$b | .messages += [{role: "tool", tool_call_id: $id, content: $c}]')
  done
done
finish '{"text": "", "finish_reason": "tool_calls", "stopped": "budget"}'
