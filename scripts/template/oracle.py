#!/usr/bin/env python3
"""Renders chat templates with Python's jinja2, configured the way Hugging Face transformers'
apply_chat_template configures it: the reference our template engine (src/template/) is tested
against.

usage: oracle.py JOBS.json OUT.json
JOBS.json holds [{"template": <template text>, "context": {...}, "now": <epoch seconds>}, ...];
OUT.json receives, for each job in order, {"output": <text>} or {"error": <message>}.
"now" fixes the time strftime_now() formats (UTC), so that renderings repeat exactly.
"""
import json
import sys
from datetime import datetime, timezone

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """transformers' {% generation %} tag (it marks assistant text); renders its body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # transformers replaces jinja2's tojson (which escapes HTML) with plain json.dumps
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(now, timezone.utc).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        jobs = json.load(f)
    results = []
    compiled = {}  # (source, now) -> template: compiling dominates the time
    for job in jobs:
        try:
            key = (job["template"], job.get("now", 0))
            if key not in compiled:
                compiled[key] = make_environment(key[1]).from_string(key[0])
            out = compiled[key].render(**job["context"])
            results.append({"output": out})
        except Exception as e:  # any failure is an answer: the engine must fail there too
            results.append({"error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
