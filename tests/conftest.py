"""Test-session setup shared by every test module."""
import os

# Bitwise reproducibility of CPU training (tests/test_training.py compares losses with ==): MKL must be in
# Conditional Numerical Reproducibility mode before its first call. The Makefile exports the same setting.
os.environ.setdefault("MKL_CBWR", "AUTO")
