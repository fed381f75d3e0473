"""How settings are declared, read, converted and written: one options system for the eval
config, training recipes, synthesis, strategies and model backends.

A configurable thing declares its options once, as a dataclass with a ``#:`` doc comment per
field (strategies: their constructor's annotated parameters). Every way of setting them goes
through one converter with one error format (:mod:`.convert`):

- a YAML file plus ``--key=value`` overrides (:func:`load_config`, :mod:`.build`),
- command-line flags generated from the declaration (:mod:`.flags`, help from :mod:`.docs`),
- ``--strategy-args k=v`` and a model spec's ``?key=value`` (:mod:`chunkwise.options`).

YAML reading and writing (duplicate keys refused, atomic writes) lives in :mod:`.yaml_io`.
"""

from chunkwise.config.build import Override, fields_of, load_config, parse_override
from chunkwise.config.convert import (
    bad_value,
    convert,
    describe,
    parse_pairs,
    unknown_options,
    value_from_text,
)
from chunkwise.config.docs import field_docs
from chunkwise.config.yaml_io import (
    MAX_YAML_DEPTH,
    config_to_dict,
    dump_yaml,
    load_yaml,
    to_yaml,
)

#: the old name of :func:`describe` (a type in words)
type_name = describe

__all__ = [
    "MAX_YAML_DEPTH",
    "Override",
    "bad_value",
    "config_to_dict",
    "convert",
    "describe",
    "dump_yaml",
    "field_docs",
    "fields_of",
    "load_config",
    "load_yaml",
    "parse_override",
    "parse_pairs",
    "to_yaml",
    "type_name",
    "unknown_options",
    "value_from_text",
]
