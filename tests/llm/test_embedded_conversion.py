"""The embedded model's conversion: its tokenizer puts <bos> first whatever transformers made
it (5.19's GGUF conversion, in `make vllm`'s environment, left it out, and Gemma without
<bos> writes nonsense), and a conversion made before that check is redone."""

from __future__ import annotations

import json

import pytest

from chunkwise.llm import embedded


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded.converted_dir()))


def test_the_cached_tokenizer_puts_bos_first(tokenizer):
    assert tokenizer("The pass key is")["input_ids"][0] == tokenizer.bos_token_id == 2


def test_ensure_bos_restores_a_post_processor_that_adds_nothing(tokenizer):
    from tokenizers.processors import TemplateProcessing

    backend = tokenizer.backend_tokenizer
    kept = backend.post_processor
    try:
        backend.post_processor = TemplateProcessing(single="$A", pair="$A $B:1")
        if hasattr(tokenizer, "add_bos_token"):
            tokenizer.add_bos_token = False
        assert tokenizer("a")["input_ids"][0] != 2  # what transformers 5.19 left
        embedded.ensure_bos(tokenizer)
        assert tokenizer("a")["input_ids"][0] == 2
        assert tokenizer("a", "b")["input_ids"].count(2) == 2
    finally:
        backend.post_processor = kept


def test_a_conversion_from_before_the_check_is_redone(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    assert not embedded._current(out)  # nothing converted
    (out / embedded._MARKER).write_text(json.dumps({"source": "x", "hub_id": "y"}))
    assert not embedded._current(out)  # format 1: made before the <bos> check
    (out / embedded._MARKER).write_text(json.dumps({"format": embedded.CONVERSION_FORMAT}))
    assert embedded._current(out)
    (out / embedded._MARKER).write_text("{cut")
    assert not embedded._current(out)


def _tiny_gguf(path):
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("general.name", "tiny")
    w.add_token_list([f"tok{i}" for i in range(300)])
    w.add_tensor("blk.0.w", np.arange(12, dtype=np.float32).reshape(3, 4))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_one_gguf_parse_shares_one_in_memory_reader_and_restores_the_library(tmp_path):
    """The conversion reads the GGUF once (it was three times, ~121 s -> ~44 s here)."""
    import inspect

    import gguf
    import gguf.gguf_reader as reader_module
    import numpy as np
    from transformers import modeling_gguf_pytorch_utils as hf_gguf

    # transformers must look the reader up at call time, or the shared parse never applies
    assert "from gguf import GGUFReader" in inspect.getsource(hf_gguf.load_gguf_checkpoint)
    path = tmp_path / "tiny.gguf"
    _tiny_gguf(path)
    plain = gguf.GGUFReader(path)
    with embedded.one_gguf_parse() as cache:
        first, second = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
        assert first is second and len(cache) == 1
        assert not isinstance(first.data, np.memmap)  # read into memory
    assert gguf.GGUFReader(path) is not first and reader_module.np is np
    assert isinstance(gguf.GGUFReader(path).data, np.memmap)
    tokens = [bytes(first.fields["tokenizer.ggml.tokens"].parts[i]) for i in (6, 8)]
    want = [bytes(plain.fields["tokenizer.ggml.tokens"].parts[i]) for i in (6, 8)]
    assert tokens == want and list(first.fields) == list(plain.fields)
    assert np.array_equal(first.tensors[0].data, plain.tensors[0].data)
