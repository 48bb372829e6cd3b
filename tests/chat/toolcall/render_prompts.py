#!/usr/bin/env python3
"""Renders the generation prompt of chat templates with the real Jinja2 (a
test-only oracle) and prints, as one JSON object, the last 256 characters of
each: {"<template file>|<enable_thinking 0/1>": "...<|im_start|>assistant\\n<think>\\n"}.

test_tc_fixtures.c asks which reasoning opener each prompt leaves open
(cv_chat_parse_prompt_opener) for the llama.cpp fixture cases, whose text is
the continuation of exactly that prompt. Usage: render_prompts.py TEMPLATES_DIR
TEMPLATE[|0/1] ..."""
import datetime
import json
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """HF's {% generation %}...{% endgeneration %} marks assistant text for
    training masks; rendering ignores it."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def tojson(v, indent=None, ensure_ascii=False, separators=None, sort_keys=False):
    return json.dumps(v, indent=indent, ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys,
                      default=list)


TOOLS = [{"type": "function", "function": {
    "name": "special_function", "description": "I'm special",
    "parameters": {"type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}},
                   "required": ["arg1"]}}}]


def render(path, thinking):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols", GenerationTag])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: datetime.datetime(2025, 1, 1).strftime(f)
    env.globals["datetime"] = "2025-01-01"
    with open(path, encoding="utf-8") as f:
        t = env.from_string(f.read())
    return t.render(messages=[{"role": "user", "content": "Hi"}], tools=TOOLS, functions="",
                    add_generation_prompt=True, bos_token="<s>", eos_token="</s>",
                    enable_thinking=thinking, thinking=thinking, reasoning=thinking)


def main():
    out = {}
    for key in sys.argv[2:]:
        name, _, x = key.partition("|")
        try:
            out[key] = render(sys.argv[1] + "/" + name, x != "0")[-256:]
        except Exception as e:  # noqa: BLE001 - report, do not stop
            out[key] = None
            print(f"render_prompts: {name}: {e}", file=sys.stderr)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
