"""Fixtures of the Hub reader's tests: the tiny models (built once per module) served by a loopback emulator of the
Hub, with fresh caches and a time limit per test."""

from __future__ import annotations

import signal

import pytest

from hub_emulator import HubEmulator, hub_env
from hub_models import TIME_LIMIT_S, TINY, llama_shards, tiny_folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub-models")
    out = {t: tiny_folder(t, root / t) for t in TINY}
    out["sharded"] = llama_shards(root / "sharded")[0]
    return out


@pytest.fixture
def hub(folders, tmp_path, monkeypatch):
    def expired(*_):
        raise TimeoutError(f"a Hub test ran past {TIME_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TIME_LIMIT_S)
    try:
        with HubEmulator() as emulator:
            for t, folder in folders.items():
                emulator.add_repo(f"tiny/{t}", folder)
            hub_env(monkeypatch, emulator, tmp_path)
            yield emulator
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


