"""Figure tests draw with the Agg backend and close every figure they open; ``book_style`` draws in the book's
style and restores matplotlib's settings afterwards."""

import matplotlib
import pytest

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def book_style():
    from qkgeometry import plotting

    with matplotlib.rc_context():
        plotting.use_style()
        yield
