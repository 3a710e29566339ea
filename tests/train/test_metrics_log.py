"""``metrics.csv`` during a run: appended row by row, always equal to the whole file."""

from __future__ import annotations

from attnlab.lab.train.metrics_log import MetricsCsv, write_metrics_csv


def _whole(tmp_path, rows) -> str:
    return write_metrics_csv(tmp_path / "whole.csv", rows).read_text()


def test_appended_rows_equal_the_whole_file_through_new_columns_and_a_resume(tmp_path):
    log = MetricsCsv(tmp_path / "metrics.csv")
    history = []
    rows = [
        {"step": 1, "dev_accuracy": 0.5, "lr": 1e-3},
        {"step": 2, "dev_accuracy": 0.625, "lr": 9.5e-4},
        {"step": 3, "dev_accuracy": 0.75, "lr": 9e-4, "dev_loss": 0.25},  # a new column
        {"step": 4, "lr": 8e-4},  # one missing: an empty cell
        {"step": 5, "dev_accuracy": 0.875, "lr": 7e-4, "dev_loss": 0.125},
    ]
    for row in rows:
        history.append(row)
        log.write(history)
        assert log.path.read_text() == _whole(tmp_path, history)
    resumed = MetricsCsv(log.path)  # a resumed run's history ends at its checkpoint
    resumed.write(history[:3])
    assert log.path.read_text() == _whole(tmp_path, history[:3])
    resumed.write([*history[:3], rows[3]])
    assert log.path.read_text() == _whole(tmp_path, history[:4])


def test_a_row_cut_short_by_a_crash_is_left_out_when_read(tmp_path):
    from attnlab.lab.train.metrics_log import read_metrics_csv

    log = MetricsCsv(tmp_path / "metrics.csv")
    rows = [{"step": 1, "dev_accuracy": 0.5}, {"step": 2, "dev_accuracy": 0.75}]
    log.write(rows[:1])
    log.write(rows)
    whole = log.path.read_text()
    log.path.write_text(whole[:-4])  # the append stopped inside its last number
    assert read_metrics_csv(log.path) == [{"step": 1.0, "dev_accuracy": 0.5}]
    log.path.write_text(whole)
    assert read_metrics_csv(log.path) == [{"step": 1.0, "dev_accuracy": 0.5},
                                          {"step": 2.0, "dev_accuracy": 0.75}]  # fmt: skip
