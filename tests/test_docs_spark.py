"""The Spark page's snippets run (tests/test_docs.py's rules), on a local Spark against an embedded Tansu broker:
`publish(df, ...)` and a Structured Streaming query with its micro-batch reports."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from test_docs import DOCS, SHOWN_ADDRESS, run_page

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.timeout(600),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter, aioproducer's
        session = (
            SparkSession.builder.master("local[2]")
            .appName("aioproducer-docs")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()


async def test_the_spark_page_snippets_run(spark: SparkSession, tansu_bootstrap: str, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "docs_spark", "DOCS_PROJECT": tmp_path, "spark": spark}
    await run_page(DOCS / "spark.md", {SHOWN_ADDRESS: tansu_bootstrap}, tmp_path, namespace)
    assert namespace["report"].delivered == 3
