"""Text from the service, made safe to show: one helper for every place scanwatch prints what it was sent.

A name or value may carry terminal escape sequences (repainting the screen, retitling the window, hiding
text), bidirectional overrides, line separators or lone surrogates. Shown raw, they act on the reader's
terminal; escaped, they are visible and inert. (What leaves as a label or a notification is cleaned
instead, by `pipelines/snapshot/labels.py`, which holds the one list of bidi characters.)
"""

from __future__ import annotations

from pipelines.snapshot.labels import BIDI

_ESCAPE = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]}
_ESCAPE.update({c: f"\\u{c:04x}" for c in [*BIDI, 0x2028, 0x2029, *range(0xD800, 0xE000)]})


def printable(text: object) -> str:
    """``text`` with control characters, bidi overrides and lone surrogates written as visible escapes."""
    return str(text).translate(_ESCAPE)
