"""The Python API survives the HDF5 library crashing on a damaged golden: the first opening in a
process walks the golden in a forked child (_screen.py); a crash there, or damage HDF5 itself
reports, keeps the golden out of this process (CorruptTrace), and verify reads in a child."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

import tracekit
from tracekit.store import _screen
from tracekit.store._backends import hdf5

from ..support import golden, write_steps

# 4 KiB zeroed over HDF5's metadata of goldens/estimator_model.h5 (its groups' object headers and
# link storage) crashed tracekit.verify() in the caller's process once (SIGSEGV in HDF5's link
# iteration). The offsets are found in the golden as it is: the object header of each of these.
OBJECTS = ("initial", "blocks", "meta")


def _header_offset(path, name):
    """The file offset of an object's header: HDF5's address, past the 512-byte user block."""
    import h5py

    with h5py.File(path, "r") as f:
        return f.userblock_size + h5py.h5o.get_info(f[name].id).addr


@pytest.fixture(autouse=True)
def fresh_screen(monkeypatch):
    monkeypatch.delenv("TRACEKIT_SCREEN", raising=False)
    _screen.forget()
    yield
    _screen.forget()


def _zeroed(tmp_path, source, offset):
    path = str(tmp_path / ("zeroed-%d.h5" % offset))
    shutil.copyfile(source, path)
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(bytes(4096))
    return path


@pytest.mark.parametrize("name", OBJECTS)
def test_damage_that_crashed_the_api_is_reported_in_process(tmp_path, name):
    path = _zeroed(tmp_path, golden("estimator_model"), _header_offset(golden("estimator_model"), name))
    try:  # this process lives on: the reads that crash happen in a child
        result = tracekit.verify(path)
        assert not result.ok and result.problems
    except tracekit.CorruptTrace as exc:  # a file that cannot be opened at all is said so, by name
        assert str(exc).startswith(path)
    try:
        with tracekit.open(path) as trace:
            for step in [trace.initial] + list(trace):
                for key in step:
                    try:
                        step[key]
                    except tracekit.CorruptTrace:
                        pass
    except tracekit.CorruptTrace as exc:
        assert str(exc).startswith(path)


def _dying_walk(path):
    os.kill(os.getpid(), signal.SIGSEGV)


def test_a_crash_in_the_walk_keeps_the_golden_out_of_this_process(tmp_path, monkeypatch):
    path = write_steps(str(tmp_path / "g.h5"), 2)
    _screen.forget()  # written here: trusted until forgotten
    monkeypatch.setattr(hdf5, "walk", _dying_walk)
    for _ in range(2):  # the answer is kept: the second opening says the same without a walk
        with pytest.raises(tracekit.CorruptTrace, match=r"g\.h5: the HDF5 library crashed \(SIGSEGV\) reading its "
                                                        r"structure, in a child process; the file is damaged"):
            tracekit.open(path)
    assert len(_screen._answers) == 1
    os.utime(path, ns=(1, 1))  # the file changed: walked again
    monkeypatch.setattr(hdf5, "walk", lambda p: ())
    with tracekit.open(path) as trace:
        assert len(trace) == 2


def test_a_walk_killed_by_another_signal_says_so_and_is_not_kept(tmp_path, monkeypatch):
    # SIGKILL (an out-of-memory killer) is no crash of the library: nothing is known of the file.
    path = write_steps(str(tmp_path / "g.h5"), 2)
    _screen.forget()
    monkeypatch.setattr(hdf5, "walk", lambda p: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(tracekit.TracekitError, match=r"killed \(SIGKILL\), not by a crash of the HDF5 library") as info:
        tracekit.open(path)
    assert not isinstance(info.value, tracekit.CorruptTrace) and not _screen._answers
    monkeypatch.setattr(hdf5, "walk", lambda p: ())  # the next opening walks again
    with tracekit.open(path) as trace:
        assert len(trace) == 2


@pytest.mark.usefixtures("all_chunked")  # a dataset for every value: HDF5 metadata throughout the file
def test_damage_hdf5_reports_keeps_the_golden_out_and_verify_lists_it(tmp_path):
    # A zeroed block in the middle of a golden's HDF5 metadata: HDF5 raises reading it.
    source = write_steps(str(tmp_path / "g.h5"), 8)
    walked = {}
    for offset in range(0, os.path.getsize(source) - 4096, 4096):
        path = _zeroed(tmp_path, source, offset)
        try:
            found = _screen._walked(path, hdf5.walk)
        finally:
            os.remove(path)
        if found.damage and found.unopened is None:
            walked[offset] = found
            break
    assert walked, "no block of the golden's metadata made HDF5 raise"
    offset, found = next(iter(walked.items()))
    path = _zeroed(tmp_path, source, offset)
    with pytest.raises(tracekit.CorruptTrace, match=r"HDF5 reports damage in the file's structure \(\d+ errors?, "
                                                    r"first: .*\); reading it in this process could crash"):
        tracekit.open(path)
    result = tracekit.verify(path)
    assert not result.ok and result.problems


def test_a_golden_this_process_wrote_is_not_walked(tmp_path, monkeypatch):
    monkeypatch.setattr(_screen, "_walked", lambda *args: pytest.fail("walked a golden this process wrote"))
    path = write_steps(str(tmp_path / "g.h5"), 3)
    with tracekit.open(path) as trace:
        assert len(trace) == 3


def test_the_screen_can_be_turned_off(tmp_path, monkeypatch):
    path = write_steps(str(tmp_path / "g.h5"), 2)
    _screen.forget()
    monkeypatch.setenv("TRACEKIT_SCREEN", "0")
    monkeypatch.setattr(_screen, "_walked", lambda *args: pytest.fail("walked with TRACEKIT_SCREEN=0"))
    with tracekit.open(path) as trace:
        assert len(trace) == 2


def test_a_healthy_golden_walks_clean(tmp_path):
    for name in ("estimator_model", "slim_resnet"):
        found = _screen._walked(golden(name), hdf5.walk)
        assert found.whole, found


def test_a_whole_answer_is_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))  # no other test's forget() reaches it
    path = shutil.copyfile(golden("seed_example"), str(tmp_path / "g.h5"))
    log = tmp_path / "walks"  # the walk runs in a child: it leaves its mark in a file

    def walk(p):
        with open(str(log), "a") as fh:
            fh.write("walked\n")
        return ()
    monkeypatch.setattr(hdf5, "walk", walk)

    def walks():
        return len(log.read_text().splitlines()) if log.exists() else 0
    tracekit.open(path).close()
    assert walks() == 1 and _screen._kept(path, _screen._identity(path))
    _screen._answers.clear()  # another process: nothing in memory, the answer on disk
    tracekit.open(path).close()
    assert walks() == 1
    _screen._answers.clear()
    os.utime(path, ns=(1, 1))  # changed: walked again
    tracekit.open(path).close()
    assert walks() == 2


def test_a_damaged_answer_is_never_kept_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    path = shutil.copyfile(golden("seed_example"), str(tmp_path / "g.h5"))
    monkeypatch.setattr(hdf5, "walk", lambda p: ("a damaged B-tree node",))
    with pytest.raises(tracekit.CorruptTrace, match="HDF5 reports damage"):
        tracekit.open(path)
    assert not _screen._kept(path, _screen._identity(path))
    assert not os.path.exists(os.path.join(_screen.cache_dir(), _screen.SCREENED))
