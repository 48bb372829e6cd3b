#!/usr/bin/env python3
"""bench_conversation.py — builds the chat-template benchmark input: a
Claude-Code-sized conversation in corvid's neutral shape (chat.h). The system
prompt (5,744 characters) and the 24 tool definitions are Claude Code's own,
read in place from ../shared/testdata/clients/claude-code/003-v1_messages.json
(Anthropic input_schema turned into function parameters); the 40 turns after
them are synthesized deterministically: user requests, assistant tool calls
with realistic arguments, tool results of 200-2,000 characters, and short
assistant answers, some with reasoning_content.

usage: bench_conversation.py OUT.json   (then: corvid template T.jinja --messages OUT.json --bench 500)
"""
import json
import os
import random
import sys

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(here, "..", "..", "..", "..", "shared", "testdata", "clients", "claude-code", "003-v1_messages.json")
rec = json.load(open(src))
body = rec["body"] if isinstance(rec["body"], dict) else json.loads(rec["body"])
system = body["system"] if isinstance(body["system"], str) else "".join(b.get("text", "") for b in body["system"])
tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                            "parameters": t.get("input_schema", {"type": "object"})}} for t in body["tools"]]
rng = random.Random(42)
words = ("the function returns a value when the buffer is full so we flush it first and then retry the write "
         "error handling path config file test suite build cache parser token stream").split()


def text(n):
    return " ".join(rng.choice(words) for _ in range(n))


messages = [{"role": "system", "content": system}]
calls = [("Read", lambda: {"file_path": "/repo/src/%s.c" % rng.choice(words)}),
         ("Bash", lambda: {"command": "make -j2 test 2>&1 | tail -20", "description": "Run the tests"}),
         ("Edit", lambda: {"file_path": "/repo/src/x.c", "old_string": text(12), "new_string": text(14)}),
         ("Write", lambda: {"file_path": "/repo/docs/n.md", "content": text(60)})]
turn = 0
while len(messages) < 41:
    messages.append({"role": "user", "content": "Please " + text(20)})
    for k in range(3):
        name, args = rng.choice(calls)
        cid = "toolu_%03d" % turn
        turn += 1
        m = {"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function",
                                                               "function": {"name": name, "arguments": args()}}]}
        if k == 0:
            m["reasoning_content"] = text(30)
        messages.append(m)
        messages.append({"role": "tool", "tool_call_id": cid, "name": name, "content": text(rng.randint(40, 330))})
    messages.append({"role": "assistant", "content": text(25)})
messages = messages[:40]
messages.append({"role": "user", "content": "Now " + text(10)})  # 40 turns after the system prompt
json.dump({"messages": messages, "tools": tools}, open(sys.argv[1], "w"), ensure_ascii=False)
print("system %d chars, %d tools, %d turns after the system prompt" % (len(system), len(tools), len(messages) - 1))
