"""rag.progress: a bar with counts, rate and ETA on a terminal, plain lines
with counts and an ETA otherwise (ingest, fetch, eval run, bench)."""

from __future__ import annotations

import io

from rag.progress import Progress, duration


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_and_lines_with_an_eta_otherwise():
    tty, plain = _Tty(), io.StringIO()
    for stream in (tty, plain):
        bar = Progress(5, verb="evaluated", unit="question", stream=stream, every=2)
        for i in range(5):
            bar.step(f"q{i}")
        bar.close()
    assert "5/5" in tty.getvalue() and "question/s" in tty.getvalue()
    lines = plain.getvalue().splitlines()
    assert [ln.split(" (")[0] for ln in lines] == [
        "evaluated 2/5 questions", "evaluated 4/5 questions", "evaluated 5/5 questions"]
    assert all("ETA " in ln for ln in lines) and lines[-1].endswith("; q4")


def test_steps_of_many_items_and_durations():
    plain = io.StringIO()
    bar = Progress(1000, verb="embedded", unit="paper", stream=plain, every=500)
    for _ in range(4):
        bar.step(n=250)
    assert len(plain.getvalue().splitlines()) == 2
    assert duration(187) == "3m07s" and duration(3900) == "1h05m"


def test_the_eval_run_shows_progress_with_an_eta(fake_engine, tmp_path, capsys):
    from eval.dataset import DEFAULT_SET, load_questions
    from eval.runner import RunConfig, run_eval

    qs = [q for q in load_questions(DEFAULT_SET) if not getattr(q, "history", None)][:2]
    run_eval(fake_engine(), qs, RunConfig(set_path=DEFAULT_SET, use_llm=False, n_boot=10),
             tmp_path / "run")
    err = capsys.readouterr().err
    assert "evaluated 2/2 questions" in err and "ETA" in err
