"""Chat templates without Jinja (ChatML forms recognised exactly; jinja2 renders the same text where it is
installed), BOS rules, Hugging Face tokenizer folders, and incremental detokenization for streaming."""

from __future__ import annotations

import json

import pytest

from nbxtensor.io.gguf import build_tokenizer
from nbxtensor.models.chat import StreamDecoder, TextCodec, is_known_chatml, render_chatml

from llama_helpers import byte_vocab

SMOL_TEMPLATE = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
                 "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                 "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                 "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                 "{% endif %}")
PLAIN = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
         "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue?"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c\nd"}],
    [],
]


def test_smollm2_template_rendered_without_jinja():
    assert is_known_chatml(SMOL_TEMPLATE) and is_known_chatml(PLAIN)
    s = render_chatml(CONVERSATIONS[0], SMOL_TEMPLATE)
    assert s == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                 "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert render_chatml(CONVERSATIONS[1], SMOL_TEMPLATE).startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert render_chatml(CONVERSATIONS[0], PLAIN, add_generation_prompt=False) == "<|im_start|>user\nHi<|im_end|>\n"


def test_other_templates_are_not_taken_for_chatml():
    changed = SMOL_TEMPLATE.replace("'\n'}}{% endfor %}", "'\n\n'}}{% endfor %}")
    assert not is_known_chatml(changed) and not is_known_chatml("{{ bos_token }}{% for m in messages %}{% endfor %}")
    with pytest.raises(ValueError, match="not a recognised ChatML"):
        render_chatml(CONVERSATIONS[0], changed)
    with pytest.raises(ValueError, match="role"):
        render_chatml([{"content": "x"}], PLAIN)


@pytest.mark.parametrize("template", [SMOL_TEMPLATE, PLAIN])
def test_same_text_as_jinja2(template):
    sandbox = pytest.importorskip("jinja2.sandbox")
    env = sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    for conv in CONVERSATIONS:
        for gen in (True, False):
            want = env.from_string(template).render(messages=conv, add_generation_prompt=gen)
            assert render_chatml(conv, template, add_generation_prompt=gen) == want


def _codec(**kw):
    tokens, merges, types = byte_vocab()
    return TextCodec(build_tokenizer(tokens, merges, types, pre="smollm"), bos_id=1, eos_id=2, **kw)


def test_bos_rules_and_eog():
    c = _codec(add_bos=True, eog_ids=[0])
    assert c.encode("in")[0] == 1 and c.encode("<|im_start|>in")[:2] != [1, 1]
    assert _codec().encode("in")[0] != 1 and c.encode("in", add_bos=False)[0] != 1
    assert c.eog_ids == [0, 2] and c.bos_token == "<|im_start|>" and c.eos_token == "<|im_end|>"


def test_stream_decoder_holds_back_partial_utf8():
    c = _codec()
    ids = c.encode("é🤖 ok")
    sd = StreamDecoder(c)
    pieces = [sd.push(i) for i in ids]
    assert "".join(pieces) + sd.flush() == "é🤖 ok"
    assert all("\ufffd" not in p for p in pieces)


def test_from_folder(tmp_path):
    c = _codec()
    c.tokenizer.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"content": "<|im_start|>"}, "eos_token": "<|im_end|>", "add_bos_token": False,
        "chat_template": [{"name": "default", "template": PLAIN}]}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    d = TextCodec.from_folder(tmp_path)
    assert (d.bos_id, d.eos_id, d.eog_ids) == (1, 2, [0, 2])
    assert d.apply_chat_template(CONVERSATIONS[0]) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert d.decode(d.encode("in the")) == "in the"
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        TextCodec.from_folder(tmp_path / "missing")
