"""dpnc.declared: remarks on declared public inputs, made only where they are far off, and said to
the owner as a DataWarning that points at the caller."""

import warnings

import pytest

from dpnc.declared import FAR, PREFIX, DataWarning, delta_note, n_note, tell_owner


@pytest.mark.parametrize("rows", [1, 10, 1400])
def test_n_within_a_factor_of_the_rows_passes_and_beyond_it_is_remarked_on(rows):
    for n in (rows, int(rows * FAR), max(1, -(-rows // int(FAR)))):
        assert n_note(n, rows) is None, n
    assert "much larger than" in n_note(int(rows * FAR) + 1, rows)
    if rows >= 10:
        assert "much smaller than" in n_note(rows // 10, rows)


def test_n_note_says_the_sizes_and_what_follows():
    small = n_note(100, 1400)
    assert "n = 100" in small and "1,400 rows" in small and "14.0× the batch size" in small
    large = n_note(10**6, 1400)
    assert "n = 1,000,000" in large and "nearly empty" in large
    assert "nearly empty" in n_note(5, 0)  # no rows at all


def test_delta_note_from_one_over_n_on_with_a_smaller_suggestion():
    assert delta_note(0.999 / 1000, 1000) is None
    note = delta_note(1 / 1000, 1000)
    assert note is not None and "1/n = 0.001" in note
    suggested = float(note.rsplit("e.g. ", 1)[1].rstrip(")"))
    assert suggested <= 0.1 / 1000


def test_tell_owner_warns_with_the_prefix_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tell_owner("n looks off", stacklevel=2)
    [warning] = caught
    assert warning.category is DataWarning and issubclass(DataWarning, UserWarning)
    assert str(warning.message) == PREFIX + "n looks off"
    assert warning.filename == __file__
