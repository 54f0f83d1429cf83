"""Test-session setup shared by every test module."""
import os

import pytest

# Bitwise reproducibility of CPU training (tests/test_training.py compares losses with ==): MKL must be in
# Conditional Numerical Reproducibility mode before its first call. The Makefile exports the same setting.
os.environ.setdefault("MKL_CBWR", "AUTO")

#: Tests that run notebooks through papermill (a kernel start each), by module. Book builds are found by their
#: fixture (``tiny_html``) or name. All of them are marked ``slow``: `make test-fast` deselects them, `make test`
#: runs them. Modules can also mark their own slow tests with ``@pytest.mark.slow``.
PAPERMILL_TESTS = {
    "test_notebooks.py": {"test_runner_passes_quick_and_hides_injected_cell", "test_runner_fails_on_a_broken_cell",
                          "test_figures_render_even_when_mplbackend_is_agg"},
}
BOOK_BUILD_FIXTURES = {"tiny_html"}
BOOK_BUILD_TESTS = {"test_book.py": {"test_broken_cross_reference_fails_the_build"}}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.name
        name = getattr(item, "originalname", item.name)
        if (name in PAPERMILL_TESTS.get(module, ()) or name in BOOK_BUILD_TESTS.get(module, ())
                or BOOK_BUILD_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)
