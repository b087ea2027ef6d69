"""Text from the service as it leaves scanwatch: one line, bounded, nothing in it that acts on a reader.

Every label value of every family the exporter serves, and of every backfilled series, passes through
`label_values`: Prometheus stores it, alert annotations are built from it, and Alertmanager and Grafana
send those to Slack, e-mail and webhooks. So one bound holds for all of them: a project name, an address
or a title cannot make a series too long for a Prometheus with `label_value_length_limit` (the longest
value is 256 characters, at most 1,024 bytes in UTF-8), cannot grow a Slack post or a webhook body past a
few kilobytes per alert, and cannot carry a line break, a terminal escape, a bidirectional override or a
line separator into a message. Escaping for each receiver's own syntax (Slack's `&`, `<`, `>`, HTML) is
the receiver template's work (`prometheus/templates/secscan.tmpl`); this module makes the text safe to
place anywhere first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

# The bidirectional marks, embeddings, overrides and isolates: text shown in another order than it is
# stored. One list for every way out (`pipelines/core/text.py` escapes them for a terminal, this module removes them).
BIDI = (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
# Line breaks of every kind become one space, so words stay apart: CR, LF, VT, FF, NEL, and the Unicode
# line and paragraph separators.
_BREAKS = re.compile("[\t\n\v\f\r\x1c-\x1f\x85\u2028\u2029]+")
# Removed outright: the other C0 and C1 controls and DEL (terminal escapes), the bidi marks, and lone
# surrogates (not encodable as UTF-8 at all).
_REMOVED = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff" + "".join(map(chr, BIDI)) + "]")
ELLIPSIS = "…"

# Characters each label may keep. The contract allows a site address of 2,048 characters and says nothing
# of a title's length; a page needs neither whole. Ids are UUIDs by contract: the default cap still
# holds if the service sends something else.
LABEL_CAPS: dict[str, int] = {
    "address": 256,
    "location": 256,
    "title": 200,
    "project": 120,
    "workspace": 120,
}
DEFAULT_CAP = 128
MAX_LABEL_CHARACTERS = max(DEFAULT_CAP, *LABEL_CAPS.values())  # 256: at most 1,024 bytes in UTF-8


def one_line(text: str, cap: int) -> str:
    """`text` on one line, without controls, bidi marks or separators, cut to `cap` characters (`…` last)."""
    if len(text) <= cap and text.isprintable() and text[:1] != " " and text[-1:] != " ":
        return text  # the common case, and the cheap one: nothing to remove (isprintable is False for each)
    text = _REMOVED.sub("", _BREAKS.sub(" ", text)).strip()
    if len(text) > cap:
        text = text[: cap - 1].rstrip() + ELLIPSIS
    return text


@lru_cache(maxsize=1 << 16)
def label_value(label: str, value: str) -> str:
    """One label's value as it may leave scanwatch, capped for that label. Cached: a snapshot repeats its
    workspace, project and kind values on thousands of series."""
    return one_line(value, LABEL_CAPS.get(label, DEFAULT_CAP))


def label_values(labels: Sequence[str], values: Sequence[str], info: Any = None) -> tuple[list[str], Any]:
    """Every value of one series cleaned and capped by its label name; an info family's value (a mapping of
    label to value) alike. Returns (values, info)."""
    cleaned = list(map(label_value, labels, values))
    if isinstance(info, dict):
        info = {label: label_value(label, value) for label, value in info.items()}
    return cleaned, info
