"""Publishing outputs all together or not at all: claims, the publish-time check, rollback on a failure at any
step, stale outputs, dead runs' staging, interrupts (no Spark: the stage's directory logic alone), and one slow
test with two real concurrent CLI runs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spark_dpsynth.data import publish
from spark_dpsynth.data.publish import (
    BACKUP_PREFIX,
    STAGING_PREFIX,
    OutputStage,
    check_writable,
    clean_dead_stagings,
    recover_before_reading,
    signals_deferred,
)
from spark_dpsynth.errors import InvalidParameterError, OutputExistsError, ReleaseError, SparkSetupError
from tests.conftest import ROOT, small_tmpfs

NAMES = ("release", "synthetic", "synthetic.csv", "evaluation")


def snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every entry under ``directory``: relative path -> file bytes (None for a directory)."""
    return {
        str(p.relative_to(directory)): (None if p.is_dir() else p.read_bytes())
        for p in sorted(directory.rglob("*"))
    }


def hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def write_outputs(stage: OutputStage, tag: str, names=NAMES) -> None:
    for name in names:
        target = Path(stage.path(name))
        if name.endswith(".csv"):
            target.write_text(f"{tag}\n")
        else:
            target.mkdir()
            (target / "part-0").write_text(f"{tag} {name}\n")


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """An output directory holding a complete earlier run."""
    with OutputStage(None, str(tmp_path), names=NAMES) as stage:
        write_outputs(stage, "old")
    assert hidden(tmp_path) == []
    return tmp_path


def test_a_run_publishes_every_output_at_once(tmp_path: Path) -> None:
    with OutputStage(None, str(tmp_path), names=NAMES) as stage:
        write_outputs(stage, "new")
        assert sorted(os.listdir(tmp_path)) == [os.path.basename(stage.staging_dir)], "nothing published yet"
    assert sorted(os.listdir(tmp_path)) == sorted(NAMES)
    assert stage.published == list(NAMES)
    assert (tmp_path / "synthetic.csv").read_text() == "new\n"


@pytest.mark.parametrize("failing_step", range(9))
def test_a_publish_failure_at_any_step_leaves_the_previous_outputs_exactly(
    old_run: Path, monkeypatch: pytest.MonkeyPatch, failing_step: int
) -> None:
    """Four outputs aside, four in, one journal commit: whichever rename fails, everything is rolled back."""
    before = snapshot(old_run)
    real = os.replace
    calls = {"n": 0, "fired": False}

    def replace(src, dst):  # noqa: ANN001, ANN202 - fails once, at the chosen step
        journal = os.path.basename(str(src)).startswith(".journal.json")
        if not journal:
            calls["n"] += 1
        if not calls["fired"]:
            if not journal and calls["n"] == failing_step + 1:
                calls["fired"] = True
                raise PermissionError(13, "Permission denied (injected)", str(dst))
            if journal and calls["n"] >= 8 and failing_step == 8:  # the commit record cannot be written
                calls["fired"] = True
                raise OSError(28, "No space left on device (injected)")
        return real(src, dst)

    with pytest.raises(OSError, match="injected"):
        with OutputStage(None, str(old_run), overwrite=True, names=NAMES) as stage:
            write_outputs(stage, "new")
            monkeypatch.setattr(publish.os, "replace", replace)
    monkeypatch.setattr(publish.os, "replace", real)
    assert snapshot(old_run) == before
    assert hidden(old_run) == []


def test_an_interrupt_inside_the_stage_changes_nothing(old_run: Path) -> None:
    before = snapshot(old_run)
    with pytest.raises(KeyboardInterrupt):
        with OutputStage(None, str(old_run), overwrite=True, names=NAMES) as stage:
            write_outputs(stage, "new")
            raise KeyboardInterrupt
    assert snapshot(old_run) == before and hidden(old_run) == []


@pytest.mark.parametrize("failure", [RuntimeError, KeyboardInterrupt])
def test_a_kept_release_is_published_alone_when_a_later_step_fails(
    old_run: Path, failure: type[BaseException]
) -> None:
    """A pipeline's release, once drawn, survives a failure of synthesis or evaluation (and an interrupt): it is
    published alone, and the outputs of the previous release (now stale) are removed with it."""
    with pytest.raises(failure):
        with OutputStage(None, str(old_run), overwrite=True, names=NAMES) as stage:
            write_outputs(stage, "new", ("release",))
            assert stage.keep_staged() == ["release"]
            write_outputs(stage, "new", ("synthetic",))  # half written when the failure comes
            raise failure
    assert stage.published == ["release"] and stage.kept == ["release"]
    assert sorted(os.listdir(old_run)) == ["release"], "the old synthetic data and evaluation are stale"
    assert (old_run / "release" / "part-0").read_text() == "new release\n"
    assert hidden(old_run) == []


def test_a_full_disk_frees_the_staged_synthetic_data_before_the_kept_release_is_published(
    old_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The synthesis fills the disk (a fault-injected file system: writing a record fails while the staged
    synthetic parts exist): those parts are removed first, and the release is published."""
    real = publish._write_json

    def write_json(path: str, value: dict) -> None:
        staging = os.path.dirname(path)
        if os.path.lexists(os.path.join(staging, "synthetic")):
            raise OSError(28, "No space left on device (injected)")
        real(path, value)

    monkeypatch.setattr(publish, "_write_json", write_json)
    with pytest.raises(OSError, match="injected"):
        with OutputStage(None, str(old_run), overwrite=True, names=NAMES) as stage:
            write_outputs(stage, "new", ("release",))
            stage.keep_staged()
            write_outputs(stage, "new", ("synthetic",))
            raise OSError(28, "No space left on device (injected)")
    assert stage.published == ["release"]
    assert sorted(os.listdir(old_run)) == ["release"]
    assert (old_run / "release" / "part-0").read_text() == "new release\n"
    assert hidden(old_run) == []


def test_a_kept_release_that_cannot_be_published_is_moved_aside_not_lost(
    old_run: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Publishing the kept release fails too (the disk stays full): it is moved, by a rename, where
    ``synthesize --output`` finds it, the previous outputs are untouched, and a warning says where."""
    before = snapshot(old_run)

    def publish_fails(self: OutputStage) -> None:
        raise OSError(28, "No space left on device (injected)")

    monkeypatch.setattr(OutputStage, "_publish", publish_fails)
    with caplog.at_level("WARNING", logger="spark_dpsynth.data.publish"):
        with pytest.raises(RuntimeError, match="synthesis"):
            with OutputStage(None, str(old_run), overwrite=True, names=NAMES) as stage:
                write_outputs(stage, "drawn", ("release",))
                stage.keep_staged()
                raise RuntimeError("the synthesis failed")
    assert stage.published == []
    recovered = f"{publish.RECOVERED_PREFIX}{os.path.basename(stage.staging_dir)[len(STAGING_PREFIX) :]}"
    after = snapshot(old_run)
    assert after.pop(f"{recovered}/release/part-0") == b"drawn release\n"
    assert after.pop(f"{recovered}/release") is None and after.pop(recovered) is None
    assert after == before and hidden(old_run) == []
    (warning,) = [r.getMessage() for r in caplog.records if "could not publish" in r.getMessage()]
    assert "(No space left on device)" in warning
    assert f"spark-dpsynth synthesize --output {old_run / recovered}" in warning


def test_kept_outputs_grow_step_by_step_and_a_success_publishes_all(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="evaluation"):
        with OutputStage(None, str(tmp_path / "a"), names=NAMES) as stage:
            write_outputs(stage, "new", ("release",))
            stage.keep_staged()
            write_outputs(stage, "new", ("synthetic", "synthetic.csv"))
            assert stage.keep_staged() == ["release", "synthetic", "synthetic.csv"]
            raise RuntimeError("the evaluation failed")
    assert sorted(os.listdir(tmp_path / "a")) == ["release", "synthetic", "synthetic.csv"]
    with OutputStage(None, str(tmp_path / "b"), names=NAMES) as stage:
        write_outputs(stage, "new")
        stage.keep_staged()
    assert sorted(os.listdir(tmp_path / "b")) == sorted(NAMES)


def test_without_keep_a_failure_changes_nothing_and_keep_needs_written_outputs(old_run: Path) -> None:
    before = snapshot(old_run)
    with pytest.raises(SparkSetupError, match="nothing was written for release"):
        with OutputStage(None, str(old_run), overwrite=True, names=NAMES) as stage:
            stage.path("release")  # claimed, never written
            stage.keep_staged()
    assert snapshot(old_run) == before and hidden(old_run) == []


def test_overwrite_removes_the_stale_outputs_of_the_scope(old_run: Path) -> None:
    """--overwrite --no-single-csv: the earlier synthetic.csv (another table's rows) does not survive."""
    with OutputStage(
        None,
        str(old_run),
        overwrite=True,
        names=("release", "synthetic", "evaluation"),
        stale=("synthetic.csv",),
    ) as stage:
        write_outputs(stage, "new", ("release", "synthetic", "evaluation"))
    assert sorted(os.listdir(old_run)) == ["evaluation", "release", "synthetic"]
    assert stage.published == ["release", "synthetic", "evaluation"]
    assert (old_run / "release" / "part-0").read_text() == "new release\n"


def test_without_overwrite_an_existing_output_or_stale_one_is_refused_before_anything_runs(
    old_run: Path,
) -> None:
    with pytest.raises(OutputExistsError, match=r"output exists: .*release; pass --overwrite"):
        OutputStage(None, str(old_run), names=("release",)).__enter__()
    with pytest.raises(OutputExistsError, match=r"output exists: .*synthetic.csv"):
        with OutputStage(None, str(old_run), names=(), stale=("synthetic.csv",)):
            pytest.fail("the block must not run")
    assert hidden(old_run) == []


def test_the_no_overwrite_check_is_made_again_at_publish_time(tmp_path: Path) -> None:
    """Another writer created an output while this run computed: this run fails, the other's output stays."""
    with pytest.raises(OutputExistsError, match=r"output exists: .*release; pass --overwrite"):
        with OutputStage(None, str(tmp_path), names=("release", "evaluation")) as stage:
            write_outputs(stage, "late", ("release", "evaluation"))
            (tmp_path / "release").mkdir()
            (tmp_path / "release" / "theirs").write_text("first\n")
    assert snapshot(tmp_path) == {"release": None, "release/theirs": b"first\n"}


def test_a_live_run_claiming_the_same_outputs_stops_the_second_before_it_starts(tmp_path: Path) -> None:
    with OutputStage(None, str(tmp_path), names=NAMES) as first:
        with pytest.raises(OutputExistsError, match=r"another run \(pid \d+ on .*\) is writing .*release"):
            OutputStage(None, str(tmp_path), overwrite=True, names=("release",)).__enter__()
        with OutputStage(None, str(tmp_path), names=("other",)) as second:  # disjoint outputs: fine
            Path(second.path("other")).write_text("x\n")
        assert os.path.isdir(first.staging_dir), "a live run's staging is never removed"
        assert clean_dead_stagings(str(tmp_path)) == []
        write_outputs(first, "first")
    assert sorted(os.listdir(tmp_path)) == sorted([*NAMES, "other"]) and hidden(tmp_path) == []


_DIE_AT_RENAME = textwrap.dedent(
    """
    def die_at_rename(publish, n):
        # the process dies (kill -9) at the n-th rename of an output (the journal's own renames not counted)
        real, calls = os.replace, []
        def replace(src, dst):
            if not os.path.basename(str(src)).startswith(".journal"):
                calls.append(src)
                if len(calls) == n:
                    os._exit(9)
            return real(src, dst)
        publish.os.replace = replace
    """
)
"""The child scripts' fault injection: the publishing process killed between two renames."""


_DYING_RUN = textwrap.dedent(
    """
    import os, sys
    from spark_dpsynth.data import publish
    from spark_dpsynth.data.publish import OutputStage
    out, mode = sys.argv[1], sys.argv[2]
    names = ("release", "synthetic.csv")
    stage = OutputStage(None, out, overwrite=True, names=names).__enter__()
    os.mkdir(stage.path("release")); open(os.path.join(stage.path("release"), "m"), "w").write("dead\\n")
    open(stage.path("synthetic.csv"), "w").write("dead\\n")
    if mode == "publishing":  # killed between renames: one old output aside, one new output in
        die_at_rename(publish, 4)
        stage.__exit__(None, None, None)
    os._exit(9)
    """
)


@pytest.mark.parametrize("mode", ["computing", "publishing"])
def test_a_dead_runs_staging_is_rolled_back_and_removed_by_the_next_run(old_run: Path, mode: str) -> None:
    before = snapshot(old_run)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", _DIE_AT_RENAME + _DYING_RUN, str(old_run), mode], env=env, timeout=60
    )
    assert result.returncode == 9
    left = hidden(old_run)
    assert any(n.startswith(STAGING_PREFIX) for n in left)
    if mode == "publishing":
        assert any(n.startswith(BACKUP_PREFIX) for n in left) and snapshot(old_run) != before
    with OutputStage(None, str(old_run), names=("other",)) as stage:  # any later run on the directory
        Path(stage.path("other")).write_text("x\n")
    after = snapshot(old_run)
    assert after.pop("other") == b"x\n"
    assert after == before, "the previous outputs are back, exactly"
    assert hidden(old_run) == []


def test_a_legacy_staging_without_owner_is_removed_only_when_old(tmp_path: Path) -> None:
    old = tmp_path / f"{STAGING_PREFIX}abcd1234"
    (old / "release").mkdir(parents=True)
    recent = tmp_path / f"{STAGING_PREFIX}ef567890"
    (recent / "release").mkdir(parents=True)
    past = time.time() - publish.LEGACY_STAGING_SECONDS - 60
    for p in (old, old / "release"):
        os.utime(p, (past, past))
    assert clean_dead_stagings(str(tmp_path)) == [str(old)]
    assert hidden(tmp_path) == [recent.name]


def test_write_access_is_checked_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(
        InvalidParameterError, match=rf"cannot write the output {afile}/out: .* is not a directory"
    ):
        with OutputStage(None, str(afile / "out"), names=("release",)):
            pytest.fail("the block must not run")
    (tmp_path / "out" / "evaluation" / "sub").mkdir(parents=True)
    locked = str(tmp_path / "out" / "evaluation" / "sub")
    real = os.access
    monkeypatch.setattr(publish.os, "access", lambda p, mode: p != locked and real(p, mode))
    with pytest.raises(
        InvalidParameterError, match=rf"cannot replace the output .*evaluation: {locked} is not"
    ):
        with OutputStage(None, str(tmp_path / "out"), overwrite=True, names=("evaluation",)):
            pytest.fail("the block must not run")
    check_writable(str(tmp_path / "out"), ["release"])  # absent outputs need only the directory
    monkeypatch.setattr(publish.os, "access", lambda p, mode: False)
    with pytest.raises(InvalidParameterError, match=r"cannot write the output .*: permission denied"):
        check_writable(str(tmp_path / "new" / "out"))
    assert hidden(tmp_path / "out") == []


def test_signals_are_deferred_while_renaming() -> None:
    seen: list[str] = []
    previous = signal.signal(signal.SIGUSR1, lambda *a: seen.append("handled"))
    try:
        sigs = {signal.SIGINT, signal.SIGTERM}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, set())
        with signals_deferred():
            assert sigs <= signal.pthread_sigmask(signal.SIG_BLOCK, set())
            seen.append("inside")
        assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == old
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seen == ["inside"]


def test_output_names_must_be_plain(tmp_path: Path) -> None:
    for bad in ("", ".hidden", "a/b", "../x"):
        with pytest.raises(InvalidParameterError, match="plain file or directory name"):
            OutputStage(None, str(tmp_path), names=(bad,))


# --------------------------------------------------------------------------------------------- the command line

ADULT = str(ROOT / "data" / "adult.csv.gz")


def test_cli_refuses_before_spark_starts(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Parameter bounds, an unwritable destination and a live run's claim: exit 2, one line, nothing written."""
    from spark_dpsynth.cli.main import main

    afile = tmp_path / "file"
    afile.write_text("x")
    out = tmp_path / "out"
    cases = [
        (["--output", str(out), "--target-number-of-records", "1000000000000"],
         "argument --target-number-of-records: target_number_of_records must be <= 10000000000, got 1000000000000"),
        (["--output", str(out), "--delta", "1e-300"], "argument --delta: delta must be in [1e-100, 1), got 1e-300"),
        (["--output", str(afile / "out")], f"cannot write the output {afile / 'out'}: {afile} is not a directory"),
    ]  # fmt: skip
    for args, message in cases:
        assert main(["pipeline", "--input", ADULT, *args]) == 2
        assert capsys.readouterr().err.strip() == f"spark-dpsynth: error: {message}"
    with OutputStage(None, str(out), names=("release",)):
        assert main(["pipeline", "--input", ADULT, "--output", str(out), "--overwrite"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("spark-dpsynth: error: another run (pid ") and "\n" not in err
        assert err.endswith(f"is writing {out / 'release'}; wait for it to finish or choose another --output")
    assert os.listdir(out) == []


def test_cli_refuses_a_tiny_epsilon_without_target_before_reading_data(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_dpsynth import pipeline
    from spark_dpsynth.cli import main as cli

    def no_reading(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        pytest.fail("the data must not be read")

    monkeypatch.setattr(pipeline, "read_table", no_reading)
    out = tmp_path / "out"
    args = ["pipeline", "--input", ADULT, "--output", str(out), "--epsilon", "1e-9", "--synthesizer", "model"]
    assert cli.main([*args, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "spark-dpsynth: error: at epsilon 1e-09 the protected number of records has discrete Laplace noise of "
        "scale 2e+11 (epsilon_N = 5e-12), and without --target-number-of-records the synthesizer emits about"
    ), err
    assert err.endswith("give --target-number-of-records or a larger epsilon")
    assert os.listdir(out) == []


@pytest.mark.slow
def test_two_concurrent_pipeline_runs_have_one_winner(tmp_path: Path) -> None:
    """Two real runs to one --output at once: one succeeds, the other exits 2 with one line; the output is the
    winner's, whole (each writes a release: `aggregate` publishes as `pipeline` does, through one staging)."""
    out = tmp_path / "out"
    args = [sys.executable, "-m", "spark_dpsynth", "aggregate", "--input", ADULT]
    args += ["--output", str(out), "--columns", "age,sex,race", "--reporting-length", "2", "--quiet"]
    args += ["--synthesizer", "model"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=900), *p.communicate()) for p in procs]
    codes = sorted(r[0] for r in results)
    assert codes == [0, 2], results
    loser = next(r for r in results if r[0] == 2)
    lines = loser[2].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spark-dpsynth: error: "), loser[2]
    assert "another run" in lines[0] or "output exists" in lines[0]
    assert os.listdir(out) == ["release"]
    assert (out / "release" / "manifest.json").is_file()


@pytest.fixture
def small_file_system(tmp_path: Path):  # noqa: ANN201 - Iterator[Path]
    """A 5 MB tmpfs at ``tmp_path/small`` (skipped where mounting is not permitted)."""
    with small_tmpfs(tmp_path / "small", "5m") as mount:
        yield mount


@pytest.mark.slow
def test_a_full_disk_during_synthesis_keeps_the_release_and_synthesize_goes_on(
    small_file_system: Path,
) -> None:
    """A pipeline whose synthetic table does not fit on its file system: exit 3, the release published (the
    staged synthetic parts removed first), and ``synthesize`` from it, with a smaller table, succeeds."""
    out = small_file_system / "out"
    cli = [sys.executable, "-m", "spark_dpsynth"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # three columns fit in seconds; their 600,000 synthetic records do not fit in 5 MB
    args = ["pipeline", "--input", ADULT, "--output", str(out), "--synthesizer", "model"]
    args += ["--columns", "age,sex,race", "--reporting-length", "2", "--target-number-of-records", "600000"]
    done = subprocess.run([*cli, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"spark-dpsynth: error: the synthesis failed: the disk is full (No space left on device) writing {out}; "
        "free space there (Spark's scratch space too, spark.local.dir) or give another --output"
    ), last
    assert f"the release is kept in {out}/release (no budget is spent to go on)" in last
    assert not any("Traceback" in x or "at org.apache" in x for x in done.stderr.splitlines())
    assert os.listdir(out) == ["release"] and (out / "release" / "manifest.json").is_file()
    args = ["synthesize", "--output", str(out), "--target-number-of-records", "2000", "--no-single-csv"]
    done = subprocess.run([*cli, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(out)) == ["release", "synthetic"]


@pytest.mark.slow
def test_sigterm_removes_the_staging_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [sys.executable, "-m", "spark_dpsynth", "pipeline", "--input", str(ROOT / "data" / "adult.csv.gz")]
    args += ["--output", str(out), "--quiet", "--synthesizer", "model"]
    args += ["--columns", "age,sex,race,education", "--reporting-length", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 300
    while time.time() < deadline and not (out.is_dir() and any(out.glob(f"{STAGING_PREFIX}*/release"))):
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    _, err = proc.communicate()
    assert code == 143, err
    last = err.strip().splitlines()[-1]
    if os.listdir(out) == []:  # the signal came while the release was being written: nothing is kept
        assert last == "spark-dpsynth: interrupted by SIGTERM; no output was changed"
    elif os.listdir(out) == ["release"]:  # during the synthesis: the release alone is kept (design.md 1.7)
        assert (out / "release" / "manifest.json").is_file()
        assert last.startswith(f"spark-dpsynth: interrupted by SIGTERM; the release is kept in {out}/release")
    else:  # on a slow machine it came during the evaluation: the release and the synthetic data are kept
        assert sorted(os.listdir(out)) == sorted(["release", "synthetic", "synthetic.csv"]), os.listdir(out)
        assert (out / "release" / "manifest.json").is_file()
        assert last.startswith(
            f"spark-dpsynth: interrupted by SIGTERM; the release and the synthetic data are kept in {out}"
        ), last


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupt_whose_exception_was_lost_is_raised_again(
    signum: int, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal that lands while Python runs a weak-reference callback (py4j frees its Java objects in them)
    has its exception ignored; the job's check between steps raises it again, so nothing is published, and
    Python's "Exception ignored in" report of it is not printed (the interrupt's one line stays the only one)."""
    import weakref

    from spark_dpsynth.cli import _signals as cli

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # Python's own, which prints
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        cli.install_interrupts()
        cli.check_interrupts()  # nothing received: no exception

        class Held:
            pass

        def on_collected(_ref: object) -> None:
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # the handler runs here, inside the callback, and its exception is ignored

        held = Held()
        ref = weakref.ref(held, on_collected)
        del held  # runs the callback: the process goes on
        assert ref() is None
        with pytest.raises(cli.Terminated if signum == signal.SIGTERM else KeyboardInterrupt):
            cli.check_interrupts()
        assert "Exception ignored" not in capsys.readouterr().err
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])
        cli.PENDING.clear()


# --------------------------------------------------------------------------------------------- untrusted entries

PLANTED = f"{STAGING_PREFIX}deadbeef0001"


def tree(directory: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """Every entry under ``directory``, links not followed: relative path -> (kind, bytes, link target or None)."""
    out: dict[str, tuple[str, bytes | str | None]] = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            p = Path(root, name)
            rel = str(p.relative_to(directory))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", None)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


def plant(out: Path, journal: object, *, owner_names: list[str] | None = None) -> Path:
    """A dead run's staging as an attacker writes it: an unlocked owner file naming this host, and ``journal``."""
    import json
    import socket

    staging = out / PLANTED
    staging.mkdir(parents=True)
    names = owner_names if owner_names is not None else list(getattr(journal, "get", dict().get)("names", []))
    owner = {"pid": 999_999_999, "host": socket.gethostname(), "process_start": None, "names": names}
    (staging / ".owner.json").write_text(json.dumps(owner))
    if journal is not None:
        (staging / ".journal.json").write_text(json.dumps(journal))
    return staging


@pytest.fixture
def victims(tmp_path: Path) -> Path:
    """Files outside the output directory ``tmp_path/out``: ``victim.txt`` next to it, ``folder/secret.txt``."""
    (tmp_path / "victim.txt").write_text("victim\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "secret.txt").write_text("secret\n")
    (tmp_path / "out").mkdir()
    return tmp_path


def _attack(case: str, base: Path) -> None:
    out = base / "out"
    if case == "dot-dot":  # the reported attack: the next run moved DIR/../victim.txt into DIR
        plant(out, {"state": "publishing", "names": ["../victim.txt"]})
    elif case == "dot-dot-committed":
        plant(out, {"state": "committed", "names": ["../victim.txt"]})
    elif case == "absolute":
        plant(out, {"state": "publishing", "names": [str(base / "victim.txt")]})
    elif case == "through-a-link":  # DIR/L -> a victim folder: the victim's file was deleted
        (out / "L").symlink_to(base / "folder")
        plant(out, {"state": "publishing", "names": ["L/secret.txt"]})
    elif case == "not-claimed":  # a plain name the owner file does not claim
        plant(out, {"state": "publishing", "names": ["release"]}, owner_names=["synthetic"])
    elif case == "hidden-name":
        plant(out, {"state": "publishing", "names": [".spark-dpsynth.lock"]})
    elif case == "unknown-state":
        plant(out, {"state": "rolling", "names": []})
    elif case == "names-not-a-list":
        plant(out, {"state": "publishing", "names": "release"})
    elif case == "journal-not-json":
        plant(out, None)
        (out / PLANTED / ".journal.json").write_text("{names: [")
    elif case == "journal-is-a-link":
        plant(out, None, owner_names=["release"])
        (out / PLANTED / ".journal.json").symlink_to(base / "victim.txt")
    elif case == "owner-is-a-link":
        staging = plant(out, {"state": "publishing", "names": []})
        (staging / ".owner.json").unlink()
        (staging / ".owner.json").symlink_to(base / "victim.txt")
    elif case == "journal-without-owner":
        staging = plant(out, {"state": "publishing", "names": []})
        (staging / ".owner.json").unlink()
        past = time.time() - publish.LEGACY_STAGING_SECONDS - 60
        for p in (staging / ".journal.json", staging):
            os.utime(p, (past, past))
    elif case == "staging-is-a-link":  # the victim folder seen as a dead run's staging
        (base / "folder" / ".owner.json").write_text("{}")
        (out / PLANTED).symlink_to(base / "folder")
    elif case == "legacy-staging-is-a-link":  # no owner file, nothing changed for a day
        past = time.time() - publish.LEGACY_STAGING_SECONDS - 60
        for p in (base / "folder" / "secret.txt", base / "folder"):
            os.utime(p, (past, past))
        (out / PLANTED).symlink_to(base / "folder")
    elif case == "aside-without-journal":
        plant(out, None, owner_names=["release"])
        (out / f"{BACKUP_PREFIX}deadbeef0001-release").mkdir()
    elif case == "aside-hidden-name":
        plant(out, {"state": "publishing", "names": []}, owner_names=["release"])
        (out / f"{BACKUP_PREFIX}deadbeef0001-.bashrc").write_text("x\n")
    else:
        raise AssertionError(case)


ATTACKS = [
    "dot-dot",
    "dot-dot-committed",
    "absolute",
    "through-a-link",
    "not-claimed",
    "hidden-name",
    "unknown-state",
    "names-not-a-list",
    "journal-not-json",
    "journal-is-a-link",
    "owner-is-a-link",
    "journal-without-owner",
    "staging-is-a-link",
    "legacy-staging-is-a-link",
    "aside-without-journal",
    "aside-hidden-name",
]


@pytest.mark.parametrize("case", ATTACKS)
def test_a_planted_or_damaged_staging_is_refused_and_nothing_is_touched(victims: Path, case: str) -> None:
    """Nothing a run finds in its output directory is trusted: a staging directory, owner file, journal or
    output renamed aside that is not as a run writes it stops the next run before it changes anything, in the
    output directory or outside it."""
    _attack(case, victims)
    before = tree(victims)
    with pytest.raises(
        InvalidParameterError, match=r"is not as spark-dpsynth writes it \(.+\); nothing in it"
    ):
        with OutputStage(None, str(victims / "out"), overwrite=True, names=("release", "other")):
            pytest.fail("the block must not run")
    assert tree(victims) == before
    with pytest.raises(InvalidParameterError, match="remove it by hand"):
        clean_dead_stagings(str(victims / "out"))
    assert tree(victims) == before


def test_a_well_formed_journal_naming_a_link_moves_only_the_link(victims: Path) -> None:
    """A plain claimed name that is a link to a folder outside: the recovery moves the link itself (never what
    it points to) and removes it with the staging; the folder is untouched."""
    out = victims / "out"
    (out / "release").symlink_to(victims / "folder")
    plant(out, {"state": "publishing", "names": ["release"]})
    outside = {k: v for k, v in tree(victims).items() if not k.startswith("out")}
    assert clean_dead_stagings(str(out)) == [str(out / PLANTED)]
    assert {k: v for k, v in tree(victims).items() if not k.startswith("out")} == outside
    assert os.listdir(out) == []


def test_a_staging_whose_entries_are_links_is_removed_without_following_them(victims: Path) -> None:
    out = victims / "out"
    staging = plant(out, None, owner_names=["release"])
    (staging / "release").symlink_to(victims / "folder")
    (staging / "synthetic.csv").symlink_to(victims / "victim.txt")
    outside = {k: v for k, v in tree(victims).items() if not k.startswith("out")}
    assert clean_dead_stagings(str(out)) == [str(staging)]
    assert {k: v for k, v in tree(victims).items() if not k.startswith("out")} == outside
    assert os.listdir(out) == []


def test_a_planted_lock_file_link_is_refused_and_not_followed(victims: Path) -> None:
    out = victims / "out"
    (out / publish.LOCK_FILE).symlink_to(victims / "created-by-the-run")
    before = tree(victims)
    with pytest.raises(
        InvalidParameterError, match=r"spark-dpsynth.lock is not as .*\(it is a symbolic link\)"
    ):
        with OutputStage(None, str(out), names=("release",)):
            pytest.fail("the block must not run")
    assert tree(victims) == before and not (victims / "created-by-the-run").exists()


def test_another_users_dead_staging_is_refused(victims: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = victims / "out"
    plant(out, {"state": "publishing", "names": ["release"]})
    before = tree(victims)
    monkeypatch.setattr(publish.os, "geteuid", lambda: os.stat(out / PLANTED).st_uid + 1)
    with pytest.raises(InvalidParameterError, match=r"it belongs to another user \(uid \d+\)"):
        clean_dead_stagings(str(out))
    assert tree(victims) == before


def test_cli_refuses_a_planted_journal_with_status_2(victims: Path, capsys: pytest.CaptureFixture) -> None:
    """The reported attack on the command line: one line, exit 2, before Spark starts; nothing moved."""
    from spark_dpsynth.cli.main import main

    _attack("dot-dot", victims)
    before = tree(victims)
    out = victims / "out"
    assert main(["aggregate", "--input", ADULT, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"spark-dpsynth: error: cannot write the output {out}: {out / PLANTED} is not as spark-dpsynth writes it "
        "(its journal names '../victim.txt', not an output of that run); nothing in it was touched: inspect it "
        "and remove it by hand"
    )
    assert tree(victims) == before


# --------------------------------------------------------------------------------------------- a dead run's release

_DYING_PIPELINE = textwrap.dedent(
    """
    import os, sys
    from spark_dpsynth.data import publish
    from spark_dpsynth.data.publish import OutputStage
    out, mode = sys.argv[1], sys.argv[2]
    names = ("release", "synthetic", "synthetic.csv", "evaluation")
    stage = OutputStage(None, out, overwrite=True, names=names).__enter__()
    os.mkdir(stage.path("release")); open(os.path.join(stage.path("release"), "m"), "w").write("drawn\\n")
    stage.keep_staged()  # the budget is spent
    os.mkdir(stage.path("synthetic"))  # half written when the process dies
    if mode == "publishing":  # the synthesis failed; killed while the kept release is published alone
        die_at_rename(publish, 3)
        stage.__exit__(RuntimeError, RuntimeError("the synthesis failed"), None)
    os._exit(9)
    """
)


@pytest.mark.parametrize("mode", ["computing", "publishing"])
def test_a_dead_runs_drawn_release_is_kept_by_the_next_run(
    old_run: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A run killed (kill -9) after its release was drawn: the next run on the directory restores the previous
    outputs exactly and keeps the drawn release where a ``synthesize --output`` finds it, saying so."""
    before = snapshot(old_run)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", _DIE_AT_RENAME + _DYING_PIPELINE, str(old_run), mode], env=env, timeout=60
    )
    assert result.returncode == 9
    (staging,) = [n for n in hidden(old_run) if n.startswith(STAGING_PREFIX)]
    ident = staging[len(STAGING_PREFIX) :]
    with caplog.at_level("WARNING", logger="spark_dpsynth.data.publish"):
        with OutputStage(None, str(old_run), names=("other",)) as stage:
            Path(stage.path("other")).write_text("x\n")
    after = snapshot(old_run)
    recovered = f"{publish.RECOVERED_PREFIX}{ident}"
    assert after.pop("other") == b"x\n"
    assert after.pop(f"{recovered}/release/m") == b"drawn\n", "the drawn release is kept"
    assert after.pop(f"{recovered}/release") is None and after.pop(recovered) is None
    assert after == before, "the previous outputs are back, exactly"
    assert hidden(old_run) == []
    (warning,) = [r.getMessage() for r in caplog.records if "drew its release" in r.getMessage()]
    assert f"are in {old_run / recovered}, not published" in warning
    assert f"spark-dpsynth synthesize --output {old_run / recovered}" in warning


# --------------------------------------------------------------------------------------------- kill -9 at every step

_DIE_AT_STEP = textwrap.dedent(
    """
    import os, shutil, sys
    from spark_dpsynth.data import publish
    from spark_dpsynth.data.publish import OutputStage
    out, n, kept, source = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "kept", sys.argv[4]
    names = ("release", "synthetic", "synthetic.csv", "evaluation")
    stage = OutputStage(None, out, overwrite=True, names=names).__enter__()
    for name in names:
        target = stage.path(name)
        if name == "release" and source:
            shutil.copytree(source, target)
        elif name.endswith(".csv"):
            open(target, "w").write("new\\n")
        else:
            os.mkdir(target)
            open(os.path.join(target, "part-0"), "w").write(f"new {name}\\n")
            if name == "release":
                open(os.path.join(target, "manifest.json"), "w").write('{"run": "new"}')
        if name == "release" and kept:
            stage.keep_staged()  # a pipeline's drawn release: the budget is spent
    steps = []
    def step():
        steps.append(1)
        if len(steps) == n:
            os._exit(9)  # kill -9: no handler, no finally
    real_replace, real_remove, real_rmdir = os.replace, publish._remove, os.rmdir
    def replace(src, dst, **kw):
        step()
        return real_replace(src, dst, **kw)
    def remove(path, dir_fd=None):
        if len(steps) + 1 == n and dir_fd is None and os.path.isdir(path):  # dies halfway through a tree
            os.unlink(next(os.path.join(r, f) for r, _, files in os.walk(path) for f in files))
        step()
        return real_remove(path, dir_fd)
    def rmdir(path, *args, **kw):
        if os.path.basename(str(path)).startswith(publish.STAGING_PREFIX):
            step()
        return real_rmdir(path, *args, **kw)
    os.replace, publish._remove, os.rmdir = replace, remove, rmdir
    stage.__exit__(None, None, None)
    print(len(steps))
    """
)
"""A child that publishes four new outputs over an earlier run and dies (``os._exit``, as kill -9) just before its
n-th file-system step, or halfway through it when the step deletes a tree; ``n`` = 0 never dies and prints the
number of steps."""

PUBLISH_STEPS = 17
"""The steps of that publish: the journal written (1), four outputs renamed aside (2-5), four renamed in (6-9),
the journal committed (10), the four earlier outputs deleted (11-14), the journal and the owner file removed
(15-16), the staging directory removed (17)."""
COMMIT_STEP = 10


def die_publishing(out: Path, n: int, *, kept: bool = False, source: Path | None = None) -> str:
    """Run :data:`_DIE_AT_STEP` on ``out`` (``source``: a release directory published as the new release);
    returns its id (the staging directory's), or its output when it lived."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [str(out), str(n), "kept" if kept else "-", str(source or "")]
    result = subprocess.run(
        [sys.executable, "-c", _DIE_AT_STEP, *args], env=env, timeout=60, capture_output=True, text=True
    )
    if n == 0:
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()
    assert result.returncode == 9, result.stderr
    stagings = [n for n in hidden(out) if n.startswith(STAGING_PREFIX)]
    return stagings[0][len(STAGING_PREFIX) :] if stagings else ""


def outputs(tag: str) -> dict[str, bytes | None]:
    """The snapshot of a complete run's outputs (:func:`write_outputs` with a manifest in ``release``)."""
    return {
        "evaluation": None,
        "evaluation/part-0": f"{tag} evaluation\n".encode(),
        "release": None,
        "release/manifest.json": f'{{"run": "{tag}"}}'.encode(),
        "release/part-0": f"{tag} release\n".encode(),
        "synthetic": None,
        "synthetic.csv": f"{tag}\n".encode(),
        "synthetic/part-0": f"{tag} synthetic\n".encode(),
    }


def _next_run(directory: Path) -> None:
    with OutputStage(None, str(directory), names=("other",)) as stage:
        Path(stage.path("other")).write_text("x\n")


def _synthesize_check(directory: Path) -> None:
    from spark_dpsynth.pipeline import Run, job_config

    Run(job_config(None, output=str(directory)), "synthesize").check()


def _synthesize_check_of_the_fake(directory: Path) -> None:
    # the manifest is found (recovered first) and read before Spark starts: the fake one lacks a release's keys
    with pytest.raises(ReleaseError, match="release manifest lacks a valid 'columns'"):
        _synthesize_check(directory)


def _load(directory: Path) -> None:
    from spark_dpsynth.release.core import Release

    # the manifest is found (recovered first); the fake release then has no aggregates
    with pytest.raises(ReleaseError, match="has no aggregates directory"):
        Release.load(str(directory / "release"), None)  # type: ignore[arg-type]


READERS = {
    "the next run": _next_run,
    "recover_before_reading": lambda d: recover_before_reading(str(d)),
    "synthesize's check": _synthesize_check_of_the_fake,
    "Release.load": _load,
}
"""Everything that acts on an output directory a run died publishing: a later run's stage, and our readers."""


def test_the_publish_has_the_steps_the_fault_injection_counts(old_run: Path) -> None:
    (old_run / "release" / "manifest.json").write_text('{"run": "old"}')
    assert die_publishing(old_run, 0) == str(PUBLISH_STEPS)
    assert snapshot(old_run) == outputs("new") and hidden(old_run) == []


@pytest.mark.parametrize("kept", [False, True], ids=["plain", "kept-release"])
@pytest.mark.parametrize("n", range(1, PUBLISH_STEPS + 1))
def test_kill_9_at_every_publish_step_leaves_all_old_or_all_new_to_every_reader(
    old_run: Path, tmp_path_factory: pytest.TempPathFactory, n: int, kept: bool
) -> None:
    """The publishing process is killed at step ``n``: the next run and every reader of the directory first roll
    the publish back (not committed: exactly the earlier outputs, a kept release moved where ``synthesize``
    finds it) or forward (committed: exactly the new outputs), never a mix, and no hidden entry is left."""
    (old_run / "release" / "manifest.json").write_text('{"run": "old"}')
    before = snapshot(old_run)
    assert before == outputs("old")
    ident = die_publishing(old_run, n, kept=kept)
    expected = before if n <= COMMIT_STEP else outputs("new")
    recovered = f"{publish.RECOVERED_PREFIX}{ident}"
    for reader_name, read in READERS.items():
        copy = tmp_path_factory.mktemp("reader") / "out"
        shutil.copytree(old_run, copy, symlinks=True)
        read(copy)
        after = snapshot(copy)
        if reader_name == "the next run":
            assert after.pop("other") == b"x\n"
        if kept and n <= COMMIT_STEP:  # the drawn release is never lost
            assert after.pop(f"{recovered}/release/part-0") == b"new release\n", reader_name
            assert after.pop(f"{recovered}/release/manifest.json") == b'{"run": "new"}'
            assert after.pop(f"{recovered}/release") is None and after.pop(recovered) is None
        assert after == expected, f"{reader_name} after a kill at step {n}"
        assert hidden(copy) == [], f"{reader_name} after a kill at step {n}"


def test_a_reader_that_cannot_write_refuses_a_half_published_directory(
    old_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not committed: the reader cannot settle it, so it reads nothing and says what to do; committed (all new
    already, the earlier outputs not yet deleted): it reads the new outputs as they are."""
    (old_run / "release" / "manifest.json").write_text('{"run": "old"}')
    real_access = os.access
    monkeypatch.setattr(publish.os, "access", lambda p, mode: mode & os.W_OK == 0 and real_access(p, mode))
    die_publishing(old_run, 6)  # the four earlier outputs renamed aside, nothing renamed in
    left = snapshot(old_run)
    with pytest.raises(ReleaseError, match=r"half published by a run that died .*with write access"):
        recover_before_reading(str(old_run))
    with pytest.raises(ReleaseError, match=r"half published by a run that died"):
        _synthesize_check(old_run)
    assert snapshot(old_run) == left
    monkeypatch.setattr(publish.os, "access", real_access)
    recover_before_reading(str(old_run))
    assert snapshot(old_run) == outputs("old") and hidden(old_run) == []
    die_publishing(old_run, COMMIT_STEP + 2)
    monkeypatch.setattr(publish.os, "access", lambda p, mode: mode & os.W_OK == 0 and real_access(p, mode))
    recover_before_reading(str(old_run))
    assert {k: v for k, v in snapshot(old_run).items() if not k.startswith(".")} == outputs("new")


def test_a_directory_without_stagings_is_only_listed_by_a_reader(
    old_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_lock(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a reader locked a directory with nothing to recover")

    monkeypatch.setattr(publish, "_dir_lock", no_lock)
    recover_before_reading(str(old_run))
    recover_before_reading(str(old_run / "missing"))
    assert hidden(old_run) == []


# --------------------------------------------------------------------------------------------- a Delta table's mark


class _FakeDelta:
    """A session recording the SQL and the Delta write of publishing a catalog table (no Delta jars here)."""

    def __init__(self, properties: dict[str, dict[str, str]]) -> None:
        self.properties = properties
        self.log: list[str] = []
        self.read = self
        self.write = self

    def sql(self, query: str):  # noqa: ANN201
        self.log.append(query)
        table = query.split()[-1]
        rows = [(k, v) for k, v in self.properties.get(table, {}).items()]
        return type("Rows", (), {"collect": lambda _self: rows})()

    def table(self, name: str):  # noqa: ANN201
        return self

    def format(self, fmt: str):  # noqa: ANN201
        return self

    def mode(self, mode: str):  # noqa: ANN201
        self.log.append(f"write mode {mode}")
        return self

    def option(self, key: str, value: str):  # noqa: ANN201
        return self

    def saveAsTable(self, name: str) -> None:  # noqa: N802
        self.log.append(f"write {name}")


@pytest.mark.parametrize(("exists", "marked"), [(False, True), (True, True), (True, False), (False, False)])
def test_a_delta_tables_test_mode_mark_follows_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exists: bool, marked: bool
) -> None:
    """Publishing rewrites a Delta table in one transaction, which does not carry the staged table's properties:
    the mark is set before test-mode rows replace a table and after they are written, and an earlier mark is
    removed after private rows replace a marked table."""
    staged = "db.t__spark_dpsynth_tmp_x0"
    spark = _FakeDelta({staged: {"spark_dpsynth.test_mode": "NOT private"} if marked else {}})
    monkeypatch.setattr(publish, "table_exists", lambda _spark, name: exists)
    stage = OutputStage(spark, str(tmp_path), overwrite=True)  # type: ignore[arg-type]
    assert stage._publish_table(staged, "db.t", "delta") is None
    mark = "ALTER TABLE db.t SET TBLPROPERTIES ('spark_dpsynth.test_mode' = 'NOT private')"
    write = [f"write mode {'overwrite' if exists else 'error'}", "write db.t"]
    after = (
        [mark] if marked else ["ALTER TABLE db.t UNSET TBLPROPERTIES IF EXISTS ('spark_dpsynth.test_mode')"]
    )
    expected = [
        f"SHOW TBLPROPERTIES {staged}",
        *([mark] if marked and exists else []),
        *write,
        *(after if marked or exists else []),
        f"DROP TABLE IF EXISTS {staged}",
    ]
    assert spark.log == expected
