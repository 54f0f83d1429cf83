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
