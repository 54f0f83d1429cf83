"""qkgeometry.tables: what a reader sees in a table cell."""

import numpy as np
import pandas as pd
import pytest

from qkgeometry.tables import show_table, tidy_number


def test_show_table_hides_index_rounds_and_renames():
    frame = pd.DataFrame({"symmetry_median": [0.491347, 4.440892e-16], "n": [3, 4], "note": [None, "x"]},
                         index=pd.Index(["a", "b"], name="model"))
    html = show_table(frame, {"symmetry_median": "median symmetry", "n": "layers", "note": "note"}).to_html()
    assert "median symmetry" in html and "symmetry_median" not in html
    assert "0.491" in html and "0.491347" not in html and "e-16" not in html
    assert "—" in html and ">model<" not in html and ">a<" not in html


def test_tidy_number_cells():
    assert tidy_number(np.float64(-1e-9)) == "0.000"
    assert tidy_number([0.5, 1]) == "0.500, 1"
    assert tidy_number(np.nan) == "—"


def test_unknown_column_is_named():
    with pytest.raises(KeyError, match="nope"):
        show_table(pd.DataFrame({"a": [1]}), ["nope"])


def test_stats_box_shows_a_sentence_and_folds_the_statistics():
    from qkgeometry import stats
    from qkgeometry.tables import stats_box

    box = stats_box(stats.judge(stats.t_interval([0.2, 0.3, 0.25]), "A higher", "B higher", "gap"))
    html = box._repr_html_()
    assert str(box) == "A higher: gap 0.25 (95% CI 0.13 to 0.37)."
    assert html.index("A higher") < html.index("<details") and "3 values" in html.split("<details")[1]
    with pytest.raises(ValueError, match="verdicts: pass at least one"):
        stats_box()


def test_mode_note_follows_the_flag():
    from qkgeometry.tables import mode_note

    quick = mode_note(True, "A smoke test.", "Full scale: 20,000 draws.")
    assert 'data-mode="quick"' in quick._repr_html_() and "A smoke test." in quick._repr_html_()
    assert 'data-mode="full"' in mode_note(False, "A smoke test.", "Full scale.")._repr_html_()
    assert mode_note(False, "A smoke test.")._repr_html_() == ""  # nothing to say at full scale: no box
    with pytest.raises(TypeError, match="quick: expected the notebook's QUICK flag"):
        mode_note("yes", "x")


def test_collapsed_wraps_a_table_behind_its_summary():
    import pandas as pd

    from qkgeometry.tables import collapsed, show_table

    box = collapsed(show_table(pd.DataFrame({"model": ["a", "b"], "s": [0.5, 0.25]})), "Show all 2 rows")
    html = box._repr_html_()
    assert html.startswith('<details class="qkg-collapsed"><summary>Show all 2 rows</summary>')
    assert "<table" in html and "0.250" in html and html.endswith("</details>") and str(box) == "Show all 2 rows"
    with pytest.raises(ValueError, match="summary"):
        collapsed(pd.DataFrame(), " ")


def test_same_values_names_the_first_row_a_row_repeats():
    import pandas as pd

    from qkgeometry.tables import same_values

    frame = pd.DataFrame({"model": ["beit-224", "beit-384", "beit-512", "other", "none"],
                          "s": ["0.26", "0.26", "0.26", "0.30", None], "d": ["-0.14", "-0.14", "-0.15", "-0.14", None]})
    assert same_values(frame, ["s", "d"], "model").tolist() == ["", "beit-224", "", "", ""]
    assert same_values(frame, ["s"], "model").tolist() == ["", "beit-224", "beit-224", "", ""]
    with pytest.raises(KeyError, match="not in the frame"):
        same_values(frame, ["x"], "model")


def test_stats_box_labels_say_which_result_is_which():
    from qkgeometry import stats
    from qkgeometry.tables import stats_box

    a = stats.judge(stats.t_interval([0.2, 0.3, 0.25]), "A higher", "B higher", "gap")
    b = stats.judge(stats.t_interval([-0.1, 0.1, 0.05]), "A higher", "B higher", "gap")
    html = stats_box(a, b, with_sentence=False, labels=["our models", "the authors' stacks"])._repr_html_()
    assert html.index("our models") < html.index("the authors&#x27; stacks")
    assert html.count('<table class="qkg-stats-table">') == 2
    with pytest.raises(ValueError, match="one per verdict"):
        stats_box(a, b, labels=["only one"])


def test_show_value_honours_display_as_glue_does(capsys):
    """``display`` says whether the book's cell shows the value: then the learner's cell shows it the same way (the
    value alone); otherwise under its name, so that the value the text quotes can be found."""
    from qkgeometry.tables import show_value

    show_value("gap", -0.25, display=True)
    show_value("gap", -0.25, display=False)
    show_value("words", "no detectable difference", display=True)
    assert capsys.readouterr().out.splitlines() == ["\u22120.250", "gap: \u22120.250", "no detectable difference"]
