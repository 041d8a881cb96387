"""A local tokenizer's files are statted at most once every `files.RECHECK_SECONDS` per path: a
request costs a dict lookup, and an edit is seen once that interval has passed."""

import os

from kvadmin.model_tokenizer import files
from kvadmin.routing.local_tokenize import files_version


def _write(path, text: str, version: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(1_700_000_000_000_000_000 + version,) * 2)


def test_an_edit_is_seen_only_once_the_files_are_statted_again(tmp_path, monkeypatch) -> None:
    path = tmp_path / "tokenizer.json"
    _write(path, "{}", version=1)
    monkeypatch.setattr(files, "RECHECK_SECONDS", 3600.0)
    before = files_version(str(path))

    _write(path, "{ }", version=2)

    assert files_version(str(path)) == before  # within the interval: not statted again
    monkeypatch.setattr(files, "RECHECK_SECONDS", 0.0)
    assert files_version(str(path)) != before
