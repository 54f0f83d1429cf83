"""Test-session setup shared by every test module. Slow tests (book builds, notebook runs, big offline models)
carry ``@pytest.mark.slow`` themselves; `make test-fast` deselects them."""
import os

# Bitwise reproducibility of CPU training (tests/training compares losses with ==): MKL must be in Conditional
# Numerical Reproducibility mode before its first call. The Makefile exports the same setting.
os.environ.setdefault("MKL_CBWR", "AUTO")
