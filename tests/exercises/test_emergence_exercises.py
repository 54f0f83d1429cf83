"""Chapter 8's checkers accept the reference solutions and reject the usual mistakes."""
import numpy as np
from scipy import stats as sps

from qkgeometry.exercises.emergence import check_change_point, check_lag_interval, check_shift_contrast


def change_point(steps, values, fraction):
    u = (values - values[0]) / (values[-1] - values[0])
    k = int(np.argmax(u >= fraction))
    if k == 0:
        return float(steps[0])
    return float(steps[k - 1] + (fraction - u[k - 1]) / (u[k] - u[k - 1]) * (steps[k] - steps[k - 1]))


def lag_interval(lags):
    lags = np.asarray(lags, dtype=float)
    half = sps.t.ppf(0.975, len(lags) - 1) * lags.std(ddof=1) / np.sqrt(len(lags))
    return lags.mean(), lags.mean() - half, lags.mean() + half


def shift(table):
    t = table.shape[0]
    visible = np.tril(np.ones((t, t), bool))
    gaps = [table[i, i - 1] - np.delete(table[i, : i + 1], i - 1).mean() for i in range(1, t)]
    return np.mean(gaps) / table[visible].std()


def test_reference_solutions_pass():
    assert check_change_point(change_point)
    assert check_lag_interval(lag_interval)
    assert check_shift_contrast(shift)


def test_usual_mistakes_fail(capsys):
    rising_only = lambda s, v, f: float(s[int(np.argmax(v >= v[0] + f * (v[-1] - v[0])))])  # noqa: E731
    assert not check_change_point(rising_only)
    z = lambda lags: (np.mean(lags), np.mean(lags) - 1.96 * np.std(lags, ddof=1) / np.sqrt(len(lags)),  # noqa: E731
                      np.mean(lags) + 1.96 * np.std(lags, ddof=1) / np.sqrt(len(lags)))
    assert not check_lag_interval(z)
    assert "Student" in capsys.readouterr().out
    all_entries = lambda g: (np.mean(np.diag(g, -1)) - g.mean()) / g.std()  # noqa: E731
    assert not check_shift_contrast(all_entries)
    assert not check_change_point(lambda s, v, f: 1 / 0)
