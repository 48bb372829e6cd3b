#!/usr/bin/env python3
"""jinja_oracle.py — renders chat templates with the real Jinja2, set up the
way Hugging Face transformers' apply_chat_template sets it up, so corvid's
interpreter can be compared with it byte for byte.

Environment (transformers, utils/chat_template_utils.py, _compile_jinja_template):
  * jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    - default Undefined, no autoescape, keep_trailing_newline=False;
  * AssistantTracker: the {% generation %}...{% endgeneration %} tag, parsed
    into a CallBlock whose body renders as-is (index tracking is inactive);
  * filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=None,
    separators=None, sort_keys=False) (with those keyword options exposed);
  * globals raise_exception(message) -> raises TemplateError, and
    strftime_now(format) -> datetime.now().strftime(format).
Render variables (render_jinja_template): messages, tools (None when absent),
documents=None, add_generation_prompt, bos_token, eos_token, then the
template kwargs, which win.

One deliberate difference: strftime_now uses a fixed instant (--now, a unix
time, formatted in the local zone; the test runs with TZ=UTC) instead of the
clock, so that both sides can be compared.

Input (stdin): JSON {"now": N, "jobs": [{"template": path, "conversation": {...}}]}
with conversation = {name, messages, tools?, add_generation_prompt, bos_token?,
eos_token?, kwargs?}. Output (stdout): one JSON line per job,
{"ok": true, "text": ...} or {"ok": false, "error": "Type: message"}.
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(now).strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    req = json.load(sys.stdin)
    env = make_env(req.get("now", 0))
    compiled = {}
    out = sys.stdout
    for job in req["jobs"]:
        path = job["template"]
        conv = job["conversation"]
        try:
            if path not in compiled:
                try:
                    with open(path, encoding="utf-8") as f:
                        compiled[path] = env.from_string(f.read())
                except Exception as e:  # a compile error fails every render of it
                    compiled[path] = e
            t = compiled[path]
            if isinstance(t, Exception):
                raise t
            kwargs = {
                "messages": conv["messages"],
                "tools": conv.get("tools"),
                "documents": None,
                "add_generation_prompt": conv.get("add_generation_prompt", True),
                "bos_token": conv.get("bos_token", "<s>"),
                "eos_token": conv.get("eos_token", "</s>"),
            }
            kwargs.update(conv.get("kwargs") or {})
            text = t.render(**kwargs)
            res = {"ok": True, "text": text}
        except RecursionError as e:
            res = {"ok": False, "error": "RecursionError: %s" % e}
        except Exception as e:
            res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        out.write(json.dumps(res, ensure_ascii=False) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
