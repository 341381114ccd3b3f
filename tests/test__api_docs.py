"""dpnc._api_docs: Sphinx roles become code spans and ``::`` markers a colon, in the text and in every
docstring griffe loads with the extension (the API pages of the site)."""

import pytest

griffe = pytest.importorskip("griffe")  # the docs extra; dpnc._api_docs imports it

from dpnc._api_docs import RestRoles, markdown  # noqa: E402


@pytest.mark.parametrize(
    "text, expected",
    [
        (":class:`dpnc.privacy.Accountant`", "`dpnc.privacy.Accountant`"),
        (":class:`~dpnc.privacy.Accountant`", "`Accountant`"),
        (":py:func:`~dpnc.make_private` and :mod:`dpnc.lm`", "`make_private` and `dpnc.lm`"),
        (":meth:`the step <dpnc.tier.DPZeroOptimizer.step>`", "`the step`"),
        (":data:` ALL `", "`ALL`"),
        ("``code`` and :unknown:`x`", "``code`` and :unknown:`x`"),
    ],
)
def test_roles_become_code_spans(text, expected):
    assert markdown(text) == expected


def test_a_literal_marker_ends_its_paragraph_in_a_colon_and_a_lone_one_stays():
    text = "The loop::\n\n    for x in xs: ...\n\n::\n\n    raw"
    assert markdown(text) == "The loop:\n\n    for x in xs: ...\n\n::\n\n    raw"
    assert markdown("a ratio 2::3 inside a line") == "a ratio 2::3 inside a line"


def test_every_loaded_docstring_is_rewritten():
    module = griffe.load("dpnc.declared", extensions=griffe.load_extensions(RestRoles))
    for obj in (module, module["tell_owner"], module["DataWarning"]):
        assert ":class:`" not in obj.docstring.value and ":func:`" not in obj.docstring.value
    assert "as a `DataWarning`" in module["tell_owner"].docstring.value
