"""Every recipe and accelerate config validates; recipe errors name the key."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from chunkwise.config import load_config
from chunkwise.errors import BadInput
from chunkwise.train.loop import lr_at
from chunkwise.train.recipe import Recipe, check_recipe, load_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted((REPO / "recipes" / "llama3.1-8b").glob("*.yaml")) + sorted(
    (REPO / "recipes" / "tiny").glob("*.yaml")
)
CONFIGS = sorted((REPO / "configs" / "accelerate").glob("*.yaml"))


def test_recipe_folders_are_complete():
    names = {p.stem for p in RECIPES}
    for stem in ("longalign-standard", "pyramid_align-standard", "pyramid_align-mapreduce"):
        assert (REPO / "recipes" / "llama3.1-8b" / f"{stem}.yaml").exists()
        assert (REPO / "recipes" / "tiny" / f"{stem}.yaml").exists()
    assert len(names) == 3
    assert {p.stem for p in CONFIGS} >= {
        "ddp",
        "zero2",
        "zero3",
        "zero3_offload",
        "fsdp2",
        "ulysses",
    }


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recipe_validates(path, monkeypatch):
    monkeypatch.chdir(REPO)
    recipe = load_config(Recipe, path)  # keys and types
    tiny = path.parent.name == "tiny"
    check_recipe(recipe, check_paths=tiny)  # the 8B data is downloaded / synthesized separately
    if tiny:
        assert recipe.model.init == "random" and recipe.model.tokenizer == "train"
    else:
        assert recipe.model.name_or_path.startswith("meta-llama/Llama-3.1-8B")
        assert recipe.train.lr == 2e-5 and recipe.train.warmup_ratio == 0.03
        assert tuple(recipe.train.adam_betas) == (0.9, 0.95)
        assert recipe.data.max_length == recipe.batching.max_tokens == 65536
        twin = load_config(Recipe, REPO / "recipes" / "tiny" / path.name)
        for section in ("data", "batching"):
            for key in ("format", "mode", "mapreduce_format", "strategy"):
                if hasattr(getattr(recipe, section), key):
                    assert getattr(getattr(recipe, section), key) == getattr(
                        getattr(twin, section), key
                    )
        assert recipe.train.loss_weighting == twin.train.loss_weighting


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_accelerate_configs_parse(path):
    cfg = yaml.safe_load(path.read_text())
    assert cfg["distributed_type"] in {"MULTI_GPU", "DEEPSPEED", "FSDP"}
    assert cfg["mixed_precision"] == "bf16"
    if path.stem.startswith("zero") or path.stem == "ulysses":
        ds = cfg["deepspeed_config"]
        assert ds["zero_stage"] in (2, 3)
        assert "gradient_accumulation_steps" not in ds  # the recipe sets it
    if path.stem == "zero3_offload":
        assert cfg["deepspeed_config"]["offload_optimizer_device"] == "cpu"
    if path.stem == "fsdp2":
        assert cfg["fsdp_config"]["fsdp_version"] == 2
    if path.stem == "ulysses":
        pc = cfg["parallelism_config"]
        assert pc["parallelism_config_sp_backend"] == "deepspeed"
        sp = pc["parallelism_config_sp_size"]
        assert cfg["num_processes"] % sp == 0 and 32 % sp == 0 and 8 % sp == 0


def test_recipe_errors_name_the_key(monkeypatch):
    monkeypatch.chdir(REPO)
    tiny = REPO / "recipes" / "tiny" / "longalign-standard.yaml"
    with pytest.raises(BadInput, match=r"unknown option\(s\) batching\.max_token .*did you mean"):
        load_recipe(tiny, ["--batching.max_token=5"])
    with pytest.raises(
        BadInput, match=r"^--train\.lr: option train\.lr='fast' is not valid; expected a number$"
    ):
        load_recipe(tiny, ["--train.lr=fast"])
    with pytest.raises(
        BadInput, match=r"batching\.max_tokens \(512\) is below data\.max_length \(1024\)"
    ):
        load_recipe(tiny, ["--batching.max_tokens=512"])
    with pytest.raises(
        BadInput, match=r"data\.mapreduce: .*unexpected keyword argument 'nonsense'"
    ):
        load_recipe(tiny, ["--data.mapreduce={nonsense: 1}"])
    with pytest.raises(
        BadInput,
        match="strategy 'mapreduce': option protocol='fancy' is not valid; expected one of",
    ):
        load_recipe(tiny, ["--data.mapreduce={protocol: fancy}"])
    with pytest.raises(BadInput, match="data.mode=mapreduce needs Pyramid-Align"):
        load_recipe(tiny, ["--data.mode=mapreduce"])
    r = load_recipe(tiny, ["--train.lr=1e-4", "--model.arch_overrides.num_hidden_layers=3"])
    assert r.train.lr == 1e-4 and r.model.arch_overrides == {"num_hidden_layers": 3}


def test_lr_schedule_warmup_then_cosine():
    lrs = [lr_at(s, 100, 10, 1.0, 0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in itertools.pairwise(lrs[9:]))  # cosine after warm-up
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)


def test_embedded_recipe_validates_and_matches_make_default_mr(monkeypatch):
    """`make default-mr` synthesizes with the decoding options the recipe trains under (and
    installs beside the adapter): a chunk size changed in one place only would teach the
    adapter on chunks it never reads at decoding."""
    import re

    monkeypatch.chdir(REPO)
    recipe = load_config(Recipe, REPO / "recipes" / "embedded" / "default-mr.yaml")
    check_recipe(recipe, check_paths=False)
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    synth_cmd = re.search(r"^DEFAULT_MR_SYNTH = (.*?)\n\S", make, re.S | re.M).group(1)
    args = re.search(r"--strategy-args (\S+)", synth_cmd).group(1)
    assert {k: str(v) for k, v in recipe.data.mapreduce.items()} == dict(
        kv.split("=", 1) for kv in args.split(",")
    )
    assert re.search(r"--window (\d+)", synth_cmd).group(1) == str(recipe.data.window)
    # every synthesized file is a training input
    outs = re.findall(r"--out \$\(DEFAULT_MR_OUT\)/(\S+)", make)
    assert outs and sorted(f"runs/default-mr/{o}/data/oracle.jsonl" for o in outs) == sorted(
        recipe.data.paths + recipe.data.reduce_only_paths
    )
    # and the Makefile's overrides name the same files as the recipe, in the same roles
    for key in ("paths", "reduce_only_paths"):
        given = re.search(rf"--data\.{key}='\[(.*?)\]'", make).group(1).split(",")
        assert [g.replace("$(DEFAULT_MR_OUT)", "runs/default-mr") for g in given] == getattr(
            recipe.data, key
        )


def test_make_default_mr_cuts_extractive_qa_sentences_only_when_asked():
    """The shipped data has no extractive_qa unanswerable variants: make default-mr passes
    --unanswerable-families only when DEFAULT_MR_EXTRACTIVE_UNANSWERABLE asks for them, and
    then to the extractive_qa call alone."""
    import subprocess

    def calls(*var: str) -> list[str]:
        out = subprocess.run(
            ["make", "-n", "-B", "default-mr-data", "DEFAULT_MR_OUT=o", *var],
            cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return [c for c in out.replace("\\\n", " ").splitlines() if "synth --teacher" in c]

    shipped = calls()
    assert len(shipped) == 7 and not any("--unanswerable-families" in c for c in shipped)
    asked = calls("DEFAULT_MR_EXTRACTIVE_UNANSWERABLE=0.5")
    changed = [c for c in asked if c not in shipped]
    assert len(changed) == 1 and "--out o/synth/extractive " in changed[0]
    assert changed[0].split()[-4:] == [
        "--unanswerable", "0.5", "--unanswerable-families", "extractive_qa"
    ]  # fmt: skip


#: train.* keys that do not change the trained weights (an adapter trained before they existed
#: is still the recipe's)
RUN_ONLY_KEYS = ("timeout_minutes",)
#: data.* keys added since, with the value that trains what the adapter was trained on
ADDED_DATA_KEYS = {"no_information_keep_by_family": {}}


def test_the_shipped_adapter_was_trained_by_make_default_mr():
    """The packaged ``default-mr`` adapter is what ``make default-mr`` (its default seed and
    learning rate) retrains: its ``train_info.json`` holds the committed recipe, up to the
    output folder the run chose and the precision the machine resolved ``auto`` to. A recipe
    changed without retraining (or an adapter from an older recipe) fails here."""
    import json
    import re

    from chunkwise.config import config_to_dict
    from chunkwise.llm import default_mr

    info = default_mr.package_dir() / "train_info.json"
    if not info.is_file():
        pytest.skip("no hf:default-mr adapter committed")
    shipped = json.loads(info.read_text(encoding="utf-8"))["recipe"]
    recipe = load_config(Recipe, REPO / "recipes" / "embedded" / "default-mr.yaml")
    committed = config_to_dict(recipe)  # what the training loop writes into train_info
    run = shipped["output_dir"].removesuffix("/train")
    for key in ("paths", "reduce_only_paths"):
        shipped["data"][key] = [p.replace(run, "runs/default-mr", 1) for p in shipped["data"][key]]
    shipped["output_dir"] = committed["output_dir"]
    assert committed["train"].pop("precision") == "auto"
    assert shipped["train"].pop("precision") in ("bf16", "fp32")
    # keys added since that change how the ranks wait, not what trains
    for key in RUN_ONLY_KEYS:
        shipped["train"].setdefault(key, committed["train"][key])
    for key, value in ADDED_DATA_KEYS.items():
        shipped["data"].setdefault(key, value)
    assert shipped == committed
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    for var, value in (("SEED", recipe.train.seed), ("LR", recipe.train.lr)):
        default = re.search(rf"^DEFAULT_MR_{var} \?= (\S+)", make, re.M).group(1)
        assert float(default) == float(value) == float(shipped["train"][var.lower()])


def test_every_recipe_option_is_documented():
    """Each option is declared once with a #: comment (#46): `chunkwise train --help` lists
    them all from the declaration."""
    import dataclasses

    from chunkwise.config import field_docs
    from chunkwise.train import recipe as r

    for cls in (r.LoraConfig, r.ModelConfig, r.DataConfig, r.BatchingConfig, r.TrainConfig):
        assert sorted(field_docs(cls)) == sorted(f.name for f in dataclasses.fields(cls)), cls
    for cls in (r.WandbConfig, r.Recipe):
        assert sorted(field_docs(cls)) == sorted(f.name for f in dataclasses.fields(cls)), cls


def test_a_bad_value_in_a_recipe_names_its_line(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("data:\n  paths: [x.jsonl]\ntrain:\n  lr: 0\n  warmup_ratio: 2\n")
    with pytest.raises(BadInput) as e:
        load_recipe(path, check_paths=False)
    assert (
        str(e.value)
        == f"{path}:5: option train.warmup_ratio=2 is not valid; expected a number in [0, 1)"
    )
