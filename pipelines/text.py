"""Text from the service, made safe to show: one helper for every place scanwatch prints what it was sent.

A name or value may carry terminal escape sequences (repainting the screen, retitling the window, hiding
text), bidirectional overrides or lone surrogates. Shown raw, they act on the reader's terminal; escaped,
they are visible and inert.
"""

from __future__ import annotations

_BIDI = [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPE = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]}
_ESCAPE.update({c: f"\\u{c:04x}" for c in [*_BIDI, *range(0xD800, 0xE000)]})


def printable(text: object) -> str:
    """``text`` with control characters, bidi overrides and lone surrogates written as visible escapes."""
    return str(text).translate(_ESCAPE)
