"""RULER-style synthetic tasks at any length, offline, in the benchmark record shape.

The task set and its settings follow NVIDIA/RULER (``scripts/synthetic.yaml`` and
``scripts/data/synthetic/*.py``); names are RULER's:

=================  ===========================================================  ==========
task               what is hidden and asked                                     haystack
=================  ===========================================================  ==========
niah_single_1      one word key -> one 7-digit number                           noise
niah_single_2      one word key -> one 7-digit number                           essay
niah_single_3      one word key -> one UUID                                     essay
niah_multikey_1    four word keys, one number each; one key asked               essay
niah_multikey_2    one word key -> number among distractor needles              needles
niah_multikey_3    one UUID key -> UUID among distractor needles                needles
niah_multivalue    one word key with four numbers; all four asked               essay
niah_multiquery    four word keys, one number each; all four asked              essay
vt                 one chain ``VAR A = 12345``, ``VAR B = VAR A``, ... (4 hops)  noise
                   hidden line by line; every variable holding the value asked
cwe                numbered word list: 10 words 30 times each, the rest 3 times
                   (6 and 1 below 4K tokens); the 10 common words asked
fwe                coded words with Zipf counts (alpha 2, '...' ranked first);
                   the three next most frequent asked
=================  ===========================================================  ==========

Haystacks: ``noise`` is the repeated noise sentence (InfiniteBench's and RULER's), ``essay``
is Python's own language reference (``pydoc_data.topics``, shipped with CPython, PSF License;
RULER uses Paul Graham's essays, which would need a download), whitespace-normalised and
repeated when a context needs more words, with needles put at sentence ends; ``needles`` is a
haystack made only of needles with other keys.

Length: ``length_tokens`` is the token count of the **context** (the instructions and the
question add some tens of tokens), measured with the caller's ``count_tokens``. The repeated
unit (noise line, essay word, distractor needle, distinct list word, coded word) is sized by
two small probes and secant steps on full contexts (about three tokenizations of a full
context), then each example is measured once and re-sized only if its own random content puts
it more than 1% off. Needles: across ``n`` examples the first answer needle's depth sweeps
0 -> 1 (a single example sits in the middle); further needles take distinct depths from
RULER's grid of 40 depths; vt's chain lines take random positions in order (RULER's rule).
Everything is drawn from ``random.Random`` seeded with the task and ``seed``, so a seed always
gives the same records.

What differs from RULER, on purpose: RULER sizes the whole prompt (template + context +
generated tokens) to the sequence length; RULER's vt and cwe prompts carry a worked example
(few-shot), which a chunked reader would meet as a chunk of the document, so ours have none;
the wording of needles and questions is ours (``prompts/ruler.yaml``); word keys pair our own
adjective and noun lists (RULER uses wonderwords'); cwe draws real words from the Python
reference (~2,500 of them) and, when a long list needs more, made-up pronounceable words too
(RULER falls back to a larger English word list).

Records: ``{id, context, input, answer, options, meta}``; ``answer`` is the list of expected
strings (scored by the fraction present in the prediction, RULER's ``string_match_all``),
``meta`` holds what the question templates need (``query``, ``kind``, ``count``, ...), the
answer needles' depths and the measured ``tokens``.
"""

from chunkwise.data.ruler.haystacks import essay
from chunkwise.data.ruler.questions import render_answer_prefix, render_question
from chunkwise.data.ruler.records import GENERATORS, generate
from chunkwise.data.ruler.tasks import (
    TASKS,
    CommonWords,
    FrequentWords,
    Niah,
    VariableTracking,
    zeta,
)
from chunkwise.data.ruler.wording import KIND_NAMES, prompt_version, templates
from chunkwise.data.ruler.words import ADJECTIVES, NOUNS, reference_words

__all__ = [
    "ADJECTIVES",
    "GENERATORS",
    "KIND_NAMES",
    "NOUNS",
    "TASKS",
    "CommonWords",
    "FrequentWords",
    "Niah",
    "VariableTracking",
    "essay",
    "generate",
    "prompt_version",
    "reference_words",
    "render_answer_prefix",
    "render_question",
    "templates",
    "zeta",
]
