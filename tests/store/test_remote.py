"""Goldens at URLs (store/remote.py): read by ranges from a real HTTP(S) server and an S3-compatible
one, both started here on 127.0.0.1; what is fetched is kept on disk under the golden's identity;
writing to a URL is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tracekit
from tracekit.cli import main
from tracekit.errors import GoldenNotFound, MissingDependency, RemoteError, UsageError
from tracekit.store import remote

from ..support import ROOT
from ..support.remote import RangedServer, moto_s3, random_golden, s3_environment, self_signed

pytestmark = pytest.mark.modern

STEPS, SHAPE = 256, (128, 256)  # 63 MB: a step holds 1/256 of it, a variable 4 more for its delta bases


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Each test its own range cache: xdist workers share the suite's."""
    folder = str(tmp_path / "cache")
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", folder)
    return folder


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder served over HTTP: the big golden, a small one, and another big one."""
    folder = str(tmp_path_factory.mktemp("site"))
    random_golden(os.path.join(folder, "big.h5"), STEPS, SHAPE, seed=1)
    random_golden(os.path.join(folder, "other.h5"), STEPS, SHAPE, seed=2)
    random_golden(os.path.join(folder, "small.h5"), 4, (16, 32), seed=3)
    with RangedServer(folder) as server:
        yield server


def _values(trace, k):
    step = trace.step(k)
    return {key: np.asarray(step[key]) for key in step}


def _same(a, b):
    assert a.keys() == b.keys() and all(np.array_equal(a[key], b[key]) for key in a)


def test_opening_and_reading_a_step_fetches_a_small_part_by_ranges(site):
    local = os.path.join(site.root, "big.h5")
    size = os.path.getsize(local)
    site.reset()
    before = remote.fetched.bytes
    with tracekit.open(site.url("big.h5")) as trace:
        assert (trace.path, len(trace), trace.complete) == (site.url("big.h5"), STEPS, True)
        got = _values(trace, 131)  # before a keyframe: the variable reads three delta bases too
        fetched = trace._backend._source.fetched.bytes
    with tracekit.open(local) as trace:
        _same(got, _values(trace, 131))
    assert site.sent == fetched == remote.fetched.bytes - before
    assert fetched < 0.05 * size, "%.1f%% of the golden fetched" % (100.0 * fetched / size)
    gets = [r for r in site.requests if r[0] == "GET"]
    assert gets and all(r[2] is not None and r[2].startswith("bytes=") for r in gets)


def test_a_second_opening_reads_from_the_range_cache(site, cache):
    with tracekit.open(site.url("big.h5")) as trace:
        first = _values(trace, 7)
    assert os.listdir(os.path.join(cache, remote.RANGES))
    site.reset()
    with tracekit.open(site.url("big.h5")) as trace:
        _same(first, _values(trace, 7))
    # Only the golden's first bytes, which say which cached blocks belong to it.
    assert site.sent == remote.HEAD
    assert [r[0] for r in site.requests] == ["HEAD", "GET"]


@pytest.mark.parametrize("validators", [True, False], ids=["etag", "no-validators"])
def test_another_golden_at_the_same_url_is_not_read_from_the_cache(site, tmp_path, validators):
    folder = str(tmp_path / "swap")
    os.mkdir(folder)
    with RangedServer(folder, validators=validators) as server:
        shutil.copy(os.path.join(site.root, "big.h5"), os.path.join(folder, "g.h5"))
        with tracekit.open(server.url("g.h5")) as trace:
            _values(trace, 3)
        shutil.copy(os.path.join(site.root, "other.h5"), os.path.join(folder, "new.h5"))
        os.replace(os.path.join(folder, "new.h5"), os.path.join(folder, "g.h5"))  # another recording's token
        server.reset()
        with tracekit.open(server.url("g.h5")) as trace, tracekit.open(os.path.join(site.root, "other.h5")) as other:
            _same(_values(trace, 3), _values(other, 3))
        assert server.sent > remote.HEAD


def test_a_golden_changed_in_place_is_known_by_its_etag(site, tmp_path):
    folder = str(tmp_path / "site")
    os.mkdir(folder)
    path = os.path.join(folder, "g.h5")
    shutil.copy(os.path.join(site.root, "small.h5"), path)
    with RangedServer(folder) as server:
        with tracekit.open(server.url("g.h5")) as trace:
            _values(trace, 1)
            before = trace._backend._source.key
        with open(path, "r+b") as fh:  # the same token and size: only the server's ETag tells
            fh.seek(-1, os.SEEK_END)
            last = fh.read(1)
            fh.seek(-1, os.SEEK_END)
            fh.write(last)
        os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10 ** 9))
        server.reset()
        with tracekit.open(server.url("g.h5")) as trace:
            _values(trace, 1)
            assert trace._backend._source.key != before
        assert server.sent > remote.HEAD


def test_a_torn_or_damaged_block_in_the_cache_is_fetched_again(site, cache):
    with tracekit.open(site.url("big.h5")) as trace:
        first = _values(trace, 9)
    (entry,) = os.listdir(os.path.join(cache, remote.RANGES))
    folder = os.path.join(cache, remote.RANGES, entry)
    blocks = sorted(name for name in os.listdir(folder) if name.isdigit())  # the first and last: read at opening
    with open(os.path.join(folder, blocks[0]), "r+b") as fh:  # torn: the end of the block is missing
        fh.truncate(1000)
    with open(os.path.join(folder, blocks[-1]), "r+b") as fh:  # damaged: one byte flipped
        fh.seek(100)
        byte = fh.read(1)
        fh.seek(100)
        fh.write(bytes([byte[0] ^ 0xFF]))
    site.reset()
    with tracekit.open(site.url("big.h5")) as trace:
        _same(first, _values(trace, 9))
    size = os.path.getsize(os.path.join(site.root, "big.h5"))
    assert site.sent == remote.HEAD + remote.BLOCK_SIZE + size % remote.BLOCK_SIZE  # those two blocks again


def test_show_verify_and_diff_take_a_url(site, tmp_path, capsys):
    # show and verify read in forked children, after this process read at URLs: the diff, read here
    # afterwards, hung until remote.py kept its filesystems referenced (remote._used).
    url = site.url("small.h5")
    assert main(["show", url]) == 0
    out = capsys.readouterr().out
    assert "golden    %s" % url in out and "state     complete" in out and "steps     4" in out
    assert main(["verify", url]) == 0
    assert capsys.readouterr().out.startswith("ok       %s: 4 steps" % url)
    actual = str(tmp_path / "actual.h5")
    shutil.copy(os.path.join(site.root, "small.h5"), actual)
    assert main(["diff", url, actual]) == 0
    assert capsys.readouterr().out.startswith("MATCH  %s vs golden %s" % (actual, url))
    assert main(["show", site.url("missing.h5")]) == 2
    assert "tracekit show: error: no golden at %s (the server answered 404 Not Found)" % site.url("missing.h5") \
        in capsys.readouterr().err


def test_a_replay_runs_against_a_golden_at_a_url(tmp_path):
    # The replay loop drives any framework's runner (tests/replay/test_loop.py's, in numpy, here):
    # tracekit.tf2.replay(URL, ...) is this loop on the trace tracekit.open(URL) returns.
    from tracekit.replay.loop import replay_steps

    from ..replay.test_loop import LR, NumpyRunner, _golden

    folder = tmp_path / "site"
    folder.mkdir()
    _golden(str(folder / "sgd.h5"), steps=5)
    with RangedServer(str(folder)) as server:
        url = server.url("sgd.h5")
        with tracekit.open(url) as golden:
            runner = NumpyRunner(golden, LR)
            actual = replay_steps(golden, runner, runner.call).trace
            assert tracekit.compare(golden, actual).ok
            assert tracekit.compare(url, actual.path).ok
            wrong = NumpyRunner(golden, np.float32(0.2))
            result = tracekit.compare(url, replay_steps(golden, wrong, wrong.call).trace)
            assert (result.first_divergence.step, result.first_divergence.key) == (0, "var/w:0")


def test_a_golden_at_a_url_is_saved_as_a_local_copy(site, tmp_path):
    copy = str(tmp_path / "copy.h5")
    with tracekit.open(site.url("small.h5")) as trace:
        assert trace.save(copy) == copy
        with pytest.raises(tracekit.UsageError, match="URL"):
            trace.save(site.url("again.h5"))
    with open(copy, "rb") as saved, open(os.path.join(site.root, "small.h5"), "rb") as served:
        assert saved.read() == served.read()
    assert tracekit.verify(copy).ok and not os.path.exists(copy + ".partial")


def test_a_trace_open_in_a_parent_reads_in_a_forked_child(site):
    from tracekit._isolate import in_child

    with tracekit.open(site.url("small.h5")) as trace:
        parent = _values(trace, 1)
        child = in_child(lambda: _values(trace, 2))  # the child makes its own connections
        with tracekit.open(os.path.join(site.root, "small.h5")) as local:
            _same(parent, _values(local, 1))
            _same(child, _values(local, 2))


def test_missing_golden_server_without_ranges_and_unreachable_server(site, tmp_path):
    with pytest.raises(GoldenNotFound, match="no golden at http://127.0.0.1:\\d+/nope.h5 .*404"):
        tracekit.open(site.url("nope.h5"))
    with RangedServer(site.root, ranges=False) as plain:
        with pytest.raises(RemoteError, match="%s: the server does not serve byte ranges" % plain.url("big.h5")):
            tracekit.open(plain.url("big.h5"))
        port = plain.port
    with pytest.raises(RemoteError, match="http://127.0.0.1:%d/big.h5: asking for the file's size failed \\(Cannot "
                                          "connect" % port):
        tracekit.open("http://127.0.0.1:%d/big.h5" % port)
    folder = str(tmp_path / "site")
    os.mkdir(folder)
    with open(os.path.join(folder, "notes.h5"), "wb") as fh:
        fh.write(b"not a golden\n" * 100)
    with RangedServer(folder) as server:
        with pytest.raises(tracekit.NotATrace, match="notes.h5 is not a tracekit golden"):
            tracekit.open(server.url("notes.h5"))


def test_missing_packages_say_what_to_install(site, monkeypatch):
    import fsspec  # noqa: F401  # loads fsspec.registry, which `fsspec.registry` (a mapping) hides

    monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, "s3", raising=False)  # as if never imported
    monkeypatch.setitem(sys.modules, "s3fs", None)
    with pytest.raises(MissingDependency, match="reading s3://goldens/g.h5 needs a package that is not installed "
                                                "\\(Install s3fs to access S3\\): pip install 'tracekit\\[remote\\]'"):
        tracekit.open("s3://goldens/g.h5")
    for name in ("fsspec", "fsspec.core", "fsspec.registry"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingDependency, match="needs fsspec, which is not installed: pip install 'tracekit\\[remote"):
        tracekit.open(site.url("small.h5"))


def test_https_trusts_a_certificate_through_ssl_cert_file(site, tmp_path):
    cert, key = self_signed(str(tmp_path))
    with RangedServer(site.root, tls=(cert, key)) as server:
        url = server.url("small.h5")
        assert url.startswith("https://")
        with pytest.raises(RemoteError, match="TLS connection failed.*point SSL_CERT_FILE at its CA certificate"):
            tracekit.open(url)  # this process trusts the system's CAs only
        env = dict(os.environ, SSL_CERT_FILE=cert, PYTHONPATH=ROOT)
        proc = subprocess.run([sys.executable, "-m", "tracekit", "show", url], env=env, cwd=ROOT, timeout=120,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        assert proc.returncode == 0, proc.stderr
        assert "golden    %s" % url in proc.stdout and "steps     4" in proc.stdout


def test_an_unclosed_trace_at_a_url_does_not_crash_the_interpreter_at_exit(site):
    # HDF5 reading through a Python file object during interpreter teardown dies of SIGSEGV.
    code = "import tracekit, sys\ntrace = tracekit.open(sys.argv[1])\nprint(trace.step(1)['loss/loss'])\n"
    proc = subprocess.run([sys.executable, "-c", code, site.url("small.h5")], env=dict(os.environ, PYTHONPATH=ROOT),
                          cwd=ROOT, timeout=120, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    assert proc.returncode == 0, proc.stderr


def test_s3_through_an_s3_compatible_server(site, tmp_path, monkeypatch, capsys):
    pytest.importorskip("moto")
    import boto3

    small = os.path.join(site.root, "small.h5")
    with moto_s3() as endpoint:
        for name, value in s3_environment(endpoint, str(tmp_path)).items():
            monkeypatch.setenv(name, value)  # AWS_ENDPOINT_URL_S3: boto3 and s3fs alike
        client = boto3.client("s3")
        client.create_bucket(Bucket="goldens")
        client.upload_file(small, "goldens", "ports/small.h5")
        url = "s3://goldens/ports/small.h5"
        with tracekit.open(url) as trace, tracekit.open(small) as local:
            _same(_values(trace, 2), _values(local, 2))
            assert trace._backend._source.validators.get("ETag")
        assert main(["show", url]) == 0
        assert "golden    %s" % url in capsys.readouterr().out
        with pytest.raises(GoldenNotFound, match="no golden at s3://goldens/ports/missing.h5"):
            tracekit.open("s3://goldens/ports/missing.h5")


def test_nothing_is_written_to_a_url(site, tmp_path, capsys):
    from tracekit.lifecycle.update import write_golden
    from tracekit.lifecycle.workspace import Workspace

    url = site.url("small.h5")
    for argv, what in [(["record", "-o", site.url("new.h5"), "--", "train.py"], "record a golden"),
                       (["recover", url], "recover a trace"),
                       (["export", url, "--npz", site.url("out.npz")], "write an export")]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "is a URL: tracekit does not %s at a URL; goldens are read from URLs and written to local paths" \
            % what in err, err
    with pytest.raises(UsageError, match="is a URL: tracekit does not recover a trace at a URL"):
        tracekit.recover(url)
    workspace = Workspace(str(tmp_path))
    with pytest.raises(UsageError, match="is a URL: tracekit does not write a golden at a URL"):
        write_golden(os.path.join(site.root, "small.h5"), url, workspace, by="test")
    assert os.listdir(str(tmp_path)) == []  # no lock folder made for the URL
    assert workspace.relative(url) == workspace.resolve(url) == url


def test_the_plugin_resolves_golden_names_under_a_url(pytester):
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("-p", "no:xdist", "--tracekit-goldens", "https://goldens.example/ci")
    result.stdout.fnmatch_lines(["tracekit: goldens https://goldens.example/ci, update none, *"])
    assert result.ret == 0
    result = pytester.runpytest("-p", "no:xdist", "--tracekit-goldens", "s3://bucket/goldens",
                                "--tracekit-update=new")
    result.stderr.fnmatch_lines(["*--tracekit-update=new writes goldens, and the goldens are at a URL "
                                 "(s3://bucket/goldens), which tracekit only reads*"])
    assert result.ret != 0
    from tracekit.plugin.replay import Settings

    settings = Settings(root=str(pytester.path), goldens="s3://bucket/goldens/", update="none", reason=None,
                        unused="warn", unused_given=False, keep=True, tolerance="auto", ci=False)
    assert settings.resolve("ports/mlp") == "s3://bucket/goldens/ports/mlp.h5"
    assert settings.resolve("https://elsewhere/g.h5") == "https://elsewhere/g.h5"
    assert settings.name_of("s3://bucket/goldens/ports/mlp.h5") == "ports/mlp"
