"""The API reference's docstrings as the site renders them: a griffe extension that mkdocstrings
loads (mkdocs.yml).

The docstrings are written for readers of the code, in Google style with Sphinx's inline roles
(``:class:`~dpnc.privacy.noise.NoiseSource```) and literal-block markers (``loop::``). mkdocstrings
renders Markdown, where those print as they are typed. This extension rewrites each docstring once,
when griffe loads it: a role becomes a code span of its target (the last component where Sphinx's
``~`` asks for it), and a paragraph ending in ``::`` ends in ``:`` (the indented block after it is a
Markdown code block already). The source stays as it is, so no module changes for the site's sake.
Not imported by the library (griffe is in the ``docs`` extra)."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|term|ref|math):`(~?)([^`]+)`"
)
LITERAL = re.compile(
    r"(?<=\S)::$", re.MULTILINE
)  # "the loop::" → "the loop:"; a lone "::" line is left alone


def markdown(text: str) -> str:
    """``text`` with Sphinx roles as code spans and ``::`` literal markers as ``:``.

    Examples:
        >>> markdown("the :class:`~dpnc.privacy.noise.NoiseSource` and :func:`dpnc.make_private`; a loop::")
        'the `NoiseSource` and `dpnc.make_private`; a loop:'
    """

    def span(match: re.Match) -> str:
        short, target = match.groups()
        target = target.strip()
        if "<" in target and target.endswith(">"):  # :class:`title <target>`
            return f"`{target.split('<', 1)[0].strip()}`"
        return f"`{target.rsplit('.', 1)[-1] if short else target}`"

    return LITERAL.sub(":", ROLE.sub(span, text))


class RestRoles(griffe.Extension):
    """Rewrite every loaded object's docstring with :func:`markdown`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
