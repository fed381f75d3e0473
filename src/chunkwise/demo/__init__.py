"""The project's main job at laptop scale: documents -> Pyramid-Align synthesis -> training in
standard and MapReduce mode -> evaluation under both decodings -> comparison.

``chunkwise demo [--size smoke|small|full] [--out runs/demo]``; see :mod:`.pipeline`.
"""

from chunkwise.demo.errors import DemoError
from chunkwise.demo.pipeline import STAGES, Demo
from chunkwise.demo.sizes import SIZES, DemoSize, get_size

__all__ = ["SIZES", "STAGES", "Demo", "DemoError", "DemoSize", "get_size"]
