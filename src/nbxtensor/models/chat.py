"""Text in and out of a decoder: :class:`TextCodec` (a ``tokenizers`` tokenizer with BOS/EOS rules and the chat
template) and :class:`StreamDecoder` (incremental detokenization for streaming).

**Chat templates.** Templates are Jinja text from the model (GGUF ``tokenizer.chat_template`` or
``tokenizer_config.json``). ChatML templates of the two common forms (every message as
``<|im_start|>{role}\\n{content}<|im_end|>\\n`` plus ``<|im_start|>assistant\\n``, optionally with a default system
message inserted when the first message is not a system one, as SmolLM2's) are rendered by :func:`render_chatml`
with no Jinja; they are recognised by an exact match of the template text (the default system message being the
only free part), so a template that differs in any way is never rendered by the wrong rule. Other templates are
rendered with ``jinja2`` in its sandbox when it is installed (as ``transformers`` does: ``trim_blocks`` and
``lstrip_blocks``), else refused with a message saying so.

**BOS.** ``add_bos`` follows the model (GGUF ``tokenizer.ggml.add_bos_token``; ``tokenizer_config.json``'s
``add_bos_token``); a BOS is never doubled when the text already starts with it (a rendered chat template often
does).
"""

from __future__ import annotations

import json
import os
import re

from .._errors import check

__all__ = ["TextCodec", "StreamDecoder", "render_chatml", "is_known_chatml"]

_CHATML_MSG = ("{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}")
_CHATML_GEN = "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
_CHATML_PLAIN = "{% for message in messages %}" + _CHATML_MSG + "{% endfor %}" + _CHATML_GEN
_CHATML_DEFAULT_SYS = re.compile(
    re.escape("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
              "{{ '<|im_start|>system\n") + r"(?P<sys>[^'\\{}]*)" +
    re.escape("<|im_end|>\n' }}{% endif %}" + _CHATML_MSG + "{% endfor %}" + _CHATML_GEN) + r"\Z")


def _chatml_form(template: str | None):
    """``(True, default_system or None)`` for a recognised ChatML template, ``(False, None)`` otherwise."""
    if template is None:
        return False, None
    t = template.strip()
    if t == _CHATML_PLAIN:
        return True, None
    m = _CHATML_DEFAULT_SYS.match(t)
    return (True, m.group("sys")) if m else (False, None)


def is_known_chatml(template: str | None) -> bool:
    """True when :func:`render_chatml` renders ``template`` exactly (see the module docstring)."""
    return _chatml_form(template)[0]


def render_chatml(messages: list[dict], template: str | None = None, *, add_generation_prompt: bool = True) -> str:
    """Render ``messages`` (``[{"role": ..., "content": ...}]``) in ChatML as ``template`` does.

    Raises:
        ValueError: ``template`` is not one of the recognised ChatML forms; a message without role/content.
    """
    ok, default_sys = _chatml_form(template) if template is not None else (True, None)
    check(ok, "render_chatml: the template is not a recognised ChatML form", ValueError)
    out = []
    for i, m in enumerate(messages):
        check(isinstance(m, dict) and "role" in m and "content" in m, lambda: f"render_chatml: message {i} needs "
              f"'role' and 'content', got {m!r}", ValueError)
        if i == 0 and default_sys is not None and messages[0]["role"] != "system":
            out.append(f"<|im_start|>system\n{default_sys}<|im_end|>\n")
        out.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


def _render_jinja(template: str, messages: list[dict], add_generation_prompt: bool, **extra) -> str:
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise NotImplementedError("this model's chat template is not plain ChatML; rendering it needs jinja2 "
                                  "(pip install jinja2), or pass a prompt without --chat") from None

    def raise_exception(msg):
        raise ValueError(f"chat template: {msg}")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt, **extra)


class TextCodec:
    """A tokenizer with the model's special-token rules and chat template.

    Attributes:
        tokenizer: the ``tokenizers.Tokenizer``. bos_id, eos_id: ids or None. add_bos: prepend BOS when encoding.
        eog_ids: ids that end a generation. chat_template: Jinja text or None.
    """

    def __init__(self, tokenizer, *, bos_id=None, eos_id=None, add_bos: bool = False, eog_ids=(),
                 chat_template: str | None = None, bos_token: str | None = None, eos_token: str | None = None):
        self.tokenizer = tokenizer
        self.bos_id, self.eos_id, self.add_bos = bos_id, eos_id, bool(add_bos)
        self.eog_ids = sorted({int(i) for i in eog_ids} | ({int(eos_id)} if eos_id is not None else set()))
        self.chat_template = chat_template
        self.bos_token = bos_token if bos_token is not None else (tokenizer.id_to_token(bos_id) if bos_id is not None
                                                                  else None)
        self.eos_token = eos_token if eos_token is not None else (tokenizer.id_to_token(eos_id) if eos_id is not None
                                                                  else None)

    @classmethod
    def from_gguf(cls, f) -> "TextCodec":
        """From a :class:`nbxtensor.io.gguf.GGUFFile`."""
        sp = f.special_tokens()
        return cls(f.tokenizer(), bos_id=sp["bos"], eos_id=sp["eos"], add_bos=sp["add_bos"], eog_ids=sp["eog"],
                   chat_template=f.chat_template())

    @classmethod
    def from_folder(cls, path: str | os.PathLike, config: dict | None = None) -> "TextCodec":
        """From a Hugging Face folder: ``tokenizer.json`` (required), ``tokenizer_config.json``,
        ``chat_template.jinja`` and ``generation_config.json`` (optional).

        Raises:
            FileNotFoundError: no ``tokenizer.json``.
        """
        from tokenizers import Tokenizer
        path = os.fspath(path)
        tj = os.path.join(path, "tokenizer.json")
        check(os.path.isfile(tj), lambda: f"TextCodec: {path} has no tokenizer.json", FileNotFoundError)
        tok = Tokenizer.from_file(tj)
        tc = _read_json(os.path.join(path, "tokenizer_config.json"))
        gc = _read_json(os.path.join(path, "generation_config.json"))
        config = config or {}

        def text(v):
            return v.get("content") if isinstance(v, dict) else v
        bos_t, eos_t = text(tc.get("bos_token")), text(tc.get("eos_token"))
        bos = tok.token_to_id(bos_t) if bos_t else config.get("bos_token_id")
        eos = tok.token_to_id(eos_t) if eos_t else None
        eog = set()
        for src in (gc.get("eos_token_id"), config.get("eos_token_id")):
            eog.update(src if isinstance(src, list) else ([src] if src is not None else []))
        if eos is None and eog:
            eos = min(eog)
        tmpl = tc.get("chat_template")
        if isinstance(tmpl, list):  # [{"name": "default", "template": ...}, ...]
            tmpl = next((t["template"] for t in tmpl if t.get("name") == "default"), tmpl[0]["template"] if tmpl else None)
        jinja = os.path.join(path, "chat_template.jinja")
        if tmpl is None and os.path.isfile(jinja):
            with open(jinja, encoding="utf-8") as fh:
                tmpl = fh.read()
        return cls(tok, bos_id=bos, eos_id=eos, add_bos=bool(tc.get("add_bos_token", False)), eog_ids=eog,
                   chat_template=tmpl, bos_token=bos_t, eos_token=eos_t)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, *, add_bos: bool | None = None) -> list[int]:
        """Token ids of ``text`` (special tokens in the text are matched whole); BOS as described above."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids = [self.bos_id] + ids
        return ids

    def decode(self, ids, *, skip_special_tokens: bool = True) -> str:
        """Text of token ids."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: list[dict], *, add_generation_prompt: bool = True) -> str:
        """The prompt text of a conversation (see the module docstring)."""
        if self.chat_template is None or is_known_chatml(self.chat_template):
            return render_chatml(messages, self.chat_template, add_generation_prompt=add_generation_prompt)
        return _render_jinja(self.chat_template, messages, add_generation_prompt, bos_token=self.bos_token or "",
                             eos_token=self.eos_token or "")


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class StreamDecoder:
    """Incremental text of a growing token sequence: :meth:`push` returns the new text, holding back a tail
    that ends in an incomplete UTF-8 sequence (shown as U+FFFD by the byte-level decoder) until it completes.

    Example::

        sd = StreamDecoder(codec)
        for tok in model.generate(ids, 32):
            print(sd.push(tok), end="", flush=True)
        print(sd.flush())
    """

    def __init__(self, codec: TextCodec, *, skip_special_tokens: bool = True):
        self.codec, self.skip = codec, skip_special_tokens
        self.ids: list[int] = []
        self.emitted = 0

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        text = self.codec.decode(self.ids, skip_special_tokens=self.skip)
        if text.endswith("\ufffd"):
            return ""
        new = text[self.emitted:]
        self.emitted = len(text)
        return new

    def flush(self) -> str:
        text = self.codec.decode(self.ids, skip_special_tokens=self.skip)
        new = text[self.emitted:]
        self.emitted = len(text)
        return new
