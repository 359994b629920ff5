"""Result rows as Python values.

The server sends each cell as a tagged `Value` (NULL, INTEGER, REAL, TEXT or BLOB); `Rows`
holds them as None, int, float, str and bytes, row by row as tuples, with the column names,
and turns them into dicts or a pandas DataFrame on request.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ._proto.quorum.v1 import common_pb2


def cell(value: common_pb2.Value) -> Any:
    """One cell as a Python value: None, int, float, str or bytes."""
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null":
        return None
    return getattr(value, kind)


@dataclass(frozen=True)
class Rows:
    """The rows a query returned, as far as the server previews them (its `preview_rows`)."""

    columns: List[str]
    rows: List[Tuple[Any, ...]]
    # Rows in the whole result, as far as the server's sandbox read it.
    total_rows: int = 0
    # The sandbox's row or byte cap cut the result short.
    truncated: bool = False
    raw: Optional[common_pb2.ResultPreview] = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, preview: common_pb2.ResultPreview) -> "Rows":
        return cls(
            columns=list(preview.columns),
            rows=[tuple(cell(v) for v in row.values) for row in preview.rows],
            total_rows=preview.total_rows,
            truncated=preview.truncated,
            raw=preview,
        )

    def dicts(self) -> List[Dict[str, Any]]:
        """Each row as a dict from column name to value (a repeated name keeps the last)."""
        return [dict(zip(self.columns, row)) for row in self.rows]

    def to_pandas(self):
        """The rows as a pandas DataFrame; needs pandas (`pip install pandas`)."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Rows.to_pandas needs pandas: pip install pandas") from e
        return pandas.DataFrame.from_records(self.rows, columns=self.columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)
