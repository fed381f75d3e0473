"""``model.attn_implementation: auto`` and ``model.liger: auto`` use an optional kernel only
where it really works: a flash-attn that is installed but fails to import, or a Liger whose
import fails or whose kernels give other numbers than PyTorch's on one step, is skipped with a
warning naming why; asked for by name, it is a one-line error. The broken packages are small
fakes put first on ``sys.path`` (a real broken wheel fails the same way: at import)."""

from __future__ import annotations

import logging
import sys
import textwrap

import pytest

from chunkwise.errors import MissingDependency
from chunkwise.train import kernels
from chunkwise.train.attention import NAME as VARLEN
from chunkwise.train.modeling import attn_implementation, use_liger

BROKEN_FLASH = """
raise ImportError(
    "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
)
"""
WORKING_FLASH = """
def flash_attn_varlen_func(*args, **kwargs):
    raise AssertionError("not called by these tests")
"""
BROKEN_LIGER = """
raise ImportError("libcuda.so.1: cannot open shared object file: No such file or directory")
"""
#: a Liger whose kernels import and run but compute something else (its RMSNorm doubles)
WRONG_LIGER = """
import torch

LigerCrossEntropyLoss = torch.nn.CrossEntropyLoss


def apply_liger_kernel_to_llama(model=None, **kwargs):
    for module in model.modules():
        if type(module).__name__ == "LlamaRMSNorm":
            module.forward = (lambda f: (lambda x: 2 * f(x)))(module.forward)
"""
#: a Liger that stands for the real one (PyTorch's own layers): the check must pass it
FAITHFUL_LIGER = """
import torch

LigerCrossEntropyLoss = torch.nn.CrossEntropyLoss


def apply_liger_kernel_to_llama(model=None, **kwargs):
    pass
"""


@pytest.fixture
def fake_packages(tmp_path, monkeypatch):
    """Write fake packages (name -> {relative file: source}) first on sys.path, each with the
    dist-info metadata an installed wheel has (without it transformers imports the package to
    read its version)."""

    def install(name: str, files: dict[str, str]) -> None:
        for rel, src in files.items():
            path = tmp_path / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(src))
        info = tmp_path / f"{name}-9.9.9.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 9.9.9\n")
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, mod)

    monkeypatch.syspath_prepend(str(tmp_path))
    kernels.forget()
    yield install
    kernels.forget()
    for mod in [m for m in sys.modules if m.startswith(("flash_attn", "liger_kernel"))]:
        sys.modules.pop(mod, None)
    from transformers.utils import import_utils

    for name in ("is_flash_attn_2_available", "is_liger_kernel_available"):
        getattr(getattr(import_utils, name, None), "cache_clear", lambda: None)()


def test_auto_falls_back_from_a_flash_attn_that_does_not_import(fake_packages, caplog):
    fake_packages("flash_attn", {"__init__.py": BROKEN_FLASH})
    assert kernels.installed("flash_attn")  # found: the old check said "use it"
    with caplog.at_level(logging.WARNING, logger="chunkwise.train.modeling"):
        assert attn_implementation("auto", cuda=True) == VARLEN
    assert "undefined symbol" in caplog.text and VARLEN in caplog.text
    with pytest.raises(MissingDependency, match="flash_attention_2.*ImportError.*undefined symbol"):
        attn_implementation("flash_attention_2", cuda=True)


def test_auto_takes_a_flash_attn_that_imports(fake_packages):
    fake_packages("flash_attn", {"__init__.py": WORKING_FLASH})
    assert attn_implementation("auto", cuda=True) == "flash_attention_2"
    assert attn_implementation("auto", cuda=False) == VARLEN  # and only on CUDA


def test_liger_auto_skips_a_liger_that_does_not_import(fake_packages, caplog):
    fake_packages("liger_kernel", {"__init__.py": BROKEN_LIGER})
    with caplog.at_level(logging.WARNING, logger="chunkwise.train.modeling"):
        assert use_liger("auto", cuda=True, device="cpu") is False
    assert "libcuda.so.1" in caplog.text
    with pytest.raises(MissingDependency, match="liger=on: ImportError: libcuda"):
        use_liger("on", cuda=True, device="cpu")


def test_liger_auto_skips_kernels_whose_one_step_differs(fake_packages, caplog):
    fake_packages("liger_kernel", {"__init__.py": "", "transformers/__init__.py": WRONG_LIGER})
    with caplog.at_level(logging.WARNING, logger="chunkwise.train.modeling"):
        assert use_liger("auto", cuda=True, device="cpu") is False
    assert "one step through Liger's kernels gave loss" in caplog.text


def test_liger_auto_takes_kernels_that_match_pytorch(fake_packages):
    fake_packages("liger_kernel", {"__init__.py": "", "transformers/__init__.py": FAITHFUL_LIGER})
    assert kernels.liger_problem("cpu") is None
    assert use_liger("auto", cuda=True, device="cpu") is True
    assert use_liger("auto", cuda=False) is False  # never on CPU by itself
    assert use_liger("off", cuda=True, device="cpu") is False


def test_liger_check_leaves_transformers_llama_as_it_was(fake_packages):
    from transformers.models.llama import modeling_llama

    before = modeling_llama.LlamaRMSNorm
    patch = FAITHFUL_LIGER.replace(
        "    pass",
        "    import transformers.models.llama.modeling_llama as m\n    m.LlamaRMSNorm = object",
    )
    fake_packages("liger_kernel", {"__init__.py": "", "transformers/__init__.py": patch})
    assert kernels.liger_problem("cpu") is None
    assert modeling_llama.LlamaRMSNorm is before


def test_gpu_training_extra_pins_torch_and_leaves_vllm_to_its_own_environment():
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    train = {r.name: r for r in map(Requirement, extras["train-gpu"])}
    assert {"torch", "deepspeed", "flash-attn", "liger-kernel"} <= set(train)
    assert "vllm" not in train
    torch_spec = train["torch"].specifier
    assert any(s.operator == "<" for s in torch_spec) and any(
        s.operator == ">=" for s in torch_spec
    )
    vllm = {Requirement(r).name for r in extras["vllm"]}
    assert "vllm" in vllm and not vllm & {"flash-attn", "deepspeed", "liger-kernel", "torch"}
    assert "gpu" not in extras  # the old mix of both
