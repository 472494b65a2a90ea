"""CSV with a header row; an ``abstract`` column is required, the other
columns are the JSONL record fields."""

from __future__ import annotations

import csv
import io

from rag.readers.base import RecordBuilder, record_fields


class CsvReader:
    extensions = (".csv",)

    def read(self, text: str, out: RecordBuilder) -> None:
        reader = csv.reader(io.StringIO(text, newline=""))
        try:
            header = next(reader)
        except (StopIteration, csv.Error) as e:
            out.error(1, f"cannot read CSV header: {e}")
            return
        cols = [h.strip().lower() for h in header]
        if "abstract" not in cols:
            out.error(1, f"CSV header has no 'abstract' column (columns: {', '.join(cols)})")
            return
        ordinal = 0
        prev_end = reader.line_num
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                out.error(reader.line_num, f"malformed CSV: {e}; rest of file skipped")
                return
            start, prev_end = prev_end + 1, reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            ordinal += 1
            rec = {c: v for c, v in zip(cols, row, strict=False) if c}
            out.add(ordinal=ordinal, line=start, **record_fields(rec))
