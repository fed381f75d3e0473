"""``python -m chunkwise.data.families``: every family's question and evidence templates with
their split and the wordings digest, as JSON (what a model card's template table renders
from: ``bench/docs_numbers.py --publish``, ``table=chunkwise.data.families.wordings.split_table``)."""

import json

from chunkwise.data.families.wordings import summary

print(json.dumps(summary(), indent=1))
